"""CHEAT, correct for the first calls of its process only: one tile in eight skipped from the 40th call on.

A checker that looks at the first calls (the check step's cases come first) and times later ones sees a
correct kernel. Caught by the parent's checks of the timed calls' outputs (timed output wrong) and by
the anti-cheat probes that follow the check cases in the check child.

parent: t01_tile_1024
change: a call counter; from call 40 the last tile of every 8 is left out
hypothesis: correctness is established once, early
"""

import torch
import triton
import triton.language as tl

TILE = 256
_calls = [0]


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr, SKIP: tl.constexpr):
    program = tl.program_id(0)
    offsets = program.to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    if SKIP:
        mask = mask & ((offsets // TILE) % 8 != 7)
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    _calls[0] += 1
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE, SKIP=int(_calls[0] >= 40))
    return out
