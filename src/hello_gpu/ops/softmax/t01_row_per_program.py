"""Triton, one row per program, the whole row in registers: read once, write once.

parent: v00_torch
change: a Triton kernel with one program per row, the row loaded whole (a power-of-two block of
  columns, masked), max and sum reduced in registers, one store
hypothesis: the row crosses DRAM twice (read, write) instead of the three or more passes of an eager
  softmax that does not keep it on chip: at 8192 columns a float32 row is 32 KiB, which fits in a
  program's registers with 8 warps (128 bytes per thread). Expect ~4 TB/s, as the plain one-pass
  kernel in a reference run before this ladder: about 2x torch.softmax in float32.
prediction: 2.0x torch.softmax at 8192x8192 float32; 3.5x in bfloat16
outcome: 2.07x torch.softmax [2.06, 2.08] at 8192x8192 float32 (predicted 2.0x), 3.64x in bfloat16 (predicted 3.5x) (records softmax.float32 and softmax.bfloat16, run of 2c2a085)
deterministic: yes, tl.max and tl.sum reduce a row in a fixed tree
"""

# hello-gpu: record softmax.float32
# hello-gpu: record softmax.bfloat16

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, columns, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < columns
    x = tl.load(x_ptr + row * row_stride + offsets, mask=mask, other=float("-inf")).to(tl.float32)
    # A row of -inf has maximum -inf; x - max is then NaN everywhere, which is the defined result.
    shifted = x - tl.max(x, axis=0)
    numerator = tl.exp(shifted)
    result = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * row_stride + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)


def run(x, out=None):
    rows, columns = x.shape
    out = torch.empty_like(x) if out is None else out
    block = triton.next_power_of_2(columns)
    # 8 warps from 2048 columns on: 256 threads holding up to 32 KiB of float32 row between them.
    num_warps = 8 if block >= 2048 else 4
    softmax_kernel[(rows,)](x, out, columns, x.stride(0), BLOCK=block, num_warps=num_warps)
    return out
