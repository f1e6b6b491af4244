"""Known wrong: linear's row-block kernel (16x32 blocks of C, K steps of 64) whose last block row
leaves out its last K step.

parent: v00_torch
change: programs of the last block row of C stop one BLOCK_K step early (with one K step, the only
  one: those blocks come out 0); every element is written
hypothesis: none; this rung exists so that a test proves the checker rejects one skipped tile row's
  work at every checked shape (issue 21)
deterministic: yes, fixed order
"""

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 16, 32, 64


@triton.jit
def skips_one_k_tile_kernel(a_ptr, w_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    columns = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    last_row = tl.program_id(0) == tl.num_programs(0) - 1
    k_end = tl.where(last_row, (tl.cdiv(K, BLOCK_K) - 1) * BLOCK_K, K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        live = k0 < k_end
        a = tl.load(a_ptr + rows[:, None] * K + k[None, :], mask=(rows[:, None] < M) & (k[None, :] < K) & live,
                    other=0.0)
        w = tl.load(w_ptr + columns[:, None] * K + k[None, :], mask=(columns[:, None] < N) & (k[None, :] < K) & live,
                    other=0.0)
        if IEEE:
            acc = tl.dot(a, tl.trans(w), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, tl.trans(w), acc)
    tl.store(c_ptr + rows[:, None] * N + columns[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (columns[None, :] < N))


def run(a, weight, out=None):
    m, k = a.shape
    n = weight.shape[0]
    out = torch.empty((m, n), dtype=a.dtype, device=a.device) if out is None else out
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    skips_one_k_tile_kernel[grid](a, weight, out, m, n, k, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                  IEEE=a.dtype == torch.float32)
    return out
