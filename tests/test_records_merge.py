"""A ladder run split over several calls, bounded in time and traced as it goes (CPU tier, real record files).

- merge: a run's record merged into the record it replaces (``merge_ladder_records``): the earlier run's
  shapes it does not measure are kept whole while every file they ran is unchanged, dropped whole otherwise,
  and the result passes ``records check``; ``extra.runs`` says which run measured which shape;
- time budget: a slow call is timed fewer times, and says so (``measure_limits``, ``compare_limits``);
- progress: one line a rung and shape as it finishes (``LadderLog``).

Timings here are the CPU's wall clock on the fixture operator toy_add (tests/fixtures/ops), its Triton rung in
the interpreter; the GPU tier runs ``run_ladder`` twice into one record directory.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from hello_gpu.bench.records import check_records, validate_record, write_record
from hello_gpu.ops import load_op
from hello_gpu.ops.ladder import (COMPARE_CALLS_A_SIDE, MEASURE_CALLS, LadderLog, LadderResult, _time_shape,
                                  check_ladder, compare_limits, ladder_record, measure_limits, merge_ladder_records)
from hello_gpu.ops.sources import record_rules
from hello_gpu.runtime.device import gpu_vendor

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "ops"
DEVICE = {"slug": "cpu-test", "name": "CPU (test)", "arch": "x86_64"}
NAME = "toy_add.float32"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository of its own (records name files relative to its root) holding a copy of toy_add."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    (tmp_path / "pyproject.toml").write_text("")
    shutil.copytree(FIXTURES / "toy_add", tmp_path / "ops" / "toy_add")
    return tmp_path


def _run(repo: Path, shapes, rung_ids=("v00_torch", "t01_block_per_program"), log=None) -> dict:
    """A real (wall-clock) ladder run of toy_add at ``shapes``: its record, as run_ladder makes it."""
    op = load_op("toy_add", repo / "ops")
    rungs = [op.rung(rung_id) for rung_id in rung_ids]
    built = {rung.id: rung.build() for rung in rungs}
    checks = check_ladder(op, rungs=rungs, shapes=[31], dtypes=["float32"], built=built)
    result = LadderResult(op, "float32", list(shapes), checks)
    for shape in shapes:
        _time_shape(op, "float32", shape, rungs, built, result, lambda: None, device="cpu", seconds=0.1, log=log)
    return ladder_record(result, device=dict(DEVICE), name=NAME)


def _write(record: dict, repo: Path) -> Path:
    return write_record(record, repo / "records", repo_root=repo, rules=record_rules(repo / "ops"))


def _merge(previous: dict, current: dict, repo: Path):
    return merge_ladder_records(previous, current, repo, record_rules(repo / "ops"))


def _shapes(record: dict) -> list[str]:
    return sorted({entry["shape"] for entry in record["entries"]}, key=lambda s: int(s.split("^")[-1]))


def test_a_second_run_replaces_its_shapes_keeps_the_others_and_passes_records_check(repo):
    first = _run(repo, [2**10, 2**12])
    path = _write(first, repo)
    second = _run(repo, [2**12, 2**14])
    merged, dropped = _merge(json.loads(path.read_text()), second, repo)
    assert dropped == []
    assert merged["extra"]["shapes"] == ["2^10", "2^12", "2^14"] and _shapes(merged) == ["2^10", "2^12", "2^14"]
    by_key = {(entry["variant"], entry["shape"]): entry for entry in merged["entries"]}
    firsts = {(entry["variant"], entry["shape"]): entry for entry in first["entries"]}
    seconds = {(entry["variant"], entry["shape"]): entry for entry in second["entries"]}
    for key, entry in by_key.items():           # each shape's entries all from one run: its speedups pair them
        assert entry == (firsts[key] if key[1] == "2^10" else seconds[key]), key
    assert merged["environment"] == second["environment"] and merged["created"] == second["created"]
    runs = merged["extra"]["runs"]
    assert [run["shapes"] for run in runs] == [["2^10"], ["2^12", "2^14"]]
    assert [run["created"] for run in runs] == [first["created"], second["created"]]
    assert all(run["commit"] == first["environment"]["git"]["commit"] for run in runs)
    assert validate_record(merged) == []
    _write(merged, repo)
    report = check_records(repo, record_rules(repo / "ops"))
    assert report.ok and report.ok_count == 1, (report.errors, report.stale)
    # A third run over every shape replaces them all: a plain record again, with no runs list.
    third = _run(repo, [2**10, 2**12, 2**14])
    again, dropped = _merge(merged, third, repo)
    assert again is third and dropped == [] and "runs" not in again["extra"]


def test_a_shape_with_a_changed_file_is_dropped_whole_and_said(repo):
    first = _run(repo, [2**10, 2**12])
    _write(first, repo)
    rung = repo / "ops" / "toy_add" / "t01_block_per_program.py"
    rung.write_text(rung.read_text() + "\n# edited after the first run\n")
    second = _run(repo, [2**14])
    merged, dropped = _merge(first, second, repo)
    assert merged is second and "runs" not in merged["extra"]
    assert len(dropped) == 2 and all("t01_block_per_program" in line and "changed since it was measured" in line
                                     for line in dropped), dropped
    assert dropped[0].startswith("previous record, shape 2^10 dropped")
    _write(merged, repo)
    assert check_records(repo, record_rules(repo / "ops")).ok


def test_a_shape_whose_baseline_alone_is_stale_is_dropped_with_its_candidates(repo):
    """Keeping t01's entry at 2^6 without v00_torch's would leave a speedup naming no baseline of the record."""
    first = _run(repo, [2**10])
    (repo / "ops" / "toy_add" / "v00_torch.py").write_text((repo / "ops" / "toy_add" / "v00_torch.py").read_text()
                                                           + "\n# edited\n")
    second = _run(repo, [2**12])
    merged, dropped = _merge(first, second, repo)
    assert _shapes(merged) == ["2^12"] and len(dropped) == 1 and "v00_torch" in dropped[0]


@pytest.mark.parametrize("change, why", [
    (lambda r: r.update(name="toy_add.bfloat16"), "its name differs"),
    (lambda r: r["extra"].update(route="triton"), "its route differs"),
    (lambda r: r["device"].update(slug="another-gpu"), "its device differs"),
    (lambda r: r["entries"][0].update(timing={}), "entries[0].timing"),
])
def test_a_record_of_something_else_is_replaced_not_merged(repo, change, why):
    first = _run(repo, [2**10])
    change(first)
    second = _run(repo, [2**12])
    merged, dropped = _merge(first, second, repo)
    assert merged is second and len(dropped) == 1 and why in dropped[0], dropped


def test_runs_of_an_already_merged_record_keep_only_their_kept_shapes(repo):
    first = _run(repo, [2**10, 2**12])
    second = _run(repo, [2**12, 2**14])
    merged, _ = _merge(first, second, repo)
    third = _run(repo, [2**10])
    again, dropped = _merge(merged, third, repo)
    assert dropped == [] and [run["shapes"] for run in again["extra"]["runs"]] == [["2^12", "2^14"], ["2^10"]]
    assert again["extra"]["shapes"] == ["2^10", "2^12", "2^14"] and validate_record(again) == []


# ------------------------------------------------------------------------------------------ time budget


def test_the_budget_leaves_fast_calls_alone_and_cuts_slow_ones_to_what_fits():
    limits = {"cache": "cold", "max_seconds": 1.0}
    assert measure_limits(limits, 1e-3, 1.0) == (limits, None)
    assert measure_limits(limits, 1.0, None) == (limits, None)              # no budget: the bench defaults
    assert MEASURE_CALLS == 26 and COMPARE_CALLS_A_SIDE == 23
    arguments, note = measure_limits(limits, 0.137, 1.0)                    # attention v02 at 4x32x32x4096^2x128
    assert arguments == {**limits, "max_warmup_seconds": 0.0, "min_repeats": 6, "max_repeats": 6}
    assert "one call takes ~137 ms, so 6 timed calls after one untimed call" in note
    assert measure_limits(limits, 5.0, 1.0)[0]["min_repeats"] == 3          # however slow, 3 timed calls
    assert compare_limits(limits, 0.02, 1.0) is limits
    assert compare_limits(limits, 0.14, 1.0) == {**limits, "min_rounds": 3, "max_rounds": 3}
    assert compare_limits(limits, 0.05, 1.0) == {**limits, "min_rounds": 8, "max_rounds": 8}


SLOW_PEER = '''"""A peer that takes 40 ms a call (a stand-in for a naive rung at a large shape).

parent: none
change: torch.add after a 40 ms sleep
hypothesis: 40 ms a call
deterministic: yes, torch.add
package: torch
"""

import time

import torch


def run(a, b):
    time.sleep(0.04)
    return torch.add(a, b)
'''


def test_a_slow_rung_is_timed_within_the_budget_and_each_rung_is_logged_as_it_finishes(repo, monkeypatch):
    from hello_gpu.ops.rung import Rung
    gpu_rule = Rung.skip_reason          # this peer runs on the CPU: let it past the no-GPU rule for peers
    monkeypatch.setattr(Rung, "skip_reason", lambda rung: None if rung.route == "peer" else gpu_rule(rung))
    (repo / "ops" / "toy_add" / "peer_slow.py").write_text(SLOW_PEER)
    op = load_op("toy_add", repo / "ops")
    rungs = [op.rung("v00_torch"), op.rung("peer_slow")]
    built = {rung.id: rung.build() for rung in rungs}
    result = LadderResult(op, "float32", [2**10], {})
    stream = io.StringIO()
    log = LadderLog("toy_add", "float32", stream)
    _time_shape(op, "float32", 2**10, rungs, built, result, lambda: None, device="cpu", seconds=0.3, log=log)
    assert result.not_timed == [], result.not_timed
    slow = {timed.rung.id: timed for timed in result.timed}["peer_slow"]
    # ~41 ms a call: int(0.3 / 0.041) - 1 = 6 timed calls (5 if the estimate came out above 43 ms).
    assert slow.measurement.summary.count in (5, 6) and slow.measurement.stopped_by == "max repeats"
    assert any(note.startswith("time budget 0.3 s a measurement") for note in slow.measurement.notes)
    assert slow.vs_torch.speedup.pairs == 3 and slow.vs_torch.verdict == "slower"
    assert slow.call_time.summary.count in (5, 6)
    lines = stream.getvalue().splitlines()
    assert all(line.startswith("[ladder toy_add float32 +") for line in lines)
    assert [line.split("] ")[1].split(":")[0] for line in lines] == ["2^10", "2^10 v00_torch", "2^10 peer_slow",
                                                                     "2^10"]
    assert "2^10 peer_slow: checked" in lines[2] and "timed" in lines[2] and "compared" in lines[2]
    assert "shape done in" in lines[3]


# ------------------------------------------------------------------------------------------ GPU tier


@pytest.mark.gpu
@pytest.mark.skipif(gpu_vendor() is None, reason="needs a GPU")
def test_two_ladder_runs_into_one_directory_merge_and_a_killed_run_keeps_its_finished_shapes(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from hello_gpu.ops import ladder
    op = load_op("toy_add", FIXTURES)
    stream = io.StringIO()
    first = ladder.run_ladder(op, shapes=[2**10, 2**12], record_dir=tmp_path, progress=False,
                              log=LadderLog("toy_add", "float32", stream))
    assert "record written after 2^10" in stream.getvalue()
    real = ladder._time_shape

    def killed_at_the_second(op, dtype, shape, *args, **kwargs):
        if shape == 2**16:
            raise KeyboardInterrupt("a time limit")
        return real(op, dtype, shape, *args, **kwargs)
    monkeypatch.setattr(ladder, "_time_shape", killed_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        ladder.run_ladder(op, shapes=[2**14, 2**16], record_dir=tmp_path, progress=False,
                          log=LadderLog("toy_add", "float32", stream))
    record = json.loads(first.record_path.read_text())
    assert record["extra"]["shapes"] == ["2^10", "2^12", "2^14"] and validate_record(record) == []
    assert [run["shapes"] for run in record["extra"]["runs"]] == [["2^10", "2^12"], ["2^14"]]
