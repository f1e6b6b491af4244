"""GPU tier for the field's real problems and the roof (issue 17, parts 5 and 8; ``pytest -m gpu``).

At the benchmark's sizes (tests/fixtures/kernelbench): softmax over 4096 x 393216 float32 (6.4 GB) from
our own softmax/t02_online_tiles.py, RMSNorm over dim 1 of 112 x 64 x 512 x 512 (7.5 GB), a sum over
dim 1 of 128 x 4096 x 4095 (8.6 GB), a 4096^3 matmul. For each: the start and the baseline pass the
checker within its stated memory bound (ops.checking.memory_bound: 3 x the problem's footprint + 1 GiB,
measured with the caching allocator's peak), then the agent runs the problem end to end (start
evaluated: compile, check, bench, compare; report written). With HG_KERNELBENCH_REPORTS set, each
run's report.md and the checker's peak memory are copied there for the records.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path

import pytest
import torch

from hello_gpu.agent.kernelbench import ProblemSpec, write_operator
from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.checking import memory_bound

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]

HERE = Path(__file__).resolve().parent.parent
PROBLEMS = HERE / "fixtures" / "kernelbench"
CASES = {
    "softmax": ("level1_23_softmax.py", HERE.parent / "src" / "hello_gpu" / "ops" / "softmax" / "t02_online_tiles.py"),
    "rms_norm": ("level1_36_rms_norm.py", PROBLEMS / "t01_rms_norm_dim1.py"),
    "sum": ("level1_47_sum_reduction.py", PROBLEMS / "t01_sum_dim1.py"),
    "matmul": ("level1_1_square_matmul.py", PROBLEMS / "t01_square_matmul.py"),
}
# Full-size steps: a check is 6 cases of GBs each, and the anti-cheat evidence runs more.
TIMEOUTS = {"compile": 300, "check": 600, "bench": 300, "compare": 300, "analyze": 300,
            "bench_seconds": 1.0, "compare_seconds": 2.0, "counters": False}


def footprint(spec: ProblemSpec, dtype: str = "float32") -> int:
    size = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    return size * (sum(math.prod(s) for s in spec.input_shapes) + sum(math.prod(s) for s in spec.parameter_shapes)
                   + spec.output_numel)


def _report_dir() -> Path | None:
    folder = os.environ.get("HG_KERNELBENCH_REPORTS")
    return Path(folder) if folder else None


@pytest.mark.parametrize("name", list(CASES))
def test_the_checker_stays_within_its_memory_bound_at_full_size(name, tmp_path):
    problem, start = CASES[name]
    write_operator(PROBLEMS / problem, start, tmp_path)
    op = load_op(Path(problem).stem, root=tmp_path)
    bound = memory_bound(footprint(op.spec._problem))
    peaks = {}
    for rung_id in ("v00_torch", start.stem):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        report = check_rung(op.rung(rung_id), op, seeds=[1, 2])
        peaks[rung_id] = {"peak_bytes": torch.cuda.max_memory_allocated() - before, "bound_bytes": bound,
                          "seconds": time.perf_counter() - started, "passed": report.passed, "reason": report.reason}
        assert report.passed, f"{rung_id}: {report.reason}"
        # The baseline (PyTorch's own op) allocates only its output: the rest is the checker's.
        assert peaks[rung_id]["peak_bytes"] <= bound, peaks
    print(json.dumps({name: peaks}, indent=1))
    if _report_dir():
        _report_dir().mkdir(parents=True, exist_ok=True)
        (_report_dir() / f"{name}.checker-memory.json").write_text(json.dumps(peaks, indent=1))


@pytest.mark.parametrize("name", list(CASES))
def test_each_problem_runs_end_to_end_through_the_agent_at_full_size(name, tmp_path):
    from hello_gpu.agent.loop import run_agent
    from hello_gpu.agent.store import CandidateStore
    problem, start = CASES[name]
    run_dir = tmp_path / "run"
    task, _ = write_operator(PROBLEMS / problem, start, run_dir / "ops")
    started = time.perf_counter()
    result = run_agent(task, "scripted", run_dir, rounds=1, patience=1, seed=0, timeouts=TIMEOUTS)
    with CandidateStore(run_dir) as store:
        first = store.get(result.start_id)
        candidates = store.list()
    assert first.state == "accepted", first.reason
    assert first.results["check"]["passed"]
    bench = first.results["bench"].get("raw") or {}
    assert bench["clock"] == "device-events" and bench["suspect"] is None, bench
    assert (run_dir / "report.md").is_file()
    if _report_dir():
        _report_dir().mkdir(parents=True, exist_ok=True)
        shutil.copy(run_dir / "report.md", _report_dir() / f"{name}.report.md")
        (_report_dir() / f"{name}.summary.json").write_text(json.dumps(
            {"seconds": time.perf_counter() - started, "stop_reason": result.stop_reason,
             "candidates": [{"id": c.id, "state": c.state, "reason": c.reason} for c in candidates],
             "bench": {key: bench.get(key) for key in ("median_s", "gb_per_s", "tflop_per_s", "suspect", "notes")}},
            indent=1, default=str))


def test_the_roof_is_armed_on_this_gpu_without_any_cached_ceilings(tmp_path, monkeypatch):
    from hello_gpu.bench import Work, measure
    from hello_gpu.bench.roof import current_roof
    monkeypatch.setenv("HG_CACHE_DIR", str(tmp_path / "empty-cache" / "kernels"))     # no ceilings cached
    work = Work(read_bytes=2**30, written_bytes=2**30)
    roof = current_roof(work)
    assert roof.bandwidth is not None and "datasheet" in roof.bandwidth_source, roof
    source = torch.randn(2**28, device="cuda")
    target = torch.empty_like(source)
    honest = measure(lambda: target.copy_(source), work=Work(read_bytes=source.nbytes, written_bytes=source.nbytes))
    assert honest.rates.suspect is None and honest.rates.bound, honest
    # A copy that claims twice the bytes it moved is over the datasheet's bound.
    claimed = measure(lambda: target.copy_(source), work=Work(read_bytes=2 * source.nbytes, written_bytes=2 * source.nbytes))
    assert claimed.rates.suspect and "datasheet" in claimed.rates.suspect, claimed.rates


def test_a_zero_block_launch_is_counted_not_silent():
    import hello_gpu as hg
    from hello_gpu.runtime import empty_launches
    add = hg.hip("""
__global__ void add_for_empty_grid(const float* a, const float* b, float* out, int n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}""")
    a, b = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
    out = torch.full_like(a, float("nan"))
    before = empty_launches().get("add_for_empty_grid", 0)
    add(a, b, out)
    assert empty_launches().get("add_for_empty_grid", 0) == before
    add(a, b, out, n=0)                     # an empty grid: nothing runs
    add(a, b, out, n=0)                     # the same call again, through its call plan
    torch.cuda.synchronize()
    assert empty_launches()["add_for_empty_grid"] == before + 2
