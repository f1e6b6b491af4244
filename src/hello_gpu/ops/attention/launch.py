"""What every attention rung's launcher shares (not a rung: the registry reads only rung names).

``prepare`` checks a call the way every kernel of this ladder reads it: q (B, H, S_q, D), k and v
(B, H_kv, S_kv, D), contiguous (row r of a head at r * D), one dtype, D in {64, 128}, H a multiple of
H_kv, and ``out`` (when given) contiguous and shaped like q. Anything else is a ValueError naming
the problem, never a silent copy (a copy would be timed too).
"""

from __future__ import annotations

import math

import torch

from hello_gpu.ops.attention.spec import Dims, dims_of

LOG2E = 1.4426950408889634       # exp(x) = exp2(x * log2(e)): the kernels work in base 2 (one ex2 instruction)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def prepare(q, k, v, causal, out=None) -> tuple[Dims, torch.Tensor]:
    """(the call's dimensions, the output tensor), after the checks above."""
    d = dims_of(q, k, v, bool(causal))
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


def softmax_scale_log2(d: Dims) -> float:
    """scale x log2(e), the factor the kernels multiply Q K^T by to get base-2 exponents."""
    return LOG2E / math.sqrt(d.head_dim)


def dot_precision(q: torch.Tensor) -> str:
    """Triton's tl.dot input precision: "ieee" for float32 (tf32's 10-bit mantissa would miss the
    float32 tolerance by ~100x), "tf32" otherwise (ignored for 16-bit inputs)."""
    return "ieee" if q.dtype == torch.float32 else "tf32"
