"""Triton, one row per program as t01, with 16 warps on rows of 8192 columns or more.

parent: t01_row_per_program
change: num_warps 16 (512 threads) instead of 8 once the row's block reaches 8192 columns
hypothesis: t01 keeps the whole row in registers: at 8192 float32 columns and 8 warps that is 32
  values per thread, at 32768 it is 128, more than the 255 registers a thread may hold once the
  exponentials and addresses are counted, so the row spills to local memory and crosses DRAM
  again. With 16 warps a thread holds 16 values at 8192 (no change in DRAM traffic, slightly
  shorter reductions per thread) and 64 at 32768. Expect ~1.0x t01 at 8192x8192 and a large gain
  at 4096x32768 (1.5x t01 or more, if t01 spills as predicted); 4096x1024 is untouched.
prediction: 1.0x t01 at 8192x8192; >= 1.5x t01 at 4096x32768; 1.0x t01 at 4096x1024
outcome: 1.31x t01 [1.30, 1.32] at 4096x32768 float32 (predicted >= 1.5x), 1.01x t01 [1.006, 1.012] at 8192x8192 (records softmax.float32, run of 2c2a085)
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


def warps_for(block: int) -> int:
    """4 warps under 2048 columns, 8 up to 4096, 16 from 8192: at most 16 float32 values per thread
    at 8192 columns, 64 at 32768."""
    if block >= 8192:
        return 16
    return 8 if block >= 2048 else 4


def run(x, out=None):
    rows, columns = x.shape
    out = torch.empty_like(x) if out is None else out
    block = triton.next_power_of_2(columns)
    softmax_kernel[(rows,)](x, out, columns, x.stride(0), BLOCK=block, num_warps=warps_for(block))
    return out
