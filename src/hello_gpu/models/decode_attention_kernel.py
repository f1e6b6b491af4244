"""Triton, flash-decoding over the model's KV cache: the hello-gpu backend's replacement for ``llama.attention``.

Why the model has its own decode kernel: ``hello_gpu.ops.attention`` cannot take the model's KV cache
without a copy. Its rungs read contiguous K/V of exactly S_kv keys (a key row is (b * H_kv + h) * S_kv + j,
S_kv a host integer, frozen in the decode step's CUDA graph) and take no mask, while the cache is
(B, H_kv, max_seq, D), written up to a position that moves every step, the position a device tensor. Slicing
the filled prefix copies all the filled K and V each step; the whole cache unmasked attends to zeros not
written yet. This kernel reads the cache in place through its strides and the mask row (1, max_seq) of
booleans from device memory: nothing about the current length is a host value, so one CUDA graph captured
at one position replays at every other.

parent: eager ``llama.attention``, F.scaled_dot_product_attention(q, keys, values, attn_mask=mask,
  enable_gqa=True), at decode (T = 1). Flash takes no arbitrary mask, and as we read PyTorch's dispatch
  (sdp_utils) the memory-efficient and cuDNN kernels do not take H != H_kv heads, so with a boolean mask and
  GQA SDPA on the H200 is likely the math kernel: K and V repeated to H heads (repeat_interleave: the 8B's
  (1, 8, 768, 128) cache read, 4x written as (1, 32, 768, 128), 12.6 MB of writes a layer for K and V), the
  boolean mask turned into a float one, q @ K^T, a softmax, P @ V: about 10 kernels and ~25 MB moved a layer.
  (GPU test ``test_which_sdpa_kernels_take_the_models_decode_arguments`` prints which backends accept them.)
change: one program per (split of the keys, batch x KV head). It holds the GROUP = H / H_kv query heads that
  share the KV head (4 on Llama-3, padded to 16 rows for tl.dot), so each K/V tile is read once per group.
  For each tile of BLOCK_N keys it loads the mask tile; a tile with no visible key is skipped (no K/V load,
  no math); otherwise K and V are loaded for the visible keys only (masked loads: a key beyond the position
  is never read), scores in float32, an online softmax (max, sum, unnormalised output) in float32. A second
  kernel merges the splits' partials in split order, divides once and rounds once to the input's dtype.
  A split whose keys are all masked leaves (max -inf, sum 0) and contributes nothing; a row that sees no key
  at all gets 0, as SDPA gives on the CPU (its math kernel's safe softmax): tested.
hypothesis: a decode step's attention is memory-bound (~1 FLOP a byte). At 8B, B = 1, position 512 of a
  768-key cache: the filled keys are 513 x 8 heads x 128 x 2 B = 1.05 MB of K and as much V, 2.10 MB a layer
  (67 MB a step of 32 layers) where reading the whole cache would be 3.15 MB (101 MB a step): skipping the
  keys beyond the position saves 1.04 MB a layer, 33 MB a step. Splitting 768 keys into 12 splits of one
  64-key tile gives 12 x 8 = 96 programs (B * H_kv = 8 alone would leave 124 of 132 SMs idle); the partials
  are 96 x 4 rows x (128 + 2) float32, 0.2 MB written and read back. Two launches a layer instead of ~10.
prediction: ~2.3 MB a layer at ~3 TB/s is ~0.8 us of bytes, so two launches (~1.2 us each from a CUDA graph,
  `hello-gpu ceilings`) dominate: ~3-4 us a layer against ~15-25 us for SDPA's math path (~25 MB and ~10
  kernels), ~4-6x the eager operation at 1x32x8x768x128 bfloat16, ~0.4-0.6 ms of the 8B's ~7 ms decode step.
  Were SDPA to take its memory-efficient kernel instead (one launch reading the whole 3.15 MB cache, the mask
  as a bias): ~1.5-2x, from the 1 MB of unwritten cache skipped and the launch it does not save;
  unmeasured (no GPU in the session that wrote it): the backend swaps it in only if its timing says faster
  The merge, loading a step of splits at once (session 19): the H100's profile of the 1B decode step
  (records/nvidia-h100-80gb-hbm3/models/profile.1b.decode.b1.p512.hello-gpu-pdl) had it at 5.7 us a call
  (456 us over 80 calls) against 3.9 us for the split kernel: 8 programs, each 12 rounds of loads one
  after another (the loop issued a split's loads after the previous split's math). With the 12 splits in
  one round (~12 KB a program, one L2 latency) ~2 us a call: ~60 us of the 1B's 1.37 ms step (~4%), ~110 us
  of the 8B's ~6 ms (~2%)
outcome: not measured yet as a ratio. The merge in a profile: 2.4 us a call in the H100's profile of the 1B's
  hello-gpu decode step after the change (records/nvidia-h100-80gb-hbm3/models/profile.1b.decode.b1.p512.hello-gpu,
  run of 5af4aad), 5.7 us in hello-gpu-pdl's before it (not one run, not one backend): about the predicted ~2 us
The merge fused into the split kernel (session 23): the last program of a KV head to finish (an acquire-release
  count at GPU scope, after a barrier: every thread's partial is stored before the count) merges that head's
  splits, reading them past L1; the merge kernel and the launch gap before it go. prediction: ~2-3 us saved a
  layer (the merge's 2.4 us and a ~1-2 us gap, less ~1 us of merge added to the split kernel's tail), ~1.3-1.5x
  the two launches over a step's calls in a CUDA graph at batch 1, ~4% of the 1B's decode step, ~2% of the 8B's.
  outcome: slower, so not the default (``fused_merge=True`` asks for it). benchmarks/decode_merge.py on the H100
  (records/nvidia-h100-80gb-hbm3/decode-merge.json, run of 3a550b2), a step's calls in a CUDA graph, fused over two
  launches: 0.979x [0.978, 0.980] at the 1B, 1.023x [1.022, 1.024] at the 8B's batch 1, 0.889x [0.887, 0.890]
  at its batch 16; with PDL 0.925x, 0.950x and 0.844x. The last program's merge comes after its own split's work,
  on the kernel's critical path, and costs more than the merge kernel and its gap (~1 us on the H100 in a graph,
  less with PDL, which overlaps the merge kernel's set-up)
deterministic: yes, each split reduces its tiles in order and the merge adds the splits in a fixed order (a
  step's splits as one tl.sum, the steps in order), whichever program merges
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..ops.rung import triton_interpreter_on
from . import arrival_counters
from .dependent_launch import checked, launch_options, wait_then_release
from .llama import attention as eager_attention

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_HEAD_DIM = 256          # a (16, 256) float32 accumulator is 32 registers a thread over 4 warps
MIN_DOT = 16                # tl.dot takes blocks of at least 16 in each dimension: rows and head dims are padded
BLOCK_N = 64                # keys a tile: 64 x 128 bf16 = 16 KB of K and as much V per step of the loop
WARPS = 4
PROGRAMS_PER_SM = 2
INTERPRETER_PROGRAMS = 8    # no GPU to size the split for: enough splits to exercise the merge
MERGE_ELEMENTS = 8192       # float32 partials the merge holds at once: 16 splits x 4 rows x 128 dims on the 8B


@triton.jit
def attend_tile(q, k, v, seen, row_max, row_sum, acc, scale_log2, PRECISION: tl.constexpr):
    """One tile of keys into an online softmax's running (max, sum, unnormalised output), all float32:
    q (rows, D) against k and v (keys, D) where ``seen`` (broadcast to (rows, keys)) is True; the weights are
    rounded to v's dtype for the P @ V dot, as flash attention does. Returns the three updated."""
    scores = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale_log2
    scores = tl.where(seen, scores, float("-inf"))
    new_max = tl.maximum(row_max, tl.max(scores, axis=1))
    safe = tl.where(new_max == float("-inf"), 0.0, new_max)          # rows that have seen no key yet
    p = tl.exp2(scores - safe[:, None])
    correction = tl.exp2(row_max - safe)
    row_sum = row_sum * correction + tl.sum(p, axis=1)
    acc = acc * correction[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return new_max, row_sum, acc


@triton.jit
def split_kernel(q_ptr, k_ptr, v_ptr, mask_ptr, part_acc_ptr, part_stats_ptr, out_ptr, arrivals_ptr, kv_heads, seq,
                 chunk, splits, q_batch_stride, q_head_stride, k_batch_stride, k_head_stride, k_seq_stride,
                 v_batch_stride, v_head_stride, v_seq_stride, mask_stride, scale_log2,
                 GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr,
                 BLOCK_N: tl.constexpr, PRECISION: tl.constexpr, PDL: tl.constexpr, FUSED_MERGE: tl.constexpr,
                 MERGE_G: tl.constexpr, MERGE_S: tl.constexpr):
    """The partial (max, sum, unnormalised output) of one KV head's GROUP query heads over keys
    [split * chunk, (split + 1) * chunk); visible keys only. FUSED_MERGE: the last of a KV head's programs to
    finish (counted in ``arrivals_ptr[bkv]``, which it sets back to 0: :mod:`.arrival_counters`) merges its
    splits into ``out_ptr``."""
    wait_then_release(PDL)
    split = tl.program_id(0)
    bkv = tl.program_id(1)
    batch = (bkv // kv_heads).to(tl.int64)
    kv_head = bkv % kv_heads
    rows = tl.arange(0, BLOCK_G)
    dims = tl.arange(0, BLOCK_D)
    live = rows < GROUP
    in_dim = dims < HEAD_DIM
    head = kv_head * GROUP + rows
    q = tl.load(q_ptr + batch * q_batch_stride + head[:, None] * q_head_stride + dims[None, :],
                mask=live[:, None] & in_dim[None, :], other=0.0)
    k_base = k_ptr + batch * k_batch_stride + kv_head * k_head_stride
    v_base = v_ptr + batch * v_batch_stride + kv_head * v_head_stride
    row_max = tl.full([BLOCK_G], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    start = split * chunk
    stop = tl.minimum(seq, start + chunk)
    for first in range(start, stop, BLOCK_N):
        keys = first + tl.arange(0, BLOCK_N)
        visible = tl.load(mask_ptr + keys * mask_stride, mask=keys < stop, other=0) != 0
        if tl.max(visible.to(tl.int32), axis=0) > 0:          # a tile beyond the position: nothing read
            kv_mask = visible[:, None] & in_dim[None, :]
            k = tl.load(k_base + keys.to(tl.int64)[:, None] * k_seq_stride + dims[None, :], mask=kv_mask, other=0.0)
            v = tl.load(v_base + keys.to(tl.int64)[:, None] * v_seq_stride + dims[None, :], mask=kv_mask, other=0.0)
            row_max, row_sum, acc = attend_tile(q, k, v, visible[None, :], row_max, row_sum, acc, scale_log2, PRECISION)
    part = (bkv.to(tl.int64) * splits + split) * GROUP + rows           # this program's live rows
    tl.store(part_acc_ptr + part[:, None] * HEAD_DIM + dims[None, :], acc, mask=live[:, None] & in_dim[None, :])
    tl.store(part_stats_ptr + part * 2, row_max, mask=live)
    tl.store(part_stats_ptr + part * 2 + 1, row_sum, mask=live)
    if FUSED_MERGE:
        # Every thread's partial stores before the count (the barrier), the count a release at GPU scope; the
        # program that counts last sees the others' partials (acquire) and reads them past L1 (.cg).
        tl.debug_barrier()
        arrived = tl.atomic_add(arrivals_ptr + bkv, 1, sem="acq_rel", scope="gpu")
        if arrived == splits - 1:
            merge_partials(part_acc_ptr, part_stats_ptr, out_ptr, bkv.to(tl.int64), splits, GROUP, HEAD_DIM,
                           MERGE_S, MERGE_G, BLOCK_D)
            tl.atomic_xchg(arrivals_ptr + bkv, 0, sem="relaxed", scope="gpu")   # ready for the next call


@triton.jit
def merge_partials(part_acc_ptr, part_stats_ptr, out_ptr, bkv, splits, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr):
    """Merge one KV head's splits (``bkv``: batch x KV head), BLOCK_S of them a step loaded at once; divide once,
    round once; a row that saw no key gets 0. (Session 19's profile of the 1B decode step on the H100: one split a
    step took 5.7 us a call for 12 splits, 12 rounds of loads one after another; the splits' partials are ~12 KB a
    KV head.) The loads bypass L1 (.cg): in the fused merge the partials were written by other SMs' programs."""
    steps = tl.arange(0, BLOCK_S)[:, None]                    # (splits of a step, 1)
    rows = tl.arange(0, BLOCK_G)[None, :]                     # (1, rows)
    dims = tl.arange(0, BLOCK_D)[None, None, :]
    in_dim = dims < HEAD_DIM
    row_max = tl.full([BLOCK_G], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    for first in range(0, splits, BLOCK_S):
        live = (first + steps < splits) & (rows < GROUP)                  # (splits, rows)
        part = (bkv * splits + first + steps) * GROUP + rows
        split_max = tl.load(part_stats_ptr + part * 2, mask=live, other=float("-inf"), cache_modifier=".cg")
        split_sum = tl.load(part_stats_ptr + part * 2 + 1, mask=live, other=0.0, cache_modifier=".cg")
        split_acc = tl.load(part_acc_ptr + part[:, :, None] * HEAD_DIM + dims, mask=live[:, :, None] & in_dim,
                            other=0.0, cache_modifier=".cg")
        new_max = tl.maximum(row_max, tl.max(split_max, axis=0))
        safe = tl.where(new_max == float("-inf"), 0.0, new_max)
        mine, theirs = tl.exp2(row_max - safe), tl.exp2(split_max - safe[None, :])
        row_sum = row_sum * mine + tl.sum(split_sum * theirs, axis=0)
        acc = acc * mine[:, None] + tl.sum(split_acc * theirs[:, :, None], axis=0)
        row_max = new_max
    seen = row_sum > 0
    out = tl.where(seen[:, None], acc / tl.where(seen, row_sum, 1.0)[:, None], 0.0)
    # out is contiguous (B, H, 1, D) and head = kv_head * GROUP + row, so its row is bkv * GROUP + row
    out_rows = tl.arange(0, BLOCK_G)[:, None]
    out_dims = tl.arange(0, BLOCK_D)[None, :]
    tl.store(out_ptr + (bkv * GROUP + out_rows) * HEAD_DIM + out_dims, out.to(out_ptr.dtype.element_ty),
             mask=(out_rows < GROUP) & (out_dims < HEAD_DIM))


@triton.jit
def merge_kernel(part_acc_ptr, part_stats_ptr, out_ptr, splits, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                 BLOCK_S: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, PDL: tl.constexpr):
    """The merge as a kernel of its own (``fused_merge=False``): one program a KV head."""
    wait_then_release(PDL)
    merge_partials(part_acc_ptr, part_stats_ptr, out_ptr, tl.program_id(0).to(tl.int64), splits, GROUP, HEAD_DIM,
                   BLOCK_S, BLOCK_G, BLOCK_D)


def merge_splits_a_step(splits: int, block_g: int, block_d: int) -> int:
    """Splits the merge loads at once: all of them, as long as their partials stay at most MERGE_ELEMENTS
    float32 values a program (64 a thread over 4 warps)."""
    fitting = max(1, MERGE_ELEMENTS // (block_g * block_d))
    return min(triton.next_power_of_2(splits), 1 << (fitting.bit_length() - 1))


def check_arguments(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, name: str) -> None:
    """Refuse, naming the problem, what the kernel ``name`` (this one, or the prefill's) would read wrongly."""
    for argument, tensor in (("q", q), ("keys", keys), ("values", values), ("mask", mask)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name}: {argument} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.device != q.device:
            raise ValueError(f"{name}: {argument} is on {tensor.device}, q on {q.device}: they must be on one device")
    if q.dim() != 4 or keys.dim() != 4:
        raise ValueError(f"{name}: q must be (batch, heads, 1, head_dim) and keys (batch, kv_heads, keys, head_dim); "
                         f"got {tuple(q.shape)} and {tuple(keys.shape)}")
    batch, heads, queries, dim = q.shape
    kv_batch, kv_heads, seq, kv_dim = keys.shape
    if values.shape != keys.shape:
        raise ValueError(f"{name}: values {tuple(values.shape)} must have the keys' shape {tuple(keys.shape)}")
    if kv_batch != batch or kv_dim != dim:
        raise ValueError(f"{name}: keys {tuple(keys.shape)} do not match q {tuple(q.shape)} in batch or head_dim")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"{name}: {heads} query heads is not a multiple of {kv_heads} key/value heads "
                         f"(grouped-query attention gives each key/value head a whole group)")
    if q.dtype not in DTYPES or keys.dtype != q.dtype or values.dtype != q.dtype:
        raise ValueError(f"{name}: q, keys, values are {q.dtype}, {keys.dtype}, {values.dtype}; the kernel takes "
                         f"one of float16, bfloat16, float32 for all three")
    if not 1 <= dim <= MAX_HEAD_DIM:
        raise ValueError(f"{name}: head_dim {dim}; the kernel holds a head in registers, 1 to {MAX_HEAD_DIM}")
    for argument, tensor in (("q", q), ("keys", keys), ("values", values)):
        if tensor.stride(-1) != 1 and dim > 1:
            raise ValueError(f"{name}: {argument}'s head_dim has stride {tensor.stride(-1)}; the kernel reads "
                             f"contiguous head vectors (strides {tuple(tensor.stride())})")
    if mask.dtype != torch.bool or mask.shape != (queries, seq):
        raise ValueError(f"{name}: mask must be a boolean ({queries}, {seq}) {'row' if queries == 1 else 'matrix'} "
                         f"(True where a query sees a key), got {mask.dtype} {tuple(mask.shape)}")
    if not q.is_cuda and not triton_interpreter_on():
        raise ValueError(f"{name}: q is on {q.device}; the kernel runs on a GPU (or in Triton's interpreter, "
                         f"TRITON_INTERPRET=1)")
    if any(t.requires_grad for t in (q, keys, values)) and torch.is_grad_enabled():
        raise RuntimeError(f"{name} is forward only: call it under torch.no_grad()")


def programs_wanted(device: torch.device) -> int:
    """PROGRAMS_PER_SM per SM on a GPU (a host integer fixed for the device: the split never changes
    between the steps a CUDA graph replays), or a few in the interpreter."""
    if device.type != "cuda":
        return INTERPRETER_PROGRAMS
    from ..runtime.device import device_info
    return PROGRAMS_PER_SM * device_info(device.index).multiprocessors


def split_keys(seq: int, heads_in_flight: int, programs: int) -> tuple[int, int]:
    """(chunk, splits): whole BLOCK_N tiles a split, enough splits for ``programs`` programs, none empty."""
    tiles = triton.cdiv(seq, BLOCK_N)
    wanted = max(1, min(tiles, triton.cdiv(programs, heads_in_flight)))
    chunk = triton.cdiv(tiles, wanted) * BLOCK_N
    return chunk, triton.cdiv(seq, chunk)


def decode_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
                     programs: int | None = None, pdl: bool = False, fused_merge: bool = False) -> torch.Tensor:
    """Attention of one query token (q (B, H, 1, D)) over the cache (B, H_kv, S, D) where the boolean
    ``mask`` (1, S) is True; a new contiguous (B, H, 1, D) tensor in q's dtype. ``programs``: how many
    programs to aim the split at (default: :func:`programs_wanted`; tests pass more to force many splits).
    ``pdl``: the kernels launched as programmatic dependent launches (:mod:`.dependent_launch`).
    ``fused_merge``: the last program of each KV head merges the splits (one launch; measured slower on the
    H100, see the header); False (the default): a merge kernel of its own (two launches)."""
    if isinstance(q, torch.Tensor) and q.dim() == 4 and q.shape[2] != 1:
        raise ValueError(f"decode attention: q has {q.shape[2]} query tokens; the kernel takes one (decode)")
    check_arguments(q, keys, values, mask, "decode attention")
    pdl = checked(pdl, q.device)
    batch, heads, _, dim = q.shape
    kv_heads, seq = keys.shape[1], keys.shape[2]
    group = heads // kv_heads
    out = torch.empty((batch, heads, 1, dim), device=q.device, dtype=q.dtype)
    if out.numel() == 0:
        return out
    if seq == 0:
        return out.zero_()                 # no key at all: every row sees none (SDPA gives 0)
    heads_in_flight = batch * kv_heads
    chunk, splits = split_keys(seq, heads_in_flight, programs or programs_wanted(q.device))
    part_acc = torch.empty((heads_in_flight, splits, group, dim), device=q.device, dtype=torch.float32)
    part_stats = torch.empty((heads_in_flight, splits, group, 2), device=q.device, dtype=torch.float32)
    block_g = max(MIN_DOT, triton.next_power_of_2(group))
    block_d = max(MIN_DOT, triton.next_power_of_2(dim))
    merge_rows = triton.next_power_of_2(group)          # no tl.dot in the merge: no padding to 16 rows
    merge_steps = merge_splits_a_step(splits, merge_rows, block_d)
    arrivals = arrival_counters.take(q.device, heads_in_flight) if fused_merge else None
    mask_bytes = mask.view(torch.uint8)    # the same memory, one byte a key
    scale_log2 = 1.4426950408889634 / dim ** 0.5       # softmax(q.k / sqrt(D)) computed with exp2
    split_kernel[(splits, heads_in_flight)](
        q, keys, values, mask_bytes, part_acc, part_stats, out, part_stats if arrivals is None else arrivals,
        kv_heads, seq, chunk, splits,
        q.stride(0), q.stride(1), keys.stride(0), keys.stride(1), keys.stride(2),
        values.stride(0), values.stride(1), values.stride(2), mask_bytes.stride(1), scale_log2,
        GROUP=group, HEAD_DIM=dim, BLOCK_G=block_g, BLOCK_D=block_d, BLOCK_N=BLOCK_N,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32", PDL=pdl, FUSED_MERGE=arrivals is not None,
        MERGE_G=merge_rows, MERGE_S=merge_steps, num_warps=WARPS, **launch_options(pdl))
    if arrivals is None:
        merge_kernel[(heads_in_flight,)](part_acc, part_stats, out, splits, GROUP=group, HEAD_DIM=dim,
                                         BLOCK_S=merge_steps, BLOCK_G=merge_rows, BLOCK_D=block_d, PDL=pdl,
                                         num_warps=WARPS, **launch_options(pdl))
    return out


def attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
              pdl: bool = False) -> torch.Tensor:
    """:func:`hello_gpu.models.llama.attention` (same arguments and result): the decode step (one query
    token) by the flash-decoding kernel above; a prefill (T > 1 query tokens) by the eager function itself,
    F.scaled_dot_product_attention, as the linear replacement leaves prefill to cuBLAS.

    CUDA-graph capture (the hello-gpu backend's decode step): the host work is the checks, three
    torch.empty (from the graph's pool under capture), the next counters of the ring and one launch whose
    arguments are the cache's addresses and strides and its length max_seq, the same at every step; the
    position is only in the mask, read on the device. Triton compiles per (GROUP, HEAD_DIM, dtype) at the first call, which the
    backend's check, timing and warm-up steps make before the capture."""
    if isinstance(q, torch.Tensor) and q.dim() == 4 and q.shape[2] != 1:
        return eager_attention(q, keys, values, mask)
    return decode_attention(q, keys, values, mask, pdl=pdl)


__all__ = ["attend_tile", "attention", "check_arguments", "decode_attention", "merge_kernel", "merge_partials",
           "merge_splits_a_step", "split_kernel", "split_keys"]
