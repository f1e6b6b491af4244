"""RoPE and the KV-cache write in one Triton launch: the hello-gpu backend's replacement for the two launches of
:mod:`.rope_kernel` and :mod:`.cache_write_kernel` that run one after the other in every layer.

Why: at decode both kernels are latency alone. A layer's q, k and v of one token are 48 rows of 128 values at
the 8B (32 + 8 + 8 heads), 12 KB in bf16, and each launch replayed from a CUDA graph costs ~1.5-2 us whatever
it moves (rope_kernel.py's one launch for q and k saved that much, session 17). RoPE writes the rotated k
contiguous and the cache write reads it back: here the rotated k goes straight to its cache row, and v is
copied beside it.
prediction: one launch fewer a layer, ~1.5-2 us each: ~25-30 us of the 1B's ~1.37 ms decode step (16 layers,
  ~2%), ~50-60 us of the 8B's ~6 ms (32 layers, ~1%). The bytes do not matter (~12 KB a layer).
outcome: timed against our two kernels where the backend chooses, H100: 1.40-1.46x at the 8B's and 1B's decode
  shapes, batch 1 and 16, and 1.42x at the 2048-token run's (the rope_cache_write choice in each of
  records/nvidia-h100-80gb-hbm3/models/run.*/model-run.json, run of d7bb2a6). The prediction was in us a step;
  the step changed with other kernels in the same commits, so no step ratio isolates this one. At a prompt: 16.3
  us a call in the 8B's 2048-token prefill, from 84.3 us with one token a program (the profile named below)

One program does one head of up to 16 tokens: the programs of q's heads rotate them into a new contiguous q, those
of k's heads rotate them into the key cache at the tokens' positions, those of v's heads copy them into the value
cache. Why 16 tokens (session 20): with one head of one token a program, the H100's profile of the 8B's
2048-token prefill (records/nvidia-h100-80gb-hbm3/models/profile.8b.prefill.b1.p2048.hello-gpu) had this kernel
at 84.3 us a call, 4.5% of the prefill, for ~50 MB moved (~17 us at 3 TB/s): 115,000 programs of 64 pairs each,
too little work a program to cover its start. Prediction: 16 tokens a program, 7,000 programs, ~20-25 us a call,
~2 ms (~3.5%) of the 8B's ~55 ms prefill; decode unchanged (one program a head either way).
Everything else is as in the two kernels: float32 math rounded once, the positions read on the device (a
position outside the cache is not written), q, k and v read through their strides.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .cache_write_kernel import checked_write
from .dependent_launch import checked, launch_options, wait_then_release
from .rope_kernel import checked_q_and_k, rotate_head

# Tokens a program: at decode one (two lanes, one masked: a tile needs two), at a prompt up to 16 (below)
MAX_TOKENS = 16
MAX_GRID_Y = 65535          # CUDA's limit on a grid's second axis: (batch, head) slots, 1365 batches of the 8B's 48


@triton.jit
def _rope_and_write(q_ptr, k_ptr, v_ptr, q_out_ptr, keys_ptr, values_ptr, cos_ptr, sin_ptr, positions_ptr,
                    q_heads, kv_heads, length, max_seq,
                    q_batch_stride, q_head_stride, q_token_stride, k_batch_stride, k_head_stride, k_token_stride,
                    v_batch_stride, v_head_stride, v_token_stride,
                    cache_batch_stride, cache_head_stride, cache_position_stride, cos_stride,
                    HALF: tl.constexpr, BLOCK: tl.constexpr, TOKENS: tl.constexpr, PDL: tl.constexpr):
    wait_then_release(PDL)
    tokens = tl.program_id(0) * TOKENS + tl.arange(0, TOKENS)
    slot = tl.program_id(1)                         # (batch, head) with the heads of q, then k, then v
    batch = slot // (q_heads + 2 * kv_heads)
    head = slot % (q_heads + 2 * kv_heads)
    pairs = tl.arange(0, BLOCK)
    real = (tokens < length)[:, None] & (pairs < HALF)[None, :]
    cos_rows = cos_ptr + tokens[:, None] * cos_stride
    sin_rows = sin_ptr + tokens[:, None] * cos_stride
    if head < q_heads:                              # q: rotated into a contiguous (B, H, T, D)
        source = q_ptr + batch * q_batch_stride + head * q_head_stride + tokens[:, None] * q_token_stride
        target = q_out_ptr + ((batch * q_heads + head) * length + tokens[:, None]) * (2 * HALF)
        rotate_head(source, target, cos_rows, sin_rows, real, HALF, BLOCK)
    else:                                           # k (rotated) or v (copied), to the cache rows of the positions
        positions = tl.load(positions_ptr + tokens, mask=tokens < length, other=-1)
        inside = real & ((positions >= 0) & (positions < max_seq))[:, None]
        kv_head = (head - q_heads) % kv_heads
        at = batch * cache_batch_stride + kv_head * cache_head_stride + positions[:, None] * cache_position_stride
        if head < q_heads + kv_heads:
            source = k_ptr + batch * k_batch_stride + kv_head * k_head_stride + tokens[:, None] * k_token_stride
            rotate_head(source, keys_ptr + at, cos_rows, sin_rows, inside, HALF, BLOCK)
        else:
            source = v_ptr + batch * v_batch_stride + kv_head * v_head_stride + tokens[:, None] * v_token_stride
            tl.store(values_ptr + at + pairs, tl.load(source + pairs, mask=inside), mask=inside)
            tl.store(values_ptr + at + HALF + pairs, tl.load(source + HALF + pairs, mask=inside), mask=inside)


def rope_cache_write(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor, pdl: bool = False):
    """:func:`hello_gpu.models.llama.rope_cache_write` (same arguments and results): q ``(B, H, T, D)`` rotated into
    a new contiguous tensor, k ``(B, K, T, D)`` rotated and v copied into the caches ``(B, K, S, D)`` at
    ``positions`` ``(T,)``, in one launch; returns ``(q rotated, keys, values)``. 16-bit and float32 q, k and v on
    a GPU, float32 cos/sin tables ``(T, D/2)``. ``pdl``: launched as a programmatic dependent launch
    (:mod:`.dependent_launch`)."""
    checked_q_and_k(q, k, cos, sin)
    checked_write(keys, values, positions, k, v)
    if q.device != keys.device or cos.device != q.device or sin.device != q.device:
        raise ValueError(f"rope_cache_write: q, the tables and the caches must be on one device, got {q.device}, "
                         f"{cos.device}, {sin.device} and {keys.device}")
    pdl = checked(pdl, q.device)
    batch, heads, length, dim = q.shape
    if batch * (heads + 2 * k.shape[1]) > MAX_GRID_Y:
        raise ValueError(f"rope_cache_write: batch x (q heads + 2 x kv heads) = {batch * (heads + 2 * k.shape[1])} "
                         f"programs on the grid's second axis, at most {MAX_GRID_Y}: split the batch")
    q_out = torch.empty(q.shape, device=q.device, dtype=q.dtype)
    if q.numel():
        tokens = min(max(triton.next_power_of_2(length), 2), MAX_TOKENS)
        _rope_and_write[(triton.cdiv(length, tokens), batch * (heads + 2 * k.shape[1]))](
            q, k, v, q_out, keys, values, cos, sin, positions, heads, k.shape[1], length,
            keys.shape[2], q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2), keys.stride(0), keys.stride(1), keys.stride(2), cos.stride(0),
            HALF=dim // 2, BLOCK=triton.next_power_of_2(dim // 2), TOKENS=tokens, PDL=pdl, **launch_options(pdl))
    return q_out, keys, values
