"""reduce_sum: the sum of every element of a float32 tensor, accumulated in float32, as a 1-element tensor.

The second ladder: still bandwidth-bound (4 bytes read per FLOP), but now threads must cooperate
(shared memory, warp shuffles, atomics), and the order of additions changes the rounding: a rung may
be correct without being bit-for-bit repeatable.
"""

from __future__ import annotations

import math

import torch

from hello_gpu.bench import Work
from hello_gpu.ops.shapes import numel

NAME = "reduce_sum"
DTYPES = ("float32",)

EDGE_SHAPES = (1, 31, 1000, 4097, (1823, 781))
BENCH_SHAPES = (2**20, 2**24, 2**28)
# Every check runs on each: "large" catches a kernel that mixes in a constant, "near_overflow" one
# that forms a wider intermediate wrongly (or adds something twice).
DISTRIBUTIONS = ("normal", "large", "near_overflow")

# A floor for tiny inputs; tolerance() below scales the absolute bound with the problem.
TOLERANCE = {"float32": (1e-6, 1e-6)}

# Atomics add the blocks' partial sums in whatever order they finish: correct, not repeatable.
# A rung that says "deterministic: yes" is still held to it.
DETERMINISTIC_REQUIRED = False

# math.fsum on the CPU takes ~0.1 s per million elements: cross-check the reference up to this size.
FSUM_CROSS_CHECK_MAX = 2**22


def make_inputs(shape, dtype: str = "float32", *, seed: int, distribution: str = "normal", device: str = "cpu"):
    """``(x,)``; never zeros. "near_overflow": all positive, the total about a quarter of float32's range."""
    if dtype != "float32":
        raise ValueError(f"reduce_sum takes float32 input (accumulates in float32), got {dtype}")
    generator = torch.Generator(device=device).manual_seed(seed)
    dims = shape if isinstance(shape, tuple) else (shape,)
    values = torch.randn(dims, generator=generator, device=device, dtype=torch.float32)
    if distribution == "large":
        values = values * 2.0**60
    elif distribution == "near_overflow":
        # Each element ~max/(4n): the total nears max/4, so a partial sum only overflows when a rung
        # adds something twice; all positive, so nothing cancels to hide it.
        values = (values.abs() + 0.5) * (torch.finfo(torch.float32).max / (8 * numel(shape)))
    elif distribution != "normal":
        raise ValueError(f"unknown distribution {distribution!r}: normal, large or near_overflow")
    values[values == 0] = 1
    return (values,)


def reference(x: torch.Tensor) -> torch.Tensor:
    """The float64 sum, as a 1-element tensor. float64 has 29 more bits than float32, so summing up to
    2^28 float32 values loses nothing a float32 tolerance could notice (checked against math.fsum below)."""
    return x.to(torch.float64).sum().reshape(1)


def tolerance(inputs, dtype: str) -> tuple[float, float]:
    """(rtol, atol): the probabilistic bound for a sum of n terms in float32, sqrt(n) * eps * sum|x|
    (Higham and Mary), times 2 for safety; at least the TOLERANCE floor."""
    (x,) = inputs
    rtol, floor = TOLERANCE[dtype]
    absolute_sum = float(x.to(torch.float64).abs().sum())
    scaled = 2 * math.sqrt(x.numel()) * torch.finfo(torch.float32).eps * absolute_sum
    return rtol, max(floor, scaled)


def invariants(inputs, output) -> list[str]:
    """What the tolerance test cannot say: the output's form, and whether the reference itself is exact."""
    (x,) = inputs
    problems = []
    if tuple(output.shape) != (1,):
        problems.append(f"output has shape {tuple(output.shape)}; a 1-element tensor was expected")
    if output.dtype != torch.float32:
        problems.append(f"output dtype is {output.dtype}; float32 was expected")
    if x.numel() <= FSUM_CROSS_CHECK_MAX:
        exact = math.fsum(x.to(torch.float64).flatten().cpu().numpy())   # correctly rounded: the ground truth
        ours = float(reference(x))
        allowed = x.numel() * torch.finfo(torch.float64).eps * float(x.to(torch.float64).abs().sum())
        if abs(ours - exact) > allowed:
            problems.append(f"the float64 reference {ours!r} is {abs(ours - exact):.3g} from math.fsum's {exact!r}")
    return problems


def work(shape, dtype: str = "float32") -> Work:
    """Read x once (4 bytes per element), write one float32; one addition per element."""
    n = numel(shape)
    return Work(bytes=4 * n + 4, flops=n, dtype=dtype)
