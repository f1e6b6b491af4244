"""Triton, t04 with the query heads of a GQA group in one program: each K/V tile is loaded once for all of them.

parent: t04_causal_block_skipping
change: a program owns BLOCK_M rows of the (query, head-in-group) pairs of one key/value head, query
  major (row r = query r // G, head r % G), instead of BLOCK_M queries of one query head; the key
  loop, masks and skipping are t04's with each row's query index. Grid: (G S_q / BLOCK_M, B H_kv)
hypothesis: with 32 query heads over 8 KV heads, t04 streams each K/V tile through 4 programs (one
  per query head of the group), ~4x the K/V traffic into the SMs (L2 absorbs part of it). For
  prefill the tensor-core work is unchanged and the tile loads are already overlapped: ~1.0x t04. In
  decode (S_q = 1) a t04 program holds 1 live row of 64; here 4 live rows share every K/V load:
  ~4x fewer K/V bytes through the SMs, but one program per (batch, KV head) only: 8 programs at
  B = 1 leave 124 of 132 SMs idle (flash-decoding, t06, splits the keys for that)
prediction: ~1.0x t04 at 4x32x8x4096x4096x128 bfloat16; ~2x t04 at 16x32x8x1x32768x128 (128
  programs, KV bytes read once instead of 4 times)
outcome: 2.480x t04 [2.475, 2.484] at 16x32x8x1x32768x128 bfloat16 (predicted ~2x: missed, +24%), 4,336 GB/s (1.02x
  copy), 495 us, 0.963x SDPA [0.962, 0.965]; 0.979x t04 [0.979, 0.979] at 4x32x32x4096x4096x128 (groups of one);
  4x32x8x4096x4096x128 not measured (records attention.bfloat16, run of 89ae604)
deterministic: yes, as t04
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

from pathlib import Path

import triton
import triton.language as tl

from hello_gpu.ops.attention.launch import LENGTHS, dot_precision, prepare, softmax_scale_log2
from hello_gpu.ops.attention.tuning import autotuned, first_point, interpreted
from hello_gpu.ops.rung import load_module

_t04 = load_module(Path(__file__).resolve().parent / "t04_causal_block_skipping.py", "attention_t04_for_t05")
key_tile, key_range = _t04.key_tile, _t04.key_range


@triton.jit(do_not_specialize=LENGTHS)
def grouped_kernel(q_ptr, k_ptr, v_ptr, out_ptr, heads, kv_heads, q_len, kv_len, scale_log2,
                   CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   PRECISION: tl.constexpr):
    group = heads // kv_heads
    first = tl.program_id(0) * BLOCK_M
    rows = first + tl.arange(0, BLOCK_M)                   # (query, head in group) pairs, query major
    query = rows // group
    bkv = tl.program_id(1)                                 # batch x kv_heads + kv_head
    head = (bkv // kv_heads) * heads + (bkv % kv_heads) * group + rows % group    # b x H + h, per row
    dim = tl.arange(0, HEAD_DIM)
    live = rows < group * q_len
    row_offsets = (head.to(tl.int64) * q_len + query) * HEAD_DIM
    q = tl.load(q_ptr + row_offsets[:, None] + dim[None, :], mask=live[:, None], other=0.0)
    k_base = k_ptr + bkv.to(tl.int64) * kv_len * HEAD_DIM
    v_base = v_ptr + bkv.to(tl.int64) * kv_len * HEAD_DIM
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    unmasked_end, end = key_range(first // group, (first + BLOCK_M - 1) // group, q_len, kv_len, CAUSAL, BLOCK_N)
    for start in range(0, unmasked_end, BLOCK_N):
        row_max, row_sum, acc = key_tile(q, k_base, v_base, start, kv_len, query, row_max, row_sum, acc, q_len, kv_len,
                                         scale_log2, False, CAUSAL, HEAD_DIM, BLOCK_N, PRECISION)
    for start in range(unmasked_end, end, BLOCK_N):
        row_max, row_sum, acc = key_tile(q, k_base, v_base, start, kv_len, query, row_max, row_sum, acc, q_len, kv_len,
                                         scale_log2, True, CAUSAL, HEAD_DIM, BLOCK_N, PRECISION)
    out = tl.where(row_sum[:, None] > 0, acc / row_sum[:, None], 0.0)
    tl.store(out_ptr + row_offsets[:, None] + dim[None, :], out.to(out_ptr.dtype.element_ty), mask=live[:, None])


tuned_kernel = autotuned(grouped_kernel)


def run(q, k, v, causal, out=None):
    d, out = prepare(q, k, v, causal, out)
    rows = d.group * d.q_len
    arguments = (q, k, v, out, d.heads, d.kv_heads, d.q_len, d.kv_len, softmax_scale_log2(d))
    options = {"CAUSAL": d.causal, "HEAD_DIM": d.head_dim, "PRECISION": dot_precision(q)}
    if interpreted():
        point = first_point()
        grouped_kernel[(triton.cdiv(rows, point["BLOCK_M"]), d.batch * d.kv_heads)](*arguments, **options, **point)
        return out
    tuned_kernel[lambda meta: (triton.cdiv(rows, meta["BLOCK_M"]), d.batch * d.kv_heads)](*arguments, **options)
    return out
