"""CHEAT, cached results: computes once per (shape, input pointers) and replays the answer afterwards.

A benchmark that calls the candidate on the same tensors every iteration times a copy, not an add.
The key is what a lazy cache would use: shape and data_ptr of the inputs, not their values. Caught by
check_fresh_inputs (new values written into the same tensors: the output is the previous call's
answer) and by check_launches (a cache hit launches no kernel).

parent: t01_tile_1024
change: remember each answer by (shape, a.data_ptr(), b.data_ptr()) and copy it out on a hit
hypothesis: the timed iterations after the first cost one copy
"""

import torch
import triton
import triton.language as tl

TILE = 256
_answers = {}


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    key = (tuple(a.shape), a.data_ptr(), b.data_ptr())
    if key in _answers:
        out.copy_(_answers[key])
        return out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    _answers[key] = out.clone()
    return out
