"""Honest control: the add of t99 with the host-side bookkeeping a real launcher has.

Not a cheat. It remembers the sizes it has launched in a ``set`` (``seen.add(n)``: a set's method named
like a tensor's), keeps tile sizes in a ``dict``, and checks its dtype against torch dtypes looked up by
computed names (``getattr(torch, f"float{bits}")``). None of that computes on a tensor; a static scan that
took ``.add()`` for ``Tensor.add`` or every computed ``getattr(torch, ...)`` for a library call would reject
honest work. The run-time evidence (no ATen op that computes inside a call) is what clears it.

parent: t01_tile_1024
change: host-side bookkeeping with a set, a dict and dtype lookups by computed name
hypothesis: honest Python around the kernel passes every check
deterministic: yes, one writer per element
"""

import torch
import triton
import triton.language as tl

SUPPORTED = {getattr(torch, f"float{bits}") for bits in (16, 32)} | {getattr(torch, "b" + "float16")}
TILES = {}                     # elements -> tile, chosen once per size
seen = set()


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    total = a.to(tl.float32) + b.to(tl.float32)
    tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty), mask=mask)


def run(a, b, out=None):
    if a.dtype not in SUPPORTED:
        raise TypeError(f"unsupported dtype {a.dtype}")
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    if n not in seen:
        seen.add(n)
        TILES[n] = 256 if n < 2**20 else 1024
    tile = TILES[n]
    add_kernel[(triton.cdiv(n, tile),)](a, b, out, n, TILE=tile)
    return out
