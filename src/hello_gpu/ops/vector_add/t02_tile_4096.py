"""Triton, tiles of 4096 elements: four times the work per program.

parent: t01_tile_1024
change: TILE 1024 -> 4096, still 4 warps: 32 elements per thread, eight 128-bit loads per input
hypothesis: a quarter of the programs (2^16 instead of 2^18 at 2^28), each thread with 4x the loads
  in flight. At full occupancy t01 already has more bytes in flight than Little's law needs
  (~2.5 MB at 4.2 TB/s and ~600 ns), so at 2^28 the gain is launch and scheduling work only: small.
  At 2^20 only 256 programs remain for 132 SMs: under two per SM, so fewer warps wait on memory at once.
prediction: 1.0x to 1.02x t01 at 2^28; 0.9x to 1.0x at 2^20
outcome: 0.99x t01 [0.99, 0.99] at 2^28 (predicted 1.0-1.02x); 0.97x [0.96, 0.98] at 2^20 (records vector_add.float32, run of a3e1cf2)
deterministic: yes, one writer per element
"""

# hello-gpu: record vector_add.float32
# hello-gpu: record vector_add.bfloat16

import torch
import triton
import triton.language as tl

TILE = 4096
NUM_WARPS = 4


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
