"""The agent's loop end to end on the CPU: a scripted test-only policy, the fixture operator toy_add in
the Triton interpreter, every step in the sandbox; then resume after Ctrl-C, the report, the record
and the command line. The real policies live in hello_gpu.agent.policies and are tested there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hello_gpu.agent.candidate import FINAL_STATES, Candidate
from hello_gpu.agent.loop import run_agent
from hello_gpu.agent.store import CandidateStore
from hello_gpu.agent.task import Task

FIXTURES = Path(__file__).parent / "fixtures" / "ops"
TOY = FIXTURES / "toy_add"
FAST = {"bench_seconds": 0.5, "compare_seconds": 1.0, "counters": False}


def toy_task() -> Task:
    return Task("toy_add", "t01_block_per_program", "triton", dtypes=("float32",),
                check_shapes=(1, 31, 1000, (37, 29)), bench_shape=4096, extra={"ops_root": str(FIXTURES)})


class ScriptPolicy:
    """Proposes the given batches of (action, edit of the current best's source), one batch per round,
    and is exhausted after the last. ``interrupt_round``: press Ctrl-C when that round proposes."""

    name = "test-script"

    def __init__(self, batches):
        self.batches = list(batches)
        self.exhausted = False
        self.contexts = []

    def propose(self, context):
        self.contexts.append(context)
        if not self.batches:
            self.exhausted = True
            return []
        batch = self.batches.pop(0)
        if not self.batches:
            self.exhausted = True
        current = context["current"].source
        return [Candidate(None, None, "triton", edit(current), action=action, hypothesis=f"test: {action}")
                for action, edit in batch]


def block(size: int):
    return lambda source: re.sub(r"^BLOCK = \d+$", f"BLOCK = {size}", source, flags=re.M)


def broken(source: str) -> str:
    return source.replace("BLOCK = 4096", "BLOCK = = 4096")


def drops_last(source: str) -> str:
    return source.replace("mask = offsets < n", "mask = offsets < n - 1")


def comment(source: str) -> str:
    return source + "\n# a comment: the same kernel\n"


def _finished_run(run_dir: Path):
    events = []
    policy = ScriptPolicy([[("BLOCK 1024 -> 4096", block(4096))],
                           [("syntax error", broken), ("mask one short", drops_last), ("comment only", comment)]])
    result = run_agent(toy_task(), policy, run_dir, rounds=5, seed=3, patience=3, progress=events.append,
                       timeouts=FAST)
    return run_dir, result, events, policy


@pytest.fixture(scope="module")
def runs(side_by_side, tmp_path_factory):
    """Every agent run of this module, started together (two at a time): each is ~15-60 s of a parent
    waiting on its step's child. A test takes its run's future; ``result()`` raises what the run raised."""
    def folder(name: str) -> Path:
        return tmp_path_factory.mktemp(name) / "run"
    return {"finished": side_by_side(_finished_run, folder("agent")),
            "ctrl_c": side_by_side(_ctrl_c_then_resume, folder("ctrl-c")),
            "one_failure": side_by_side(_one_policy_failure, folder("one-failure")),
            "keeps_failing": side_by_side(_policy_keeps_failing, folder("keeps-failing")),
            "incorrect_start": side_by_side(_incorrect_start, folder("incorrect-start"))}


@pytest.fixture(scope="module")
def finished_run(runs):
    return runs["finished"].result()


def test_the_loop_accepts_the_faster_candidate_and_rejects_the_rest(finished_run):
    run_dir, result, events, policy = finished_run
    assert result.stop_reason.startswith("policy exhausted"), result.stop_reason
    with CandidateStore(run_dir) as store:
        candidates = store.list()
        states = {c.action: c.state for c in candidates}
        assert states == {"start": "accepted", "BLOCK 1024 -> 4096": "accepted", "syntax error": "compile-failed",
                          "mask one short": "incorrect", "comment only": "rejected"}, \
            {c.action: (c.state, c.reason) for c in candidates}
        by_action = {c.action: c for c in candidates}
        assert result.best_id == by_action["BLOCK 1024 -> 4096"].id == store.best_accepted().id
        assert result.start_id == by_action["start"].id
        # the same kernel: rejected by the accept rule; on a noisy CPU its interval may even lie below 1
        assert re.search(r"lower 95% bound [\d.]+ <= [\d.]+ .*: (not faster beyond noise|slower \(the whole interval)",
                         by_action["comment only"].reason), by_action["comment only"].reason
        assert "never written" in by_action["mask one short"].reason
        assert by_action["syntax error"].results["compile"]["errors"][0]["line"] is not None
        # every candidate of round 2 was compared with the best of round 1, and its parent is that best
        for action in ("syntax error", "mask one short", "comment only"):
            assert by_action[action].parent_id == result.best_id
        assert by_action["comment only"].results["compare"]["baseline_id"] == result.best_id
        tools_run = [r["tool"] for r in store.results(by_action["BLOCK 1024 -> 4096"].id)]
        assert tools_run == ["compile", "check", "compare", "bench", "accept", "analyze"]
        assert store.run_info()["stop_reason"] == result.stop_reason
    # the policy saw the new best and its analysis in round 2
    assert policy.contexts[1]["current"].id == result.best_id
    assert policy.contexts[1]["analysis"]["bound"] == "unknown"
    assert policy.contexts[1]["round"] == 2 and policy.contexts[1]["seed"] == 3
    assert [e["event"] for e in events][-3:] == ["stop", "final", "report"]


def test_the_final_remeasurement_is_paired_and_fresh(finished_run):
    run_dir, result, _, _ = finished_run
    final = result.final
    assert final["remeasured"] > 1.2 and final["pairs"] >= 5
    assert final["ci95"][0] <= final["remeasured"] <= final["ci95"][1]
    assert final["claimed"] > 1.2 and final["agree"] in (True, False)
    assert final["clock"] == "wall"


def test_the_report_has_every_part(finished_run):
    run_dir, result, _, _ = finished_run
    markdown = (run_dir / "report.md").read_text(encoding="utf-8")
    data = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    assert (run_dir / "search.png").stat().st_size > 1000
    assert len(data["candidates"]) == 5 and data["best_id"] == result.best_id
    assert "-BLOCK = 1024" in data["diff"] and "+BLOCK = 4096" in data["diff"]
    assert data["rerun"].startswith("hello-gpu agent toy_add --from t01_block_per_program --route triton")
    assert " --no-counters" in data["rerun"]                      # the run's analysis skipped the profiler
    assert data["environment"]["python"] and "git" in data["environment"]
    assert len(data["check_seeds"]) >= 3
    assert "agree within 3%" in data["agreement"] or "DO NOT agree" in data["agreement"]
    for entry in data["candidates"]:
        assert len(entry["source_sha256"]) == 64
        assert f"### Candidate {entry['id']}: {entry['state']}" in markdown
    assert "claimed vs re-measured" in markdown and "wall clock on the CPU" in markdown


def test_the_record_needs_a_gpu_unless_told(finished_run, tmp_path):
    from hello_gpu.agent import tools
    from hello_gpu.bench.records import RecordError, validate_record
    run_dir, result, _, _ = finished_run
    with pytest.raises(RecordError, match="not timed on a GPU"):
        tools.record(run_dir, directory=tmp_path)
    path = tools.record(run_dir, directory=tmp_path, allow_cpu=True)
    record = json.loads(path.read_text(encoding="utf-8"))
    assert validate_record(record) == []
    assert record["kind"] == "agent" and [e["role"] for e in record["entries"]] == ["baseline", "candidate"]
    assert record["entries"][1]["speedups"]["t01_block_per_program"]["value"] == pytest.approx(result.final["remeasured"])


def test_cli_report_rerenders(finished_run, tmp_path):
    from hello_gpu.cli import main
    run_dir, _, _, _ = finished_run
    (run_dir / "report.md").unlink()
    assert main(["agent", "report", str(run_dir)]) == 0
    assert (run_dir / "report.md").is_file()
    assert main(["agent", "report", str(tmp_path)]) == 2
    assert main(["agent", "toy_add", "--ops-root", str(FIXTURES)]) == 2        # no --from


def _ctrl_c_then_resume(run_dir: Path) -> None:
    def interrupt_in_round_two(event):
        if event["event"] == "proposed" and event["round"] == 2:
            raise KeyboardInterrupt

    first = ScriptPolicy([[("BLOCK 4096", block(4096))], [("BLOCK 2048", block(2048))]])
    with pytest.raises(KeyboardInterrupt):
        run_agent(toy_task(), first, run_dir, rounds=2, patience=None, progress=interrupt_in_round_two, timeouts=FAST,
                  final_remeasure=False, write_report=False)
    with CandidateStore(run_dir) as store:
        assert store.run_info()["stop_reason"].startswith("interrupted")
        pending = [c for c in store.list() if c.state not in FINAL_STATES]
        assert [c.action for c in pending] == ["BLOCK 2048"]          # stored before it was evaluated
        assert store.get(2).state == "accepted"
    second = ScriptPolicy([])
    result = run_agent(None, second, run_dir, resume=True, timeouts=FAST, final_remeasure=False, write_report=False)
    assert result.stop_reason == "max rounds: 2 of 2 done"
    assert second.contexts == []                                      # nothing new was asked for
    with CandidateStore(run_dir) as store:
        candidates = store.list()
        assert [c.action for c in candidates] == ["start", "BLOCK 4096", "BLOCK 2048"]
        assert all(c.state in FINAL_STATES for c in candidates)
        assert candidates[2].results["compare"]["baseline_id"] == candidates[1].id
    # A resume given a new time budget counts the run's whole time, and the run keeps the new settings.
    again = run_agent(None, ScriptPolicy([]), run_dir, resume=True, rounds=3, time_budget_s=0.001, timeouts=FAST,
                      final_remeasure=False, write_report=False)
    assert again.stop_reason.startswith("time budget"), again.stop_reason
    with CandidateStore(run_dir) as store:
        settings = store.run_info()["extra"]["settings"]
        assert (settings["rounds"], settings["time_budget_s"], settings["patience"]) == (3, 0.001, 4)
        assert settings["timeouts"]["counters"] is False
    # Settings given again on resume are kept: here the counters come back on.
    run_agent(None, ScriptPolicy([]), run_dir, resume=True, timeouts={"counters": True}, final_remeasure=False,
              write_report=False)
    with CandidateStore(run_dir) as store:
        settings = store.run_info()["extra"]["settings"]
        assert settings["timeouts"]["counters"] is True and settings["timeouts"]["bench_seconds"] == 0.5
    with pytest.raises(ValueError, match="already holds a run"):
        run_agent(toy_task(), ScriptPolicy([]), run_dir, timeouts=FAST)


def test_ctrl_c_then_resume_loses_nothing(runs):
    runs["ctrl_c"].result()


def _incorrect_start(run_dir: Path):
    task = Task("toy_add", "t02_drops_last", "triton", dtypes=("float32",), check_shapes=(31,), bench_shape=1024,
                extra={"ops_root": str(FIXTURES)})
    return run_agent(task, ScriptPolicy([]), run_dir, timeouts=FAST, final_remeasure=False, write_report=False)


def test_an_incorrect_start_stops_the_run(runs):
    result = runs["incorrect_start"].result()
    assert result.stop_reason.startswith("the starting rung t02_drops_last is incorrect")


class FailingPolicy:
    """Raises in the first ``failures`` rounds (all of them when None), then proposes BLOCK 4096."""

    name = "test-failing"
    exhausted = False

    def __init__(self, failures=None):
        self.failures, self.calls = failures, 0

    def propose(self, context):
        self.calls += 1
        if self.failures is None or self.calls <= self.failures:
            raise ConnectionError("the endpoint is down")
        self.exhausted = True
        return [Candidate(None, None, "triton", block(4096)(context["current"].source), action="BLOCK 4096")]


def _policy_keeps_failing(run_dir: Path):
    return run_dir, run_agent(toy_task(), FailingPolicy(), run_dir, timeouts=FAST, final_remeasure=False)


def test_a_policy_that_keeps_failing_ends_the_search_cleanly(runs):
    run_dir, result = runs["keeps_failing"].result()
    assert result.stop_reason == ("the policy failed 3 rounds running; last: "
                                  "policy failed in round 3: ConnectionError: the endpoint is down")
    assert (run_dir / "report.md").is_file()
    with CandidateStore(run_dir) as store:
        assert [c.state for c in store.list()] == ["accepted"]
        assert len(store.run_info()["extra"]["policy_failures"]) == 3
        assert store.run_info()["stop_reason"] == result.stop_reason


def _one_policy_failure(run_dir: Path):
    policy = FailingPolicy(failures=1)
    result = run_agent(toy_task(), policy, run_dir, rounds=4, timeouts=FAST, final_remeasure=False,
                       write_report=False)
    return run_dir, policy, result


def test_one_policy_failure_costs_a_round_not_the_search(runs):
    run_dir, policy, result = runs["one_failure"].result()
    assert policy.calls == 2 and result.stop_reason.startswith("policy exhausted"), result.stop_reason
    with CandidateStore(run_dir) as store:
        assert [c.action for c in store.list()] == ["start", "BLOCK 4096"]
        assert store.run_info()["extra"]["policy_failures"] == [
            "policy failed in round 1: ConnectionError: the endpoint is down"]


def test_the_report_states_seconds_per_candidate_from_the_store():
    """Issue 17: the stricter pipeline's price per candidate, read from the step seconds each sandbox step
    records, so a committed run (the old pipeline) and a new one compare step by step."""
    from hello_gpu.agent.candidate import Candidate
    from hello_gpu.agent.report import step_seconds

    def candidate(**steps):
        return Candidate(1, None, "triton", "x", results={name: ({"raw": {"step_seconds": s}} if name == "check"
                                                                 else {"step_seconds": s}) for name, s in steps.items()})
    spent = step_seconds([candidate(compile=4.0, check=10.0, bench=5.0), candidate(compile=6.0, check=12.0),
                          candidate(check=20.0, compare=3.0), Candidate(2, None, "triton", "y")])
    assert spent["steps"]["compile"] == {"candidates": 2, "median_s": 5.0}
    assert spent["steps"]["check"] == {"candidates": 3, "median_s": 12.0}
    assert "analyze" not in spent["steps"]                       # a step nobody ran is left out, not a 0
    assert spent["per_candidate"] == {"candidates": 3, "median_s": 19.0, "total_s": 60.0}
    assert step_seconds([Candidate(3, None, "hip", "z")])["per_candidate"] is None


def test_the_candidate_cost_table_reads_every_committed_rerun_before_and_after(tmp_path):
    """benchmarks/agent_candidate_cost.py: one before row (the store as first committed) and one after row (the
    store in the tree) for each rerun under records/, with a per-candidate median read from the stores."""
    from benchmark_scripts import load
    root = Path(__file__).resolve().parent.parent
    module = load("agent_candidate_cost")
    runs = sorted(path.name for path in (root / "records" / "nvidia-h100-80gb-hbm3" / "agent").glob("*.*"))
    assert len(runs) >= 8
    out = tmp_path / "cost.md"
    assert module.main(["--out", str(out)]) == 0
    rows = [line for line in out.read_text().splitlines()
            if line.startswith("| ") and ("before: " in line or "after: " in line)]
    for run in runs:
        before = [row for row in rows if row.startswith(f"| {run} | before: nvidia-h200, ")]
        after = [row for row in rows if row.startswith(f"| {run} | after: nvidia-h100-80gb-hbm3 |")]
        assert len(before) == 1 and len(after) == 1, (run, rows)
        for row in before + after:
            per_candidate = row.split(" | ")[2]
            assert re.fullmatch(r"\d+\.\d \(\d+\)", per_candidate) and float(per_candidate.split()[0]) > 0, row
    with pytest.raises(SystemExit, match="no agent run stores under records/no-such-device/agent"):
        module.main(["--after-device", "no-such-device"])


def test_the_rerun_command_keeps_the_side_stream_allowance():
    from dataclasses import asdict

    from hello_gpu.agent.report import rerun_command
    from hello_gpu.agent.task import Task
    info = {"policy": "scripted", "seed": 0, "extra": {"settings": {"rounds": 3}}}
    allowed = rerun_command({**info, "task": asdict(Task("vector_add", "t01_tile_1024", "triton", side_streams=True))})
    plain = rerun_command({**info, "task": asdict(Task("vector_add", "t01_tile_1024", "triton"))})
    assert allowed.endswith(" --side-streams") and "--side-streams" not in plain
