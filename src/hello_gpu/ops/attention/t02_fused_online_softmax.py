'''Triton, one kernel: online softmax over K/V tiles, the scores never leave the chip (FlashAttention).

parent: t01_materialised_scores
change: one program per (64 query rows, batch x head) walks the keys in tiles of 64: a tile of
  scores Q K_j^T in registers, the running maximum and sum updated, the output accumulator rescaled
  and P_j V_j added (P rounded to the input dtype for the tensor cores, as FlashAttention does); one
  division at the end. Causal is a mask on every tile (no tile is skipped yet: t04)
hypothesis: t01 moves ~34 GB of scores at 4x32x4096x4096; this moves Q, K, V and O (~0.5 GB with
  K/V re-read per query block, mostly from L2) and is bound by the tensor cores and the exp2s. With
  fixed 64x64 tiles, 4 warps and Triton's default pipelining, expect ~half the flash backend
prediction: ~170 TFLOP/s at 4x32x32x4096x4096x128 bfloat16 (~3.4x t01, 0.5x the flash backend);
  causal the same time as non-causal (the masked half is computed and thrown away): half the TFLOP/s
outcome: 5.433x t01 [5.418, 5.451] at 4x32x32x4096x4096x128 bfloat16 (predicted ~3.4x), 409 TFLOP/s (predicted ~170:
  missed, 2.4x over), 2,690 us, 0.605x SDPA [0.604, 0.605], 1.16x the flash peer (ratio of medians; predicted 0.5x);
  causal 0.47x the non-causal rate (half) (records attention.bfloat16, run of 89ae604)
deterministic: yes, each program walks its keys in order and reduces each tile in a fixed tree

Online softmax, derived (the notes chapter 12 builds on)
-------------------------------------------------------

For one query row with scores s_1 .. s_n (already times scale) and value rows v_1 .. v_n,

    o = sum_j exp(s_j) v_j / sum_j exp(s_j).

Computed as written, exp(s_j) overflows float32 once s_j > 88. Any constant c may be subtracted
from every score, since exp(s_j - c) / sum exp(s_k - c) is the same ratio; c = max_j s_j makes every
exponent <= 0 and the largest term exactly 1. That needs the maximum before the first exponential:
a pass over all the scores, then another for the sum, then a third for o, with the n scores
kept somewhere (t01 keeps them in memory).

Online softmax keeps, after the first t keys, three things for the row:

    m_t = max_{j <= t} s_j,    l_t = sum_{j <= t} exp(s_j - m_t),    a_t = sum_{j <= t} exp(s_j - m_t) v_j.

Adding key t + 1 (or a whole tile of keys, with m' = the tile's maximum):

    m_{t+1} = max(m_t, s_{t+1})
    l_{t+1} = l_t exp(m_t - m_{t+1}) + exp(s_{t+1} - m_{t+1})
    a_{t+1} = a_t exp(m_t - m_{t+1}) + exp(s_{t+1} - m_{t+1}) v_{t+1}

because every term of l_t and a_t carries exp(-m_t), and multiplying by exp(m_t - m_{t+1}) turns it
into exp(-m_{t+1}): the sums are re-expressed against the new maximum, exactly (up to rounding).
The factor alpha = exp(m_t - m_{t+1}) is <= 1, so nothing overflows; when the maximum does not
change alpha is exactly 1. At the end o = a_n / l_n. Nothing but (m, l, a) and the current tile is
ever held: the n scores are never stored, so the memory is O(D) a row instead of O(n).

A worked example, one row, 8 scores in two tiles of 4 (values v_j = j for a one-column V):

    tile 1: s = (1, 3, 2, 0): m = 3, l = e^-2 + 1 + e^-1 + e^-3 = 1.553, a = 1e^-2 + 2 + 3e^-1 + 4e^-3 = 3.438
    tile 2: s = (4, 1, 1, 2): m' = 4, alpha = e^(3 - 4) = 0.368;
            l = 1.553 x 0.368 + (1 + e^-3 + e^-3 + e^-2) = 0.571 + 1.235 = 1.806
            a = 3.438 x 0.368 + (5 + 6e^-3 + 7e^-3 + 8e^-2) = 1.265 + 6.730 = 7.995
    o = a / l = 4.426, the same as the three-pass softmax over all 8 scores.

Base 2: the kernel multiplies the scores by log2(e) once (folded into the scale) and uses exp2,
one hardware instruction, where exp would be a multiply and exp2: 2^(s log2 e) = e^s.

Masked keys are -inf: exp2(-inf) = 0 adds nothing. A row that has seen only masked keys keeps
m = -inf and l = 0; the update then subtracts 0 instead of m (-inf - -inf would be NaN), and the
row's output is written as 0, the spec's definition of a fully masked row.
'''

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

import triton
import triton.language as tl

from hello_gpu.ops.attention.launch import LENGTHS, dot_precision, prepare, softmax_scale_log2

BLOCK_M = 64            # query rows per program
BLOCK_N = 64            # keys per step
WARPS = 4


@triton.jit(do_not_specialize=LENGTHS)
def attention_kernel(q_ptr, k_ptr, v_ptr, out_ptr, heads, kv_heads, q_len, kv_len, scale_log2,
                     CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     PRECISION: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    bh = tl.program_id(1)
    kv_head = (bh // heads) * kv_heads + (bh % heads) // (heads // kv_heads)   # GQA: no copy of K, V
    dim = tl.arange(0, HEAD_DIM)
    q_rows = q_ptr + (bh.to(tl.int64) * q_len + rows[:, None]) * HEAD_DIM + dim[None, :]
    q = tl.load(q_rows, mask=rows[:, None] < q_len, other=0.0)
    k_base = k_ptr + kv_head.to(tl.int64) * kv_len * HEAD_DIM
    v_base = v_ptr + kv_head.to(tl.int64) * kv_len * HEAD_DIM
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start in range(0, kv_len, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_base + keys[None, :] * HEAD_DIM + dim[:, None], mask=keys[None, :] < kv_len, other=0.0)
        s = tl.dot(q, k, input_precision=PRECISION) * scale_log2
        visible = keys[None, :] < kv_len
        if CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None] + (kv_len - q_len))
        s = tl.where(visible, s, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(s, axis=1))
        safe = tl.where(new_max == float("-inf"), 0.0, new_max)          # rows that have seen no key yet
        alpha = tl.exp2(row_max - safe)
        p = tl.exp2(s - safe[:, None])
        row_sum = row_sum * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + keys[:, None] * HEAD_DIM + dim[None, :], mask=keys[:, None] < kv_len, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        row_max = new_max
    out = tl.where(row_sum[:, None] > 0, acc / row_sum[:, None], 0.0)      # a fully masked row: 0
    out_rows = out_ptr + (bh.to(tl.int64) * q_len + rows[:, None]) * HEAD_DIM + dim[None, :]
    tl.store(out_rows, out.to(out_ptr.dtype.element_ty), mask=rows[:, None] < q_len)


def launch(q, k, v, out, d, block_m: int, block_n: int, warps: int, stages: int | None = None) -> None:
    """The kernel over the whole call with the given tiles (t03 sweeps them)."""
    grid = (triton.cdiv(d.q_len, block_m), d.batch * d.heads)
    extra = {} if stages is None else {"num_stages": stages}
    attention_kernel[grid](q, k, v, out, d.heads, d.kv_heads, d.q_len, d.kv_len, softmax_scale_log2(d),
                           CAUSAL=d.causal, HEAD_DIM=d.head_dim, BLOCK_M=block_m, BLOCK_N=block_n,
                           PRECISION=dot_precision(q), num_warps=warps, **extra)


def run(q, k, v, causal, out=None):
    d, out = prepare(q, k, v, causal, out)
    launch(q, k, v, out, d, BLOCK_M, BLOCK_N, WARPS)
    return out
