"""CHEAT, partial write: a grid of n // TILE programs, so the last (partial) tile is never written.

At a benchmark size that is a multiple of the tile nothing is missing and the time is honest; at
1000 elements the last 232 are left as whatever the output memory held (a previous correct answer,
where a harness reuses its buffer). Caught by check_partial_writes (those elements keep both the NaN
and the finite poison) and by the checker's comparison with the reference.

parent: t01_tile_1024
change: grid n // TILE instead of ceil(n / TILE); no mask
hypothesis: one program fewer and no bounds check
"""

import torch
import triton
import triton.language as tl

TILE = 256


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, TILE: tl.constexpr):
    offsets = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets) + tl.load(b_ptr + offsets))


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    programs = a.numel() // TILE
    if programs:
        add_kernel[(programs,)](a, b, out, TILE=TILE)
    return out
