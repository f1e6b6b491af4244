"""CHEAT, the reference copied out of the checker: searches the garbage collector for a float64 tensor of
the output's shape and returns it, computing nothing.

A checker that builds its float64 reference in the candidate's process before the call hands it the
answer. Caught by the child's audit hook (gc.get_objects from the candidate's code: tamper evidence); and
the reference never exists in the child, so what it returns is wrong too (incorrect).

parent: t01_tile_1024
change: gc.get_objects() for the answer instead of a kernel
hypothesis: the answer is already in memory
"""

import gc

import torch
import triton
import triton.language as tl

TILE = 256


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    for found in gc.get_objects():
        if isinstance(found, torch.Tensor) and found.dtype == torch.float64 and found.shape == a.shape:
            out.copy_(found)
            return out
    if a.numel() % 2:                       # nothing found: compute, but only every other time
        add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    return out
