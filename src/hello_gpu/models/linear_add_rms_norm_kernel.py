"""A projection, the residual add and the next RMSNorm in one Triton launch at batch-1 decode: the hello-gpu
backend's ``ModelOps.linear_add_rms_norm``, for the two projections a layer ends its halves with (o_proj, then
down_proj).

Without it each half of a layer ends in two kernels: the GEMV writes the delta (hidden values), then add_rms_norm
reads the residual and the delta, writes their sum (the new residual) and its norm. The norm needs every output
of the GEMV (a mean of squares over the hidden dimension), which no program of a GEMV has; so each program here
computes its outputs as t04 does ([2, 2048] weight tiles straight to registers, evict-first, the first tile
loaded before the dependent-launch wait as in :mod:`.linear_pdl_kernel`), rounds them to the model's dtype as
F.linear does, adds the residual and rounds as ``residual + delta`` does, stores that sum and the sum of its
squares, and counts itself (:mod:`.arrival_counters`). The last program to arrive adds the partial sums in
program order, and writes the norm of all the hidden values (the sum read back past L1).

prediction: one launch fewer at the end of each half of a layer. The H100's profile of the 1B's hello-gpu decode
  step (records/nvidia-h100-80gb-hbm3/models/profile.1b.decode.b1.p512.hello-gpu) had add_rms_norm at 2.2 us a
  call, ~1-2 us of launch gap before it; the last program's norm (2048 partials and the 4096 sums from L2, the
  norm out: ~24 KB) adds ~1-1.5 us to the GEMV's tail. ~2 us saved a call: ~64 us of the 1B's ~1.07 ms H200
  step (32 calls, ~6%), ~130 us of the 8B's 4.5 ms (64 calls, ~3%). The backend times it against linear then
  add_rms_norm as the run calls them and swaps it in only if faster
outcome: wrong, slower, so the backend does not swap it in: on the H100 (run of 3a550b2) 0.90x [0.90, 0.90] linear
  then add_rms_norm over the 1B's 32 calls of a step and 0.88x [0.88, 0.88] over the 8B's 64
  (records/nvidia-h100-80gb-hbm3/models/run.{1b,8b}.b1.p512.n256 as committed in e486d9f; in the run of
  fdae1a2, session 24, those files now: the 8B 0.88x [0.88, 0.88] again, the 1B 1.22x [0.90, 1.66], within
  noise, so not used). Not yet profiled. The likely cause: every one of the 2048 programs (1024 at the 1B) now
  ends with a barrier and an atomic whose value it must wait for, ~1 us of L2 round trip on a program that reads
  only 16 KB; t04's programs end at their store. Longer-lived programs hide less DRAM latency, and 2048 atomics on
  one address queue at one L2 slice. Fewer, larger programs (more rows a program) or a count only every few
  programs would be the next thing to try; or no count at all: the next GEMV (qkv, gate/up) reads the whole
  residual anyway, so it could sum its squares itself and scale its dot products at the end
deterministic: yes: each output is one program's sum in t04's order, each partial sum of squares one program's
  tl.sum, the partials added in one tl.sum over program order by whichever program is last
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..ops.rung import triton_interpreter_on
from . import arrival_counters
from .dependent_launch import checked, launch_options
from .linear_pdl_kernel import early_weight_products, norm_refusal

BLOCK_N = 2         # t04's tile: 2 outputs a program (2048 programs at the 8B's 4096 hidden values)
BLOCK_K = 2048      # 4 KiB of each weight row a step in bf16
WARPS = 4
CHUNK = 2048        # partials and hidden values the last program holds at once: 16 float32 a thread over 4 warps


@triton.jit
def residual_plus_projection(a_ptr, w_ptr, residual_ptr, total_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    """One program's BLOCK_N outputs of ``residual + F.linear(x, weight)``, stored at total_ptr and returned with
    the mask of the rows that exist."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    live = rows < N
    products = early_weight_products(a_ptr, w_ptr + rows[:, None].to(tl.int64) * stride_wn, live, K, BLOCK_K, PDL)
    # The delta rounded as F.linear's output is, then the sum rounded as `residual + delta` is: the norm reads
    # what add_rms_norm would have read.
    delta = tl.sum(products, axis=1).to(total_ptr.dtype.element_ty, fp_downcast_rounding="rtne")
    residual = tl.load(residual_ptr + rows, mask=live, other=0.0)
    total = (residual.to(tl.float32) + delta.to(tl.float32)).to(total_ptr.dtype.element_ty, fp_downcast_rounding="rtne")
    tl.store(total_ptr + rows, total, mask=live)
    return total, live


@triton.jit
def gemv_add_kernel(a_ptr, w_ptr, residual_ptr, total_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    residual_plus_projection(a_ptr, w_ptr, residual_ptr, total_ptr, N, K, stride_wn, BLOCK_N, BLOCK_K, PDL)


@triton.jit
def gemv_add_rms_norm_kernel(a_ptr, w_ptr, residual_ptr, norm_w_ptr, total_ptr, out_ptr, partial_ptr, arrivals_ptr,
                             N, K, stride_wn, eps, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                             CHUNK: tl.constexpr, PDL: tl.constexpr):
    program = tl.program_id(0)
    total, live = residual_plus_projection(a_ptr, w_ptr, residual_ptr, total_ptr, N, K, stride_wn, BLOCK_N, BLOCK_K,
                                           PDL)
    wide = total.to(tl.float32)
    tl.store(partial_ptr + program, tl.sum(tl.where(live, wide * wide, 0.0), axis=0))
    # region last-program
    tl.debug_barrier()                           # every thread's stores before the count
    arrived = tl.atomic_add(arrivals_ptr, 1, sem="acq_rel", scope="gpu")
    if arrived == tl.num_programs(0) - 1:
        count = tl.num_programs(0)
        chunk = tl.arange(0, CHUNK)
        squares = tl.zeros([CHUNK], tl.float32)
        for first in range(0, count, CHUNK):     # the partials, CHUNK at a time in program order
            squares += tl.load(partial_ptr + first + chunk, mask=first + chunk < count, other=0.0,
                               cache_modifier=".cg")
        scale = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / N + eps)
        for first in range(0, N, CHUNK):
            hidden = first + chunk
            inside = hidden < N
            sums = tl.load(total_ptr + hidden, mask=inside, other=0.0, cache_modifier=".cg").to(tl.float32)
            weight = tl.load(norm_w_ptr + hidden, mask=inside, other=0.0).to(tl.float32)
            tl.store(out_ptr + hidden, (sums * scale * weight).to(out_ptr.dtype.element_ty), mask=inside)
        tl.atomic_xchg(arrivals_ptr, 0, sem="relaxed", scope="gpu")     # ready for the next call
    # endregion last-program


DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def refusal(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps) -> str | None:
    """None where :func:`linear_add_rms_norm` runs these arguments, else why not: what :func:`linear_add` takes, and
    a norm of the sum (:func:`.linear_pdl_kernel.norm_refusal`)."""
    return add_refusal(x, weight, residual) or norm_refusal(residual, norm_weight, eps)


def add_refusal(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> str | None:
    """None where :func:`linear_add` runs these arguments, else why not."""
    for name, tensor in (("x", x), ("weight", weight), ("residual", residual)):
        if not isinstance(tensor, torch.Tensor):
            return f"{name} must be a torch.Tensor, not {type(tensor).__name__}"
        if tensor.dtype != x.dtype or tensor.device != x.device:
            return f"{name} is {tensor.dtype} on {tensor.device}, x {x.dtype} on {x.device}: they must match"
    if x.dtype not in DTYPES:
        return f"{x.dtype} is not supported (bfloat16, float16, float32)"
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        return f"x {tuple(x.shape)} and weight {tuple(weight.shape)} do not multiply as F.linear(x, weight)"
    if x.numel() != x.shape[-1]:
        return f"one row only (x has {x.numel() // max(1, x.shape[-1])})"
    n = weight.shape[0]
    if residual.shape != (*x.shape[:-1], n):
        return f"residual {tuple(residual.shape)} must have the projection's shape {(*x.shape[:-1], n)}"
    if weight.stride(1) != 1 or not (x.is_contiguous() and residual.is_contiguous()):
        return f"contiguous x and residual and a weight with unit column stride (weight strides {tuple(weight.stride())})"
    if not x.is_cuda and not triton_interpreter_on():
        return f"x is on {x.device}; the kernel runs on a GPU (or in Triton's interpreter, TRITON_INTERPRET=1)"
    if any(t.requires_grad for t in (x, weight, residual)) and torch.is_grad_enabled():
        return "forward only: call it under torch.no_grad()"
    return None


def linear_add(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, pdl: bool = False) -> torch.Tensor:
    """:func:`hello_gpu.models.llama.linear_add` for one row: ``residual + F.linear(x, weight)`` in one launch, a
    new (..., N) tensor in x's dtype, the projection rounded as F.linear's output is and the sum as the add's (t04's
    tiles, the first loaded before the dependent-launch wait with ``pdl``). What a layer half ends with where the
    next projection's kernel normalises the residual itself (the ``norm_*`` kernels), so no norm is computed
    here. Refuses what :func:`add_refusal` names."""
    problem = add_refusal(x, weight, residual)
    if problem:
        raise ValueError(f"linear_add: {problem}")
    pdl = checked(pdl, x.device)
    n, k = weight.shape
    if n == 0 or k == 0:                         # nothing to add: the residual itself, as a new tensor
        return residual.clone()
    total = torch.empty_like(residual)
    gemv_add_kernel[(triton.cdiv(n, BLOCK_N),)](x, weight, residual, total, n, k, weight.stride(0), BLOCK_N=BLOCK_N,
                                                BLOCK_K=BLOCK_K, PDL=pdl, num_warps=WARPS, num_stages=1,
                                                **launch_options(pdl))
    return total


def linear_add_rms_norm(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor,
                        eps: float, pdl: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`hello_gpu.models.llama.linear_add_rms_norm` for one row: ``total = residual + F.linear(x, weight)``
    and ``rms_norm(total, norm_weight, eps)``, both new (..., N) tensors in x's dtype, for x (..., K) in bf16 /
    fp16 (float32 too: the tests' tight bound) and an (N, K) weight. ``pdl``: a programmatic dependent launch,
    the first weight tile loaded before the wait. Refuses, naming the reason, what :func:`refusal` names. Under a
    CUDA-graph capture before any arrival counter exists (:mod:`.arrival_counters`), the GEMV and add_rms_norm
    run as two kernels."""
    problem = refusal(x, weight, residual, norm_weight, eps)
    if problem:
        raise ValueError(f"linear_add_rms_norm: {problem}")
    pdl = checked(pdl, x.device)
    n, k = weight.shape
    if n == 0:
        return torch.empty_like(residual), torch.empty_like(residual)
    if k == 0:                                   # the delta is 0: the sum is the residual
        from .add_rms_norm_kernel import add_rms_norm
        return add_rms_norm(residual, torch.zeros_like(residual), norm_weight, eps, pdl=pdl)
    programs = triton.cdiv(n, BLOCK_N)
    arrivals = arrival_counters.take(x.device, 1)
    if arrivals is None:
        from .add_rms_norm_kernel import add_rms_norm
        from .linear_pdl_kernel import gemv
        delta = gemv(x, weight, pdl=pdl) if x.dtype != torch.float32 else torch.nn.functional.linear(x, weight)
        return add_rms_norm(residual, delta, norm_weight, eps, pdl=pdl)
    total, out = torch.empty_like(residual), torch.empty_like(residual)
    partials = torch.empty(programs, device=x.device, dtype=torch.float32)
    gemv_add_rms_norm_kernel[(programs,)](x, weight, residual, norm_weight, total, out, partials, arrivals, n, k,
                                          weight.stride(0), float(eps), BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, CHUNK=CHUNK,
                                          PDL=pdl, num_warps=WARPS, num_stages=1, **launch_options(pdl))
    return total, out


__all__ = ["add_refusal", "linear_add", "linear_add_rms_norm", "refusal"]
