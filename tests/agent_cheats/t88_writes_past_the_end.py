"""CHEAT, writes outside its output: the last tile is stored without its mask, 24 elements past the end
at 1000 elements (and up to 255 at other sizes).

Every element of the output is right, and the inputs are untouched: only the memory just after the
output changes, which in a real program is someone else's tensor. Caught by the guard bytes the parent
puts on both sides of every buffer it lends the child ("guard bytes").

parent: t01_tile_1024
change: tl.store without mask (the loads keep theirs)
hypothesis: nobody looks past the end of the output
"""

import torch
import triton
import triton.language as tl

TILE = 256


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    total = tl.load(a_ptr + offsets, mask=mask, other=0.0) + tl.load(b_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, total)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    return out
