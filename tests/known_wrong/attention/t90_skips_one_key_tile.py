"""Known wrong: t02's fused attention with the middle key tile of every row left out.

parent: t02_fused_online_softmax
change: the loop over 64-key tiles skips tile (tiles // 2) (with one tile, the only one: the row then
  sees no key and writes 0); everything else is t02's kernel
hypothesis: none; this rung exists so that a test proves the checker rejects one dropped key tile at
  every checked shape (issue 22)
deterministic: yes, as t02
"""

import triton
import triton.language as tl

from hello_gpu.ops.attention.launch import dot_precision, prepare, softmax_scale_log2

BLOCK_M = 64
BLOCK_N = 64


@triton.jit
def skipping_kernel(q_ptr, k_ptr, v_ptr, out_ptr, heads, kv_heads, q_len, kv_len, scale_log2,
                    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    PRECISION: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    bh = tl.program_id(1)
    kv_head = (bh // heads) * kv_heads + (bh % heads) // (heads // kv_heads)
    dim = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (bh.to(tl.int64) * q_len + rows[:, None]) * HEAD_DIM + dim[None, :],
                mask=rows[:, None] < q_len, other=0.0)
    k_base = k_ptr + kv_head.to(tl.int64) * kv_len * HEAD_DIM
    v_base = v_ptr + kv_head.to(tl.int64) * kv_len * HEAD_DIM
    skipped = (tl.cdiv(kv_len, BLOCK_N) // 2) * BLOCK_N
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start in range(0, kv_len, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_base + keys[None, :] * HEAD_DIM + dim[:, None], mask=keys[None, :] < kv_len, other=0.0)
        s = tl.dot(q, k, input_precision=PRECISION) * scale_log2
        visible = (keys[None, :] < kv_len) & (start != skipped)
        if CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None] + (kv_len - q_len))
        s = tl.where(visible, s, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(s, axis=1))
        safe = tl.where(new_max == float("-inf"), 0.0, new_max)
        alpha = tl.exp2(row_max - safe)
        p = tl.exp2(s - safe[:, None])
        row_sum = row_sum * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + keys[:, None] * HEAD_DIM + dim[None, :], mask=keys[:, None] < kv_len, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        row_max = new_max
    out = tl.where(row_sum[:, None] > 0, acc / row_sum[:, None], 0.0)
    tl.store(out_ptr + (bh.to(tl.int64) * q_len + rows[:, None]) * HEAD_DIM + dim[None, :],
             out.to(out_ptr.dtype.element_ty), mask=rows[:, None] < q_len)


def run(q, k, v, causal, out=None):
    d, out = prepare(q, k, v, causal, out)
    grid = (triton.cdiv(d.q_len, BLOCK_M), d.batch * d.heads)
    skipping_kernel[grid](q, k, v, out, d.heads, d.kv_heads, d.q_len, d.kv_len, softmax_scale_log2(d),
                          CAUSAL=d.causal, HEAD_DIM=d.head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                          PRECISION=dot_precision(q))
    return out
