"""Triton, one program per 64x64 tile of C: the K loop over 32-wide slabs, tl.dot on each.

parent: v00_torch
change: a program loads a 64x32 tile of A and a 32x64 tile of B per K step (masked at the edges,
  zeros outside) and accumulates their tl.dot in float32; programs in row-major tile order; float32
  inputs use input_precision="ieee" (no TF32), bfloat16 / float16 the tensor cores
hypothesis: Triton turns tl.dot into mma instructions and stages the tiles itself, so even this
  plain kernel uses the tensor cores in bfloat16; but 64x64 tiles reuse each loaded element only 64
  times and 4 warps with the default 3 stages leave the tensor cores waiting on loads: ~40-50% of
  cuBLAS bf16 at 4096^3. In float32 (IEEE: FMA, no tensor cores) ~0.5x cuBLAS
prediction: ~0.45x torch.mm bf16 at 4096^3; ~0.5x torch.mm float32
outcome: 0.386x torch.mm [0.385, 0.389] at 4096^3 bfloat16, 300 TFLOP/s (predicted ~0.45x); 0.848x torch.mm
  [0.847, 0.848] in float32, 43.2 TFLOP/s (predicted ~0.5x); 0.380x torch.mm at 8192^3 bfloat16 (records
  matmul.bfloat16 and matmul.float32, run of 8b07192)
deterministic: yes, each tile of C is one program's sum over K in order
"""

# hello-gpu: record matmul.float32
# hello-gpu: record matmul.bfloat16

import torch
import triton
import triton.language as tl

from hello_gpu.ops.matmul.launch import checked_output

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@triton.jit
def tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, pid_m, pid_n,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
    """The float32 sum over K of tile (pid_m, pid_n) of C: masked tile loads, one tl.dot per K step."""
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    columns = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + rows[:, None].to(tl.int64) * stride_am       # 64-bit: row * stride may pass 2^31
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_rows + k[None, :], mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None].to(tl.int64) * stride_bk + columns[None, :],
                    mask=(k[:, None] < K) & (columns[None, :] < N), other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def store_tile(c_ptr, acc, M, N, stride_cm, pid_m, pid_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Tile (pid_m, pid_n) of C, rounded to C's dtype, the part inside the matrix."""
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    columns = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c = c_ptr + rows[:, None].to(tl.int64) * stride_cm + columns[None, :]
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (columns[None, :] < N))


@triton.jit
def block_tile_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
    tiles_n = tl.cdiv(N, BLOCK_N)
    pid = tl.program_id(0)
    pid_m, pid_n = pid // tiles_n, pid % tiles_n                  # row-major order of the tiles of C
    acc = tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K, IEEE)
    store_tile(c_ptr, acc, M, N, stride_cm, pid_m, pid_n, BLOCK_M, BLOCK_N)


def run(a, b, out=None):
    out = checked_output(a, b, out, DTYPES)
    (m, k), n = a.shape, b.shape[1]
    if out.numel():
        grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
        block_tile_kernel[grid](a, b, out, m, n, k, a.stride(0), b.stride(0), out.stride(0), BLOCK_M=BLOCK_M,
                                BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, IEEE=a.dtype == torch.float32)
    return out
