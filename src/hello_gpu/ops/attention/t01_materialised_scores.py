"""Triton, the textbook in three kernels: S = Q K^T * scale written to memory, softmax of S in place, then O = P V.

parent: none
change: three launches over a float32 scores buffer of B x H x S_q x S_kv: (1) a 64x64 tile of
  scores per program, the causal mask applied as -inf; (2) 16 score rows per program: an online
  max/sum pass over tiles of 256 keys, then a pass writing exp(s - max) / sum (a row with no visible
  key gets 0); (3) a 64-row block of O per program, P V over 64-key tiles. K and V are read through
  kv_head = h // (H / H_kv): no repeated copy of them. Refused with a ValueError, before anything is
  allocated, where the scores would not fit in the GPU's free memory or pass 2^40 bytes
hypothesis: the scores are 4 S_q S_kv bytes a head: at 4x32x4096x4096 8.6 GB written, read, written
  and read again (~34 GB of traffic, ~7 ms at 4.8 TB/s) against 1.1 TFLOP (~2 ms at 600 TFLOP/s):
  memory-bound on the scores, ~0.15x the flash backend; decode (S_q = 1) writes only S_kv scores a head,
  where the three launches' latency dominates
prediction: ~50 TFLOP/s at 4x32x32x4096x4096x128 bfloat16 (0.15x the flash backend)
outcome: 79.9 TFLOP/s, 13,763 us at 4x32x32x4096x4096x128 bfloat16 (predicted ~50: missed, +60%), 0.116x SDPA [0.115,
  0.116], 0.23x the flash peer (ratio of medians; predicted 0.15x) (records attention.bfloat16, run of 89ae604)
deterministic: yes, every score, row and output block is computed by one program in a fixed order
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

import torch
import triton
import triton.language as tl

from hello_gpu.ops.attention.launch import LENGTHS, check_scores_fit, dot_precision, prepare, softmax_scale_log2

BLOCK_M = 64            # query rows per program (kernels 1 and 3)
BLOCK_N = 64            # keys per program (kernel 1) or per step (kernel 3)
SOFTMAX_ROWS = 16       # score rows per program of the softmax kernel (16 x 256 float32: 32 a thread at 4 warps)
ROW_TILE = 256          # scores of each row per step of the softmax kernel


@triton.jit(do_not_specialize=LENGTHS)
def scores_kernel(q_ptr, k_ptr, s_ptr, heads, kv_heads, q_len, kv_len, scale_log2,
                  CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  PRECISION: tl.constexpr):
    """S[b, h, i, j] = (q_i . k_j) * scale * log2(e), or -inf where causal hides key j from query i."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    keys = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    bh = tl.program_id(2)
    kv_head = (bh // heads) * kv_heads + (bh % heads) // (heads // kv_heads)
    dim = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + bh.to(tl.int64) * q_len * HEAD_DIM + rows[:, None] * HEAD_DIM + dim[None, :],
                mask=rows[:, None] < q_len, other=0.0)
    k = tl.load(k_ptr + kv_head.to(tl.int64) * kv_len * HEAD_DIM + keys[None, :] * HEAD_DIM + dim[:, None],
                mask=keys[None, :] < kv_len, other=0.0)
    s = tl.dot(q, k, input_precision=PRECISION) * scale_log2
    if CAUSAL:
        s = tl.where(keys[None, :] <= rows[:, None] + (kv_len - q_len), s, float("-inf"))
    inside = (rows[:, None] < q_len) & (keys[None, :] < kv_len)
    row_start = (bh.to(tl.int64) * q_len + rows[:, None]) * kv_len
    tl.store(s_ptr + row_start + keys[None, :], s, mask=inside)


@triton.jit(do_not_specialize=("rows", "kv_len"))
def softmax_kernel(s_ptr, rows, kv_len, ROWS: tl.constexpr, TILE: tl.constexpr):
    """ROWS score rows in place: base-2 online max and sum, then 2^(s - max) / sum; a row of -inf gets 0.
    Several rows a program rather than one: the grid of (4 x 32 x 4096) rows is 32768 programs, not
    half a million (and the Triton interpreter, which pays ~5 ms a program, runs 16x fewer)."""
    row_ids = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_starts = s_ptr + row_ids.to(tl.int64)[:, None] * kv_len
    live = row_ids[:, None] < rows
    running_max = tl.full([ROWS, TILE], float("-inf"), tl.float32)
    running_sum = tl.zeros([ROWS, TILE], tl.float32)
    for start in range(0, kv_len, TILE):
        keys = start + tl.arange(0, TILE)[None, :]
        s = tl.load(row_starts + keys, mask=live & (keys < kv_len), other=float("-inf"))
        new_max = tl.maximum(running_max, s)
        safe = tl.where(new_max == float("-inf"), 0.0, new_max)     # no -inf - (-inf)
        running_sum = running_sum * tl.exp2(running_max - safe) + tl.exp2(s - safe)
        running_max = new_max
    row_max = tl.max(running_max, axis=1)
    safe_max = tl.where(row_max == float("-inf"), 0.0, row_max)[:, None]
    row_sum = tl.sum(running_sum * tl.exp2(running_max - safe_max), axis=1)
    inverse = tl.where(row_sum > 0, 1.0 / row_sum, 0.0)[:, None]      # no visible key: every weight 0
    for start in range(0, kv_len, TILE):
        keys = start + tl.arange(0, TILE)[None, :]
        inside = live & (keys < kv_len)
        s = tl.load(row_starts + keys, mask=inside, other=float("-inf"))
        tl.store(row_starts + keys, tl.exp2(s - safe_max) * inverse, mask=inside)


@triton.jit(do_not_specialize=LENGTHS)
def weighted_values_kernel(p_ptr, v_ptr, out_ptr, heads, kv_heads, q_len, kv_len,
                           HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           PRECISION: tl.constexpr):
    """O = P V for a block of query rows, P in float32 rounded to V's dtype for the tensor cores."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    bh = tl.program_id(1)
    kv_head = (bh // heads) * kv_heads + (bh % heads) // (heads // kv_heads)
    dim = tl.arange(0, HEAD_DIM)
    p_rows = p_ptr + (bh.to(tl.int64) * q_len + rows[:, None]) * kv_len
    v_base = v_ptr + kv_head.to(tl.int64) * kv_len * HEAD_DIM
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start in range(0, kv_len, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        p = tl.load(p_rows + keys[None, :], mask=(rows[:, None] < q_len) & (keys[None, :] < kv_len), other=0.0)
        v = tl.load(v_base + keys[:, None] * HEAD_DIM + dim[None, :], mask=keys[:, None] < kv_len, other=0.0)
        acc += tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    out = out_ptr + (bh.to(tl.int64) * q_len + rows[:, None]) * HEAD_DIM + dim[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=rows[:, None] < q_len)


def run(q, k, v, causal, out=None):
    d, out = prepare(q, k, v, causal, out)
    rows = d.batch * d.heads * d.q_len
    check_scores_fit(rows * d.kv_len * 4, q.device)
    scores = torch.empty((rows, d.kv_len), dtype=torch.float32, device=q.device)
    precision = dot_precision(q)
    grid = (triton.cdiv(d.q_len, BLOCK_M), triton.cdiv(d.kv_len, BLOCK_N), d.batch * d.heads)
    scores_kernel[grid](q, k, scores, d.heads, d.kv_heads, d.q_len, d.kv_len, softmax_scale_log2(d),
                        CAUSAL=d.causal, HEAD_DIM=d.head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, PRECISION=precision)
    softmax_kernel[(triton.cdiv(rows, SOFTMAX_ROWS),)](scores, rows, d.kv_len, ROWS=SOFTMAX_ROWS,
                                                       TILE=min(ROW_TILE, max(16, triton.next_power_of_2(d.kv_len))))
    grid = (triton.cdiv(d.q_len, BLOCK_M), d.batch * d.heads)
    weighted_values_kernel[grid](scores, v, out, d.heads, d.kv_heads, d.q_len, d.kv_len, HEAD_DIM=d.head_dim,
                                 BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, PRECISION=precision)
    return out
