"""The README's table of the agent's committed runs, generated from their records.

A Markdown region ``<!-- hello-gpu:agent-runs records/<device> -->`` ... ``<!-- /hello-gpu:agent-runs -->``
is filled by ``hello-gpu records tables`` with one row per ``agent.OP.ROUTE.DTYPE.json`` record in that
folder: where the run started, what it timed, how many candidates it tried, its best against the start
(re-measured in a fresh process) and against the route's best hand-written rung, why it stopped, and
whether its claimed speedup agreed with the re-measurement. Typed by hand, this table went stale when
three runs were re-run under stricter verdicts (issue 17); generated, it cannot.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..bench.records import RecordError

COLUMNS = ("op", "route", "start", "timed at", "candidates after the start", "best vs start (fresh process)",
           "best vs hand-written", "stopped by", "claim vs re-measurement")


class AgentRunsTableError(RecordError):
    """A region that names no folder of agent records, or a record without what a row needs."""


def _interval(value: float, ci95) -> str:
    return f"{value:.3f}x [{ci95[0]:.3f}, {ci95[1]:.3f}]"


def _counts(counts: dict) -> str:
    total = sum(counts.values())
    detail = ", ".join(f"{number} {state}" for state, number in counts.items())
    return f"{total - 1} ({detail})"


def run_row(record: dict, where: str = "record") -> list[str]:
    """One table row for an agent record (``kind: agent``)."""
    try:
        _, op, route, dtype = record["name"].split(".")
        extra = record["extra"]
        start = next(entry for entry in record["entries"] if entry["role"] == "baseline")
    except (KeyError, ValueError, StopIteration) as error:
        raise AgentRunsTableError(f"{where}: {record.get('name', '?')} is not an agent run's record ({error})") from None
    best = [entry for entry in record["entries"] if entry["role"] == "candidate"]
    if best:
        speedup = best[-1]["speedups"][start["variant"]]
        versus_start = _interval(speedup["value"], speedup["ci95"])
    else:
        versus_start = "start kept"
    hand = extra.get("vs_hand_written") or {}
    if hand.get("fraction") is not None:
        versus_hand = f"{_interval(hand['fraction'], hand['ci95'])} of {hand['rung']}"
    else:
        versus_hand = f"not measured ({hand.get('why') or hand.get('status') or 'no reference'})"
    claim = extra.get("claimed_vs_remeasured", "")
    claim = claim.split(" (")[0] if claim.startswith("claimed") else "-"
    return [op, route, start["variant"], f"{start['shape']} {dtype}", _counts(extra.get("counts", {})), versus_start,
            versus_hand, extra.get("stop_reason", "").split(":")[0], claim]


def render_agent_runs(arguments: list[str], root: Path, where: str) -> str:
    """The region's table: ``arguments`` is one folder of device records, relative to the repository root."""
    if len(arguments) != 1:
        raise AgentRunsTableError(f"{where}: agent-runs takes one folder of device records, e.g. records/nvidia-h200; "
                                  f"got {arguments!r}")
    folder = root / arguments[0]
    paths = sorted(folder.glob("agent.*.json"))
    if not paths:
        raise AgentRunsTableError(f"{where}: no agent.*.json record in {arguments[0]}")
    rows = [run_row(json.loads(path.read_text(encoding="utf-8")), f"{where}: {path.name}") for path in paths]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|---|---|---|---:|---:|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", f"Generated from `{arguments[0]}/agent.*.json` by `hello-gpu records tables`; do not edit by hand."]
    return "\n".join(lines)
