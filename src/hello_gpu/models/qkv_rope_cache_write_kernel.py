"""The attention's qkv projection, RoPE and the KV-cache write in one Triton launch at batch-1 decode: the
hello-gpu backend's ``ModelOps.qkv_rope_cache_write``.

Without it each layer's attention starts with two kernels: the GEMV of the fused [q | k | v] weight writes the
token's q, k and v (6144 values at the 8B), then :mod:`.rope_cache_write_kernel` reads them back, rotates q and k
and writes k and v into the caches at the position. RoPE ("rotate half") mixes dimension i of a head with
dimension i + D/2 only, so a GEMV program that owns exactly those two weight rows of one head can finish the
job itself: program p computes rows h*D + i and h*D + i + D/2 (h = p // (D/2), i = p % (D/2)) as t04 does
([2, 2048] weight tiles straight to registers, evict-first, the first tile loaded before the dependent-launch
wait), rounds both to the model's dtype as F.linear does, then rotates them by the position's angle (q and k
heads, float32 math rounded once, as the two kernels do) and stores them: q's into a new contiguous q, k's and
v's (unrotated) into the caches at the position read on the device (a position outside the cache writes nothing).
``norm_qkv_rope_cache_write`` is the same kernel with the RMSNorm before it folded in (:mod:`.norm_fold`): the
residual read in place of the normed x, its squares summed on the way, the two sums scaled before the rounding.

prediction: one launch fewer a layer. rope_cache_write ran at ~2-3 us a call with its launch gap in the H100's
  profiles; the rotation adds a few instructions to each program's tail and nothing to its bytes (the weight's
  rows are read as t04 reads them, two rows a program, 3072 programs at the 8B). ~2 us saved a layer: ~32 us of
  the 1B's ~1.07 ms H200 step (~3%), ~64 us of the 8B's 4.5 ms (~1.4%); the backend times it against the
  linear and RoPE + cache write this run calls and swaps it in only if faster
outcome: faster, swapped in: on the H100 (run of 3a550b2) 1.44x [1.44, 1.45] linear then rope_cache_write over
  the 1B's 16 calls of a step and 1.12x [1.11, 1.12] over the 8B's 32
  (records/nvidia-h100-80gb-hbm3/models/run.{1b,8b}.b1.p512.n256 as committed in e486d9f; in the run of
  fdae1a2, session 24, those files now: 1.73x [1.46, 2.50] and 2.08x [1.88, 2.35], wider intervals). No count, no
  barrier: each program finishes its own pair, which is why it gains where linear_add_rms_norm (a last program's
  norm) loses
deterministic: yes, each output is one program's sum in t04's order
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..ops.rung import triton_interpreter_on
from .dependent_launch import checked, launch_options
from .linear_pdl_kernel import norm_refusal, weight_products

BLOCK_K = 2048      # t04's step: 4 KiB of each weight row a step in bf16
WARPS = 4
DTYPES = (torch.bfloat16, torch.float16, torch.float32)


@triton.jit
def qkv_rope_write(a_ptr, norm_ptr, eps, w_ptr, cos_ptr, sin_ptr, positions_ptr, q_out_ptr, keys_ptr, values_ptr,
                   K, stride_wn, max_seq, cache_head_stride, cache_position_stride,
                   Q_HEADS: tl.constexpr, KV_HEADS: tl.constexpr, HALF: tl.constexpr,
                   BLOCK_K: tl.constexpr, PDL: tl.constexpr, NORM: tl.constexpr):
    """One program's pair of rows; with NORM, of rms_norm(x) (x the residual, the norm's weight at norm_ptr)."""
    program = tl.program_id(0)
    head = program // HALF                       # q's heads, then k's, then v's
    pair = program % HALF
    both = tl.arange(0, 2)                       # dimension pair and pair + HALF of the head
    rows = head * (2 * HALF) + pair + both * HALF
    rows_live = both < 2                         # all True: masks have the tile's shape
    products, squares = weight_products(a_ptr, norm_ptr, w_ptr + rows[:, None].to(tl.int64) * stride_wn, rows_live,
                                        K, BLOCK_K, PDL, NORM)
    sums = tl.sum(products, axis=1)
    if NORM:                                     # the norm's one scale, out of the sum (weight_products)
        sums = sums / tl.sqrt(tl.sum(squares, axis=0) / K + eps)
    # Rounded as F.linear's output is: RoPE and the cache read what the two kernels would have read.
    out = sums.to(q_out_ptr.dtype.element_ty, fp_downcast_rounding="rtne").to(tl.float32)
    first = tl.sum(tl.where(both == 0, out, 0.0), axis=0)
    second = tl.sum(tl.where(both == 1, out, 0.0), axis=0)
    if head < Q_HEADS + KV_HEADS:                # q and k: rotated by the position's angle
        cos = tl.load(cos_ptr + pair).to(tl.float32)
        sin = tl.load(sin_ptr + pair).to(tl.float32)
        out = tl.where(both == 0, first * cos - second * sin, second * cos + first * sin)
    out = out.to(q_out_ptr.dtype.element_ty, fp_downcast_rounding="rtne")
    if head < Q_HEADS:
        tl.store(q_out_ptr + head * (2 * HALF) + pair + both * HALF, out)
    else:
        position = tl.load(positions_ptr + both * 0)    # the one position, once for each of the pair
        inside = (position >= 0) & (position < max_seq)
        kv_head = (head - Q_HEADS) % KV_HEADS
        at = kv_head * cache_head_stride + position.to(tl.int64) * cache_position_stride + pair + both * HALF
        if head < Q_HEADS + KV_HEADS:
            tl.store(keys_ptr + at, out, mask=inside)
        else:
            tl.store(values_ptr + at, out, mask=inside)


@triton.jit
def qkv_rope_write_kernel(a_ptr, w_ptr, cos_ptr, sin_ptr, positions_ptr, q_out_ptr, keys_ptr, values_ptr,
                          K, stride_wn, max_seq, cache_head_stride, cache_position_stride,
                          Q_HEADS: tl.constexpr, KV_HEADS: tl.constexpr, HALF: tl.constexpr,
                          BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    qkv_rope_write(a_ptr, a_ptr, 0.0, w_ptr, cos_ptr, sin_ptr, positions_ptr, q_out_ptr, keys_ptr, values_ptr, K,
                   stride_wn, max_seq, cache_head_stride, cache_position_stride, Q_HEADS, KV_HEADS, HALF, BLOCK_K, PDL,
                   False)


@triton.jit
def norm_qkv_rope_write_kernel(a_ptr, norm_ptr, eps, w_ptr, cos_ptr, sin_ptr, positions_ptr, q_out_ptr, keys_ptr,
                               values_ptr, K, stride_wn, max_seq, cache_head_stride, cache_position_stride,
                               Q_HEADS: tl.constexpr, KV_HEADS: tl.constexpr, HALF: tl.constexpr,
                               BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    qkv_rope_write(a_ptr, norm_ptr, eps, w_ptr, cos_ptr, sin_ptr, positions_ptr, q_out_ptr, keys_ptr, values_ptr, K,
                   stride_wn, max_seq, cache_head_stride, cache_position_stride, Q_HEADS, KV_HEADS, HALF, BLOCK_K, PDL,
                   True)


def refusal(x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, keys: torch.Tensor,
            values: torch.Tensor, positions: torch.Tensor) -> str | None:
    """None where :func:`qkv_rope_cache_write` runs these arguments, else why not."""
    tensors = (("x", x), ("weight", weight), ("cos", cos), ("sin", sin), ("keys", keys), ("values", values),
               ("positions", positions))
    for name, tensor in tensors:
        if not isinstance(tensor, torch.Tensor):
            return f"{name} must be a torch.Tensor, not {type(tensor).__name__}"
        if tensor.device != x.device:
            return f"{name} is on {tensor.device}, x on {x.device}: they must be on one device"
    if x.dtype not in DTYPES or any(t.dtype != x.dtype for t in (weight, keys, values)):
        return (f"x, weight, keys and values of one dtype of bfloat16, float16, float32; got {x.dtype}, "
                f"{weight.dtype}, {keys.dtype}, {values.dtype}")
    if weight.dim() != 2 or x.dim() != 3 or x.shape[-1] != weight.shape[1]:
        return f"x (B, T, K) {tuple(x.shape)} and weight {tuple(weight.shape)} do not multiply as F.linear(x, weight)"
    if x.shape[0] != 1 or x.shape[1] != 1:
        return f"one token of one row only (x is {tuple(x.shape)})"
    if keys.dim() != 4 or values.shape != keys.shape or keys.shape[0] != 1:
        return f"caches of one row (1, kv_heads, positions, head_dim), keys {tuple(keys.shape)}, values " \
               f"{tuple(values.shape)}"
    kv_heads, dim = keys.shape[1], keys.shape[3]
    if dim < 2 or dim % 2 or kv_heads < 1:
        return f"head_dim {dim} and {kv_heads} kv heads: RoPE pairs dimension i with i + head_dim / 2"
    q_size = weight.shape[0] - 2 * kv_heads * dim
    if q_size <= 0 or q_size % (dim * kv_heads):
        return (f"the weight's {weight.shape[0]} rows are not q heads then {kv_heads} k heads then {kv_heads} v heads "
                f"of {dim} (q heads a multiple of kv heads)")
    if cos.shape != (1, dim // 2) or sin.shape != cos.shape or cos.dtype != sin.dtype or not cos.is_floating_point():
        return f"cos and sin must be one token's ({1}, {dim // 2}) floating tables, got {tuple(cos.shape)}, " \
               f"{tuple(sin.shape)}"
    if positions.shape != (1,) or positions.dtype not in (torch.int64, torch.int32):
        return f"positions must be one integer position (1,), got {positions.dtype} {tuple(positions.shape)}"
    if weight.stride(1) != 1 or not all(t.is_contiguous() for t in (x, cos, sin)) or keys.stride(3) != 1 \
            or values.stride() != keys.stride():
        return (f"contiguous x and tables, a weight with unit column stride, caches of one layout with unit "
                f"head_dim stride (weight {tuple(weight.stride())}, keys {tuple(keys.stride())}, values "
                f"{tuple(values.stride())})")
    if not x.is_cuda and not triton_interpreter_on():
        return f"x is on {x.device}; the kernel runs on a GPU (or in Triton's interpreter, TRITON_INTERPRET=1)"
    if any(t.requires_grad for t in (x, weight)) and torch.is_grad_enabled():
        return "forward only: call it under torch.no_grad()"
    return None


def qkv_rope_cache_write(x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor, pdl: bool = False):
    """:func:`hello_gpu.models.llama.qkv_rope_cache_write` for one token of one row: x (1, 1, K), the fused
    [q | k | v] weight (N, K), one token's cos/sin tables (1, D/2), the layer's caches (1, KV, S, D) and the
    position (1,); returns (q rotated as a new contiguous (1, H, 1, D), keys, values), the token's k rotated and
    its v written into the caches at the position. ``pdl``: a programmatic dependent launch, the first weight tile
    loaded before the wait. Refuses, naming the reason, what :func:`refusal` names."""
    problem = refusal(x, weight, cos, sin, keys, values, positions)
    if problem:
        raise ValueError(f"qkv_rope_cache_write: {problem}")
    return _project_rotate_write(x, None, 0.0, weight, cos, sin, keys, values, positions, pdl)


def norm_qkv_rope_cache_write(residual: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
                              cos: torch.Tensor, sin: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                              positions: torch.Tensor, pdl: bool = False):
    """:func:`qkv_rope_cache_write` of ``rms_norm(residual, norm_weight, eps)`` in the same one launch
    (:func:`hello_gpu.models.llama.norm_qkv_rope_cache_write`): each program sums the squares of the residual
    as it reads it for its dot products and scales the two sums at the end, so no kernel before it writes the
    normed activation. The normed values are not rounded to the model's dtype before the projection (eager
    rounds them once): closer to the float64 result, not bitwise eager's. Refuses what :func:`refusal` and
    :func:`.linear_pdl_kernel.norm_refusal` name."""
    problem = refusal(residual, weight, cos, sin, keys, values, positions) or norm_refusal(residual, norm_weight, eps)
    if problem:
        raise ValueError(f"norm_qkv_rope_cache_write: {problem}")
    return _project_rotate_write(residual, norm_weight, float(eps), weight, cos, sin, keys, values, positions, pdl)


def _project_rotate_write(x, norm_weight, eps, weight, cos, sin, keys, values, positions, pdl):
    """Checked arguments: one launch of the kernel (the norm-folded one where ``norm_weight`` is given)."""
    pdl = checked(pdl, x.device)
    kv_heads, dim = keys.shape[1], keys.shape[3]
    q_heads = (weight.shape[0] - 2 * kv_heads * dim) // dim
    q = torch.empty(1, q_heads, 1, dim, device=x.device, dtype=x.dtype)
    if x.shape[-1] == 0:                         # every projection is 0: so is its rotation
        q.zero_()
        if 0 <= int(positions[0]) < keys.shape[2]:
            keys.index_fill_(2, positions, 0)
            values.index_fill_(2, positions, 0)
        return q, keys, values
    programs = (q_heads + 2 * kv_heads) * (dim // 2)
    shapes = (x.shape[-1], weight.stride(0), keys.shape[2], keys.stride(1), keys.stride(2))
    options = dict(Q_HEADS=q_heads, KV_HEADS=kv_heads, HALF=dim // 2, BLOCK_K=BLOCK_K, PDL=pdl, num_warps=WARPS,
                   num_stages=1, **launch_options(pdl))
    if norm_weight is None:
        qkv_rope_write_kernel[(programs,)](x, weight, cos, sin, positions, q, keys, values, *shapes, **options)
    else:
        norm_qkv_rope_write_kernel[(programs,)](x, norm_weight, eps, weight, cos, sin, positions, q, keys, values,
                                                *shapes, **options)
    return q, keys, values


__all__ = ["norm_qkv_rope_cache_write", "qkv_rope_cache_write", "refusal"]
