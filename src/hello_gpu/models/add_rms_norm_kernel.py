"""Triton, the residual add fused into the RMSNorm after it: one kernel reads the residual and the delta
once and writes both the new residual and its norm (the hello-gpu backend's ``add_rms_norm``).

parent: the two launches it replaces in the hello-gpu backend (a torch add, then hello_gpu.ops.rms_norm)
change: one program per row holds the whole row in registers (HIDDEN a compile-time constant, BLOCK its
  next power of two): loads residual and delta, adds them in float32 and rounds the sum to the model's
  dtype (as the torch add does), stores it, and normalises the rounded sum from registers (no second
  read of it), then multiplies by the weight and stores the norm
hypothesis: at decode a row is one token's hidden state: 4096 bf16 = 8 KB on the 8B. Two launches move
  residual + delta in (16 KB), the sum out (8 KB), the sum back in (8 KB) and the norm out (8 KB), plus the
  weight: 48 KB; fused, 40 KB and one launch instead of two. Both are far below what takes a GPU a
  microsecond, so the win is the launch and its dependency: ~2 us of the ~5 us a kernel costs on the
  decode step's critical path inside a CUDA graph, 64 times a step (two per layer) on the 8B
prediction: ~1.5-2x the torch add + rms_norm pair at 1x1x4096 bfloat16 (two dependent launches become
  one); ~0.1-0.2 ms of the ~6-8 ms decode step of the 8B (64 launches saved), a 1-3% faster step;
  unmeasured (no GPU in the session that wrote it): the backend swaps it in only if its timing says faster
outcome: not measured yet
deterministic: yes, each row reduces in one tl.sum tree, one program per row
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..ops.rung import triton_interpreter_on
from .dependent_launch import checked, launch_options, wait_then_release

MAX_HIDDEN = 16384          # a row in registers: 16384 float32 over 16 warps is 32 per thread
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@triton.jit
def add_rms_norm_kernel(residual_ptr, delta_ptr, weight_ptr, total_ptr, out_ptr, eps, HIDDEN: tl.constexpr,
                        BLOCK: tl.constexpr, PDL: tl.constexpr):
    wait_then_release(PDL)
    row = tl.program_id(0).to(tl.int64)
    columns = tl.arange(0, BLOCK)
    mask = columns < HIDDEN
    offsets = row * HIDDEN + columns
    residual = tl.load(residual_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    delta = tl.load(delta_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    # The sum rounded to the model's dtype, as `residual + delta` in torch: the norm reads what is stored.
    total = (residual + delta).to(total_ptr.dtype.element_ty, fp_downcast_rounding="rtne")
    tl.store(total_ptr + offsets, total, mask=mask)
    wide = total.to(tl.float32)
    scale = 1.0 / tl.sqrt(tl.sum(wide * wide, axis=0) / HIDDEN + eps)
    weight = tl.load(weight_ptr + columns, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offsets, (wide * scale * weight).to(out_ptr.dtype.element_ty), mask=mask)


def _check(residual: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps) -> None:
    """Refuse, naming the problem, what the kernel would read wrongly (it indexes rows of HIDDEN contiguous elements)."""
    name = "add_rms_norm"
    for argument, tensor in (("residual", residual), ("delta", delta), ("weight", weight)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name}: {argument} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dtype != residual.dtype or tensor.device != residual.device:
            raise ValueError(f"{name}: {argument} is {tensor.dtype} on {tensor.device}; residual is {residual.dtype} "
                             f"on {residual.device}: they must match")
        if not tensor.is_contiguous():
            raise ValueError(f"{name}: {argument} has shape {tuple(tensor.shape)} and strides {tuple(tensor.stride())}; "
                             f"the kernel reads contiguous rows (pass {argument}.contiguous(), a copy it does not make)")
    if residual.dtype not in DTYPES:
        raise TypeError(f"{name}: {residual.dtype} is not supported (float32, bfloat16, float16; the kernel computes "
                        f"in float32)")
    if residual.dim() < 1 or delta.shape != residual.shape:
        raise ValueError(f"{name}: residual {tuple(residual.shape)} and delta {tuple(delta.shape)} must have one shape "
                         f"with a last dimension")
    hidden = residual.shape[-1]
    if weight.shape != (hidden,):
        raise ValueError(f"{name}: weight must have shape ({hidden},), one per column; got {tuple(weight.shape)}")
    if not 1 <= hidden <= MAX_HIDDEN:
        raise ValueError(f"{name}: rows of {hidden} elements; the kernel holds a row in registers, 1 to {MAX_HIDDEN}")
    if not (isinstance(eps, (int, float)) and eps >= 0):
        raise ValueError(f"{name}: eps must be a number >= 0, got {eps!r}")
    if not residual.is_cuda and not triton_interpreter_on():
        raise ValueError(f"{name}: residual is on {residual.device}; the kernel runs on a GPU (or in Triton's "
                         f"interpreter, TRITON_INTERPRET=1)")
    if (residual.requires_grad or delta.requires_grad) and torch.is_grad_enabled():
        raise RuntimeError(f"{name} is forward only: call it under torch.no_grad()")


def add_rms_norm(residual: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float, pdl: bool = False):
    """``(residual + delta, rms_norm(residual + delta, weight, eps))`` (hello_gpu.models.llama.add_rms_norm)
    in one kernel. Both results are new contiguous tensors in residual's shape and dtype.

    CUDA-graph capture (the hello-gpu backend's decode step): the host work is the checks, two
    torch.empty (from the graph's pool under capture) and one launch; Triton compiles a kernel per
    (HIDDEN, dtype) at its first call, which the backend's check, timing and warm-up steps make
    before the capture. ``pdl``: launched as a programmatic dependent launch (:mod:`.dependent_launch`)."""
    _check(residual, delta, weight, eps)
    pdl = checked(pdl, residual.device)
    total, out = torch.empty_like(residual), torch.empty_like(residual)
    hidden = residual.shape[-1]
    rows = residual.numel() // hidden
    if rows:
        block = triton.next_power_of_2(hidden)
        add_rms_norm_kernel[(rows,)](residual, delta, weight, total, out, float(eps), HIDDEN=hidden, BLOCK=block,
                                     PDL=pdl, num_warps=min(16, max(1, block // 512)), **launch_options(pdl))
    return total, out
