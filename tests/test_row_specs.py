"""The row operators' specs (softmax, rms_norm): references, inputs, tolerances, invariants, work.

Each tolerance must admit what PyTorch itself computes, and must reject what a typical mistake gives
(no max subtraction, a float16 accumulator); the references define the edge cases (a row of -inf).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from hello_gpu.ops import load_op
from hello_gpu.ops.checking import compare_outputs

SOFTMAX = load_op("softmax").spec
RMS_NORM = load_op("rms_norm").spec


def _admits(spec, dtype, output, expected) -> bool:
    rtol, atol = spec.TOLERANCE[dtype]
    return compare_outputs(output, expected, rtol, atol)[2] is None


@pytest.mark.parametrize("dtype", SOFTMAX.DTYPES)
@pytest.mark.parametrize("distribution", SOFTMAX.DISTRIBUTIONS)
def test_softmax_tolerance_admits_float32_math_rounded_once(dtype, distribution):
    for shape in SOFTMAX.EDGE_SHAPES:
        (x,) = SOFTMAX.make_inputs(shape, dtype, seed=7, distribution=distribution)
        expected = SOFTMAX.reference(x)
        output = torch.softmax(x.float(), dim=-1).to(x.dtype)
        assert _admits(SOFTMAX, dtype, output, expected), (shape, distribution)
        assert SOFTMAX.invariants((x,), output) == [], (shape, distribution)


def test_softmax_of_a_row_of_minus_inf_is_nan_and_other_minus_inf_are_zero():
    (x,) = SOFTMAX.make_inputs((6, 1025), "float32", seed=3, distribution="minus_inf_rows")
    expected = SOFTMAX.reference(x)
    assert torch.isnan(expected[0]).all() and torch.isnan(expected[3]).all()
    finite_rows = expected[[1, 2, 4, 5]]
    assert not torch.isnan(finite_rows).any() and bool((finite_rows[torch.isneginf(x[[1, 2, 4, 5]])] == 0).all())
    zeros_instead = torch.nan_to_num(torch.softmax(x, dim=-1), nan=0.0)
    assert not _admits(SOFTMAX, "float32", zeros_instead, expected)          # 0 is not the defined result
    assert "should be NaN" in SOFTMAX.invariants((x,), zeros_instead)[0]


def test_softmax_without_the_max_subtraction_fails_on_large_inputs():
    (x,) = SOFTMAX.make_inputs((31, 1023), "float32", seed=1, distribution="large")
    naive = torch.exp(x) / torch.exp(x).sum(dim=-1, keepdim=True)          # inf / inf = NaN
    assert not _admits(SOFTMAX, "float32", naive, SOFTMAX.reference(x))


def test_softmax_inputs_shapes_and_work():
    first = SOFTMAX.make_inputs((31, 1023), "bfloat16", seed=1)[0]
    assert first.dtype == torch.bfloat16 and first.shape == (31, 1023) and bool((first != 0).all())
    assert torch.equal(first, SOFTMAX.make_inputs((31, 1023), "bfloat16", seed=1)[0])
    assert not torch.equal(first, SOFTMAX.make_inputs((31, 1023), "bfloat16", seed=2)[0])
    with pytest.raises(ValueError, match="unknown distribution"):
        SOFTMAX.make_inputs((2, 2), "float32", seed=1, distribution="zeros")
    with pytest.raises(ValueError, match="rows, columns"):
        SOFTMAX.make_inputs(4097, "float32", seed=1)
    work = SOFTMAX.work((8192, 8192), "float32")
    assert work.bytes == 2 * 8192 * 8192 * 4 and work.flops == 5 * 8192 * 8192
    assert {(1, 1), (31, 1023), (7, 1025)} <= set(SOFTMAX.EDGE_SHAPES)
    assert (8192, 8192) in SOFTMAX.BENCH_SHAPES and (4096, 32768) in SOFTMAX.BENCH_SHAPES


@pytest.mark.parametrize("dtype", RMS_NORM.DTYPES)
@pytest.mark.parametrize("distribution", RMS_NORM.DISTRIBUTIONS)
def test_rms_norm_tolerance_admits_torch_and_float32_accumulation(dtype, distribution):
    for shape in RMS_NORM.EDGE_SHAPES + ((4, 8192),):
        x, weight = RMS_NORM.make_inputs(shape, dtype, seed=5, distribution=distribution)
        expected = RMS_NORM.reference(x, weight)
        assert torch.isfinite(expected).all()
        x32 = x.float()
        ours = (x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + RMS_NORM.EPS) * weight.float()).to(x.dtype)
        assert _admits(RMS_NORM, dtype, ours, expected), (shape, distribution)
        native = F.rms_norm(x, (shape[1],), weight, RMS_NORM.EPS)
        assert _admits(RMS_NORM, dtype, native, expected), (shape, distribution)


def test_rms_norm_near_overflow_catches_a_float16_accumulator():
    x, weight = RMS_NORM.make_inputs((7, 127), "float16", seed=2, distribution="near_overflow")
    squares_in_half = x.square()                       # float16: overflows to inf
    assert torch.isinf(squares_in_half).any()
    wrong = (x * torch.rsqrt(squares_in_half.float().mean(-1, keepdim=True) + RMS_NORM.EPS).half() * weight)
    assert not _admits(RMS_NORM, "float16", wrong, RMS_NORM.reference(x, weight))


def test_rms_norm_inputs_and_work():
    x, weight = RMS_NORM.make_inputs((3, 4097), "bfloat16", seed=1)
    assert x.shape == (3, 4097) and weight.shape == (4097,) and x.dtype == weight.dtype == torch.bfloat16
    assert bool((x != 0).all()) and bool((weight != 0).all())
    assert abs(float(weight.float().mean()) - 1) < 0.05
    work = RMS_NORM.work((16384, 8192), "bfloat16")
    assert work.bytes == (2 * 16384 * 8192 + 8192) * 2 and work.flops == 4 * 16384 * 8192
    assert {1, 127, 4097} <= {hidden for _, hidden in RMS_NORM.EDGE_SHAPES}
    assert math.isclose(RMS_NORM.EPS, 1e-6)


def test_ladder_of_a_spec_without_rungs_says_so(capsys, tmp_path):
    import shutil

    from hello_gpu.cli import main
    from hello_gpu.ops import ops_root
    (tmp_path / "softmax").mkdir()
    shutil.copy(ops_root() / "softmax" / "spec.py", tmp_path / "softmax" / "spec.py")   # the spec alone
    assert main(["ladder", "softmax", "--check-only", "--root", str(tmp_path)]) == 2
    assert "softmax has a spec but no rungs yet" in capsys.readouterr().out
