"""The KV-cache write by one Triton kernel for keys and values: the hello-gpu backend's replacement for
``llama.cache_write``.

Eager writes the cache with two ``index_copy_`` calls a layer, one for the keys and one for the values, each a
launch of its own for a few kilobytes at decode (the 8B: 8 heads x 128 values = 2 KB in bf16 each). In a CUDA
graph a launch that small costs its latency, ~1.5-2 us, so the prediction is one launch fewer a layer: ~50-60 us
of a ~6.2 ms decode step at the 8B (32 layers), ~25-30 us of ~1.5 ms at the 1B (16).
Outcome: landed with RoPE's one launch (rope_kernel.py says what the two did together, session 17).

One program copies one head of one token, for the keys (program axis 1 = 0) or the values (= 1), to the cache
row of its position. The positions are read on the device (the model hands a tensor; reading it on the host
would synchronise every step). A position outside the cache is not written: eager's ``index_copy_`` would stop
with a device assert, and the model's caller keeps positions within the cache (``Llama.forward``), so the kernel
only keeps a bad one from writing outside the cache's memory. Keys and values are read through their strides
(the model hands the values as a view of the fused qkv projection's output).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .dependent_launch import checked, launch_options, wait_then_release


@triton.jit
def _write_rows(k_ptr, v_ptr, keys_ptr, values_ptr, positions_ptr, heads, length, max_seq,
                k_batch_stride, k_head_stride, k_token_stride, v_batch_stride, v_head_stride, v_token_stride,
                cache_batch_stride, cache_head_stride, cache_position_stride,
                DIM: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
    wait_then_release(PDL)
    row = tl.program_id(0)                       # (batch, head, token) flattened, token fastest
    token = row % length
    head = (row // length) % heads
    batch = row // (length * heads)
    position = tl.load(positions_ptr + token)
    columns = tl.arange(0, BLOCK)
    position_vector = tl.full([BLOCK], 0, tl.int64) + position      # a vector: the interpreter takes no scalar in a mask
    inside = (columns < DIM) & (position_vector >= 0) & (position_vector < max_seq)
    target = batch * cache_batch_stride + head * cache_head_stride + position * cache_position_stride + columns
    if tl.program_id(1) == 0:
        source = k_ptr + batch * k_batch_stride + head * k_head_stride + token * k_token_stride + columns
        tl.store(keys_ptr + target, tl.load(source, mask=inside), mask=inside)
    else:
        source = v_ptr + batch * v_batch_stride + head * v_head_stride + token * v_token_stride + columns
        tl.store(values_ptr + target, tl.load(source, mask=inside), mask=inside)


def cache_write(keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                pdl: bool = False):
    """:func:`hello_gpu.models.llama.cache_write` (same arguments and results): ``k`` and ``v`` ``(B, K, T, D)``
    written at ``positions`` ``(T,)`` of the caches ``(B, K, S, D)``, in one launch; returns the caches.
    ``pdl``: launched as a programmatic dependent launch (:mod:`.dependent_launch`)."""
    checked_write(keys, values, positions, k, v)
    batch, heads, max_seq, dim = keys.shape
    length = k.shape[2]
    pdl = checked(pdl, keys.device)
    if k.numel():
        _write_rows[(batch * heads * length, 2)](
            k, v, keys, values, positions, heads, length, max_seq,
            k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
            keys.stride(0), keys.stride(1), keys.stride(2), DIM=dim, BLOCK=triton.next_power_of_2(dim), PDL=pdl,
            **launch_options(pdl))
    return keys, values


def checked_write(keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor, k: torch.Tensor,
                  v: torch.Tensor) -> None:
    """Raises ValueError naming the problem unless the kernel takes these caches, positions, k and v."""
    if keys.dim() != 4 or values.shape != keys.shape or values.stride() != keys.stride():
        raise ValueError(f"cache_write: keys and values must be (batch, heads, positions, head_dim) of one layout, got "
                         f"{tuple(keys.shape)} {keys.stride()} and {tuple(values.shape)} {values.stride()}")
    batch, heads, max_seq, dim = keys.shape
    for name, x in (("k", k), ("v", v)):
        if x.dim() != 4 or x.shape[:2] != (batch, heads) or x.shape[3] != dim:
            raise ValueError(f"cache_write: {name} must be ({batch}, {heads}, tokens, {dim}) for caches of shape "
                             f"{tuple(keys.shape)}, got {tuple(x.shape)}")
    length = k.shape[2]
    if v.shape != k.shape:
        raise ValueError(f"cache_write: k {tuple(k.shape)} and v {tuple(v.shape)} must have one shape")
    if positions.shape != (length,) or positions.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"cache_write: positions must be ({length},) int64 or int32 (one a token), got "
                         f"{tuple(positions.shape)} {positions.dtype}")
    if len({x.dtype for x in (keys, values, k, v)}) != 1:
        raise ValueError(f"cache_write: the caches, k and v must share a dtype, got {keys.dtype}, {values.dtype}, "
                         f"{k.dtype} and {v.dtype}")
    if len({x.device for x in (keys, values, k, v, positions)}) != 1:
        raise ValueError("cache_write: the caches, k, v and positions must be on one device")
    if keys.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        raise ValueError("cache_write: head_dim must be contiguous in the caches, k and v")
