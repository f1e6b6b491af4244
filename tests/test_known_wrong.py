"""The checker rejects what issue 19 found passing: a dropped block of work, a strided input read as
contiguous. Each operator has a "one block dropped" Triton rung under tests/known_wrong/<op>/ (run in
the interpreter on the CPU tier, on the GPU in the GPU tier) that must fail at every checked shape.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hello_gpu.ops import load_op
from hello_gpu.ops.checking import INTERPRETER_MAX_ELEMENTS, LAYOUTS
from hello_gpu.ops.probes import PROBE, probe_inputs, tolerance_override
from hello_gpu.ops.shapes import shape_label
from hello_gpu.runtime.device import gpu_vendor

KNOWN_WRONG = Path(__file__).parent / "known_wrong"
HAS_GPU = gpu_vendor() is not None


def known_wrong_rungs() -> list[tuple[str, Path]]:
    return sorted((path.parent.name, path) for path in KNOWN_WRONG.glob("*/t9*.py"))


def test_every_shipped_operator_has_a_known_wrong_rung():
    from hello_gpu.ops import list_ops
    assert {name for name, _ in known_wrong_rungs()} == set(list_ops())


# A child process: Triton's interpreter must be chosen before triton is first imported (see
# tests/test_ops_ladders.py), and one process serves every operator.
_SCRIPT = """
import json, sys
from pathlib import Path
from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.header import parse_header
from hello_gpu.ops.rung import Rung
from hello_gpu.ops.shapes import numel, shape_label
results = {}
for name, path, max_elements in json.loads(sys.argv[1]):
    op = load_op(name)
    rung = Rung(op, Path(path).stem, "triton", Path(path), parse_header(Path(path)))
    shapes = [s for s in op.spec.EDGE_SHAPES if max_elements is None or numel(s) <= max_elements]
    dtypes = [d for d in op.spec.DTYPES if d != "bfloat16" or max_elements is None]
    report = check_rung(rung, op, shapes=shapes, dtypes=dtypes)
    results[name] = {"shapes": [shape_label(s) for s in shapes], "status": report.status, "error": report.error,
                     "cases": [[c.shape, c.dtype, c.distribution, c.passed, c.reason[:200]] for c in report.cases]}
print(json.dumps(results))
"""


def _check_known_wrong(max_elements: int | None, environment: dict) -> dict:
    jobs = [(name, str(path), max_elements) for name, path in known_wrong_rungs()]
    done = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(jobs)], capture_output=True, text=True,
                          env=environment, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _assert_rejected_everywhere(results: dict) -> None:
    for name, result in results.items():
        assert result["error"] is None, f"{name}: {result['error']}"
        assert result["status"] == "FAIL", f"{name}'s known-wrong rung passed the checker"
        for shape in result["shapes"]:
            for dtype in {case[1] for case in result["cases"] if case[3] is not None}:
                failed = [case for case in result["cases"] if case[0] == shape and case[1] == dtype and case[3] is False]
                assert failed, f"{name}: the dropped block passed every case at {shape} {dtype}"
        if name in ("reduce_sum", "vector_add"):
            # The probe alone rejects it at every shape: its answer is exact, with zero tolerance.
            for shape in result["shapes"]:
                probes = [case for case in result["cases"] if case[0] == shape and case[2] == PROBE]
                assert probes and all(case[3] is False for case in probes), f"{name} probe at {shape}: {probes}"


@pytest.mark.skipif(HAS_GPU, reason="the interpreter tier; the GPU tier runs test_known_wrong_rungs_fail_on_the_gpu")
def test_known_wrong_rungs_fail_at_every_checked_shape_in_the_interpreter():
    _assert_rejected_everywhere(_check_known_wrong(INTERPRETER_MAX_ELEMENTS, {**os.environ, "TRITON_INTERPRET": "1"}))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_known_wrong_rungs_fail_on_the_gpu():
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    _assert_rejected_everywhere(_check_known_wrong(None, environment))


# ------------------------------------------------------------------------------------------ probes


@pytest.mark.parametrize("shape", [1, 31, 4097, (1823, 781), 2**22])
def test_reduce_sum_probe_is_exact_in_float32_in_any_order(shape):
    """Every partial sum is an integer below 2^24: float32 sums in index order and reversed give the
    float64 answer exactly, and dropping any one element changes it."""
    import torch
    spec = load_op("reduce_sum").spec
    (x,), tolerance = probe_inputs(spec, shape, "float32", seed=7, device="cpu")
    assert tolerance == (0.0, 0.0)
    flat = x.flatten()
    exact = float(flat.to(torch.float64).sum())
    assert float(torch.cumsum(flat, 0)[-1]) == exact == float(torch.cumsum(flat.flip(0), 0)[-1])
    assert flat[0] == 2**12 and (flat.numel() == 1 or flat[-1] == 2**13)
    assert bool((flat >= 0).all()) and exact < 2**24


def test_reduce_sum_tolerance_is_tight_on_random_inputs_and_never_looser_than_the_spec():
    """At 1823x781 normal inputs the spec allowed ~320 (a dropped 256-element block, ~16, passed);
    the bound now allows a few units, and near_overflow inputs keep the spec's own."""
    spec = load_op("reduce_sum").spec
    tighter = tolerance_override(spec)
    for distribution in ("normal", "large", "near_overflow"):
        inputs = spec.make_inputs((1823, 781), "float32", seed=3, distribution=distribution)
        ours, theirs = tighter(inputs, "float32")[1], spec.tolerance(inputs, "float32")[1]
        assert ours <= theirs
        if distribution == "normal":
            assert ours < 8 and theirs > 100, (ours, theirs)


# ------------------------------------------------------------------------------------------ layouts


_LAYOUT_SCRIPT = """
import json
import torch
from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.rung import LayoutError
out = {}
for name, rung_id, make in (("vector_add", "t01_tile_1024", lambda x: (x[::2], x[1::2])),
                            ("reduce_sum", "t01_two_stage", lambda x: (x[::2],))):
    op = load_op(name)
    built = op.rung(rung_id).build()
    try:
        built(*make(torch.randn(2000)))
        out[name] = "no error"
    except LayoutError as error:
        out[name] = str(error)
    report = check_rung(op.rung(rung_id), op, shapes=[1000, (37, 29)], dtypes=["float32"], built=built)
    out[name + "/check"] = [report.status, report.evidence()["layouts_refused"]]
print(json.dumps(out))
"""


@pytest.mark.skipif(HAS_GPU, reason="the interpreter tier")
def test_triton_rungs_refuse_strided_inputs_by_name_before_launch():
    """Issue 19: t01_tile_1024 and t01_two_stage returned wrong answers on x[::2]; now the call refuses,
    naming the rung, the input and its strides, and the checker counts that refusal as correct."""
    done = subprocess.run([sys.executable, "-c", _LAYOUT_SCRIPT], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "vector_add/t01_tile_1024: a has shape (1000,) and strides (2,)" in result["vector_add"]
    assert "reduce_sum/t01_two_stage: x has shape (1000,) and strides (2,)" in result["reduce_sum"]
    assert result["vector_add/check"] == ["pass", sorted(LAYOUTS)]
    assert result["reduce_sum/check"] == ["pass", sorted(LAYOUTS)]


def test_a_rung_that_reads_strides_wrong_fails_the_layout_cases():
    """A rung that says it reads any layout (torch route) but ignores the strides is caught by the
    layout cases, while torch.add itself passes them."""
    import torch

    from hello_gpu.ops import check_rung
    from hello_gpu.ops.rung import BuiltRung

    op = load_op("vector_add")
    rung = op.rung("v00_torch")

    def ignores_strides(a, b, out=None):
        flat = lambda t: torch.as_strided(t, (t.numel(),), (1,)).reshape(t.shape)   # noqa: E731
        result = flat(a) + flat(b)
        return result if out is None else out.copy_(result)

    honest = check_rung(rung, op, shapes=[(37, 29)], dtypes=["float32"], device="cpu")
    assert honest.passed and honest.evidence()["layouts_refused"] == []
    wrong = check_rung(rung, op, shapes=[(37, 29)], dtypes=["float32"], device="cpu",
                       built=BuiltRung(rung, ignores_strides, True, any_layout=True))
    failed = {case.distribution for case in wrong.failures}
    assert failed == set(LAYOUTS), [(c.distribution, c.reason) for c in wrong.failures]
    assert shape_label((37, 29)) in wrong.reason
