"""rms_norm: ``x * rsqrt(mean(x^2, last dim) + eps) * weight`` for x of (rows, hidden) and weight of (hidden,).

A fused row operation like softmax, with one reduction (a sum of squares) instead of two, and a
second input (the weight, read by every row: it should come from L2, not DRAM). Inputs and output
are bfloat16, float16 or float32; the sum of squares is accumulated in float32, which is what the
"near_overflow" inputs test. In float16 their squares overflow, so a rung that accumulates in
float16 gives inf and then 0. In bfloat16 and float32 the sum of squares comes near float32's
range, and it stays finite only when each square is added once.
"""

from __future__ import annotations

import torch

from hello_gpu.bench import Work
from hello_gpu.ops.rows import normal_rows, rows_and_width

NAME = "rms_norm"
DTYPES = ("bfloat16", "float16", "float32")
EPS = 1e-6               # the epsilon every rung and the reference use (Llama-style models use 1e-5 or 1e-6)

# Hidden sizes 1, 127 and 4097 (as the issue asks: multiples of no warp or vector width), a tall odd
# shape, and a single row.
EDGE_SHAPES = ((1, 1), (7, 127), (3, 4097), (1823, 781), (1, 1000))
# bf16 16384x8192 is 256 MiB in, 256 MiB out; 8192x4096 is 64 MiB each way.
BENCH_SHAPES = ((16384, 8192), (8192, 4096))
DISTRIBUTIONS = ("normal", "large", "near_overflow")

# The output is x times a float32 scale, rounded once to the output dtype (2^-8 relative in bfloat16,
# 2^-11 in float16), after float32 arithmetic over up to 8192 columns (~sqrt(n) ulps of float32 in
# the mean: 1e-5). atol: the output dtype's smallest subnormal spacing.
TOLERANCE = {"bfloat16": (2**-7, 1e-38), "float16": (2**-9, 6e-8), "float32": (2e-5, 1e-38)}

DETERMINISTIC_REQUIRED = True      # one row, one owner, a fixed order: no atomics needed


def make_inputs(shape, dtype: str, *, seed: int, distribution: str = "normal", device: str = "cpu"):
    """``(x, weight)``; never zeros. weight is 1 + 0.1 * N(0, 1), as a trained norm's weights look."""
    rows, hidden = rows_and_width(shape, NAME, "hidden")
    x, generator = normal_rows(rows, hidden, seed=seed, device=device)
    if distribution == "large":
        x = x * 100.0                    # 100^2 = 10^4: still fine in float16, far from 1
    elif distribution == "near_overflow":
        # float16: |x| in [300, 4000], so x^2 > 65504 overflows a float16 accumulator at once.
        # bfloat16/float32: |x| in [2^55, 2^56), x^2 ~ 2^110. A float32 sum over 16384 columns
        # reaches 2^126, just under float32's 2^128: a float32 accumulator holds it, but a sum
        # that adds a row twice overflows.
        if dtype == "float16":
            magnitude = 300.0 + 3700.0 * torch.rand((rows, hidden), generator=generator, device=device)
        else:
            magnitude = 2.0**55 * (1 + torch.rand((rows, hidden), generator=generator, device=device))
        x = torch.where(x < 0, -magnitude, magnitude)
    elif distribution != "normal":
        raise ValueError(f"unknown distribution {distribution!r}: normal, large or near_overflow")
    weight = 1 + 0.1 * torch.randn((hidden,), generator=generator, device=device, dtype=torch.float32)
    weight[weight == 0] = 1
    return x.to(getattr(torch, dtype)), weight.to(getattr(torch, dtype))


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """In float64, where no square overflows."""
    x64 = x.to(torch.float64)
    scale = torch.rsqrt(x64.square().mean(dim=-1, keepdim=True) + EPS)
    return x64 * scale * weight.to(torch.float64)


def work(shape, dtype: str) -> Work:
    """Read x once, read weight once (every row reuses it from cache), write the output once.
    FLOPs: a square and an add per element for the mean, two multiplies for the output."""
    rows, hidden = rows_and_width(shape, NAME, "hidden")
    itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    return Work(bytes=(2 * rows * hidden + hidden) * itemsize, flops=4 * rows * hidden, dtype=dtype)
