"""The batch-1 decode GEMV of the hello-gpu-pdl backend: t04's kernel (hello_gpu.ops.linear, [2, 2048] tiles
loaded straight to registers, evict-first) with its first weight tile loaded *before* it waits for the kernel
before it.

Why: with programmatic dependent launch (:mod:`.dependent_launch`) a kernel may start while the one before it
still runs, and must wait (``griddepcontrol.wait``) before it touches what that kernel writes. Our other kernels
wait first thing, so the overlap is only their set-up. A GEMV's weight is written by nobody during a decode step:
only x comes from the kernel before (the RMSNorm, the attention's merge, SwiGLU). So each program issues its first
weight loads, then waits, then reads x. The weight bytes of the programs already resident stream from DRAM while
the kernel before ends, instead of after it.

prediction: on the H200 the 8B's decode step (4.503 ms, records/nvidia-h200/models/run.8b.b1.p512.n256, hello-gpu)
  is 0.95 ms above its 3.55 ms read floor, and 129 GEMVs a step each pay a ramp-up (first bytes ~1 us after the
  launch) behind a kernel of a few microseconds. Hiding ~1-2 us of each: 0.13-0.26 ms, hello-gpu-pdl ~1.03-1.06x
  hello-gpu on the 8B (~82-84% of the bound), less on the 1B (65 GEMVs a step, 1.047 ms): ~1.06-1.12x
  hello-gpu there if the same 1-2 us are hidden, against the 1.010x of PDL without the early weight loads
outcome: wrong, nothing gained: on the H100 (run of 3a550b2, where the GEMVs' neighbours were also fused:
  qkv_rope_cache_write, gate_up_swiglu) hello-gpu-pdl's decode step is 0.999x hello-gpu [0.997, 1.002] on the
  1B and 0.997x [0.997, 0.998] on the 8B (records/nvidia-h100-80gb-hbm3/models/run.{1b,8b}.b1.p512.n256 as committed in
  e486d9f). So
  the ~1 us ramp a GEMV pays behind the kernel before is not there to hide in a CUDA graph here, or the early
  loads do not start it sooner; a profile of the two steps side by side would say which. The H200 not measured
deterministic: yes, and bitwise equal to t04 at M = 1: the same products into the same accumulator slots in the
  same order (the first step's products are the accumulator's first value, as 0 + a is a), then one tl.sum
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .dependent_launch import checked, launch_options

BLOCK_N = 2         # t04's tile: 2 weight rows a program (7168 programs at N = 14336, 1024 at the 1B's 2048 rows)
BLOCK_K = 2048      # 4 KiB of each row a step in bf16
WARPS = 4


@triton.jit
def early_weight_products(a_ptr, w_rows, live, K, BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    """t04's loop for the weight rows ``w_rows`` (a pointer to each row's first element; ``live``: which rows
    exist): the [rows, BLOCK_K] float32 products of x and the weight, summed over the K steps, for tl.sum over
    axis 1. With PDL the first step's weight tile is loaded before the wait: no kernel of a decode step writes a
    weight, so those loads need no wait; x is the kernel before's output, read only after it."""
    products, _squares = weight_products(a_ptr, a_ptr, w_rows, live, K, BLOCK_K, PDL, False)
    return products


@triton.jit
def weight_products(a_ptr, norm_ptr, w_rows, live, K, BLOCK_K: tl.constexpr, PDL: tl.constexpr,
                    NORM: tl.constexpr):
    """:func:`early_weight_products`, and with NORM the products of ``x * norm_weight`` (the RMSNorm's weight at
    ``norm_ptr``) instead, with the [BLOCK_K] float32 sums of x's squares: the caller scales each tl.sum of the
    products by 1 / sqrt(tl.sum(squares) / K + eps) and gets the projection of rms_norm(x), in the same one pass
    over x and the weight (the norm's scale is the same for every column, so it moves out of the sum)."""
    columns = tl.arange(0, BLOCK_K)
    w = tl.load(w_rows + columns[None, :], mask=live[:, None] & (columns < K)[None, :], other=0.0,
                eviction_policy="evict_first")
    if PDL:
        tl.extra.cuda.gdc_wait()                 # x is the kernel before's output: from here on it is visible
        tl.extra.cuda.gdc_launch_dependents()    # the kernel after may be set up
    x, squares = x_step(a_ptr, norm_ptr, columns, K, tl.zeros([BLOCK_K], tl.float32), NORM)
    products = w.to(tl.float32) * x[None, :]
    for k0 in tl.range(BLOCK_K, K, BLOCK_K, num_stages=1):     # t04's loop for the other steps
        k = k0 + columns
        w = tl.load(w_rows + k[None, :], mask=live[:, None] & (k < K)[None, :], other=0.0,
                    eviction_policy="evict_first")
        x, squares = x_step(a_ptr, norm_ptr, k, K, squares, NORM)
        products += w.to(tl.float32) * x[None, :]
    return products, squares


# region fold-norm
@triton.jit
def x_step(a_ptr, norm_ptr, k, K, squares, NORM: tl.constexpr):
    """x at columns ``k`` in float32 (0 past K) and ``squares``; with NORM, x times the norm's weight there and
    ``squares`` plus x's squares (the folded norm's sum, weight_products)."""
    x = tl.load(a_ptr + k, mask=k < K, other=0.0).to(tl.float32)
    if NORM:
        squares += x * x
        x = x * tl.load(norm_ptr + k, mask=k < K, other=0.0).to(tl.float32)
    return x, squares
# endregion fold-norm


@triton.jit
def early_weight_gemv_kernel(a_ptr, w_ptr, c_ptr, N, K, stride_wn,
                             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    live = rows < N
    products = early_weight_products(a_ptr, w_ptr + rows[:, None].to(tl.int64) * stride_wn, live, K, BLOCK_K, PDL)
    tl.store(c_ptr + rows, tl.sum(products, axis=1).to(c_ptr.dtype.element_ty), mask=live)


def refusal(x: torch.Tensor, weight: torch.Tensor) -> str | None:
    """None where :func:`gemv` runs these arguments, else why not (the caller then runs ops.linear)."""
    if x.shape[-1] != weight.shape[-1] or weight.dim() != 2:
        return f"x {tuple(x.shape)} and weight {tuple(weight.shape)} do not multiply as F.linear(x, weight)"
    if x.numel() != x.shape[-1]:
        return f"one row only (x has {x.numel() // max(1, x.shape[-1])})"
    if x.dtype not in (torch.bfloat16, torch.float16) or weight.dtype != x.dtype:
        return f"bfloat16 or float16 x and weight of one dtype, not {x.dtype} and {weight.dtype}"
    if weight.stride(1) != 1 or not x.is_contiguous():
        return f"a contiguous x and a weight with unit column stride (weight strides {weight.stride()})"
    if x.device != weight.device:
        return f"x on {x.device} and weight on {weight.device}"
    return None


def norm_refusal(x: torch.Tensor, norm_weight: torch.Tensor, eps) -> str | None:
    """None where a kernel that normalises ``x`` over its last dimension (weight_products with NORM, the last
    program of linear_add_rms_norm) takes these norm arguments, else why not: one weight per value of that
    dimension, x's dtype and device, contiguous; eps a number >= 0."""
    if not isinstance(norm_weight, torch.Tensor):
        return f"norm_weight must be a torch.Tensor, not {type(norm_weight).__name__}"
    if norm_weight.shape != (x.shape[-1],):
        return (f"norm_weight must have shape ({x.shape[-1]},), one per normalised value; got "
                f"{tuple(norm_weight.shape)}")
    if norm_weight.dtype != x.dtype or norm_weight.device != x.device or not norm_weight.is_contiguous():
        return (f"norm_weight is {norm_weight.dtype} on {norm_weight.device}, x {x.dtype} on {x.device}: a contiguous "
                f"norm_weight of x's dtype and device")
    if not (isinstance(eps, (int, float)) and not isinstance(eps, bool) and eps >= 0):
        return f"eps must be a number >= 0, got {eps!r}"
    if norm_weight.requires_grad and torch.is_grad_enabled():
        return "forward only: call it under torch.no_grad()"
    return None


def gemv(x: torch.Tensor, weight: torch.Tensor, pdl: bool = False) -> torch.Tensor:
    """``F.linear(x, weight)`` for one row of x (..., K) in bf16 / fp16 and an (N, K) weight, as the decode
    step calls it; the result is (..., N). ``pdl``: launched as a programmatic dependent launch, the first weight
    tile loaded before the wait. Refuses, naming the reason, what :func:`refusal` names."""
    problem = refusal(x, weight)
    if problem:
        raise ValueError(f"linear_pdl_kernel.gemv: {problem}")
    pdl = checked(pdl, x.device)
    n, k = weight.shape
    out = torch.empty(*x.shape[:-1], n, device=x.device, dtype=x.dtype)
    if n == 0:
        return out
    if k == 0:
        return out.zero_()
    early_weight_gemv_kernel[(triton.cdiv(n, BLOCK_N),)](x, weight, out, n, k, weight.stride(0), BLOCK_N=BLOCK_N,
                                                         BLOCK_K=BLOCK_K, PDL=pdl, num_warps=WARPS, num_stages=1,
                                                         **launch_options(pdl))
    return out


__all__ = ["early_weight_products", "gemv", "norm_refusal", "refusal", "weight_products", "x_step"]
