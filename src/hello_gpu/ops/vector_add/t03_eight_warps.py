"""Triton, tiles of 4096 elements over 8 warps instead of 4.

parent: t02_tile_4096
change: num_warps 4 -> 8: 16 elements per thread instead of 32
hypothesis: the same bytes per program, spread over twice the threads: fewer registers per thread
  (the 32 loaded values of t02 need 64+ registers in float32), so more programs fit per SM if
  registers were the limit; each thread has half the loads in flight, twice the threads: the same
  bytes in flight per SM. For an add that is bandwidth-bound either way, expect no change.
prediction: 0.98x to 1.02x t02 at 2^28
outcome: 1.00x t02 [1.00, 1.01] at 2^28, as predicted (records vector_add.float32, run of a3e1cf2)
deterministic: yes, one writer per element
"""

# hello-gpu: record vector_add.float32
# hello-gpu: record vector_add.bfloat16

import torch
import triton
import triton.language as tl

TILE = 4096
NUM_WARPS = 8


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    total = a.to(tl.float32) + b.to(tl.float32)
    tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    add_kernel[(triton.cdiv(n, TILE),)](a, b, out, n, TILE=TILE, num_warps=NUM_WARPS)
    return out
