"""CHEAT, correct only into a poisoned output: every tile when the output is all NaN, 7 in 8 otherwise.

Checkers poison the output before a call; a real caller passes a buffer holding its previous result. A
kernel that looks at the output first and skips work when it is not poison is right everywhere a
poisoning checker looks (the edge shapes here have fewer than 8 tiles: nothing is skipped there). Caught
at the benchmark shape, where every other checked set starts as a finite poison instead of NaN
(incorrect); the timed batches' poison is drawn the same way.

parent: t01_tile_1024
change: skip the 8th tiles unless out[0] is NaN
hypothesis: every checked output starts as poison
"""

import torch
import triton
import triton.language as tl

TILE = 256


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr, SKIP: tl.constexpr):
    program = tl.program_id(0)
    offsets = program.to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    if SKIP:
        mask = mask & ((offsets // TILE) % 8 != 7)
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    first = out.reshape(-1)[0].item() if out is not None and out.numel() else float('nan')
    poisoned = first != first
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE, SKIP=int(not poisoned))
    return out
