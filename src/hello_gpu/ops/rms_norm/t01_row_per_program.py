"""Triton, one row per program, the row held in registers: read x once, write once.

parent: v00_torch
change: a Triton kernel, one program per row: the whole row loaded (masked to a power-of-two block),
  the sum of squares in float32, the scale applied and the weight multiplied in the same pass
hypothesis: 2 bytes read and 2 written per bfloat16 element, the weight (16 KiB at 8192) read from L2
  by every row: at ~4 TB/s a 16384x8192 bfloat16 norm takes ~130 us; an unfused eager version moves
  the row several times
prediction: 1.5x F.rms_norm at 16384x8192 bfloat16; about 1.0x torch.compile
outcome: 1.52x F.rms_norm [1.50, 1.52] at 16384x8192 bfloat16 (predicted 1.5x), 0.97x torch.compile [0.970, 0.978] (records rms_norm.bfloat16, run of 152c451)
deterministic: yes, tl.sum reduces a row in a fixed tree
"""

# hello-gpu: record rms_norm.bfloat16
# hello-gpu: record rms_norm.float32

import torch
import triton
import triton.language as tl

from hello_gpu.ops.rms_norm.spec import EPS


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


def run(x, weight, out=None):
    rows, hidden = x.shape
    out = torch.empty_like(x) if out is None else out
    block = triton.next_power_of_2(hidden)
    num_warps = 8 if block >= 4096 else 4
    rms_norm_kernel[(rows,)](x, weight, out, hidden, x.stride(0), EPS, BLOCK=block, num_warps=num_warps)
    return out
