"""matmul: ``C = A @ B`` for A of (M, K) and B of (K, N), both row-major; C is (M, N), row-major.

The course's compute-bound operator: 2 M N K FLOPs on (M K + K N + M N) elements, so a 4096^3 matmul
does ~680 FLOPs per float32 byte moved, far above any GPU's ridge point, while a decode step (M = 1 or
16) does one or a few FLOPs per weight byte and is bound by reading B.

A shape is ``(M, N, K)``, written ``MxNxK`` ("4096x14336x4096": M = 4096 rows of A, N = 14336 columns
of C, K = 4096 the shared dimension). Inputs and output are float32, bfloat16 or float16; every rung
accumulates in float32. float32 is the SIMT route with TF32 off: a rung that rounds its inputs to TF32
(10 mantissa bits) errs by ~5e-4 relative and fails the float32 bound below, which is how the checker
keeps TF32 out of the float32 ladder.

B transposed (``x @ weight.t()`` with an ``nn.Linear`` weight of (N, K)) is its own operator,
``linear`` (hello_gpu/ops/linear/), with this spec's shapes, inputs and bounds: the checker hands a rung
its inputs as contiguous tensors and nothing else, so a layout option inside one operator could not be
told apart from the shapes alone (B of (K, N) and a weight of (N, K) are both 4096x4096 at 4096^3).
Every matmul rung takes contiguous row-major B; a transposed view ``weight.t()`` is refused before any
launch (every non-torch rung refuses non-contiguous tensors, naming the tensor and its strides).

Correctness has two parts. Element by element (``tolerance``): one rounding of the output plus the
float32 accumulation, bounded through the rows of A and the columns of B (below). And as a whole
(``invariants``): the relative Frobenius error ``||C - C64||_F / ||C64||_F`` against float64 stays
under ``frobenius_bound(dtype, K)``: 1e-5 in float32 (2 u sqrt(K) for K > 7040, where float32's own
accumulation comes near it), 1e-2 in bfloat16 and float16. A rung that skips one K tile of one tile row
of C errs by ~sqrt(BK / K) relative on those rows: 6% for 16 of 4096, 3% for 16 of 14336, and far
more at the edge shapes, so it fails both parts.
"""

from __future__ import annotations

import math

import torch

from hello_gpu.bench import Work

NAME = "matmul"
DTYPES = ("float32", "bfloat16", "float16")

# Multiples of no tile: a single element; M = 1 (a decode row) with N = 1025; a K loop ending in a
# partial tile (517); a small odd cube; then N = 4095 with M = 1, M = 4095 (a last tile row of one),
# K = 4095, the 1823x781x517, and 1000^3. The first four have M N K <= 2^16, which the Triton
# interpreter checks on the CPU tier (hello_gpu.ops.checking.INTERPRETER_MAX_ELEMENTS; a call there
# costs ~1-5 s at 2^16, mostly per-program overhead); the GPU tier checks every shape here.
EDGE_SHAPES = ((1, 1, 1), (1, 1025, 16), (3, 5, 517), (39, 41, 37), (1, 4095, 17), (4095, 7, 3), (3, 7, 4095),
               (1823, 781, 517), (1000, 1000, 1000))

# Square 1024^3 .. 8192^3; LLM prefill (M = 4096 tokens through Llama-3-8B-sized layers: attention
# 4096x4096, MLP up 14336x4096 and down 4096x14336, the 128256-word output head); decode (M = 1 and
# 16 with the same weights), where the weight bytes dominate. A ladder run picks a subset with --shapes:
# the naive float32 rungs take seconds a call at the largest.
SQUARE_SHAPES = tuple((n, n, n) for n in (1024, 2048, 4096, 8192))
LAYERS = ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096))       # (N, K) of each weight
PREFILL_SHAPES = tuple((4096, n, k) for n, k in LAYERS[1:])                 # 4096^3 is a square shape
DECODE_SHAPES = tuple((m, n, k) for m in (1, 16) for n, k in LAYERS[1:])
BENCH_SHAPES = SQUARE_SHAPES + PREFILL_SHAPES + DECODE_SHAPES

DISTRIBUTIONS = ("normal", "large")

# Unit roundoff (half an ulp of 1.0) of each output dtype: the output is rounded to it once.
UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11}
ACCUMULATOR_ROUNDOFF = 2.0**-24          # every rung accumulates in float32
# Element by element: rtol is two roundings of the output (one is the rounding itself, the second
# leaves room for a fused epilogue that rounds twice); the atol floor is float32's smallest normal.
# tolerance() adds the accumulation terms, which depend on the inputs.
TOLERANCE = {dtype: (2 * u, 1.2e-38) for dtype, u in UNIT_ROUNDOFF.items()}
ACCUMULATION_SIGMAS = 4                  # float32 accumulation: sqrt(K) rounding steps, 4 standard deviations
# cuBLAS reduces split-K partial sums in bfloat16/float16 (allow_bf16_reduced_precision_reduction is on
# by default): each partial of magnitude ~|C| is rounded once more. 8 typical elements of slack.
REDUCTION_SLACK = 8
# Relative Frobenius error against float64: the bounds. float32 accumulation alone reaches
# ~u sqrt(K) (a random walk of K roundings): 3.8e-6 at K = 4096, 7.1e-6 at 14336; so the bound is
# 2 u sqrt(K) where that is larger than 1e-5 (K > 7040: 1.4e-5 at 14336). bfloat16 / float16 outputs are rounded
# once: ~2^-8 / sqrt(3) = 2.3e-3 and 2.8e-4; accumulation adds nothing visible there.
FROBENIUS = {"float32": 1e-5, "bfloat16": 1e-2, "float16": 1e-2}

# Each output element is written by one owner after a fixed-order K loop (no split-K with atomics);
# cuBLAS may pick split-K, but repeats its choice for the same shape.
DETERMINISTIC_REQUIRED = True


def dims(shape, op_name: str = NAME) -> tuple[int, int, int]:
    """``(M, N, K)`` from a 3-D shape; anything else is an error naming the operator and the form."""
    if not (isinstance(shape, (tuple, list)) and len(shape) == 3 and all(int(d) >= 1 for d in shape)):
        raise ValueError(f"{op_name} takes an (M, N, K) shape of positive sizes, written MxNxK; got {shape!r}")
    m, n, k = (int(d) for d in shape)
    return m, n, k


def _scales(dtype: str, distribution: str) -> tuple[float, float]:
    """(scale of A, scale of B): "large" moves the magnitudes far from 1, within each dtype's range."""
    if distribution == "normal":
        return 1.0, 1.0
    if distribution == "large":
        # float32 / bfloat16 (range 3e38): A ~ 2^40, B ~ 2^-30, C ~ 2^10 sqrt(K). float16 (max 65504):
        # A ~ 2^6, B ~ 2^-6 (B's smallest entries go subnormal, which a kernel must keep), C ~ sqrt(K).
        return (2.0**40, 2.0**-30) if dtype != "float16" else (2.0**6, 2.0**-6)
    raise ValueError(f"unknown distribution {distribution!r}: normal or large")


def random_operands(rows_a: int, k: int, rows_b: int, dtype: str, *, seed: int, distribution: str, device: str):
    """``(a, b)``: A of (rows_a, k) and a second operand of (rows_b, k) drawn N(0, 1), scaled for
    ``distribution``, no exact zero (a kernel that writes zeros must not pass on a zero row)."""
    generator = torch.Generator(device=device).manual_seed(seed)
    scale_a, scale_b = _scales(dtype, distribution)
    values = []
    for rows, scale in ((rows_a, scale_a), (rows_b, scale_b)):
        x = (torch.randn((rows, k), generator=generator, device=device, dtype=torch.float32) * scale)
        x = x.to(getattr(torch, dtype))
        x[x == 0] = scale       # an exact 0 of randn, or (float16 "large") one that underflowed
        values.append(x)
    return values[0], values[1]


def make_inputs(shape, dtype: str, *, seed: int, distribution: str = "normal", device: str = "cpu"):
    """``(a, b)``: A of (M, K) and B of (K, N), contiguous. B is drawn as (N, K) and transposed into a
    contiguous copy, so matmul and linear see the same numbers for the same seed."""
    m, n, k = dims(shape)
    a, weight = random_operands(m, k, n, dtype, seed=seed, distribution=distribution, device=device)
    return a, weight.t().contiguous()


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """In float64: every product of float32 (or narrower) inputs is exact there, and the sums err by
    ~1e-16 relative, far below any bound here."""
    return a.to(torch.float64) @ b.to(torch.float64)


# float64 elements largest_row_norm widens at once (128 MiB): the 8B's head, 128256 x 4096 in bf16 (1.05 GB),
# would be 4.2 GB of float64 widened whole, the hello-gpu backend's peak memory over eager's (its linear check).
FLOAT64_BLOCK_ELEMENTS = 2**24


def largest_row_norm(rows: torch.Tensor) -> float:
    """``max_i ||rows_i||`` of a 2-D tensor, computed in float64, a block of rows at a time: never a float64
    copy of the whole matrix (at most FLOAT64_BLOCK_ELEMENTS elements, or one row where a row is longer)."""
    if rows.shape[0] == 0:
        return float(rows.to(torch.float64).norm(dim=1).max())      # raises, as a reduction over nothing does
    block = max(1, FLOAT64_BLOCK_ELEMENTS // max(1, rows.shape[1]))
    # one float64 maximum a block, the maximum of those taken by torch: a NaN anywhere stays NaN
    return float(torch.stack([part.to(torch.float64).norm(dim=1).max() for part in rows.split(block)]).max())


def error_scale(a: torch.Tensor, b_columns: torch.Tensor) -> tuple[float, int]:
    """``(max_i ||a_i|| * max_j ||b_j||, K)``: by Cauchy-Schwarz no |C_ij| and no sum of |a_ik b_kj| is
    larger. ``b_columns`` holds the columns of B as rows (B.t() for matmul, the weight for linear). The
    norms are float64, taken a block of rows at a time (:func:`largest_row_norm`)."""
    return largest_row_norm(a) * largest_row_norm(b_columns), a.shape[1]


def tolerance_for(scale: float, k: int, dtype: str) -> tuple[float, float]:
    """(rtol, atol) for an output whose inputs give ``error_scale`` ``scale`` over ``k``: the output's
    rounding (rtol); float32 accumulation, ~u sqrt(K) scale at ACCUMULATION_SIGMAS standard deviations;
    a low-precision split-K reduction, REDUCTION_SLACK x u_out x the typical element scale / sqrt(K).
    At 4095 normal float32 inputs the atol is ~0.07 while one dropped K tile of 16 moves elements by ~4."""
    rtol, floor = TOLERANCE[dtype]
    accumulation = ACCUMULATION_SIGMAS * ACCUMULATOR_ROUNDOFF * math.sqrt(k) * scale
    reduction = REDUCTION_SLACK * UNIT_ROUNDOFF[dtype] * scale / math.sqrt(k) if dtype != "float32" else 0.0
    return rtol, max(floor, accumulation + reduction)


def tolerance(inputs, dtype: str) -> tuple[float, float]:
    a, b = inputs
    scale, k = error_scale(a, b.t())
    return tolerance_for(scale, k, dtype)


def frobenius_bound(dtype: str, k: int) -> float:
    """The largest relative Frobenius error a correct rung may make (see FROBENIUS)."""
    return max(FROBENIUS[dtype], 2 * ACCUMULATOR_ROUNDOFF * math.sqrt(k))


def frobenius_problems(output: torch.Tensor, expected: torch.Tensor, dtype: str, k: int) -> list[str]:
    """The relative Frobenius error of ``output`` against the float64 ``expected``, as a problem when
    it passes ``frobenius_bound``."""
    error = float((output.to(torch.float64) - expected).norm())
    size = float(expected.norm())
    relative = error / size if size > 0 else error
    bound = frobenius_bound(dtype, k)
    if not relative <= bound:                       # NaN fails too
        return [f"relative Frobenius error {relative:.3g} against float64 exceeds {bound:.3g} ({dtype}, K = {k})"]
    return []


def invariants(inputs, output) -> list[str]:
    """The relative Frobenius error, bounded as the issue states (the element bound cannot see a small
    error spread over every element, which is what a dropped K tile is)."""
    a, b = inputs
    return frobenius_problems(output, reference(a, b), str(a.dtype).removeprefix("torch."), a.shape[1])


def work_for(m: int, n: int, k: int, dtype: str) -> Work:
    """Read A and B once, write C once; 2 M N K FLOPs (a multiply and an add per term)."""
    itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    reads, writes = (m * k + k * n) * itemsize, m * n * itemsize
    return Work(read_bytes=reads, written_bytes=writes, flops=2 * m * n * k, dtype=dtype)


def work(shape, dtype: str) -> Work:
    return work_for(*dims(shape), dtype)
