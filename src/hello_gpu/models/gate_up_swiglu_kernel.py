"""The MLP's gate/up projection and SwiGLU in one Triton launch at batch-1 decode: the hello-gpu backend's
``ModelOps.gate_up_swiglu``.

Without it a layer's MLP starts with two kernels: the GEMV of the fused [gate | up] weight (2I rows) writes 2I
values, then SwiGLU reads them back and writes I. Here a program owns output j and j + 1: it reads weight rows j,
j + 1 (gate) and I + j, I + j + 1 (up), the same bytes the GEMV reads, keeps both dot products in float32, and
writes silu(gate) * up rounded once. The tiles are t04's ([2, 2048] of each half, loaded straight to registers,
evict-first), with twice the warps for the twice as many rows. As in :mod:`.linear_pdl_kernel`, the first weight
tiles are loaded before the dependent-launch wait where ``pdl`` asks for it.
``norm_gate_up_swiglu`` is the same kernel with the RMSNorm before it folded in (:mod:`.norm_fold`): the residual
read in place of the normed x, its squares summed on the way, both dot products scaled at the end.

prediction: one launch fewer a layer. On the H200, the 1B's step (1.047 ms, records/nvidia-h200/models/
  run.1b.b1.p512.n256, hello-gpu) runs ~10 kernels a layer for ~29 us above its read floor, ~3 us a kernel:
  ~16 x 2.5-3 us = 40-50 us a step (~4-5%, 56% -> ~58-59% of the bound); the 8B 32 x the same, ~2%. The GEMV
  itself should read its weight as t04 does (same tile, same loads), so the backend's timing against linear then
  swiglu decides; a slower fused kernel is not swapped in
outcome: faster, swapped in: on the H100 (run of 3a550b2) 1.18x [1.18, 1.18] linear then swiglu over the 1B's 16
  calls of a step and 1.05x [1.05, 1.05] over the 8B's 32 (records/nvidia-h100-80gb-hbm3/models/
  run.{1b,8b}.b1.p512.n256 as committed in e486d9f); again in the run of fdae1a2 (session 24, those files now): 1.18x
  [1.18, 1.19] and 1.05x [1.05, 1.05]; the H200 not measured yet
deterministic: yes, each output's two sums are one program's, each in t04's fixed order
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .dependent_launch import checked, launch_options
from .linear_pdl_kernel import norm_refusal, refusal as one_row_refusal, x_step

BLOCK_N = 2         # outputs a program: gate rows j, j + 1 and up rows I + j, I + j + 1 (7168 programs at the 8B)
BLOCK_K = 2048      # t04's step: 4 KiB of each row in bf16
WARPS = 8           # two [2, 2048] float32 accumulators: 32 sums a thread, as t04's one with 4 warps


@triton.jit
def gate_up_swiglu_rows(a_ptr, norm_ptr, eps, w_ptr, c_ptr, I, K, stride_wn,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr, NORM: tl.constexpr):
    """One program's outputs; with NORM, of rms_norm(x) (x the residual, the norm's weight at norm_ptr: the dot
    products of x * norm_weight, scaled at the end by the norm's one scale, as weight_products does)."""
    outputs = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    live = outputs < I
    gate_rows = w_ptr + outputs[:, None].to(tl.int64) * stride_wn
    up_rows = w_ptr + (outputs[:, None] + I).to(tl.int64) * stride_wn     # I may be specialised to a constant
    columns = tl.arange(0, BLOCK_K)
    first = live[:, None] & (columns < K)[None, :]
    # The first step's weight tiles before the wait: no kernel of a decode step writes a weight.
    gate_w = tl.load(gate_rows + columns[None, :], mask=first, other=0.0, eviction_policy="evict_first")
    up_w = tl.load(up_rows + columns[None, :], mask=first, other=0.0, eviction_policy="evict_first")
    if PDL:
        tl.extra.cuda.gdc_wait()                 # x is the RMSNorm's output: visible from here on
        tl.extra.cuda.gdc_launch_dependents()
    x, squares = x_step(a_ptr, norm_ptr, columns, K, tl.zeros([BLOCK_K], tl.float32), NORM)
    gate = gate_w.to(tl.float32) * x[None, :]
    up = up_w.to(tl.float32) * x[None, :]
    for k0 in tl.range(BLOCK_K, K, BLOCK_K, num_stages=1):
        k = k0 + columns
        inside = live[:, None] & (k < K)[None, :]
        gate_w = tl.load(gate_rows + k[None, :], mask=inside, other=0.0, eviction_policy="evict_first")
        up_w = tl.load(up_rows + k[None, :], mask=inside, other=0.0, eviction_policy="evict_first")
        x, squares = x_step(a_ptr, norm_ptr, k, K, squares, NORM)
        gate += gate_w.to(tl.float32) * x[None, :]
        up += up_w.to(tl.float32) * x[None, :]
    g = tl.sum(gate, axis=1)
    u = tl.sum(up, axis=1)
    if NORM:
        scale = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / K + eps)
        g = g * scale
        u = u * scale
    tl.store(c_ptr + outputs, (g / (1.0 + tl.exp(-g)) * u).to(c_ptr.dtype.element_ty), mask=live)


@triton.jit
def gate_up_swiglu_kernel(a_ptr, w_ptr, c_ptr, I, K, stride_wn,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    gate_up_swiglu_rows(a_ptr, a_ptr, 0.0, w_ptr, c_ptr, I, K, stride_wn, BLOCK_N, BLOCK_K, PDL, False)


@triton.jit
def norm_gate_up_swiglu_kernel(a_ptr, norm_ptr, eps, w_ptr, c_ptr, I, K, stride_wn,
                               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    gate_up_swiglu_rows(a_ptr, norm_ptr, eps, w_ptr, c_ptr, I, K, stride_wn, BLOCK_N, BLOCK_K, PDL, True)


def refusal(x: torch.Tensor, weight: torch.Tensor) -> str | None:
    """None where :func:`gate_up_swiglu` runs these arguments, else why not: what the one-row GEMV takes
    (:func:`.linear_pdl_kernel.refusal`), with the rows of gate then up."""
    if weight.dim() == 2 and weight.shape[0] % 2:
        return f"the weight's rows hold gate then up, so there must be an even number of them, not {weight.shape[0]}"
    return one_row_refusal(x, weight)


def gate_up_swiglu(x: torch.Tensor, weight: torch.Tensor, pdl: bool = False) -> torch.Tensor:
    """:func:`hello_gpu.models.llama.gate_up_swiglu` for one row of x (..., K) in bf16 / fp16 and the fused (2I, K)
    [gate | up] weight: ``silu(x @ gate.T) * (x @ up.T)``, (..., I). ``pdl``: a programmatic dependent launch, the
    first weight tiles loaded before the wait. Refuses, naming the reason, what :func:`refusal` names."""
    problem = refusal(x, weight)
    if problem:
        raise ValueError(f"gate_up_swiglu: {problem}")
    return _launch(x, None, 0.0, weight, pdl)


def norm_gate_up_swiglu(residual: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
                        pdl: bool = False) -> torch.Tensor:
    """:func:`gate_up_swiglu` of ``rms_norm(residual, norm_weight, eps)`` in the same one launch
    (:func:`hello_gpu.models.llama.norm_gate_up_swiglu`): each program sums the squares of the residual as it
    reads it and scales its two dot products at the end, so no kernel before it writes the normed activation.
    The normed values are not rounded to the model's dtype before the projection (eager rounds them once): closer
    to the float64 result, not bitwise eager's. Refuses what :func:`refusal` and
    :func:`.linear_pdl_kernel.norm_refusal` name."""
    problem = refusal(residual, weight) or norm_refusal(residual, norm_weight, eps)
    if problem:
        raise ValueError(f"norm_gate_up_swiglu: {problem}")
    return _launch(residual, norm_weight, float(eps), weight, pdl)


def _launch(x, norm_weight, eps, weight, pdl) -> torch.Tensor:
    """Checked arguments: one launch of the kernel (the norm-folded one where ``norm_weight`` is given)."""
    pdl = checked(pdl, x.device)
    width, k = weight.shape[0] // 2, weight.shape[1]
    out = torch.empty(*x.shape[:-1], width, device=x.device, dtype=x.dtype)
    if width == 0:
        return out
    if k == 0:
        return out.zero_()                       # silu(0) * 0
    programs = triton.cdiv(width, BLOCK_N)
    options = dict(BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, PDL=pdl, num_warps=WARPS, num_stages=1, **launch_options(pdl))
    if norm_weight is None:
        gate_up_swiglu_kernel[(programs,)](x, weight, out, width, k, weight.stride(0), **options)
    else:
        norm_gate_up_swiglu_kernel[(programs,)](x, norm_weight, eps, weight, out, width, k, weight.stride(0), **options)
    return out


__all__ = ["gate_up_swiglu", "norm_gate_up_swiglu", "refusal"]
