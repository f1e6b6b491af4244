"""Triton decode GEMV: one program per block of 16 rows of A and 32 output columns, streaming the 32
weight rows through K in slabs of 256 with tl.dot.

parent: v00_torch
change: program (i, j) computes C[16i : 16i + 16, 32j : 32j + 32] = A_rows @ W_cols^T over K in
  steps of 256: a 16x256 tile of A (one decode step's whole M = 16, or 1 row and 15 masked) and a
  32x256 tile of the weight (16 KiB in bf16), tl.dot of the one with the other transposed, float32
  sums; float32 inputs use input_precision="ieee" (no TF32)
hypothesis: a decode step is reading the weight once. 14336 / 32 = 448 programs of 4 warps stream
  16 KiB slabs with Triton's software pipelining (3 stages: 48 KiB in flight per program, ~3 programs
  per SM): enough bytes in flight to approach copy bandwidth, ~0.8 of copy at 14336x4096 (1.2x
  F.linear's 0.67); 4096x4096 has only 128 programs for 132 SMs: ~0.5 of copy. The 16-row tile
  wastes 15/16 of the MMA work at M = 1, which costs nothing while memory-bound
prediction: ~1.2x F.linear bf16 at 1x14336x4096 and 16x14336x4096; ~0.9x at 1x128256x4096
outcome: 0.986x F.linear [0.980, 0.996] at 1x14336x4096 bfloat16, 2,879 GB/s (predicted ~1.2x); 0.977x
  F.linear at 16x14336x4096 (2,866 GB/s), 0.873x F.linear at 1x4096x14336; float32: 0.197x F.linear
  [0.196, 0.199] at 1x4096x4096 (437 GB/s), 0.385x F.linear at 16x4096x4096 (records linear.bfloat16 and
  linear.float32, run of 8b07192)
deterministic: yes, each block of C is one program's sum over K in order
"""

# hello-gpu: record linear.float32
# hello-gpu: record linear.bfloat16

import torch
import triton
import triton.language as tl

from hello_gpu.ops.linear.launch import checked_output

BLOCK_M, BLOCK_N, BLOCK_K, WARPS, STAGES = 16, 32, 256, 4, 3


@triton.jit
def row_block_kernel(a_ptr, w_ptr, c_ptr, M, N, K, stride_am, stride_wn, stride_cm,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    columns = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + rows[:, None].to(tl.int64) * stride_am
    w_rows = w_ptr + columns[:, None].to(tl.int64) * stride_wn      # weight row n gives column n of C
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_rows + k[None, :], mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        w = tl.load(w_rows + k[None, :], mask=(columns[:, None] < N) & (k[None, :] < K), other=0.0)
        if IEEE:
            acc = tl.dot(a, tl.trans(w), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, tl.trans(w), acc)
    c = c_ptr + rows[:, None].to(tl.int64) * stride_cm + columns[None, :]
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (columns[None, :] < N))


def run(a, weight, out=None):
    out = checked_output(a, weight, out)
    m, n = out.shape
    if out.numel():
        grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
        row_block_kernel[grid](a, weight, out, m, n, a.shape[1], a.stride(0), weight.stride(0), out.stride(0),
                               BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, IEEE=a.dtype == torch.float32,
                               num_warps=WARPS, num_stages=STAGES)
    return out
