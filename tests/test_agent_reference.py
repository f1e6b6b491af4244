"""The hand-written rung an agent run is measured against: read from the committed H200 ladder records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hello_gpu.agent.reference import best_in_record, hand_written_best
from hello_gpu.ops import load_op

RECORDS = Path(__file__).resolve().parents[1] / "records"


@pytest.mark.parametrize("op_name, route, dtype, shape", [
    ("vector_add", "hip", "float32", "2^28"), ("reduce_sum", "triton", "float32", "2^28"),
    ("softmax", "hip", "float32", "8192x8192"), ("rms_norm", "triton", "bfloat16", "8192x4096")])
def test_the_reference_is_the_routes_fastest_rung_in_the_record(op_name, route, dtype, shape):
    op = load_op(op_name)
    rung, why = hand_written_best(op, route, dtype, shape, "nvidia-h200", RECORDS)
    record = json.loads((RECORDS / "nvidia-h200" / f"{op_name}.{dtype}.json").read_text(encoding="utf-8"))
    speeds = {e["variant"]: e["speedups"]["v00_torch"]["value"] for e in record["entries"]
              if e["shape"] == shape and "v00_torch" in (e.get("speedups") or {})
              and op.rung(e["variant"]).route == route and not op.rung(e["variant"]).is_baseline}
    assert speeds and rung == max(speeds, key=speeds.get)
    assert op.rung(rung).route == route and f"{op_name}.{dtype}.json" in why


def test_baselines_and_other_routes_are_never_the_reference():
    record = {"entries": [
        {"variant": "v00_torch_compile", "shape": "4", "speedups": {"v00_torch": {"value": 9.0}}},
        {"variant": "t01", "shape": "4", "speedups": {"v00_torch": {"value": 1.5}}},
        {"variant": "t02", "shape": "8", "speedups": {"v00_torch": {"value": 3.0}}},
        {"variant": "t03", "shape": "4", "speedups": {"v00_torch": {"value": 1.2}}}]}
    assert best_in_record(record, {"t01", "t02", "t03"}, "4") == "t01"
    assert best_in_record(record, {"t02"}, "4") is None


def test_without_a_record_the_last_rung_of_the_route_is_the_reference(tmp_path):
    op = load_op("softmax")
    rung, why = hand_written_best(op, "triton", "float32", "8192x8192", "some-other-gpu", tmp_path)
    assert rung == [r.id for r in op.rungs if r.route == "triton" and not r.is_baseline][-1]
    assert "no some-other-gpu record" in why


def test_a_resumed_run_meets_the_rungs_added_since_it_started(tmp_path):
    """The reduce_sum Triton run of the H200 started when t04 was the fastest Triton rung; t05 came
    later. Its final comparison now picks t05 from today's record, unless a rung was named."""
    import shutil

    from hello_gpu.agent.loop import NAMED_REFERENCE, _current_reference
    from hello_gpu.agent.store import CandidateStore
    run_dir = tmp_path / "run"
    shutil.copytree(RECORDS / "nvidia-h200" / "agent" / "reduce_sum.triton", run_dir)
    with CandidateStore(run_dir) as store:
        assert store.task().extra["reference"]["rung"] == "t04_wide_finish"
        expected, _ = hand_written_best(load_op("reduce_sum"), "triton", "float32", "2^28", "nvidia-h200", RECORDS)
        assert expected == "t05_wide_tiles"
        assert _current_reference(store)["rung"] == expected
    with CandidateStore(run_dir) as store:                  # a named rung is kept
        task = store.run_info()["task"]
        task["extra"]["reference"] = {"rung": "t03_single_pass_atomic", "why": NAMED_REFERENCE}
        store.connection.execute("UPDATE run SET task = ? WHERE id = 1", (json.dumps(task),))
        assert _current_reference(store)["rung"] == "t03_single_pass_atomic"
