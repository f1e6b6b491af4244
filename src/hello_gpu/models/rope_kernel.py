"""RoPE by one Triton kernel, launched for q and for k: the hello-gpu backend's replacement for ``llama.rope``.

Eager RoPE (:func:`hello_gpu.models.llama.rope`) is, for each of q and k, a cast to float32, a chunk, four
multiplies, a subtract, an add, a concatenation and a cast back: about nine kernels each, eighteen a layer,
576 a decode step of the 8B model (32 layers), each reading and writing a few kilobytes. At decode the
work is tiny (q and k of one token: 40 heads x 128 values = 10 KB in bf16) and each kernel costs its
launch (about 1.2 us a call even replayed from a CUDA graph, `hello-gpu ceilings`), so the prediction is
about 18 -> 2 kernels a layer, 512 fewer a step: ~0.6 ms of a ~7.7 ms decode step at 8B, batch 1.

One program rotates one head of one token: it reads the head's two halves (pair ``i`` is dimensions ``i``
and ``i + D/2``, Hugging Face's "rotate half") and the position's cos/sin row, computes in float32 as the
eager code does and rounds once to the input's dtype. q and k are read through their strides (the model
hands views of the fused qkv projection's output), the results are written contiguous, as eager's
``torch.cat`` makes them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_heads(x_ptr, out_ptr, cos_ptr, sin_ptr, heads, length,
                x_batch_stride, x_head_stride, x_token_stride, cos_stride,
                HALF: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)                       # (batch, head, token) flattened, token fastest
    token = row % length
    head = (row // length) % heads
    batch = row // (length * heads)
    pairs = tl.arange(0, BLOCK)
    inside = pairs < HALF
    source = x_ptr + batch * x_batch_stride + head * x_head_stride + token * x_token_stride
    first = tl.load(source + pairs, mask=inside, other=0.0).to(tl.float32)
    second = tl.load(source + HALF + pairs, mask=inside, other=0.0).to(tl.float32)
    cos = tl.load(cos_ptr + token * cos_stride + pairs, mask=inside, other=0.0)
    sin = tl.load(sin_ptr + token * cos_stride + pairs, mask=inside, other=0.0)
    target = out_ptr + row * (2 * HALF)          # contiguous (B, H, T, D)
    tl.store(target + pairs, (first * cos - second * sin).to(out_ptr.dtype.element_ty), mask=inside)
    tl.store(target + HALF + pairs, (second * cos + first * sin).to(out_ptr.dtype.element_ty), mask=inside)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, name: str) -> torch.Tensor:
    if x.dim() != 4:
        raise ValueError(f"rope: {name} must be (batch, heads, tokens, head_dim), got shape {tuple(x.shape)}")
    batch, heads, length, dim = x.shape
    if dim % 2 or x.stride(-1) != 1:
        raise ValueError(f"rope: {name}'s head_dim must be even and contiguous, got {dim} with stride {x.stride(-1)}")
    if cos.shape != (length, dim // 2) or sin.shape != cos.shape or cos.stride() != sin.stride() or cos.stride(-1) != 1:
        raise ValueError(f"rope: cos and sin must be ({length}, {dim // 2}) with contiguous rows, got "
                         f"{tuple(cos.shape)} and {tuple(sin.shape)}")
    if cos.dtype != torch.float32 or sin.dtype != torch.float32:
        raise ValueError(f"rope: cos and sin must be float32 (the eager code computes in float32), got {cos.dtype}")
    out = torch.empty((batch, heads, length, dim), device=x.device, dtype=x.dtype)
    if out.numel():
        _rope_heads[(batch * heads * length,)](
            x, out, cos, sin, heads, length, x.stride(0), x.stride(1), x.stride(2), cos.stride(0),
            HALF=dim // 2, BLOCK=triton.next_power_of_2(dim // 2))
    return out


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """:func:`hello_gpu.models.llama.rope` (same arguments and results): one launch for q, one for k,
    for 16-bit and float32 q and k on a GPU (float32 cos/sin tables)."""
    for name, x in (("q", q), ("k", k)):
        if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise ValueError(f"rope: {name} is {x.dtype}; the kernel takes float16, bfloat16 or float32")
    return _rotate(q, cos, sin, "q"), _rotate(k, cos, sin, "k")
