"""What a candidate costs the agent, before and after issue 17's stricter pipeline, from committed run stores.

Issue 17 moved the verdict out of the candidate's process: baseline and candidate are now timed in separate
processes, alternating, the timed calls' outputs are checked, and the child runs under audit hooks. This
prints, for each committed agent run, the seconds per candidate (the median of each candidate's steps added
up, and the median of each step) of two stores of the same run:

- before: the run's store as it was first committed (``git log``'s oldest version of
  ``records/<before-device>/agent/OP.ROUTE/candidates.sqlite``: the H200 runs of 2026-12-03, made before
  the stricter pipeline existed);
- after: the store in the working tree under ``records/<after-device>/agent/OP.ROUTE`` (a rerun of the
  same command, ``gpu_session.sh agent-rerun:OP.ROUTE``).

The two may come from different GPUs (the lender gave an H100 for the reruns): the table names both, and a
step's time includes that device's kernel times, so only the harness's share (compile, check, compare's
process starts) compares cleanly.

    python benchmarks/agent_candidate_cost.py [--before-device nvidia-h200]
        [--after-device nvidia-h100-80gb-hbm3] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from hello_gpu.agent.report import STEPS, step_seconds
from hello_gpu.agent.store import CandidateStore

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True)


def first_committed_cost(path: str) -> tuple[str, str, dict] | None:
    """(commit, date, :func:`cost`) of the oldest committed version of the store ``path``; None if never committed."""
    log = _git("log", "--format=%h %cd", "--date=short", "--", path).stdout.decode().split("\n")
    versions = [line.split() for line in log if line.strip()]
    if not versions:
        return None
    commit, date = versions[-1]
    with tempfile.TemporaryDirectory(prefix="agent-cost-") as folder:
        (Path(folder) / "candidates.sqlite").write_bytes(_git("show", f"{commit}:{path}").stdout)
        return commit, date, cost(Path(folder))


def cost(run_dir: Path) -> dict:
    with CandidateStore(run_dir) as store:
        return step_seconds(store.list())


def _cell(costs: dict, step: str | None) -> str:
    """'8.6 (10)': the median seconds and how many candidates ran the step; '-' where none did."""
    if step is None:
        entry = costs.get("per_candidate") or {}
    else:
        entry = costs.get("steps", {}).get(step) or {}
    value, count = entry.get("median_s"), entry.get("candidates")
    return "-" if value is None else f"{value:.1f} ({count})"


def table(before_device: str, after_device: str) -> list[str]:
    runs = sorted(path.name for path in (ROOT / "records" / after_device / "agent").glob("*.*")
                  if (path / "candidates.sqlite").exists())
    if not runs:
        raise SystemExit(f"no agent run stores under records/{after_device}/agent")
    lines = [f"| run | store | per candidate, s | {' | '.join(STEPS)} |",
             "|---|---|---:|" + "---:|" * len(STEPS)]
    for run in runs:
        before = first_committed_cost(f"records/{before_device}/agent/{run}/candidates.sqlite")
        rows = []
        if before:
            commit, date, costs = before
            rows.append((f"before: {before_device}, {commit} ({date})", costs))
        else:
            rows.append((f"before: no committed store under records/{before_device}", {}))
        rows.append((f"after: {after_device}", cost(ROOT / "records" / after_device / "agent" / run)))
        for label, costs in rows:
            steps = " | ".join(_cell(costs, step) for step in STEPS)
            lines.append(f"| {run} | {label} | {_cell(costs, None)} | {steps} |")
    return lines + ["", "Seconds are medians over the run's candidates; in brackets, how many candidates ran it."]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-device", default="nvidia-h200")
    parser.add_argument("--after-device", default="nvidia-h100-80gb-hbm3")
    parser.add_argument("--out", type=Path, help="write the table there (markdown) as well as printing it")
    args = parser.parse_args(argv)
    text = "\n".join(table(args.before_device, args.after_device)) + "\n"
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
