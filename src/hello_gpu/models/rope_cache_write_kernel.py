"""RoPE and the KV-cache write in one Triton launch: the hello-gpu backend's replacement for the two launches of
:mod:`.rope_kernel` and :mod:`.cache_write_kernel` that run one after the other in every layer.

Why: at decode both kernels are latency alone. A layer's q, k and v of one token are 48 rows of 128 values at
the 8B (32 + 8 + 8 heads), 12 KB in bf16, and each launch replayed from a CUDA graph costs ~1.5-2 us whatever
it moves (rope_kernel.py's one launch for q and k saved that much, session 17). RoPE writes the rotated k
contiguous and the cache write reads it back: here the rotated k goes straight to its cache row, and v is
copied beside it.
prediction: one launch fewer a layer, ~1.5-2 us each: ~25-30 us of the 1B's ~1.37 ms decode step (16 layers,
  ~2%), ~50-60 us of the 8B's ~6 ms (32 layers, ~1%). The bytes do not matter (~12 KB a layer).
outcome: not measured yet

One program does one head of one token: the first programs rotate q's heads into a new contiguous q, the next
rotate k's heads into the key cache at the token's position, the last copy v's heads into the value cache.
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


@triton.jit
def _rope_and_write(q_ptr, k_ptr, v_ptr, q_out_ptr, keys_ptr, values_ptr, cos_ptr, sin_ptr, positions_ptr,
                    q_rows, kv_rows, q_heads, kv_heads, length, max_seq,
                    q_batch_stride, q_head_stride, q_token_stride, k_batch_stride, k_head_stride, k_token_stride,
                    v_batch_stride, v_head_stride, v_token_stride,
                    cache_batch_stride, cache_head_stride, cache_position_stride, cos_stride,
                    HALF: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
    wait_then_release(PDL)
    program = tl.program_id(0)
    pairs = tl.arange(0, BLOCK)
    if program < q_rows:                            # q: rotated into a contiguous (B, H, T, D)
        token = program % length
        head = (program // length) % q_heads
        batch = program // (length * q_heads)
        source = q_ptr + batch * q_batch_stride + head * q_head_stride + token * q_token_stride
        rotate_head(source, q_out_ptr + program * (2 * HALF), cos_ptr + token * cos_stride,
                    sin_ptr + token * cos_stride, pairs < HALF, HALF, BLOCK)
    else:                                           # k (rotated) or v (copied), to the cache row of the position
        row = (program - q_rows) % kv_rows
        token = row % length
        head = (row // length) % kv_heads
        batch = row // (length * kv_heads)
        position = tl.load(positions_ptr + token)
        position_vector = tl.full([BLOCK], 0, tl.int64) + position   # a vector: the interpreter takes no scalar in a mask
        inside = (pairs < HALF) & (position_vector >= 0) & (position_vector < max_seq)
        at = batch * cache_batch_stride + head * cache_head_stride + position * cache_position_stride
        if program < q_rows + kv_rows:
            source = k_ptr + batch * k_batch_stride + head * k_head_stride + token * k_token_stride
            rotate_head(source, keys_ptr + at, cos_ptr + token * cos_stride, sin_ptr + token * cos_stride,
                        inside, HALF, BLOCK)
        else:
            source = v_ptr + batch * v_batch_stride + head * v_head_stride + token * v_token_stride
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
    q_out = torch.empty(q.shape, device=q.device, dtype=q.dtype)
    q_rows, kv_rows = q.numel() // dim, k.numel() // dim
    if kv_rows:                                     # q has rows too: they share batch and tokens
        _rope_and_write[(q_rows + 2 * kv_rows,)](
            q, k, v, q_out, keys, values, cos, sin, positions, q_rows, kv_rows, heads, k.shape[1], length,
            keys.shape[2], q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2), keys.stride(0), keys.stride(1), keys.stride(2), cos.stride(0),
            HALF=dim // 2, BLOCK=triton.next_power_of_2(dim // 2), PDL=pdl, **launch_options(pdl))
    return q_out, keys, values
