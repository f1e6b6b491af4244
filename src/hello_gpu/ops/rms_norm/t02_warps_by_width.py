"""Triton, one row per program as t01, with the warp count following the row length.

parent: t01_row_per_program
change: num_warps = block / 512, between 4 and 16 (16 warps at 8192 columns, 8 at 4096), so every
  thread holds 16 values of the row whatever its length; t01 used 8 warps from 4096 columns on
hypothesis: at 16384x8192 bfloat16 t01 gives a thread 32 values of x and 32 of the weight to keep
  in float32 registers, ~100 registers with addresses: 2 programs of 256 threads per SM, 16 warps
  to hide DRAM latency. At 16 warps a program has 16 values per thread and the SM holds 32 warps
  or more. The bytes do not change (x once in, once out; the weight from L2), so expect the gain
  to come only from latency hiding: ~1.05x t01 at 16384x8192, 1.0x at 8192x4096 (8 warps either way)
prediction: 1.05x t01 at 16384x8192 bfloat16; 1.0x t01 at 8192x4096
outcome: 1.001x t01 [0.997, 1.006] at 16384x8192 bfloat16 (predicted 1.05x) (records rms_norm.bfloat16, run of 152c451)
deterministic: yes, tl.sum reduces a row in a fixed tree
"""

# hello-gpu: record rms_norm.bfloat16
# hello-gpu: record rms_norm.float32

import torch
import triton
import triton.language as tl

from hello_gpu.ops.rms_norm.spec import EPS

VALUES_PER_THREAD = 16


@triton.jit
def rms_norm_kernel(x_ptr, weight_ptr, out_ptr, hidden, row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < hidden
    x = tl.load(x_ptr + row * row_stride + offsets, mask=mask, other=0.0).to(tl.float32)
    weight = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    # float32 accumulation: float16 squares of |x| > 256 would overflow (the spec's near_overflow).
    scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / hidden + eps)
    tl.store(out_ptr + row * row_stride + offsets, (x * scale * weight).to(out_ptr.dtype.element_ty), mask=mask)


def warps_for(block: int) -> int:
    """block / (32 lanes x 16 values), between 4 and 16 warps."""
    return min(16, max(4, block // (32 * VALUES_PER_THREAD)))


def run(x, weight, out=None, eps=EPS):
    rows, hidden = x.shape
    out = torch.empty_like(x) if out is None else out
    block = triton.next_power_of_2(hidden)
    rms_norm_kernel[(rows,)](x, weight, out, hidden, x.stride(0), eps, BLOCK=block, num_warps=warps_for(block))
    return out
