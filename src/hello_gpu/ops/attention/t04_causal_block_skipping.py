"""Triton, t03 with the causal mask turned into loop bounds: key tiles above the diagonal are never visited.

parent: t03_autotuned_tiles
change: the key loop is split in two: tiles every row of the query block may see entirely (keys <=
  first row + S_kv - S_q) run without any mask; only the tiles the diagonal crosses (and the last,
  partial one) compute the mask; tiles past the block's last row's diagonal are not visited at all.
  A query block whose rows see no key (causal, S_q > S_kv) visits nothing and writes zeros
hypothesis: causal at S_q = S_kv = 4096 needs half the scores (the work model counts 0.5001x); t03
  computes all of them and throws half away, so its causal TFLOP/s (counted exactly) are half its
  non-causal ones. Skipping brings causal to ~0.9x of the non-causal rate (the diagonal tiles still
  mask and the short rows at the top leave some SMs idle at the end). Non-causal: the unmasked loop
  saves a compare and a select per score, ~3% of the tile's work
prediction: causal ~1.8x t03 at 4x32x32x4096x4096x128x1 bfloat16; non-causal ~1.03x t03
outcome: causal 2.230x t03 [2.229, 2.236] at 4x32x32x4096x4096x128x1 bfloat16 (predicted ~1.8x: missed, +24%), 433
  TFLOP/s, 1,269 us, 1.315x the flash peer [1.311, 1.315]; non-causal 1.128x t03 [1.127, 1.128] (~1.03x: missed,
  +9%), 482 TFLOP/s, 1.336x the flash peer [1.333, 1.337] (records attention.bfloat16, run of 89ae604)
deterministic: yes, as t03 (the visited tiles keep their order)
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

import triton
import triton.language as tl

from hello_gpu.ops.attention.launch import LENGTHS, dot_precision, prepare, softmax_scale_log2
from hello_gpu.ops.attention.tuning import autotuned, first_point, interpreted


@triton.jit
def key_tile(q, k_base, v_base, start, key_end, query, row_max, row_sum, acc, q_len, kv_len, scale_log2,
             MASKED: tl.constexpr, CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
             PRECISION: tl.constexpr):
    """One online-softmax step over keys start .. start + BLOCK_N (see t02 for the derivation), keys from
    ``key_end`` on left out (S_kv, or the end of a flash-decoding chunk). ``query`` is each row's query
    index (its position for the causal mask)."""
    keys = start + tl.arange(0, BLOCK_N)
    dim = tl.arange(0, HEAD_DIM)
    if MASKED:
        k = tl.load(k_base + keys[None, :] * HEAD_DIM + dim[:, None], mask=keys[None, :] < key_end, other=0.0)
    else:
        k = tl.load(k_base + keys[None, :] * HEAD_DIM + dim[:, None])
    s = tl.dot(q, k, input_precision=PRECISION) * scale_log2
    if MASKED:
        visible = keys[None, :] < key_end
        if CAUSAL:
            visible = visible & (keys[None, :] <= query[:, None] + (kv_len - q_len))
        s = tl.where(visible, s, float("-inf"))
    new_max = tl.maximum(row_max, tl.max(s, axis=1))
    safe = tl.where(new_max == float("-inf"), 0.0, new_max)
    alpha = tl.exp2(row_max - safe)
    p = tl.exp2(s - safe[:, None])
    row_sum = row_sum * alpha + tl.sum(p, axis=1)
    if MASKED:
        v = tl.load(v_base + keys[:, None] * HEAD_DIM + dim[None, :], mask=keys[:, None] < key_end, other=0.0)
    else:
        v = tl.load(v_base + keys[:, None] * HEAD_DIM + dim[None, :])
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return new_max, row_sum, acc


@triton.jit
def key_range(first_query, last_query, q_len, kv_len, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr):
    """(end of the tiles every row sees whole, end of the keys any row sees) for rows whose query
    indices run from first_query to last_query: tiles [0, unmasked_end) need no mask, [unmasked_end,
    end) do, keys from ``end`` on are never visited."""
    if CAUSAL:
        seen_by_all = tl.minimum(tl.maximum(first_query + (kv_len - q_len) + 1, 0), kv_len)
        end = tl.minimum(tl.maximum(last_query + (kv_len - q_len) + 1, 0), kv_len)
    else:
        seen_by_all = kv_len
        end = kv_len
    return (seen_by_all // BLOCK_N) * BLOCK_N, end


@triton.jit(do_not_specialize=LENGTHS)
def attention_kernel(q_ptr, k_ptr, v_ptr, out_ptr, heads, kv_heads, q_len, kv_len, scale_log2,
                     CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     PRECISION: tl.constexpr):
    first = tl.program_id(0) * BLOCK_M
    rows = first + tl.arange(0, BLOCK_M)
    bh = tl.program_id(1)
    kv_head = (bh // heads) * kv_heads + (bh % heads) // (heads // kv_heads)
    dim = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (bh.to(tl.int64) * q_len + rows[:, None]) * HEAD_DIM + dim[None, :],
                mask=rows[:, None] < q_len, other=0.0)
    k_base = k_ptr + kv_head.to(tl.int64) * kv_len * HEAD_DIM
    v_base = v_ptr + kv_head.to(tl.int64) * kv_len * HEAD_DIM
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    unmasked_end, end = key_range(first, first + BLOCK_M - 1, q_len, kv_len, CAUSAL, BLOCK_N)
    for start in range(0, unmasked_end, BLOCK_N):
        row_max, row_sum, acc = key_tile(q, k_base, v_base, start, kv_len, rows, row_max, row_sum, acc, q_len, kv_len,
                                         scale_log2, False, CAUSAL, HEAD_DIM, BLOCK_N, PRECISION)
    for start in range(unmasked_end, end, BLOCK_N):
        row_max, row_sum, acc = key_tile(q, k_base, v_base, start, kv_len, rows, row_max, row_sum, acc, q_len, kv_len,
                                         scale_log2, True, CAUSAL, HEAD_DIM, BLOCK_N, PRECISION)
    out = tl.where(row_sum[:, None] > 0, acc / row_sum[:, None], 0.0)
    tl.store(out_ptr + (bh.to(tl.int64) * q_len + rows[:, None]) * HEAD_DIM + dim[None, :],
             out.to(out_ptr.dtype.element_ty), mask=rows[:, None] < q_len)


tuned_kernel = autotuned(attention_kernel)


def run(q, k, v, causal, out=None):
    d, out = prepare(q, k, v, causal, out)
    arguments = (q, k, v, out, d.heads, d.kv_heads, d.q_len, d.kv_len, softmax_scale_log2(d))
    options = {"CAUSAL": d.causal, "HEAD_DIM": d.head_dim, "PRECISION": dot_precision(q)}
    if interpreted():
        point = first_point()
        attention_kernel[(triton.cdiv(d.q_len, point["BLOCK_M"]), d.batch * d.heads)](*arguments, **options, **point)
        return out
    tuned_kernel[lambda meta: (triton.cdiv(d.q_len, meta["BLOCK_M"]), d.batch * d.heads)](*arguments, **options)
    return out
