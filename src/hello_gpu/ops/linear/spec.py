"""linear: ``C = A @ W^T`` for A of (M, K) and a weight W of (N, K), as ``nn.Linear`` stores it
(``F.linear(a, weight)`` without a bias); C is (M, N), row-major.

matmul's operator with B transposed: the layout of every weight of a transformer, and the one a
decode step (M = 1 or 16 tokens) reads. It is an operator of its own because the checker hands rungs
contiguous tensors only, so one operator could not tell "B of (K, N)" from "W of (N, K)" at a square
shape. Shapes, inputs, bounds and work model are matmul's (hello_gpu/ops/matmul/spec.py): a shape is
``(M, N, K)``; for the same seed, W here is matmul's B transposed, value for value.

Decode is memory-bound: at M = 1 a 14336x4096 bf16 weight is 117 MB read for 117 MFLOP, one FLOP per
byte, so its measure is the fraction of copy bandwidth reached on the weight bytes.
"""

from __future__ import annotations

import torch

from hello_gpu.ops.matmul import spec as matmul

NAME = "linear"
DTYPES = matmul.DTYPES
EDGE_SHAPES = matmul.EDGE_SHAPES
# Decode first (M = 1 and 16 through each Llama-3-8B-sized weight, 4096x4096 included), then prefill.
DECODE_SHAPES = tuple((m, n, k) for m in (1, 16) for n, k in matmul.LAYERS)
BENCH_SHAPES = DECODE_SHAPES + matmul.PREFILL_SHAPES
DISTRIBUTIONS = matmul.DISTRIBUTIONS
TOLERANCE = matmul.TOLERANCE
DETERMINISTIC_REQUIRED = True       # one owner per output element, a fixed K order: no atomics


def make_inputs(shape, dtype: str, *, seed: int, distribution: str = "normal", device: str = "cpu"):
    """``(a, weight)``: A of (M, K) and W of (N, K), contiguous, never zero."""
    m, n, k = matmul.dims(shape, NAME)
    return matmul.random_operands(m, k, n, dtype, seed=seed, distribution=distribution, device=device)


def reference(a: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return a.to(torch.float64) @ weight.to(torch.float64).t()


def tolerance(inputs, dtype: str) -> tuple[float, float]:
    a, weight = inputs
    return matmul.tolerance_for(*matmul.error_scale(a, weight), dtype)


def invariants(inputs, output) -> list[str]:
    a, weight = inputs
    return matmul.frobenius_problems(output, reference(a, weight), str(a.dtype).removeprefix("torch."), a.shape[1])


def work(shape, dtype: str):
    return matmul.work_for(*matmul.dims(shape, NAME), dtype)
