"""Triton, one program per tile of 1024 elements: the first Triton rung.

parent: v00_torch
change: the add written in Triton: one program per 1024-element tile, 4 warps, masked tail
hypothesis: 4 warps are 128 threads, so each thread owns 8 consecutive elements of the tile and
  Triton emits two 128-bit loads per input per thread (float32), the same access pattern as
  torch.add's vectorised kernel; bandwidth-bound, so ~1.0x torch.add at 2^28. At 2^20 there are
  only 1024 programs for 132 SMs: under one wave, so the tail of the grid idles part of the machine.
prediction: 0.97x to 1.0x torch.add at 2^28
outcome: 1.00x torch.add [1.00, 1.00] at 2^28 float32 and in bfloat16, as predicted (records vector_add.float32, run of a3e1cf2)
deterministic: yes, one writer per element
"""

# hello-gpu: record vector_add.float32
# hello-gpu: record vector_add.bfloat16

import torch
import triton
import triton.language as tl

TILE = 1024
NUM_WARPS = 4


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    # int64 offsets: program_id * TILE is a 32-bit product that would overflow above 2^31 elements.
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    # Add in float32, round once to the output dtype (bfloat16 is one rounding from exact, as torch.add).
    total = a.to(tl.float32) + b.to(tl.float32)
    tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    add_kernel[(triton.cdiv(n, TILE),)](a, b, out, n, TILE=TILE, num_warps=NUM_WARPS)
    return out
