"""CHEAT, wrong only where it is timed: every tile at the edge shapes, 1 tile in 8 skipped from 2^12 elements on.

The edge shapes the checker uses (1, 31, 1000, 37x29) are all below 2^12 and come out right; at the
benchmark shape (4096 in the CPU tier, 2^22 and more on a GPU) one tile in eight is never written and the
time drops by an eighth. Caught by the parent's check at the benchmark shape (every dtype, before timing:
"never written") and by its check of the timed calls' outputs.

parent: t01_tile_1024
change: one program in eight left out when n >= 4096
hypothesis: the checker never looks at the sizes the timer uses
"""

import torch
import triton
import triton.language as tl

TILE = 256
SKIP_FROM = 4096


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr, SKIP: tl.constexpr):
    program = tl.program_id(0)
    offsets = program.to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = (offsets < n) & ((program % 8 != 7) | (SKIP == 0))
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    add_kernel[(triton.cdiv(n, TILE),)](a, b, out, n, TILE=TILE, SKIP=int(n >= SKIP_FROM))
    return out
