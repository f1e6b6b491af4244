"""The run's report: Markdown + JSON + PNGs in the run folder, made from the store alone.

``write_report(run_dir)`` writes ``report.md``, ``report.json``, ``search.png`` (each candidate's paired
speedup over the best of its time, accepts marked, the cumulative best as a step line) and, where
the start and best were timed on a GPU, ``roofline.png`` (before and after). The report holds the
environment manifest, the seeds, every candidate's source hash, verdict and evidence, the diff from
the start to the best, the command that reruns the search, and whether the loop's claimed speedup
and the fresh-process re-measurement agree within 3% (and says so plainly when they do not).
``hello-gpu agent report RUN`` re-renders it; nothing is re-measured.
"""

from __future__ import annotations

import difflib
import json
import statistics
from pathlib import Path

from ..bench.ceilings import cached_ceilings
from ..bench.records import RecordError, device_from_manifest, new_record, source_entries
from ..bench.stats import Ratio, verdict
from ..ops.shapes import shape_label
from ..ops.sources import repository_rules
from ..profile.roofline import Roofline, RooflinePoint, roofs_from
from .store import CandidateStore

AGREEMENT = 0.03


def _start_and_best(store: CandidateStore):
    candidates = store.list()
    start = next((c for c in candidates if c.parent_id is None and c.action == "start"), None)
    return start, store.best_accepted(), candidates


def rerun_command(info: dict) -> str:
    task, settings = info["task"], info["extra"].get("settings", {})
    command = (f"hello-gpu agent {task['op']} --from {task['start']} --route {task['route']} "
               f"--rounds {settings.get('rounds', 12)} --policy {info['policy']} --seed {info['seed']}")
    for option, key in (("--patience", "patience"), ("--time-budget", "time_budget_s"), ("--target", "target_fraction")):
        if settings.get(key) is not None:
            command += f" {option} {settings[key]:g}"
    if task.get("bench_shape") is not None and not task.get("problem_path"):
        shape = task["bench_shape"]
        command += f" --shape {shape_label(tuple(shape) if isinstance(shape, list) else shape)}"
    if task.get("dtypes"):
        command += f" --dtype {task['dtypes'][0]}"
    if settings.get("timeouts", {}).get("counters") is False:
        command += " --no-counters"
    if task.get("side_streams"):
        command += " --side-streams"
    if task.get("extra", {}).get("ops_root"):
        command += f"  # operator folder from {task['extra']['ops_root']}"
    return command


def _candidate_entry(store: CandidateStore, candidate, rounds: dict) -> dict:
    row = store.row(candidate.id)
    results = candidate.results
    check = results.get("check") or {}
    compare = results.get("compare") or {}
    bench = results.get("bench") or {}
    decision = results.get("accept") or {}
    compiled = results.get("compile") or {}
    return {"id": candidate.id, "parent_id": candidate.parent_id, "round": rounds.get(candidate.id, 0),
            "action": candidate.action, "hypothesis": candidate.hypothesis, "state": candidate.state,
            "reason": candidate.reason, "source_sha256": row["source_sha256"], "diff": row["diff"],
            "evidence": {
                "compile": {"ok": compiled.get("ok"), "errors": compiled.get("errors"),
                            "resources": compiled.get("resources")} if compiled else None,
                "check": {"passed": check.get("passed"), "reason": check.get("reason"), "cheats": check.get("cheats"),
                          "seeds": (check.get("evidence") or {}).get("seeds"),
                          "cases": (check.get("evidence") or {}).get("cases"),
                          "dtypes": (check.get("evidence") or {}).get("dtypes"),
                          "shapes": (check.get("evidence") or {}).get("shapes"),
                          "distributions": (check.get("evidence") or {}).get("distributions"),
                          "checks": (check.get("evidence") or {}).get("checks"),
                          "skipped": (check.get("raw") or {}).get("skipped") or None} if check else None,
                "compare": {key: compare.get(key) for key in ("baseline_id", "speedup", "ci95", "pairs", "verdict",
                                                             "noise", "clock", "suspect")} if compare else None,
                "bench": {key: bench.get(key) for key in ("median_s", "ci95", "gb_per_s", "bandwidth_fraction",
                                                          "suspect", "clock", "shape", "dtype")}
                          | {"work": (bench.get("raw") or {}).get("work")} if bench else None,
                "accept": decision or None,
                "analyze": {key: (results.get("analyze") or {}).get(key)
                            for key in ("bound", "fraction_of_attainable", "reason")} if results.get("analyze") else None,
            }}


STEPS = ("compile", "check", "bench", "compare", "analyze")


def _step_seconds(result: dict) -> float | None:
    """Seconds a step took, as its sandbox measured it (``step_seconds``, at the top or in ``raw``)."""
    if not isinstance(result, dict):
        return None
    seconds = result.get("step_seconds")
    if seconds is None and isinstance(result.get("raw"), dict):
        seconds = result["raw"].get("step_seconds")
    return float(seconds) if isinstance(seconds, (int, float)) else None


def step_seconds(candidates) -> dict:
    """What the pipeline costs per candidate (issue 17: the price of the stricter checks): for each step,
    how many candidates ran it and their median seconds; and the median of each candidate's steps
    added up. From the store, so a committed run can be compared with a new one."""
    per_step: dict[str, list[float]] = {step: [] for step in STEPS}
    totals = []
    for candidate in candidates:
        spent = [(step, _step_seconds(candidate.results.get(step))) for step in STEPS]
        for step, seconds in spent:
            if seconds is not None:
                per_step[step].append(seconds)
        measured = [seconds for _, seconds in spent if seconds is not None]
        if measured:
            totals.append(sum(measured))
    return {"steps": {step: {"candidates": len(values), "median_s": statistics.median(values)}
                      for step, values in per_step.items() if values},
            "per_candidate": ({"candidates": len(totals), "median_s": statistics.median(totals),
                               "total_s": sum(totals)} if totals else None)}


def report_data(run_dir: str | Path) -> dict:
    """Everything the report shows, as JSON."""
    with CandidateStore(run_dir) as store:
        info = store.run_info()
        if info is None:
            raise ValueError(f"{run_dir} holds no run")
        start, best, candidates = _start_and_best(store)
        rounds = store.rounds()
        final = info["extra"].get("final")
        diff = ""
        if start is not None and best is not None and best.id != start.id:
            diff = "".join(difflib.unified_diff(start.source.splitlines(keepends=True), best.source.splitlines(keepends=True),
                                                fromfile=f"start ({info['task']['start']})", tofile=f"best (candidate {best.id})"))
        agreement = _agreement_text(final)
        check_seeds = sorted({seed for c in candidates for seed in
                              ((c.results.get("check") or {}).get("evidence") or {}).get("seeds", [])})
        return {"run_dir": str(run_dir), "task": info["task"], "policy": info["policy"], "seed": info["seed"],
                "created": info["created"], "stop_reason": info["stop_reason"],
                "settings": info["extra"].get("settings", {}), "environment": info["extra"].get("environment", {}),
                "elapsed_s": info["extra"].get("elapsed_s"), "check_seeds": check_seeds,
                "start_id": start.id if start else None, "best_id": best.id if best else None,
                "counts": {state: sum(1 for c in candidates if c.state == state)
                           for state in sorted({c.state for c in candidates})},
                "candidates": [_candidate_entry(store, c, rounds) for c in candidates],
                "step_seconds": step_seconds(candidates),
                "final": final, "agreement": agreement, "diff": diff, "rerun": rerun_command(info),
                "suggestions": info["extra"].get("policy_suggestions", [])}


def _agreement_text(final: dict | None) -> str:
    if not final:
        return "no final re-measurement was made"
    if final.get("remeasured") is None:
        return final.get("note") or f"the final re-measurement failed: {final.get('detail')}"
    claimed, remeasured = final.get("claimed"), final["remeasured"]
    if claimed is None:
        return f"re-measured {remeasured:.3f}x; the loop's claim is unknown"
    difference = remeasured / claimed - 1
    if abs(difference) <= AGREEMENT:
        return (f"claimed {claimed:.3f}x and re-measured {remeasured:.3f}x agree within {AGREEMENT:.0%} "
                f"({difference:+.1%})")
    return (f"claimed {claimed:.3f}x and re-measured {remeasured:.3f}x DO NOT agree within {AGREEMENT:.0%} "
            f"({difference:+.1%}): trust the re-measurement, not the claim")


def _hand_written_text(versus: dict | None) -> str:
    if not versus:
        return "not measured (no hand-written rung to compare with)"
    if versus.get("fraction") is None:
        return f"the comparison with {versus['rung']} failed: {versus.get('detail')}"
    return (f"the best candidate runs at {versus['fraction']:.3f}x {_interval(versus.get('ci95'))} the speed of "
            f"{versus['rung']} ({versus.get('why')}), paired over {versus.get('pairs')} pairs in a fresh process")


def _figure_number(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _interval(interval) -> str:
    return f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""


def _markdown(data: dict, images: list[str]) -> str:
    task = data["task"]
    environment = data["environment"]
    final = data["final"] or {}
    lines = [f"# Agent run: {task['op']} ({task['route']}) from {task['start']}", "",
             f"- policy **{data['policy']}**, seed {data['seed']}; stopped: {data['stop_reason']}",
             "- candidates: " + ", ".join(f"{count} {state}" for state, count in data["counts"].items()),
             f"- start: candidate {data['start_id']}; best: candidate {data['best_id']}",
             f"- final re-measurement (fresh process, start vs best): "
             f"{_figure_number(final.get('remeasured'))}x {_interval(final.get('ci95'))} over {final.get('pairs') or 0} pairs"
             f" ({final.get('clock') or 'not timed'})",
             f"- claimed vs re-measured: {data['agreement']}",
             f"- against the hand-written ladder: {_hand_written_text(final.get('vs_hand_written'))}",
             f"- rerun: `{data['rerun']}`",
             f"- seconds per candidate: {_seconds_text(data.get('step_seconds'))}",
             *(f"- the policy suggests (not a candidate it can write): {text}" for text in data.get("suggestions", [])),
             ""]
    if final.get("clock") == "wall":
        lines += ["> Timed with the wall clock on the CPU (Triton interpreter): these figures test the loop; "
                  "they say nothing about a GPU.", ""]
    lines += [f"![{Path(image).stem}]({image})" for image in images] + [""]
    lines += ["## Candidates", "", "| id | round | parent | action | state | speedup [95% CI] | reason | sha256 |",
              "|---|---|---|---|---|---|---|---|"]
    for entry in data["candidates"]:
        compare = entry["evidence"]["compare"] or {}
        interval = compare.get("ci95")
        speedup = (f"{compare['speedup']:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"
                   if compare.get("speedup") is not None and interval else "-")
        reason = (entry["reason"] or "").replace("|", "\\|").replace("\n", " ")[:200]
        action = (entry["action"] or "").replace("|", "\\|")
        lines.append(f"| {entry['id']} | {entry['round']} | {entry['parent_id'] or '-'} | {action} | {entry['state']} "
                     f"| {speedup} | {reason} | `{entry['source_sha256'][:12]}` |")
    lines += ["", "## Evidence per candidate", ""]
    for entry in data["candidates"]:
        lines += [f"### Candidate {entry['id']}: {entry['state']}", "", f"- hypothesis: {entry['hypothesis'] or '-'}",
                  f"- source sha256: `{entry['source_sha256']}`"]
        for tool, evidence in entry["evidence"].items():
            if evidence:
                lines.append(f"- {tool}: `{json.dumps(evidence, default=str)[:600]}`")
        lines.append("")
    lines += ["## Final diff (start -> best)", "", "```diff", data["diff"].rstrip() or "(no change accepted)", "```", "",
              "## Seeds", "", f"- run seed (policy): {data['seed']}",
              f"- check seeds (fresh per check, drawn in the child): {', '.join(map(str, data['check_seeds'])) or '-'}",
              "", "## Environment", "", "```json", json.dumps(environment, indent=2, default=str), "```", ""]
    return "\n".join(lines)


def _seconds_text(spent: dict | None) -> str:
    """"31.2 s median over 8 candidates (check 12.1 s, bench 4.0 s, ...)" from step_seconds()."""
    if not spent or not spent.get("per_candidate"):
        return "not recorded"
    steps = ", ".join(f"{step} {values['median_s']:.1f} s" for step, values in spent["steps"].items())
    whole = spent["per_candidate"]
    return f"{whole['median_s']:.1f} s median over {whole['candidates']} candidate(s) ({steps}; medians per step)"


def _search_figure(data: dict):
    from matplotlib.figure import Figure
    figure = Figure(figsize=(8, 4.5), layout="constrained")
    axes = figure.add_subplot()
    xs, ys, colours, low, high = [], [], [], [], []
    best = 1.0
    best_xs, best_ys = [0], [1.0]
    for entry in data["candidates"]:
        compare = entry["evidence"]["compare"] or {}
        if compare.get("speedup") is None:
            continue
        xs.append(entry["id"])
        ys.append(compare["speedup"])
        interval = compare.get("ci95") or [compare["speedup"]] * 2
        low.append(max(compare["speedup"] - interval[0], 0.0))
        high.append(max(interval[1] - compare["speedup"], 0.0))
        accepted = entry["state"] == "accepted"
        colours.append("tab:green" if accepted else "tab:red" if entry["state"] == "suspect" else "tab:grey")
        if accepted:
            best *= compare["speedup"]
            best_xs.append(entry["id"])
            best_ys.append(best)
    axes.scatter(xs, ys, c=colours, zorder=3, label="candidate vs the best of its time (green: accepted)")
    axes.step(best_xs + [max(xs + best_xs)], best_ys + [best], where="post", color="tab:green", alpha=0.6,
              label="cumulative best vs start (claimed)")
    axes.errorbar(xs, ys, yerr=[low, high], fmt="none", ecolor="tab:grey", capsize=3, zorder=2)
    final = data.get("final") or {}
    if final.get("remeasured") is not None:
        interval = final.get("ci95") or [final["remeasured"]] * 2
        axes.errorbar([final["best_id"]], [final["remeasured"]],
                      yerr=[[final["remeasured"] - interval[0]], [interval[1] - final["remeasured"]]],
                      fmt="*", markersize=12, color="tab:blue", capsize=3, zorder=4,
                      label="best vs start, re-measured in a fresh process")
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel("candidate id")
    axes.set_ylabel("paired speedup")
    axes.set_title(f"{data['task']['op']} ({data['task']['route']}): search")
    axes.legend(loc="best", fontsize=8)
    return figure


def _roofline_figure(data: dict):
    """Start and best under the roofs, where both were timed on a GPU; None otherwise."""
    environment = data["environment"]
    entries = {entry["id"]: entry for entry in data["candidates"]}
    points = []
    for label, candidate_id in (("start", data["start_id"]), ("best", data["best_id"])):
        bench = (entries.get(candidate_id) or {}).get("evidence", {}).get("bench") or {}
        if bench.get("clock") != "device-events" or not bench.get("median_s"):
            return None
        points.append((label, bench))
    if not environment.get("gpu"):
        return None
    from ..profile.roofline_plot import roofline_figure
    ceilings = cached_ceilings(allow_partial=True)
    dtype = points[0][1]["dtype"]
    roofs = roofs_from({"name": environment["gpu"], "arch": environment.get("arch", "")}, dtype,
                       [("this machine's cache", ceilings.to_dict())] if ceilings else [], environment=environment)
    roofline_points = [RooflinePoint(label, bench["shape"], dtype, data["task"]["route"], "candidate",
                                     float(bench["median_s"]), float(bench["work"]["bytes"]),
                                     float(bench["work"].get("flops") or 0.0), suspect=bench.get("suspect"))
                       for label, bench in points]
    roofline = Roofline(data["task"]["op"], dtype, data["task"]["route"], {}, None, roofs, roofline_points)
    return roofline_figure(roofline, title=f"{data['task']['op']}: start and best under the roofs")


def write_report(run_dir: str | Path) -> dict[str, Path]:
    """Write report.md, report.json, search.png (and roofline.png on a GPU); return their paths."""
    run_dir = Path(run_dir)
    data = report_data(run_dir)
    paths: dict[str, Path] = {}
    images = []
    notes = []
    if any((entry["evidence"]["compare"] or {}).get("speedup") is not None for entry in data["candidates"]):
        figure = _search_figure(data)
        paths["search_png"] = run_dir / "search.png"
        figure.savefig(paths["search_png"], dpi=120)
        images.append("search.png")
    try:
        figure = _roofline_figure(data)
    except Exception as error:  # noqa: BLE001 - a plot is not worth failing a report for
        figure, error_text = None, f"roofline plot not drawn: {type(error).__name__}: {error}"
        notes.append(error_text)
    if figure is not None:
        paths["roofline_png"] = run_dir / "roofline.png"
        figure.savefig(paths["roofline_png"], dpi=120)
        images.append("roofline.png")
    data["notes"] = notes
    paths["json"] = run_dir / "report.json"
    paths["json"].write_text(json.dumps(data, indent=2, default=str, allow_nan=False) + "\n", encoding="utf-8")
    paths["markdown"] = run_dir / "report.md"
    paths["markdown"].write_text(_markdown(data, images), encoding="utf-8")
    return paths


# ------------------------------------------------------------------------------------------ record


def _source_file(run_dir: Path, candidate) -> Path:
    folder = run_dir / "sources"
    folder.mkdir(parents=True, exist_ok=True)
    # .txt: a record's copy of a candidate is evidence, not code: no compile gate, linter or test
    # collector should take it for a kernel of the package.
    path = folder / f"candidate-{candidate.id}.{'hip' if candidate.route == 'hip' else 'py'}.txt"
    path.write_text(candidate.source, encoding="utf-8")
    return path


def build_record(run_dir: Path, *, repo_root: Path | None = None, allow_cpu: bool = False) -> dict:
    """The run as a record of kind "agent": the start (role baseline) and the best (role candidate,
    with the final re-measured speedup over the start) at the bench shape."""
    data = report_data(run_dir)
    environment = dict(data["environment"])
    if environment.get("gpu"):
        device = device_from_manifest(environment)
    elif allow_cpu:
        device = {"slug": "cpu", "name": "CPU (Triton interpreter, wall clock)", "arch": "cpu"}
    else:
        raise RecordError("this run was not timed on a GPU: a record names a GPU (allow_cpu=True for tests)")
    if not (environment.get("git") or {}).get("commit") and allow_cpu:
        environment["git"] = {**(environment.get("git") or {}), "commit": "unknown"}
    entries = []
    task = data["task"]
    with CandidateStore(run_dir) as store:
        for role, candidate_id in (("baseline", data["start_id"]), ("candidate", data["best_id"])):
            if candidate_id is None or (role == "candidate" and candidate_id == data["start_id"]):
                continue
            candidate = store.get(candidate_id)
            bench = candidate.results.get("bench") or {}
            raw = bench.get("raw") or {}
            path = _source_file(Path(run_dir), candidate)
            sources = []
            if repo_root is not None:
                try:
                    sources = source_entries(path, repo_root, repository_rules(repo_root))
                except Exception:  # noqa: BLE001 - a run folder outside the repository: hash kept in extra
                    sources = []
            entry = {"variant": f"{task['start']}" if role == "baseline" else f"agent-candidate-{candidate_id}",
                     "role": role, "source": sources[0] if sources else None,
                     **({"sources": sources} if sources else {}),
                     "shape": raw.get("shape") or bench.get("shape") or "?",
                     "dtype": raw.get("dtype") or bench.get("dtype") or "?",
                     "correctness": (candidate.results.get("check") or {}).get("evidence") or None,
                     "timing": raw.get("timing"), "work": raw.get("work"), "derived": raw.get("derived"),
                     "extra": {"route": task["route"], "candidate_id": candidate_id,
                               "source_sha256": candidate.source_sha256, "action": candidate.action}}
            final = data["final"] or {}
            if role == "candidate" and final.get("remeasured") is not None:
                ratio = Ratio(final["remeasured"], tuple(final["ci95"]), final["pairs"])
                entry["speedups"] = {task["start"]: {**ratio.to_dict(), "verdict": verdict(ratio, 0.02)}}
            entries.append(entry)
    name = f"agent.{task['op']}.{task['route']}.{entries[0]['dtype'] if entries else 'unknown'}"
    return new_record(name, "agent", device=device, environment=environment, entries=entries,
                      extra={"stop_reason": data["stop_reason"], "policy": data["policy"], "seed": data["seed"],
                             "vs_hand_written": (data["final"] or {}).get("vs_hand_written"),
                             "claimed_vs_remeasured": data["agreement"], "rerun": data["rerun"],
                             "candidates": len(data["candidates"]), "counts": data["counts"]})
