"""softmax: ``exp(x - max) / sum(exp(x - max))`` over the last dimension of a 2-D tensor (rows x columns).

The third ladder, and the first with a row structure: each row is read, reduced twice (a maximum, then
a sum of exponentials) and written, so the question is how many times the row crosses DRAM (three
passes, two, or one with the row kept on chip) and how the reductions are shared between threads.
Inputs and outputs are float32, bfloat16 or float16; the arithmetic is float32.

A row whose entries are all -inf has no maximum to subtract: its softmax is 0/0, and this spec
defines it as NaN in every column, as ``torch.softmax`` gives. A row with some -inf entries is
ordinary: those columns get exactly 0.
"""

from __future__ import annotations

import torch

from hello_gpu.bench import Work
from hello_gpu.ops.rows import normal_rows, rows_and_width

NAME = "softmax"
DTYPES = ("float32", "bfloat16", "float16")

# One column; rows just under and over 1024 (a block of 1024 threads, a tile of 1024); widths that
# are multiples of no warp or vector size; a single long row.
EDGE_SHAPES = ((1, 1), (5, 1), (31, 1023), (7, 1025), (1823, 781), (2, 4097))
# 8192x8192 and 4096x32768 float32 are 256 and 512 MiB: several times the 60 MiB L2. 4096x1024 is
# 16 MiB: short rows, where latency and occupancy matter more than bandwidth.
BENCH_SHAPES = ((8192, 8192), (4096, 32768), (4096, 1024))
# "large": magnitudes that overflow exp() unless the maximum is subtracted first; "minus_inf_rows":
# some rows entirely -inf (NaN by definition), some with scattered -inf entries (exactly 0 there).
DISTRIBUTIONS = ("normal", "large", "minus_inf_rows")

# Outputs lie in [0, 1]. rtol: float32 math over up to 32768 columns rounds the sum by ~sqrt(n) ulps
# (~1e-5 at 32768); bfloat16 and float16 outputs are rounded once more, to 8 and 11 significant bits.
# atol: the spacing of the output dtype's subnormals, where relative error stops meaning anything
# (float16's smallest normal is 6.1e-5; bfloat16 and float32 share float32's range).
TOLERANCE = {"float32": (2e-5, 1e-38), "bfloat16": (2**-7, 1e-38), "float16": (2**-9, 6e-8)}

# One row, one owner, a fixed reduction order per row: nothing here needs atomics.
DETERMINISTIC_REQUIRED = True


def make_inputs(shape, dtype: str, *, seed: int, distribution: str = "normal", device: str = "cpu"):
    """``(x,)`` of ``shape`` and ``dtype``; never zeros (an all-zero row has a uniform softmax that a
    kernel writing 1/columns without reading x would pass)."""
    rows, columns = rows_and_width(shape, NAME)
    values, generator = normal_rows(rows, columns, seed=seed, device=device)
    if distribution == "large":
        # |x| up to ~4 x 10^3 in float16 (max 65504), ~10^4 elsewhere: exp(10^4) is inf in any dtype.
        scale = 1000.0 if dtype == "float16" else 3000.0
        values = values * scale
    elif distribution == "minus_inf_rows":
        # Every third row entirely -inf; in the others, about one column in eight is -inf.
        scattered = torch.rand((rows, columns), generator=generator, device=device) < 0.125
        values = values.masked_fill(scattered, float("-inf"))
        values[::3] = float("-inf")
    elif distribution != "normal":
        raise ValueError(f"unknown distribution {distribution!r}: normal, large or minus_inf_rows")
    return (values.to(getattr(torch, dtype)),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """Softmax in float64 (NaN across a row that is all -inf, as defined above)."""
    return torch.softmax(x.to(torch.float64), dim=-1)


def invariants(inputs, output) -> list[str]:
    """Each row that has a finite entry sums to 1 and lies in [0, 1]; an all -inf row is all NaN."""
    (x,) = inputs
    problems = []
    if tuple(output.shape) != tuple(x.shape):
        return [f"output has shape {tuple(output.shape)}; {tuple(x.shape)} was expected"]
    values = output.to(torch.float64)
    empty = torch.isneginf(x).all(dim=-1)
    if empty.any() and not torch.isnan(values[empty]).all():
        problems.append(f"{int(empty.sum())} all -inf row(s) should be NaN throughout (0/0), and are not")
    finite = values[~empty]
    if finite.numel():
        sums = finite.sum(dim=-1)
        rtol = TOLERANCE[str(x.dtype).removeprefix("torch.")][0]
        # Summing `columns` outputs, each within rtol of its value, moves the sum by at most rtol.
        worst = float((sums - 1).abs().max())
        if not worst <= 2 * rtol + 1e-12:
            problems.append(f"a row sums to 1 +- {worst:.3g} (allowed {2 * rtol:.3g})")
        if bool((finite < 0).any()) or bool((finite > 1).any()):
            problems.append("an output lies outside [0, 1]")
    return problems


def work(shape, dtype: str) -> Work:
    """Read x once and write the output once. FLOPs: a max, a subtract, an exp, an add and a divide
    per element, counted as 5 (exp is several instructions, but a FLOP count is a convention)."""
    rows, columns = rows_and_width(shape, NAME)
    itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    return Work(bytes=2 * rows * columns * itemsize, flops=5 * rows * columns, dtype=dtype)
