"""The agent with a spec whose inputs end in plain options (attention's ``causal``, a Python bool), on the CPU.

A spec's inputs are tensors, optionally followed by plain options (a bool, an int, a float: see
hello_gpu.ops.checking). The agent's parent lends each tensor to the candidate's child process as a guarded
shared buffer and passes each option by value (session.lend); the child hands both to the candidate in order.
Checked here, in the Triton interpreter: attention's t02 passes the agent's check with causal and non-causal
shapes; candidates that ignore the option, flip it, or keep the first call's value are rejected for their
outputs; and ``hello-gpu agent attention --from t02_fused_online_softmax --route triton --policy scripted
--rounds 2`` runs its two rounds on the CPU.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hello_gpu.agent import tools
from hello_gpu.agent.candidate import Candidate
from hello_gpu.agent.session import buffer_keys, lend
from hello_gpu.agent.task import Task
from hello_gpu.ops import load_op

OP = load_op("attention")
START = "t02_fused_online_softmax"
SOURCE = OP.rung(START).path.read_text(encoding="utf-8")
# Causal with S_q > S_kv (2 fully masked rows) and not: a candidate must honour causal both ways. Both are
# shipped edge shapes; the whole edge list costs ~10 minutes a check in the interpreter on this machine.
SHAPES = ((1, 1, 1, 33, 31, 64, 1), (1, 2, 1, 1, 1, 128))


def attention_task() -> Task:
    return Task("attention", START, "triton", dtypes=("float32",), check_shapes=SHAPES,
                bench_shape=(1, 2, 1, 3, 70, 64))


def edited(old: str, new: str) -> Candidate:
    assert SOURCE.count(old) == 1, old
    return Candidate(None, None, "triton", SOURCE.replace(old, new))


def test_lend_passes_options_by_value_and_refuses_anything_else():
    """Refused by position before any buffer is made (so no child is needed to see it): a str, a NumPy
    scalar, None. What lend makes of options: their values; buffer_keys keeps the buffers' keys only."""
    import numpy as np
    for bad in ("causal", np.float32(1.0), None):
        with pytest.raises(TypeError, match=r"input 0 is a .*: only tensors and plain options \(a bool, an int, a "
                                            r"float\) cross to the child"):
            lend(None, (bad,), "input", "cpu")
    assert buffer_keys(["input0:1x2:float32", {"option": True}, {"option": 3}, "input3:4:float16"]) == \
        ["input0:1x2:float32", "input3:4:float16"]


def test_the_start_rung_passes_the_agents_check_with_causal_as_an_option():
    """The check step of the agent (the ladder's checker, the run-time anti-cheat checks, the benchmark-shape
    check, the profiled calls) on t02 as it ships: every case passes, causal and not."""
    result = tools.check(Candidate(None, None, "triton", SOURCE), attention_task())
    assert result.status == "ok" and result.passed, result.reason
    assert sorted(result.evidence["shapes"]) == ["1x1x1x33x31x64x1", "1x2x1x1x1x128"]
    assert result.raw["anticheat"]["bench_shape"]["failures"] == []


@pytest.mark.parametrize("label, old, new", [
    ("ignores causal", "CAUSAL=d.causal,", "CAUSAL=False,"),
    ("flips causal", "    d, out = prepare(q, k, v, causal, out)\n",
     "    d, out = prepare(q, k, v, not causal, out)\n"),
    ("keeps the first call's causal", "def run(q, k, v, causal, out=None):\n",
     "FIRST_CAUSAL = []\n\n\ndef run(q, k, v, causal, out=None):\n"
     "    FIRST_CAUSAL.append(causal)\n    causal = FIRST_CAUSAL[0]\n"),
])
def test_a_candidate_that_ignores_or_changes_the_option_is_rejected(label, old, new):
    """Each is correct at some shapes (the first at non-causal ones, the last until the option changes) and
    wrong at another: the checker compares every output with the float64 reference of the inputs it made,
    the option included, so a candidate cannot decide the option for itself."""
    result = tools.check(edited(old, new), attention_task())
    assert result.status == "ok", result.reason
    assert not result.passed and not result.correct, label
    assert "elements outside rtol" in result.reason, result.reason         # wrong values, not a crash
    if label != "keeps the first call's causal":                            # that one fails where causal changes
        assert result.reason.startswith("1x1x1x33x31x64x1 "), result.reason  # the causal shape's outputs are wrong


def test_the_agent_command_runs_on_attention_in_the_interpreter(tmp_path, capsys):
    """``hello-gpu agent attention --from t02_fused_online_softmax --route triton --policy scripted --rounds 2``
    on the CPU: the start is checked and timed (in the interpreter), two rounds of the scripted policy's
    candidates follow, and the run ends with a result. --ops-root is a copy of the attention folder whose spec
    checks two of its edge shapes (SHAPES) instead of every one, which keeps the run to minutes here."""
    from hello_gpu.agent.store import CandidateStore
    from hello_gpu.cli import main
    ops = tmp_path / "ops"
    shutil.copytree(OP.path, ops / "attention", ignore=shutil.ignore_patterns("__pycache__"))
    spec = ops / "attention" / "spec.py"
    spec.write_text(spec.read_text(encoding="utf-8") + f"\n# tests/test_agent_options.py: two edge shapes.\n"
                    f"EDGE_SHAPES = {SHAPES!r}\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    status = main(["agent", "attention", "--ops-root", str(ops), "--from", START, "--route", "triton",
                   "--policy", "scripted", "--rounds", "2", "--no-counters", "--dtype", "float32",
                   "--shape", "1x2x1x3x70x64", "--run-dir", str(run_dir)])
    out = capsys.readouterr().out
    assert "only tensors" not in out and "crashed" not in out.split("stop:")[0], out
    assert status == 0, out
    with CandidateStore(run_dir) as store:
        candidates = store.list()
        start = candidates[0]
        assert start.action == "start" and start.state in ("accepted", "timed"), (start.state, start.results)
        assert start.results["check"]["passed"]
        assert len(candidates) > 1                                    # the policy's candidates were evaluated
    assert Path(run_dir / "report.md").is_file()


@pytest.mark.parametrize("start, route, asked, expected", [
    ("v01_naive", "hip", "float32", ("float32",)),
    ("t01_block_tile", "triton", "bfloat16", ("bfloat16", "float32", "float16")),   # its header names no dtypes
    ("t01_block_tile", "triton", None, ("float32", "bfloat16", "float16")),
    ("v01_naive", "hip", "bfloat16", None),
])
def test_the_agents_task_checks_the_dtypes_its_starting_rung_takes(monkeypatch, tmp_path, capsys, start, route,
                                                                   asked, expected):
    """matmul's routes take some of its dtypes each (the SIMT route float32, the tensor-core routes 16-bit): a task of
    all three failed both starting rungs at once on the H100 (session 27, "dtype coverage"). The task is the
    dtypes the starting rung takes, the one asked for first; one it does not take is refused before any search."""
    from hello_gpu.agent import command
    from hello_gpu.cli import main
    tasks = []
    monkeypatch.setattr(command, "_search", lambda task, *rest: tasks.append(task) or 0)
    monkeypatch.setattr(command, "_can_run_here", lambda *rest: True)
    status = main(["agent", "matmul", "--from", start, "--route", route, "--policy", "scripted", "--rounds", "1",
                   "--run-dir", str(tmp_path / "run"), *(["--dtype", asked] if asked else [])])
    out = capsys.readouterr().out
    if expected is None:
        assert status == 2 and not tasks and f"{start} takes float32 (its header's dtypes), not {asked}" in out, out
    else:
        assert status == 0 and tasks[0].dtypes == expected, (out, tasks)
