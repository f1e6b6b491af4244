"""GPU tier for whole course-style programs (``pytest -m gpu``): every kernel of
``examples/course_kernels.hip``, loaded with ``hg.load`` as the file is written (main() and all), run on
the device against float64 references.

Inputs are fresh random values for every test; outputs are poisoned with NaN before the launch, so an
element a kernel does not write fails; sizes are odd (not multiples of the block, the tile or 4).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import hello_gpu as hg

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]

COURSE = Path(__file__).resolve().parents[2] / "examples" / "course_kernels.hip"
EPS32 = 2.0 ** -24            # float32 unit roundoff


@pytest.fixture(scope="module")
def course():
    return hg.load(COURSE)     # for the visible GPU's arch


@pytest.fixture
def generator():
    return torch.Generator(device="cuda").manual_seed(torch.seed() % 2**31)


def randn(*shape, generator):
    return torch.randn(*shape, device="cuda", generator=generator)


def poisoned(*shape):
    return torch.full(shape, float("nan"), device="cuda")


@pytest.mark.parametrize("name", ["vector_add_v1", "vector_add_v2_grid_stride", "vector_add_v3_float4"])
@pytest.mark.parametrize("n", [1, 3, 4097, 1_000_003])
def test_vector_add_versions(course, name, n, generator):
    a, b = randn(n, generator=generator), randn(n, generator=generator)
    out = poisoned(n)
    result = getattr(course, name)(a, b, out, block=256)
    assert result is out
    expected = a.double() + b.double()
    # One float32 rounding of the exact sum: within half an ulp.
    assert torch.all((out.double() - expected).abs() <= EPS32 * expected.abs())


def test_vector_add_v3_with_a_grid_smaller_than_the_data(course, generator):
    # The grid-stride loops must cover every element (and the n % 4 tail) with any grid.
    n = 100_003
    a, b = randn(n, generator=generator), randn(n, generator=generator)
    out = course.vector_add_v3_float4(a, b, poisoned(n), block=128, grid=7)
    torch.testing.assert_close(out.double(), a.double() + b.double(), rtol=EPS32, atol=0)


@pytest.mark.parametrize("n", [1, 255, 100_003])
def test_block_sum_shared(course, n, generator):
    block = 256
    blocks = math.ceil(n / block)
    x = randn(n, generator=generator)
    partial = course.block_sum_shared(x, poisoned(blocks), block=block)
    padded = torch.zeros(blocks * block, device="cuda", dtype=torch.float64)
    padded[:n] = x.double()
    expected = padded.view(blocks, block).sum(dim=1)
    magnitude = padded.abs().view(blocks, block).sum(dim=1)
    # A tree of log2(256) = 8 float32 additions per element: |error| <= 8 eps sum|x| per block.
    assert torch.all((partial.double() - expected).abs() <= 8 * EPS32 * magnitude)


def test_row_max_finite_skips_inf_and_nan(course, generator):
    rows, cols = 37, 1001
    x = randn(rows, cols, generator=generator)
    special = torch.rand(rows, cols, device="cuda", generator=generator)
    x[special < 0.02] = float("inf")
    x[(special >= 0.02) & (special < 0.04)] = float("-inf")
    x[(special >= 0.04) & (special < 0.06)] = float("nan")
    x[5] = float("inf")                          # a row with no finite value: -inf
    x[6, :] = float("nan")
    out = course.row_max_finite(x, poisoned(rows), rows=rows, cols=cols, block=256, grid=rows)
    finite = torch.where(torch.isfinite(x), x.double(), torch.tensor(float("-inf"), dtype=torch.float64,
                                                                      device="cuda"))
    expected = finite.max(dim=1).values
    assert torch.equal(out.double(), expected)   # a maximum is exact
    assert out[5].item() == float("-inf") and out[6].item() == float("-inf")


@pytest.mark.parametrize("rows, cols", [(1, 1), (29, 1531), (3, 70_001)])
def test_row_softmax_in_an_anonymous_namespace(course, rows, cols, generator):
    assert "_GLOBAL__N_" in course.row_softmax.binary.lowered_name or course.row_softmax.binary.vendor == "amd"
    x = randn(rows, cols, generator=generator) * 4
    y = course.row_softmax(x, poisoned(rows, cols), rows=rows, cols=cols, block=256, grid=rows)
    expected = torch.softmax(x.double(), dim=1)
    torch.testing.assert_close(y.double(), expected, rtol=1e-5, atol=1e-12)
    torch.testing.assert_close(y.double().sum(dim=1), torch.ones(rows, dtype=torch.float64, device="cuda"),
                               rtol=1e-5, atol=0)


def test_scale_clamp_in_a_named_namespace(course, generator):
    n = 4099
    x = randn(n, generator=generator) * 3
    y = course.scale_clamp(x, poisoned(n), alpha=1.5, lo=-0.5, hi=0.75)      # n: x's element count
    expected = (1.5 * x.double()).clamp(-0.5, 0.75)
    assert torch.all((y.double() - expected).abs() <= EPS32 * expected.abs())
    unclamped = course["course::scale_clamp"](x, poisoned(n), alpha=-2.0, lo=float("-inf"), hi=float("inf"))
    torch.testing.assert_close(unclamped.double(), -2.0 * x.double(), rtol=0, atol=0)   # times a power of 2


@pytest.mark.parametrize("m, n, k", [(100, 90, 70), (1, 17, 33), (129, 1, 16)])
def test_tiled_template(course, m, n, k, generator):
    a, b = randn(m, k, generator=generator), randn(k, n, generator=generator)
    c = course["tiled<16>"](a, b, poisoned(m, n), m=m, n=n, k=k, block=(16, 16),
                            grid=(math.ceil(n / 16), math.ceil(m / 16)))
    expected = a.double() @ b.double()
    bound = k * EPS32 * (a.double().abs() @ b.double().abs())     # k float32 multiply-adds
    assert torch.all((c.double() - expected).abs() <= bound)
