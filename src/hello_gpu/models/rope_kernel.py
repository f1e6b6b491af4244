"""RoPE by one Triton kernel, one launch for q and k: the hello-gpu backend's replacement for ``llama.rope``.

Eager RoPE (:func:`hello_gpu.models.llama.rope`) is, for each of q and k, a cast to float32, a chunk, four
multiplies, a subtract, an add, a concatenation and a cast back: about nine kernels each, eighteen a layer,
576 a decode step of the 8B model (32 layers), each reading and writing a few kilobytes. At decode the
work is tiny (q and k of one token: 40 heads x 128 values = 10 KB in bf16) and each kernel costs its
launch (about 1.2 us a call even replayed from a CUDA graph, `hello-gpu ceilings`), so the prediction is
about 18 -> 2 kernels a layer, 512 fewer a step: ~0.6 ms of a ~7.7 ms decode step at 8B, batch 1. Then one
launch for both (session 16): a layer's q and k are 40 rows of 128 values at the 8B, far too few to fill the GPU
twice, so the second launch was its latency alone (~1.5-2 us in a CUDA graph): ~50-60 us a step at the 8B
(32 layers), ~25-30 us at the 1B (16).
Outcome (the H100, session 17, with the cache-write kernel landed beside it; not one run, so only a rough check):
the median decode step went 1.488 -> 1.442 ms at the 1B and 6.247 -> 6.108 ms at the 8B; in the same run,
hello-gpu over compile-reduce-overhead 0.982x (was 0.929x) and 1.040x (was 1.019x).

One program rotates one head of one token (the first programs q's heads, the rest k's): it reads the head's two halves (pair ``i`` is dimensions ``i``
and ``i + D/2``, Hugging Face's "rotate half") and the position's cos/sin row, computes in float32 as the
eager code does and rounds once to the input's dtype. q and k are read through their strides (the model
hands views of the fused qkv projection's output), the results are written contiguous, as eager's
``torch.cat`` makes them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .dependent_launch import checked, launch_options, wait_then_release


@triton.jit
def rotate_head(source, target, cos_row, sin_row, inside, HALF: tl.constexpr, BLOCK: tl.constexpr):
    """One head's ``2 * HALF`` values from ``source`` rotated into ``target`` (pointers to the head's first value),
    by the angles at ``cos_row``/``sin_row``, in float32, rounded once to the target's dtype; ``inside``: the
    pairs (``BLOCK`` of them) to do."""
    pairs = tl.arange(0, BLOCK)
    first = tl.load(source + pairs, mask=inside, other=0.0).to(tl.float32)
    second = tl.load(source + HALF + pairs, mask=inside, other=0.0).to(tl.float32)
    cos = tl.load(cos_row + pairs, mask=inside, other=0.0)
    sin = tl.load(sin_row + pairs, mask=inside, other=0.0)
    tl.store(target + pairs, (first * cos - second * sin).to(target.dtype.element_ty), mask=inside)
    tl.store(target + HALF + pairs, (second * cos + first * sin).to(target.dtype.element_ty), mask=inside)


@triton.jit
def _rope_row(x_ptr, out_ptr, cos_ptr, sin_ptr, row, heads, length, x_batch_stride, x_head_stride, x_token_stride,
              cos_stride, HALF: tl.constexpr, BLOCK: tl.constexpr):
    """Rotate row ``row`` of one tensor: (batch, head, token) flattened, token fastest."""
    token = row % length
    head = (row // length) % heads
    batch = row // (length * heads)
    source = x_ptr + batch * x_batch_stride + head * x_head_stride + token * x_token_stride
    rotate_head(source, out_ptr + row * (2 * HALF), cos_ptr + token * cos_stride, sin_ptr + token * cos_stride,
                tl.arange(0, BLOCK) < HALF, HALF, BLOCK)     # the output contiguous (B, H, T, D)


@triton.jit
def _rope_q_and_k(q_ptr, k_ptr, q_out_ptr, k_out_ptr, cos_ptr, sin_ptr, q_rows, q_heads, k_heads, length,
                  q_batch_stride, q_head_stride, q_token_stride, k_batch_stride, k_head_stride, k_token_stride,
                  cos_stride, HALF: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """One launch for both: the first ``q_rows`` programs rotate q's rows, the rest k's."""
    wait_then_release(PDL)
    row = tl.program_id(0)
    if row < q_rows:
        _rope_row(q_ptr, q_out_ptr, cos_ptr, sin_ptr, row, q_heads, length,
                  q_batch_stride, q_head_stride, q_token_stride, cos_stride, HALF, BLOCK)
    else:
        _rope_row(k_ptr, k_out_ptr, cos_ptr, sin_ptr, row - q_rows, k_heads, length,
                  k_batch_stride, k_head_stride, k_token_stride, cos_stride, HALF, BLOCK)


def _checked(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, name: str) -> None:
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"rope: {name} is {x.dtype}; the kernel takes float16, bfloat16 or float32")
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


def checked_q_and_k(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    """Raises ValueError naming the problem unless the kernel takes these q, k and angle tables."""
    _checked(q, cos, sin, "q")
    _checked(k, cos, sin, "k")
    if k.dtype != q.dtype or k.shape[0] != q.shape[0] or k.shape[2:] != q.shape[2:] or k.device != q.device:
        raise ValueError(f"rope: q {tuple(q.shape)} {q.dtype} and k {tuple(k.shape)} {k.dtype} must share their "
                         f"batch, tokens, head_dim, dtype and device")


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pdl: bool = False):
    """:func:`hello_gpu.models.llama.rope` (same arguments and results): one launch for q and k together,
    for 16-bit and float32 q and k on a GPU (float32 cos/sin tables). ``pdl``: launched as a programmatic
    dependent launch (:mod:`.dependent_launch`)."""
    checked_q_and_k(q, k, cos, sin)
    pdl = checked(pdl, q.device)
    batch, heads, length, dim = q.shape
    q_out, k_out = torch.empty(q.shape, device=q.device, dtype=q.dtype), torch.empty(k.shape, device=k.device,
                                                                                      dtype=k.dtype)
    q_rows, rows = q.numel() // dim, q.numel() // dim + k.numel() // dim
    if rows:
        _rope_q_and_k[(rows,)](
            q, k, q_out, k_out, cos, sin, q_rows, heads, k.shape[1], length,
            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2), cos.stride(0),
            HALF=dim // 2, BLOCK=triton.next_power_of_2(dim // 2), PDL=pdl, **launch_options(pdl))
    return q_out, k_out
