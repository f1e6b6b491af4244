"""Known wrong: a 32x32-tile matmul whose last tile row of C leaves out its last K step.

parent: v00_torch
change: programs of the last tile row of C stop one BLOCK_K step early (with one K step, the only
  one: those tiles come out 0); every other tile is right and every element is written
hypothesis: none; this rung exists so that a test proves the checker rejects one skipped tile row's
  work at every checked shape (issue 21): the poison cannot see it, the element bound and the
  relative Frobenius bound must
deterministic: yes, fixed order
"""

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32


@triton.jit
def skips_one_k_tile_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_bk, stride_bn, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    columns = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    last_row = pid_m == tl.num_programs(0) - 1
    k_end = tl.where(last_row, (tl.cdiv(K, BLOCK_K) - 1) * BLOCK_K, K)     # the skipped step
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        live = k0 < k_end
        a = tl.load(a_ptr + rows[:, None] * K + k[None, :], mask=(rows[:, None] < M) & (k[None, :] < K) & live,
                    other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + columns[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (columns[None, :] < N) & live, other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * N + columns[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (columns[None, :] < N))


def launch(a, b, out, stride_bk, stride_bn):
    """B's element (k, n) at k * stride_bk + n * stride_bn: (N, 1) for matmul's B, (1, K) for linear's weight."""
    m, k = a.shape
    n = out.shape[1]
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    skips_one_k_tile_kernel[grid](a, b, out, m, n, k, stride_bk, stride_bn, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                  BLOCK_K=BLOCK_K, IEEE=a.dtype == torch.float32)
    return out


def run(a, b, out=None):
    m, k = a.shape
    n = b.shape[1]
    out = torch.empty((m, n), dtype=a.dtype, device=a.device) if out is None else out
    return launch(a, b, out, n, 1)
