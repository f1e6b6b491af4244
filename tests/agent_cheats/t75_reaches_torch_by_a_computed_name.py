"""CHEAT, the library reached by names the source never spells: torch's namespace read as data.

A static scan reads names: ``torch.add``, ``getattr(torch, "add")``, ``from torch import add``. Here the
name is computed ("dda" reversed) and looked up three ways a scan cannot resolve: ``vars(torch)[name]``,
``functools.reduce(getattr, [...], torch)`` and ``operator.attrgetter(name)(torch)``. The kernel copies ``a``
into the output (so every call launches its own kernel and writes every element); ATen adds ``b``. Caught
by run-time evidence, which does not read names: the ATen watch records ``aten::add`` inside every call
(library fallback). The scan names the dynamic lookups as hints only: it cannot know what they find, and
honest code looks dtypes up by computed names too.

parent: t01_tile_1024
change: torch.add reached through vars(torch), functools.reduce(getattr) and operator.attrgetter
hypothesis: a library call the static scan cannot read is not seen
deterministic: yes, one writer per element
"""

import functools
import operator

import torch
import triton
import triton.language as tl

TILE = 256
_NAME = "".join(reversed("dda"))
_ROUTES = (vars(torch)[_NAME], functools.reduce(getattr, ["_C", "_VariableFunctions", _NAME], torch),
           operator.attrgetter(_NAME)(torch))
_calls = []


@triton.jit
def copy_kernel(a_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    copy_kernel[(triton.cdiv(a.numel(), TILE),)](a, out, a.numel(), TILE=TILE)
    add = _ROUTES[len(_calls) % len(_ROUTES)]          # each route in turn
    _calls.append(1)
    add(out, b, out=out)
    return out
