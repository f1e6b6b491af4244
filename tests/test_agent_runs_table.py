"""The README's table of the agent's committed runs is generated from their records (hello_gpu.agent.runs_table)."""

import copy
import json
from pathlib import Path

import pytest

from hello_gpu.agent.runs_table import AgentRunsTableError, render_agent_runs, run_row
from hello_gpu.bench.records import RecordError

REPO = Path(__file__).resolve().parents[1]
RECORD = {
    "name": "agent.softmax.hip.float32", "kind": "agent",
    "entries": [
        {"role": "baseline", "variant": "v01_thread_per_row", "shape": "8192x8192"},
        {"role": "candidate", "variant": "agent-candidate-3", "shape": "8192x8192",
         "speedups": {"v01_thread_per_row": {"value": 17.25748, "ci95": [17.19572, 17.28909]}}},
    ],
    "extra": {"counts": {"accepted": 3, "rejected": 7},
              "stop_reason": "policy exhausted: it has no further candidates to propose",
              "claimed_vs_remeasured": "claimed 17.187x and re-measured 17.257x agree within 3% (+0.4%)",
              "vs_hand_written": {"fraction": 0.98211, "ci95": [0.97956, 0.98464], "rung": "v08_packed_registers"}},
}


def test_a_run_that_beat_its_start_gets_both_ratios_and_the_claim():
    assert run_row(RECORD) == [
        "softmax", "hip", "v01_thread_per_row", "8192x8192 float32", "9 (3 accepted, 7 rejected)",
        "17.257x [17.196, 17.289]", "0.982x [0.980, 0.985] of v08_packed_registers", "policy exhausted",
        "claimed 17.187x and re-measured 17.257x agree within 3%"]


def test_a_run_that_kept_its_start_says_so_and_claims_nothing():
    record = copy.deepcopy(RECORD)
    record["entries"] = record["entries"][:1]
    record["extra"].update(counts={"accepted": 1}, claimed_vs_remeasured="no candidate beat the starting rung: nothing",
                           vs_hand_written={"status": "skipped", "why": "no ladder record on this GPU"})
    row = run_row(record)
    assert row[4:] == ["0 (1 accepted)", "start kept", "not measured (no ladder record on this GPU)", "policy exhausted", "-"]


def test_what_is_not_an_agent_record_or_folder_is_refused_by_name(tmp_path):
    with pytest.raises(AgentRunsTableError, match="softmax.float32 is not an agent run's record"):
        run_row({"name": "softmax.float32", "entries": [], "extra": {}}, "README.md:5")
    with pytest.raises(RecordError, match="no agent.*.json record in records/none"):
        render_agent_runs(["records/none"], tmp_path, "README.md:5")
    with pytest.raises(RecordError, match="takes one folder"):
        render_agent_runs([], tmp_path, "README.md:5")


def test_the_committed_records_give_one_row_each():
    folder = REPO / "records" / "nvidia-h200"
    names = sorted(path.name for path in folder.glob("agent.*.json"))
    table = render_agent_runs(["records/nvidia-h200"], REPO, "test")
    rows = [line for line in table.split("\n") if line.startswith("| ") and not line.startswith("| op ")]
    assert len(rows) == len(names) >= 1
    for name, row in zip(names, rows):
        record = json.loads((folder / name).read_text(encoding="utf-8"))
        assert row.startswith(f"| {record['name'].split('.')[1]} | {record['name'].split('.')[2]} |")
