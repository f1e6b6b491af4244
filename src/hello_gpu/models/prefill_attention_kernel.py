"""Triton, flash attention of a prefill over the model's KV cache: the hello-gpu backend's ``prefill_attention``.

Why not ``hello_gpu.ops.attention``: its rungs read contiguous K/V of exactly the prompt's keys and take no mask,
while the model hands attention the whole cache (B, H_kv, max_seq, D), written up to the prompt's last position,
and a boolean mask (T, max_seq) that lives on the device (the prompt may start anywhere in the cache: a position
tensor, never a host value). This kernel reads the cache through its strides and the mask from device memory,
and is right for any mask; a causal one costs it about half the work.

parent: eager ``llama.attention``, F.scaled_dot_product_attention(q, keys, values, attn_mask=mask,
  enable_gqa=True), at prefill (T > 1). As we read PyTorch's dispatch (sdp_utils), flash takes no arbitrary
  mask and the memory-efficient and cuDNN kernels take no H != H_kv heads, so with a boolean mask and GQA SDPA
  is likely its math kernel: K and V repeated to H heads, the whole (B, H, T, max_seq) score matrix written and
  read back through the mask, the softmax and P @ V. At the 8B, B = 1, a 2048-token prompt in a 2304-position
  cache (2048 + 256 new): 32 x 2048 x 2304 scores, 151 M elements a layer (302 MB in bf16 each time they
  are written or read), and every masked score computed too.
change: one program per (tile of BLOCK_M queries, batch x query head), classic flash attention: a tile of K and
  V at a time, scores in float32, an online softmax (max, sum, unnormalised output), one division and one
  rounding at the end. Two things are this kernel's own:
  - the span: a first small kernel reads the mask once (T x max_seq bytes: 4.7 MB at 2048 x 2304) and writes,
    per query tile, the first and one-past-last key tile that holds a key any of its rows sees. The main loop
    runs over that span only, a plain counted loop (no branch inside, so Triton can pipeline its loads): for a
    causal prompt, the tiles above the diagonal and the unwritten cache are never visited;
  - inside the span the mask tile is applied exactly, and K and V are loaded only for keys some row of the tile
    sees (a key no row sees is never read: the cache beyond the prompt may hold anything, NaN included).
  The output is written as (B, T, H, D) memory and returned as its (B, H, T, D) view, so the model's
  ``out.transpose(1, 2).reshape(B, T, H * D)`` before the o_proj is a view, not a 16 MB copy a layer.
hypothesis: the work is compute-bound (D = 128: ~64 FLOP a byte of K/V per query tile of 128): causal, the 8B's
  prefill of 2048 does 4 x 32 x 128 x 2048^2 / 2 = 34.4 GFLOP a layer of tensor-core dots (diagonal tiles
  half wasted: +3%); SDPA's math kernel does the full 2048 x 2304 (2.25x the FLOPs) and moves the score
  matrix through memory ~3 times (~0.9 GB a layer in bf16, ~0.3 ms at ~3 TB/s alone).
prediction: at ~300 TFLOP/s (our attention ladder's t04 reached 433 TFLOP/s causal and 482 non-causal at
  4x32x32x4096x4096x128 bf16 on the H200 with autotuned tiles and no mask to read, records attention.bfloat16;
  this kernel reads a mask tile a step and its tiles are not tuned), ~0.12 ms a layer, ~3.7 ms of a 2048-token
  prefill, against ~0.5-1 ms a layer for SDPA's math path: ~4-8x the eager operation, ~15-30 ms saved of the 8B's ~70-90 ms eager prefill;
  unmeasured (no GPU in the session that wrote it): the backend swaps it in only if its timing says faster
outcome: slower than eager, by far less than predicted. On the H100 (session 16, in the model runs' own timing of
  the replacement): 0.91x eager [0.90, 0.92] at the 8B (batch 1, a 512-token prompt in a 768-position cache,
  records/nvidia-h100-80gb-hbm3/models/run.8b.b1.p512.n256), 0.79x [0.78, 0.79] at the 1B (the same shape,
  run.1b.b1.p512.n256); never swapped in. A 4-8x prediction missed by 5-10x says its premise is wrong: eager is
  likely not SDPA's math path here. Next, before any change to this kernel: the kernels eager launches at this
  shape (`hello-gpu model profile --phase prefill`), then this kernel's own time against its FLOPs.
deterministic: yes, each program visits its key tiles in order
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..ops.rung import triton_interpreter_on
from .decode_attention_kernel import attend_tile, check_arguments
from .llama import attention as eager_attention

MIN_DOT = 16                # tl.dot takes blocks of at least 16 in each dimension: the head dim is padded
# (BLOCK_M, BLOCK_N, warps, stages) per case. 16-bit at D <= 128: a 128 x 128 float32 accumulator over 8 warps is
# 64 registers a thread, the tiles of Triton's own Hopper flash forward; a 256-wide head halves BLOCK_M to stay
# out of local memory; float32 (an "ieee" dot, no tensor cores) takes smaller tiles. The interpreter: 16 x 16,
# so that small test shapes span several tiles each way.
TILES_16BIT = (128, 64, 8, 3)
TILES_16BIT_WIDE = (64, 64, 8, 2)
TILES_FLOAT32 = (64, 32, 4, 2)
TILES_INTERPRETER = (16, 16, 4, 1)
SPAN_BLOCK_N = 256          # mask bytes a row reads per step of the span kernel


@triton.jit
def span_kernel(mask_ptr, span_ptr, queries, seq, mask_row_stride, mask_col_stride,
                BLOCK_M: tl.constexpr, SPAN_BLOCK_N: tl.constexpr):
    """For query tile m: [first, last + 1) of the keys some row of the tile sees ((0, 0) when none does)."""
    tile = tl.program_id(0)
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    live = rows < queries
    first_key = seq
    last_key = -1
    for start in range(0, seq, SPAN_BLOCK_N):
        keys = start + tl.arange(0, SPAN_BLOCK_N)
        seen = tl.load(mask_ptr + rows.to(tl.int64)[:, None] * mask_row_stride + keys[None, :] * mask_col_stride,
                       mask=live[:, None] & (keys < seq)[None, :], other=0) != 0
        column_seen = tl.max(seen.to(tl.int32), axis=0) > 0
        first_key = tl.minimum(first_key, tl.min(tl.where(column_seen, keys, seq), axis=0))
        last_key = tl.maximum(last_key, tl.max(tl.where(column_seen, keys, -1), axis=0))
    any_seen = last_key >= 0
    tl.store(span_ptr + tile * 2, tl.where(any_seen, first_key, 0))
    tl.store(span_ptr + tile * 2 + 1, tl.where(any_seen, last_key + 1, 0))


@triton.jit
def prefill_kernel(q_ptr, k_ptr, v_ptr, mask_ptr, span_ptr, out_ptr, heads, queries,
                   q_batch_stride, q_head_stride, q_seq_stride, k_batch_stride, k_head_stride, k_seq_stride,
                   v_batch_stride, v_head_stride, v_seq_stride, mask_row_stride, mask_col_stride,
                   out_batch_stride, out_head_stride, out_seq_stride, scale_log2,
                   GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """One query head's BLOCK_M queries over the keys of their span."""
    tile = tl.program_id(0)
    bh = tl.program_id(1)
    batch = (bh // heads).to(tl.int64)
    head = bh % heads
    kv_head = head // GROUP
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    live = rows < queries
    in_dim = dims < HEAD_DIM
    q = tl.load(q_ptr + batch * q_batch_stride + head * q_head_stride + rows.to(tl.int64)[:, None] * q_seq_stride
                + dims[None, :], mask=live[:, None] & in_dim[None, :], other=0.0)
    k_base = k_ptr + batch * k_batch_stride + kv_head * k_head_stride
    v_base = v_ptr + batch * v_batch_stride + kv_head * v_head_stride
    mask_rows = mask_ptr + rows.to(tl.int64)[:, None] * mask_row_stride
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    # Every load's mask below is the key span's (two scalars loaded once) and the cache's: nothing in it depends on
    # another load of the loop, so Triton can issue the next tiles' loads ahead (cp.async) while this one computes
    first_key = tl.load(span_ptr + tile * 2)
    end_key = tl.load(span_ptr + tile * 2 + 1)
    for key_tile in range(first_key // BLOCK_N, tl.cdiv(end_key, BLOCK_N)):
        keys = key_tile * BLOCK_N + tl.arange(0, BLOCK_N)
        in_span = (keys >= first_key) & (keys < end_key)                # end_key <= seq
        seen = tl.load(mask_rows + keys[None, :] * mask_col_stride, mask=live[:, None] & in_span[None, :],
                       other=0) != 0
        kv_mask = in_span[:, None] & in_dim[None, :]
        k = tl.load(k_base + keys.to(tl.int64)[:, None] * k_seq_stride + dims[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_base + keys.to(tl.int64)[:, None] * v_seq_stride + dims[None, :], mask=kv_mask, other=0.0)
        row_max, row_sum, acc = attend_tile(q, k, v, seen, row_max, row_sum, acc, scale_log2, PRECISION)
    seen_any = row_sum > 0
    out = tl.where(seen_any[:, None], acc / tl.where(seen_any, row_sum, 1.0)[:, None], 0.0)
    tl.store(out_ptr + batch * out_batch_stride + head * out_head_stride + rows.to(tl.int64)[:, None] * out_seq_stride
             + dims[None, :], out.to(out_ptr.dtype.element_ty), mask=live[:, None] & in_dim[None, :])


def tiles_for(dtype: torch.dtype, head_dim: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, warps, stages) for this dtype and head width (see TILES_16BIT)."""
    if triton_interpreter_on():
        return TILES_INTERPRETER
    if dtype == torch.float32:
        return TILES_FLOAT32
    return TILES_16BIT if head_dim <= 128 else TILES_16BIT_WIDE


def prefill_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Attention of T query tokens (q (B, H, T, D)) over the cache (B, H_kv, S, D) where the boolean ``mask``
    (T, S) is True; a (B, H, T, D) result in q's dtype, the transposed view of a contiguous (B, T, H, D)."""
    check_arguments(q, keys, values, mask, "prefill attention")
    batch, heads, queries, dim = q.shape
    kv_heads, seq = keys.shape[1], keys.shape[2]
    out = torch.empty((batch, queries, heads, dim), device=q.device, dtype=q.dtype).transpose(1, 2)
    if out.numel() == 0:
        return out
    if seq == 0:
        return out.zero_()                 # no key at all: every row sees none (SDPA gives 0)
    block_m, block_n, warps, stages = tiles_for(q.dtype, dim)
    query_tiles = triton.cdiv(queries, block_m)
    span = torch.empty((query_tiles, 2), device=q.device, dtype=torch.int32)
    mask_bytes = mask.view(torch.uint8)    # the same memory, one byte a key
    span_kernel[(query_tiles,)](mask_bytes, span, queries, seq, mask_bytes.stride(0), mask_bytes.stride(1),
                                BLOCK_M=block_m, SPAN_BLOCK_N=SPAN_BLOCK_N, num_warps=4)
    scale_log2 = 1.4426950408889634 / dim ** 0.5       # softmax(q.k / sqrt(D)) computed with exp2
    prefill_kernel[(query_tiles, batch * heads)](
        q, keys, values, mask_bytes, span, out, heads, queries,
        q.stride(0), q.stride(1), q.stride(2), keys.stride(0), keys.stride(1), keys.stride(2),
        values.stride(0), values.stride(1), values.stride(2), mask_bytes.stride(0), mask_bytes.stride(1),
        out.stride(0), out.stride(1), out.stride(2), scale_log2,
        GROUP=heads // kv_heads, HEAD_DIM=dim, BLOCK_M=block_m, BLOCK_N=block_n,
        BLOCK_D=max(MIN_DOT, triton.next_power_of_2(dim)),
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32", num_warps=warps, num_stages=stages)
    return out


def attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """:func:`hello_gpu.models.llama.attention` (same arguments and result) for a prefill: the kernel above
    for T > 1 query tokens; a single token (a one-token prompt) by the eager function itself, which the
    backend's ``attention`` replacement (decode) serves."""
    if isinstance(q, torch.Tensor) and q.dim() == 4 and q.shape[2] == 1:
        return eager_attention(q, keys, values, mask)
    return prefill_attention(q, keys, values, mask)


__all__ = ["attention", "prefill_attention", "prefill_kernel", "span_kernel", "tiles_for"]
