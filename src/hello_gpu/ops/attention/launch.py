"""What every attention rung's launcher shares (not a rung: the registry reads only rung names).

``prepare`` checks a call the way every kernel of this ladder reads it: q (B, H, S_q, D), k and v
(B, H_kv, S_kv, D), contiguous (row r of a head at r * D), one dtype, D in {64, 128}, H a multiple of
H_kv, causal a Python bool, and ``out`` (when given) contiguous and shaped like q. Anything else is a
ValueError (a TypeError for causal) naming the problem, never a silent copy (a copy would be timed too).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from hello_gpu.ops.attention.spec import Dims, dims_of

# The integer arguments of the Triton kernels (t01-t06) that Triton would otherwise specialise on: a value of 1
# becomes a constant and a multiple of 16 gets a divisibility hint, each combination a compile of its own
# (~0.8 s a kernel and configuration; 0.55-1.5 s measured for t02's kernel compiled for sm_90 on a CPU). The edge
# and benchmark shapes of one ladder make 12 combinations of (H, H_kv, S_q, S_kv), so t03-t05 compiled each of
# their 8 autotune configurations ~12 times (issue 22; the time model in spec.py puts it at ~260 compiles, most
# of the 548 s run). The hints buy nothing here: every address is a multiple of HEAD_DIM (a constexpr)
# elements, and every mask is constant along the head dimension, the one the loads vectorise, whatever the
# lengths.
LENGTHS = ("heads", "kv_heads", "q_len", "kv_len")

LOG2E = 1.4426950408889634       # exp(x) = exp2(x * log2(e)): the kernels work in base 2 (one ex2 instruction)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
MAX_SCORE_BYTES = 2**40   # beyond any GPU: a sanity bound for the materialising rungs (t01, v01)


def prepare(q, k, v, causal, out=None) -> tuple[Dims, torch.Tensor]:
    """(the call's dimensions, the output tensor), after the checks above."""
    check_causal(causal)
    d = dims_of(q, k, v, causal)
    if q.dtype not in DTYPES:
        raise ValueError(f"attention: q is {q.dtype}; these kernels take float32, bfloat16 or float16")
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not tensor.is_contiguous():
            raise ValueError(f"attention: {name} must be contiguous (B, heads, S, D); its strides are "
                             f"{tuple(tensor.stride())}: pass {name}.contiguous()")
    if out is None:
        return d, torch.empty_like(q)
    if tuple(out.shape) != tuple(q.shape) or out.dtype != q.dtype or out.device != q.device or not out.is_contiguous():
        raise ValueError(f"attention: out must be a contiguous {tuple(q.shape)} {q.dtype} tensor on {q.device}; "
                         f"got {tuple(out.shape)} {out.dtype} on {out.device}")
    return d, out


def check_causal(causal) -> None:
    """causal must be a Python bool: a tensor would be read on the host by a PyTorch operation on every
    call (a GPU sync on a CUDA tensor), which no replay can repeat (see spec.py)."""
    if type(causal) is not bool:
        raise TypeError(f"attention: causal must be True or False (a Python bool), got {type(causal).__name__}"
                        + (": pass bool(causal)" if isinstance(causal, torch.Tensor) else ""))


def softmax_scale_log2(d: Dims) -> float:
    """scale x log2(e), the factor the kernels multiply Q K^T by to get base-2 exponents."""
    return LOG2E / math.sqrt(d.head_dim)


def dot_precision(q: torch.Tensor) -> str:
    """Triton's tl.dot input precision: "ieee" for float32 (tf32's 10-bit mantissa would miss the
    float32 tolerance by ~100x), "tf32" otherwise (ignored for 16-bit inputs)."""
    return "ieee" if q.dtype == torch.float32 else "tf32"


def check_scores_fit(score_bytes: int, device: torch.device) -> None:
    """Refuse, naming the sizes, where the scores buffer cannot be allocated (not an out-of-memory crash)."""
    gib = score_bytes / 2**30
    if score_bytes > MAX_SCORE_BYTES:
        raise ValueError(f"attention: the float32 scores would take {gib:.1f} GiB; a materialising rung refuses "
                         f"past {MAX_SCORE_BYTES / 2**30:.0f} GiB: use a fused rung")
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        if score_bytes > free:
            raise ValueError(f"attention: the float32 scores (B x H x S_q x S_kv x 4 bytes) would take "
                             f"{gib:.1f} GiB and the GPU has {free / 2**30:.1f} GiB free: this rung materialises "
                             f"them; use a fused rung, which never does")


# The fused HIP rungs (v02-v04): kFusedWarps warps a block, kBlockRows query rows a block (their .hip files).
FUSED_WARPS = 4
FUSED_BLOCK_ROWS = 16
MAX_GRID_Y = 65535          # the largest second grid dimension on both vendors


def warp_size(tensor: torch.Tensor) -> int:
    """32 on NVIDIA (and AMD RDNA), 64 on AMD CDNA: the fused HIP rungs' blocks are whole warps."""
    from hello_gpu.runtime.device import device_info
    return device_info(tensor.device.index).warp_size


def run_fused(kernel, q, k, v, causal, out=None, *, heads_first: bool = False):
    """Launch a fused HIP rung (v02-v04): one block of FUSED_WARPS warps per (16 query rows, b x H + h); grid
    (query blocks, B x H), or (B x H, query blocks) with ``heads_first`` (v04 walks its query blocks in
    reverse order along y). The kernels hold D = 64 or 128 (spec.dims refuses any other)."""
    d, out = prepare(q, k, v, causal, out)
    blocks = -(-d.q_len // FUSED_BLOCK_ROWS)
    heads = d.batch * d.heads
    grid = (heads, blocks) if heads_first else (blocks, heads)
    if grid[1] > MAX_GRID_Y:
        raise ValueError(f"attention: {grid[1]} {'query blocks' if heads_first else 'batch x heads'} exceed the "
                         f"grid's second dimension ({MAX_GRID_Y}); this rung launches one block per "
                         f"{FUSED_BLOCK_ROWS} query rows per head")
    kernel(q, k, v, out, d.heads, d.kv_heads, d.q_len, d.kv_len, d.head_dim, softmax_scale_log2(d), int(d.causal),
           block=FUSED_WARPS * warp_size(q), grid=grid)
    return out


_SIBLINGS: dict = {}
# The C type of an entry's template argument -> the suffix of the per-dtype sibling kernels.
SIBLING_SUFFIXES = {"float": "float", "__half": "half", "hip_bfloat16": "bfloat16"}


def sibling(kernel, function: str, source: Path | None = None):
    """Another kernel of the same source (.hip or .cu) as ``kernel`` (a rung's entry), or of the file ``source``
    beside it, for the same arch, compiled once per process (and cached on disk by hello_gpu's compiler).

    ``function`` is a plain name, one ending in ``_{T}``, which becomes the suffix of the entry's dtype
    (``attention_weighted_values_{T}`` for the entry ``attention_scores<__half>`` is
    ``attention_weighted_values_half``: one non-template kernel per dtype, so that the compile gate compiles each
    of them), or one ending in ``<{T}>``, the entry's own template argument (``attention_causal_skipping<{T}>``).

    ``source``: where ``function`` is declared when that is not the entry's own file. The signature parser reads
    one file's text, never what it #includes: v05 runs v04's kernel on prefill shapes, which v05.hip includes
    but does not declare, and looking it up in v05's text failed on the H200
    (records/nvidia-h200/gpu-tests.test_attention_decode_hip.xml)."""
    template = kernel.entry[kernel.entry.index("<") + 1:-1] if "<" in kernel.entry else None
    if "{T}" in function:
        if template not in SIBLING_SUFFIXES:
            raise ValueError(f"attention: {kernel.entry} has no dtype for {function}")
        function = function.replace("{T}", template if function.endswith("<{T}>") else SIBLING_SUFFIXES[template])
    key = (id(kernel), function, None if source is None else str(source))
    if key not in _SIBLINGS:
        from hello_gpu.runtime.kernel import Kernel
        text = kernel.source if source is None else Path(source).read_text(encoding="utf-8")
        name = kernel.file_name if source is None else Path(source).name
        # The entry is kept with its sibling: while it lives, no other kernel can be given its id (CPython reuses
        # the ids of freed objects), so a key never finds another dtype's or arch's sibling.
        _SIBLINGS[key] = (kernel, Kernel(text, function, dialect=kernel.dialect, arch=kernel.arch,
                                         include_dirs=kernel.options.include_dirs, name=name))
    return _SIBLINGS[key][1]
