"""Every shipped rung of every operator, parametrised over op x rung x dtype (x shape in the check).

CPU tier: each Triton rung is checked in the interpreter (``TRITON_INTERPRET=1``) on the edge shapes
small enough for it, every distribution and three fresh seeds; each HIP rung compiles for sm_90 with
NVRTC for every dtype it declares, with no register spills; every header is complete. GPU tier
(``-m gpu``): every rung is checked on every edge shape and dtype on the device itself.
"""

from __future__ import annotations

import pytest

from hello_gpu.ops import check_rung, list_ops, load_op
from hello_gpu.ops.checking import INTERPRETER_BFLOAT16, INTERPRETER_MAX_ELEMENTS, STRIDED, TRANSPOSED
from hello_gpu.ops.probes import PROBE
from hello_gpu.ops.shapes import shape_label
from hello_gpu.runtime.compile_gate import NO_PTXAS_REPORT
from hello_gpu.runtime.compiler import ptxas_section
from hello_gpu.runtime.compiler import cache_dir
from hello_gpu.runtime.resources import parse_ptxas_report
from hello_gpu.runtime.device import gpu_vendor

HAS_GPU = gpu_vendor() is not None


def _cases(route: str | None = None, with_dtype: bool = True):
    """(op name, rung id[, dtype]) for every shipped rung of ``route`` (None: every route)."""
    cases = []
    for name in list_ops():
        op = load_op(name)
        for rung in op.rungs:
            if route is not None and rung.route != route:
                continue
            if not with_dtype:
                cases.append(pytest.param(name, rung.id, id=f"{name}-{rung.id}"))
                continue
            for dtype in op.spec.DTYPES:
                if rung.supports(dtype):
                    cases.append(pytest.param(name, rung.id, dtype, id=f"{name}-{rung.id}-{dtype}"))
    return cases


def test_every_shipped_operator_has_a_ladder():
    names = list_ops()
    assert {"vector_add", "reduce_sum"} <= set(names)
    for name in names:
        op = load_op(name)
        if not op.rungs:
            continue               # a spec waiting for its rungs (they land with their GPU records)
        routes = {rung.route for rung in op.rungs}
        assert {"torch", "hip", "triton"} <= routes, f"{name} lacks a route: {routes}"


def _launchers():
    """(op name, rung id) of every HIP rung that has a Python launcher (companion)."""
    return [pytest.param(name, rung.id, id=f"{name}-{rung.id}") for name in list_ops()
            for rung in load_op(name).rungs if rung.route == "hip" and rung.companion is not None]


@pytest.mark.parametrize("name, rung_id", _launchers())
def test_hip_launcher_imports_and_defines_run(name, rung_id):
    """Every launcher imports on a machine without a GPU (the checks it shares with its ladder resolve)."""
    from hello_gpu.ops.rung import load_module
    rung = load_op(name).rung(rung_id)
    assert callable(load_module(rung.companion, f"test_{name}_{rung.companion.stem}").run)


@pytest.mark.parametrize("rung_id", [rung.id for rung in load_op("softmax").rungs
                                     if rung.route == "hip" and rung.companion is not None])
def test_softmax_launchers_check_input_and_output(rung_id):
    """The checks v02-v08 share with v01 refuse what the kernels cannot read, by name, before any kernel
    is touched: the kernel argument is never reached, so None stands in for it."""
    import torch

    from hello_gpu.ops.rung import load_module
    rung = load_op("softmax").rung(rung_id)
    run = load_module(rung.companion, f"test_softmax_{rung.companion.stem}").run
    with pytest.raises(ValueError, match="2-D"):
        run(None, torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="contiguous input"):
        run(None, torch.randn(8, 4).t())
    with pytest.raises(ValueError, match="out must be a contiguous"):
        run(None, torch.randn(4, 8), out=torch.empty(4, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="out must be a contiguous"):
        run(None, torch.randn(4, 8), out=torch.empty(8, 4).t())
    empty = run(None, torch.randn(0, 5))                 # no rows: nothing to launch, an empty result
    assert empty.shape == (0, 5)


@pytest.mark.parametrize("name, rung_id", _cases(with_dtype=False))
def test_header_states_change_hypothesis_prediction_and_determinism(name, rung_id):
    rung = load_op(name).rung(rung_id)
    header = rung.metadata
    assert header.change and header.hypothesis
    if not rung.is_baseline:            # torch and the peers are the yardsticks
        assert header.prediction, f"{rung.path}: a rung states its prediction before it is measured"
        assert header.outcome, f"{rung.path}: outcome (the measurement, or 'not measured yet')"
    assert header.deterministic_text, f"{rung.path}: say whether it repeats bit for bit, and why"
    assert rung.parent is not None or header.parent_id is None


@pytest.mark.parametrize("name, rung_id, dtype", _cases("hip"))
def test_hip_rung_compiles_for_sm_90_without_spills(name, rung_id, dtype):
    rung = load_op(name).rung(rung_id)
    if rung.metadata.target and rung.metadata.target[0] != "nvidia":
        # An AMD-only HIP rung (matmul v15_rdna4_wmma: gfx12 builtins) has no NVIDIA build; compile-check
        # compiles it for its declared target (tests/test_compile_gate.py, tests/test_matmul_wmma_layout.py).
        pytest.skip(f"{rung.path.name} targets {' '.join(filter(None, rung.metadata.target))}: no sm_90 build")
    binary = rung.kernel(arch="sm_90", dtype=dtype).compile()
    assert binary.arch == "sm_90" and binary.image
    section = ptxas_section(binary.log, binary.lowered_name)
    # Without ptxas's report the spills are unknown: that is a failure, never a pass that checked nothing.
    assert "Used " in section, (f"{rung.path} {dtype}: spills not checked, {NO_PTXAS_REPORT}; or a binary "
                                f"cached that way: clear hello-gpu's kernel cache ({cache_dir()})")
    report = parse_ptxas_report(section)
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, f"{rung.path} {dtype}: {report}"


# Run in a child process: the interpreter is chosen when @triton.jit decorates a function, and
# triton.language's own helpers (tl.sum is a @triton.jit function) are decorated when triton is first
# imported. A test process that imported triton earlier (any other test may) would mix a compiled
# tl.sum into interpreted kernels ("Cannot call @triton.jit'd outside of the scope of a kernel").
_INTERPRETER_SCRIPT = """
import json, sys
from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.shapes import numel
name, max_elements = sys.argv[1], int(sys.argv[2])
op = load_op(name)
shapes = [s for s in op.spec.EDGE_SHAPES if numel(s) <= max_elements]
results = {}
for rung in op.rungs:
    if rung.route != "triton":
        continue
    for dtype in op.spec.DTYPES:
        report = check_rung(rung, op, shapes=shapes, dtypes=[dtype], device="cpu")
        results[f"{rung.id}/{dtype}"] = {
            "status": report.status, "reason": report.reason,
            "skips": sorted({case.reason for case in report.cases if case.skipped}),
            "distributions": sorted({case.distribution for case in report.ran}),
            "seeds": sorted({case.seed for case in report.ran}), "cases": len(report.ran)}
print(json.dumps(results))
"""


def _interpreter_child(name: str) -> dict:
    """Every Triton rung of ``name`` checked in the interpreter, in one child process."""
    import json
    import os
    import subprocess
    import sys
    environment = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", _INTERPRETER_SCRIPT, name, str(INTERPRETER_MAX_ELEMENTS)],
                          capture_output=True, text=True, env=environment, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def interpreter_checks(side_by_side):
    """One child per operator, all started at the first test that asks, two at a time, the operator with
    the most Triton rungs first: softmax's child alone is ~50 s of one core, the others' 3-20 s."""
    def triton_rungs(name: str) -> int:
        return sum(rung.route == "triton" for rung in load_op(name).rungs)
    return {name: side_by_side(_interpreter_child, name) for name in sorted(list_ops(), key=triton_rungs, reverse=True)}


@pytest.mark.parametrize("name, rung_id, dtype", _cases("triton"))
def test_triton_rung_is_correct_in_the_interpreter(name, rung_id, dtype, interpreter_checks):
    op = load_op(name)
    result = interpreter_checks[name].result()[f"{rung_id}/{dtype}"]
    if dtype == "bfloat16":
        assert result["skips"] == [INTERPRETER_BFLOAT16]
        pytest.skip(INTERPRETER_BFLOAT16)
    assert result["status"] == "pass", result["reason"]
    # The spec's distributions, the block probe and the non-contiguous layouts (refused or correct; the
    # transposed one only where a checked shape is 2-D).
    expected = {*getattr(op.spec, "DISTRIBUTIONS", ("normal", "large")), PROBE, STRIDED}
    assert expected <= set(result["distributions"]) <= expected | {TRANSPOSED}
    assert len(result["seeds"]) >= 3


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("name, rung_id, dtype", _cases())
def test_rung_is_correct_on_the_gpu(name, rung_id, dtype, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    op = load_op(name)
    rung = op.rung(rung_id)
    unmet = rung.unmet_requirement()
    if unmet:
        # A rung for another vendor or arch (v15_rdna4_wmma: amd gfx1201 on the H200) is skipped by the
        # checker with this reason, in the records' not_timed too: never run, never a pass.
        skipped = check_rung(rung, op, dtypes=[dtype]).skipped
        assert skipped and unmet in skipped, skipped
        pytest.skip(unmet)
    report = check_rung(rung, op, dtypes=[dtype])
    if report.skipped and rung_id.startswith("peer_"):
        # A peer library (Liger-Kernel) travels as a wheel in .whl/ (scripts/gpu_session.sh); a GPU
        # run without it skips the peer, while our own rungs may never skip.
        pytest.skip(report.skipped)
    assert report.skipped is None, report.skipped
    assert report.passed, report.reason
    assert {case.shape for case in report.ran} >= {shape_label(shape) for shape in op.spec.EDGE_SHAPES}
