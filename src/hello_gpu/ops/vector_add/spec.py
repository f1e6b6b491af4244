"""vector_add: ``out = a + b``, elementwise, on two tensors of one shape and dtype.

The first ladder: no reuse, 12 bytes moved per FLOP in float32, so every rung is bound by memory
bandwidth and the question is only how close it gets to the measured copy ceiling.
"""

from __future__ import annotations

import torch

from hello_gpu.bench import Work
from hello_gpu.ops.shapes import numel

NAME = "vector_add"
DTYPES = ("float32", "bfloat16")

# Sizes that are multiples of no block size (1, 31, 4097) and a 2-D shape whose rows are not either:
# an off-by-one in the tail or a missing bounds check shows here, not at 2^24.
EDGE_SHAPES = (1, 31, 1000, 4097, (1823, 781))
# 12 MB, 200 MB and 3.2 GB in float32: from a few times the H200's 60 MB L2 to far beyond it.
BENCH_SHAPES = (2**20, 2**24, 2**28)
# Every check runs on each: "large" catches a kernel that mixes in a constant, "near_overflow" one
# that forms a wider intermediate wrongly (or adds something twice).
DISTRIBUTIONS = ("normal", "large", "near_overflow")

# The exact sum of two inputs is rounded once to the output dtype: at most half an ulp, which is 2^-24
# relative in float32 (24 significant bits) and 2^-8 in bfloat16 (8 bits; torch.add on bfloat16 was
# seen at 0.9961 * 2^-8). Twice that is allowed, for a rung that adds in float32 and then rounds to
# bfloat16 (two roundings). atol: the smallest normal number, so a kernel flushing subnormal results
# to zero (fast math) still passes.
TOLERANCE = {"float32": (2**-23, 1.2e-38), "bfloat16": (2**-7, 1.2e-38)}

# One thread (or lane) writes each element once from the same two inputs: nothing to reorder.
DETERMINISTIC_REQUIRED = True


def make_inputs(shape, dtype: str, *, seed: int, distribution: str = "normal", device: str = "cpu"):
    """``(a, b)`` drawn from ``distribution``; never zeros (a kernel that writes nothing would pass)."""
    torch_dtype = getattr(torch, dtype)
    generator = torch.Generator(device=device).manual_seed(seed)
    dims = shape if isinstance(shape, tuple) else (shape,)
    inputs = []
    for _ in range(2):
        values = torch.randn(dims, generator=generator, device=device, dtype=torch.float32)
        if distribution == "large":
            values = values * 2.0**100          # far from 1: catches a kernel that mixes in a constant
        elif distribution == "near_overflow":
            # |a|, |b| in [max/8, max/4]: the sum cannot overflow, 2*a or a wider intermediate done
            # wrong would. The bfloat16 range is float32's, so one scale serves both.
            magnitude = torch.finfo(torch_dtype).max / 8 * (1 + values.abs().clamp(max=1.0))
            values = torch.where(values < 0, -magnitude, magnitude)
        elif distribution != "normal":
            raise ValueError(f"unknown distribution {distribution!r}: normal, large or near_overflow")
        values = values.to(torch_dtype)
        values[values == 0] = 1                   # randn gives an exact 0 with probability ~2^-24 per element
        inputs.append(values)
    return tuple(inputs)


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The exact sum (float64 holds the sum of two float32 or bfloat16 values without rounding)."""
    return a.to(torch.float64) + b.to(torch.float64)


def work(shape, dtype: str) -> Work:
    """Read a and b once, write out once; one addition per element."""
    n = numel(shape)
    itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    return Work(bytes=3 * n * itemsize, flops=n, dtype=dtype)
