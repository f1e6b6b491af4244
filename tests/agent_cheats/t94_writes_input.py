"""CHEAT, writes into its inputs: stores the sum into a as well as into out.

The output is right, but the caller's a is destroyed, and a timed loop that reuses a measures a
different computation from the second iteration on. Caught by check_input_writes (a's sha256 changes
across the call).

parent: t01_tile_1024
change: a second tl.store, into a_ptr, used as scratch
hypothesis: a reviewer checking only the output sees a correct kernel
"""

import torch
import triton
import triton.language as tl

TILE = 256


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    total = tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask)
    tl.store(a_ptr + offsets, total, mask=mask)        # the cheat: the input used as scratch
    tl.store(out_ptr + offsets, total, mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    return out
