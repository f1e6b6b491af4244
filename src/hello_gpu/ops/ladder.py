"""``run_ladder``: check every rung, time the correct ones in one run, compare each with its parent and
with the torch baseline, and write it all down as a record.

Order matters. Correctness first: a rung that fails is reported and never timed, since a fast wrong
answer is not a data point. Then, per benchmark shape, one set of inputs is drawn, every rung is
checked once more at that very size (a bug can hide above the edge shapes: an int32 index, a grid
limit), timed cold with :func:`hello_gpu.bench.measure` under the spec's work model, and compared
paired and interleaved (ABBA, :func:`hello_gpu.bench.compare`) with its parent and with ``v00_torch``,
all in the same process, so clocks and temperature are shared.

The checks of a ladder share their cases (:class:`~.checking.CaseCache`): each (shape, dtype, seed,
distribution)'s inputs, block probe and reference are made once, on the GPU, for all the rungs, one
shape at a time so that only one shape's cases are held. The timed inputs are the timing shape's
"normal" case, proven unchanged after each rung's timing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..bench import compare, measure
from ..bench.ceilings import cached_ceilings
from ..bench.records import device_from_manifest, format_figure, new_record, repository_root, write_record
from ..runtime import manifest
from ..runtime.device import require_gpu
from .checking import CaseCache, CheckReport, build_error, case_count, check_rung, fresh_seeds
from .registry import Op, load_op
from .rung import TORCH_BASELINE, BuiltRung, Rung, triton_interpreter_on
from .shapes import numel, shape_label
from .sources import record_rules, rung_source_fields

ROUTES = ("hip", "cuda", "triton")


@dataclass
class TimedRung:
    """One rung at one shape: its timing, its size check and its paired comparisons."""

    rung: Rung
    shape: object
    measurement: object                      # hello_gpu.bench.Measurement
    check: CheckReport                       # at this shape, on the timed seed
    vs_parent: object | None = None          # hello_gpu.bench.Comparison, parent = baseline side
    vs_torch: object | None = None
    # The fastest rungs of each route only (``contenders``): against every other baseline (torch.compile, the peers).
    vs_baselines: dict = field(default_factory=dict)
    # Baselines and contenders only: the time a Python caller pays, host launch path included (mode="call").
    call_time: object | None = None


@dataclass
class LadderResult:
    op: Op
    dtype: str
    shapes: list
    checks: dict[str, CheckReport]           # edge-shape checks, by rung id
    timed: list[TimedRung] = field(default_factory=list)
    not_timed: list[tuple[str, str, str]] = field(default_factory=list)    # (rung id, shape, why)
    record: dict | None = None
    record_path: Path | None = None
    plot_paths: list[Path] = field(default_factory=list)

    def table(self):
        return ladder_table(self)

    def figure(self):
        """A bar chart of GB/s per rung and shape, with the measured ceiling (needs the record)."""
        from ..bench.plots import record_bar_chart
        return record_bar_chart(self.record, metric="gb_per_s", title=f"{self.op.name} ladder, {self.dtype}")


# ------------------------------------------------------------------------------------------ choosing


def select_rungs(op: Op, route: str | None = None, only: list[str] | None = None) -> list[Rung]:
    """The rungs of one route (plus the torch baselines every route is compared with), or ``only`` the
    named rungs with their parents and ``v00_torch``."""
    if route is not None and route not in ROUTES:
        raise ValueError(f"route must be one of {', '.join(ROUTES)}, got {route!r}")
    rungs = [rung for rung in op.rungs if route is None or rung.route == route or rung.is_baseline]
    if only is not None:
        wanted = {op.rung(rung_id).id for rung_id in only}          # KeyError names the known rungs
        wanted |= {op.rung(rung_id).metadata.parent_id for rung_id in only} - {None}
        wanted.add(TORCH_BASELINE)
        rungs = [rung for rung in rungs if rung.id in wanted]
    return rungs


def check_ladder(op: Op | str, *, route: str | None = None, rungs: list[Rung] | None = None, shapes=None,
                 dtypes=None, seeds=None, max_elements: int | None = None, root=None,
                 built: dict[str, BuiltRung] | None = None, progress=None) -> dict[str, CheckReport]:
    """check_rung for every selected rung on the edge shapes (only those up to ``max_elements``: the
    Triton interpreter takes ~0.6 ms per program), with one set of seeds shared by all rungs, and one set
    of cases: a shape at a time, each case (inputs, probe, reference) is made once and every rung is
    checked against it (:class:`~.checking.CaseCache`).

    ``progress(total)`` returns the function to call after each case (a progress bar: see ``cli``)."""
    op = load_op(op, root) if isinstance(op, str) else op
    rungs = rungs if rungs is not None else select_rungs(op, route)
    shapes = [s for s in (shapes or op.spec.EDGE_SHAPES) if max_elements is None or numel(s) <= max_elements]
    seeds = tuple(seeds) if seeds is not None else fresh_seeds()
    advance = None
    if progress is not None:
        per_rung = case_count(op.spec, shapes, dtypes or op.spec.DTYPES, len(seeds))
        advance = progress(per_rung * sum(rung.skip_reason() is None for rung in rungs))
    built = dict(built or {})
    reports: dict[str, CheckReport] = {}
    for rung in rungs:            # each rung built once, not once per shape; a skip or a build error is its report
        if rung.skip_reason() is not None:
            reports[rung.id] = check_rung(rung, op, shapes, dtypes, seeds)
        elif rung.id not in built:
            built[rung.id], error = build_error(rung)
            if error:
                reports[rung.id] = CheckReport(rung.id, seeds, error=error)
    runnable = [rung for rung in rungs if rung.id not in reports]
    for shape in shapes:
        cases = CaseCache(op.spec)         # this shape's cases, for every rung; dropped before the next shape
        for rung in runnable:
            part = check_rung(rung, op, [shape], dtypes, seeds, built=built[rung.id], progress=advance, cases=cases)
            report = reports.setdefault(rung.id, part)
            if report is not part:         # a dtype skipped for the rung is reported once, not once per shape
                report.cases += [case for case in part.cases if not (case.skipped and case in report.cases)]
    for rung in runnable:                  # no shape left to check (max_elements): a report with no cases
        reports.setdefault(rung.id, CheckReport(rung.id, seeds))
    return {rung.id: reports[rung.id] for rung in rungs}


# ------------------------------------------------------------------------------------------ timing


def _time_shape(op: Op, dtype: str, shape, rungs: list[Rung], built: dict[str, BuiltRung], result: LadderResult,
                advance, *, device: str = "cuda", seconds: float | None = None, cache: str = "cold") -> None:
    """Check, time and compare ``rungs`` at one shape. ``seconds`` caps each measurement and comparison
    (default: the bench defaults); ``device="cpu"`` times with the wall clock (the CPU-tier test);
    ``cache`` is the flush before every timed call (bench.timing: "cold" or "cold-clean")."""
    limits = {"cache": cache, **({"max_seconds": seconds} if seconds else {})}
    spec = op.spec
    seed = fresh_seeds(1)[0]
    # The inputs, block probe and references of this shape, made once for every rung (issue 22: rebuilt per
    # rung, attention's four shapes did not finish in 290 s); the timed inputs are the "normal" case's.
    cases = CaseCache(spec)
    timed_case = cases.case(shape, dtype, seed, "normal", device)
    inputs = timed_case.inputs
    work = spec.work(shape, dtype)
    label = shape_label(shape)
    timed: dict[str, TimedRung] = {}
    for rung in rungs:
        call = built[rung.id]
        check = check_rung(rung, op, [shape], [dtype], [seed], ("normal",), built=call, cases=cases)
        if not check.passed:
            result.not_timed.append((rung.id, label, f"incorrect at this size: {check.reason}"))
            advance()
            continue
        measurement = measure(lambda call=call: call(*inputs), work=work, **limits)
        changed = timed_case.changed_inputs()
        if changed:         # the check's calls left them alone, the timed ones did not: void, and restored
            timed_case.restore()
            result.not_timed.append((rung.id, label, f"wrote into its input(s) {changed} while timed: "
                                                     f"inputs must be read-only"))
            advance()
            continue
        timed[rung.id] = TimedRung(rung, shape, measurement, check)
        advance()
    baseline = timed.get(TORCH_BASELINE)
    for entry in timed.values():
        function = built[entry.rung.id]
        candidate = lambda function=function: function(*inputs)      # noqa: E731
        parent = timed.get(entry.rung.metadata.parent_id or "")
        if baseline is not None and entry is not baseline:
            entry.vs_torch = compare(lambda: built[TORCH_BASELINE](*inputs), candidate, **limits)
        if parent is not None and parent is not baseline:
            entry.vs_parent = compare(lambda parent=parent: built[parent.rung.id](*inputs), candidate, **limits)
        elif parent is not None:
            entry.vs_parent = entry.vs_torch                         # the parent is the baseline: one comparison
        advance()
    contending = _compare_best_with_baselines(timed, built, inputs, limits)
    _measure_call_times([entry for entry in timed.values() if entry.rung.is_baseline] + contending, built, inputs,
                        limits, measure)
    changed = timed_case.changed_inputs()
    if changed:
        raise RuntimeError(f"{op.name} {label}: input(s) {changed} changed during the paired comparisons, though "
                           f"every rung left them alone when checked and timed alone; these comparisons are void")
    result.timed += timed.values()


CALL_TIME_SECONDS = 1.0      # per measurement: the call time is a second figure beside the device time


def _measure_call_times(entries: list[TimedRung], built: dict[str, BuiltRung], inputs, limits, measure) -> None:
    """What a user pays per call (``measure(mode="call")``: from an idle GPU, host launch path included)
    for the baselines and each route's contenders: a rung that wins on device time and loses on call
    time has not won at sizes where the host is the cost."""
    for entry in entries:
        function = built[entry.rung.id]
        entry.call_time = measure(lambda function=function: function(*inputs), mode="call",
                                  **{**limits, "max_seconds": min(limits.get("max_seconds", CALL_TIME_SECONDS),
                                                                  CALL_TIME_SECONDS)})


def _paired_speed(entry: TimedRung) -> float:
    """Speedup over torch when it was paired, else 1 / cold median: higher is faster."""
    if entry.vs_torch is not None:
        return entry.vs_torch.speedup.value
    return 1.0 / entry.measurement.summary.median


# A route's rungs paired with torch.compile and the peers: its best, and those close behind it.
CONTENDERS = 3              # at most this many a route
CONTENDER_MARGIN = 0.03     # within 3% of the best's paired speedup over torch


def contenders(candidates: list[TimedRung]) -> list[TimedRung]:
    """The rungs of one route to pair with the other baselines, fastest first: the best, and up to
    CONTENDERS - 1 more within CONTENDER_MARGIN of it. Rungs that close are a coin toss apart: at
    rms_norm bfloat16 8192x4096 (run of 35e06ab) t03 led t07 by 0.6% against torch and was paired
    with Liger (1.006x), while t07's median was the shape's fastest (36.1 us against 37.8)."""
    ranked = sorted(candidates, key=_paired_speed, reverse=True)
    if not ranked:
        return []
    floor = _paired_speed(ranked[0]) * (1 - CONTENDER_MARGIN)
    return [entry for entry in ranked[:CONTENDERS] if _paired_speed(entry) >= floor]


def _compare_best_with_baselines(timed: dict[str, TimedRung], built: dict[str, BuiltRung], inputs, limits) -> list[TimedRung]:
    """The targets are ratios of a route's best rung to torch.compile and to the peers: measure those pairs.

    "Best" is the highest paired speedup over torch (the separate cold medians are noisier: at
    4096x1024 softmax, ~13 us, they picked t01 while t07 was 1.05x faster paired, run of 152c451),
    or the lowest median where no torch pairing exists; the rungs within 3% of it are compared too
    (``contenders``). That keeps a ladder of ten rungs and two peers to at most six extra
    comparisons per route and shape, not twenty.
    """
    others = [entry for rung_id, entry in timed.items() if entry.rung.is_baseline and rung_id != TORCH_BASELINE]
    contending = []
    for route in ROUTES:
        candidates = [entry for entry in timed.values() if entry.rung.route == route]
        contending += contenders(candidates)
        if not candidates or not others:
            continue
        for best in contenders(candidates):
            function = built[best.rung.id]
            for other in others:
                baseline = built[other.rung.id]
                best.vs_baselines[other.rung.id] = compare(lambda baseline=baseline: baseline(*inputs),
                                                           lambda function=function: function(*inputs), **limits)
    return contending


def not_timed_after_checks(checks: dict[str, CheckReport]) -> list[tuple[str, str, str]]:
    """(rung id, "all", why) for each rung the edge-shape checks keep from timing: a FAIL, a build error,
    or a skip with its reason (``skipped: requires nvidia sm_90a; this GPU is amd gfx1201``). They go
    into the record's ``not_timed``, so a rung this machine cannot run is visible there, never a pass."""
    return [(rung_id, "all", f"{report.status}: {report.reason}") for rung_id, report in checks.items()
            if not report.passed]


def run_ladder(op: Op | str, route: str | None = None, shapes=None, dtype: str = "float32", record_dir=None,
               progress: bool = True, *, root=None, only: list[str] | None = None, cache: str = "cold") -> LadderResult:
    """Check, time and compare the ladder of ``op`` on this GPU; write a record when ``record_dir`` is given.

    ``route`` keeps one route's rungs (with the torch baselines); ``only`` keeps the named rungs (with
    their parents and v00_torch); ``shapes`` defaults to the spec's BENCH_SHAPES. A relative
    ``record_dir`` is taken from the repository root, and the plot is saved next to the record.
    ``cache="cold-clean"`` times after a flush that leaves no modified lines in the L2 (see
    bench.timing): to see what a short kernel pays for other data's write-back. Records hold
    ``cold`` timings only, the convention every committed figure and target uses.
    """
    if cache not in ("cold", "cold-clean"):
        raise ValueError(f"cache must be 'cold' or 'cold-clean', got {cache!r}")
    if cache != "cold" and record_dir is not None:
        raise ValueError(f"records hold cold timings (the zeroing flush, as do_bench): a ladder timed with "
                         f"cache={cache!r} is for comparison on screen, not for a record")
    op = load_op(op, root) if isinstance(op, str) else op
    require_gpu()
    if triton_interpreter_on():
        raise RuntimeError("TRITON_INTERPRET=1 is set: Triton rungs would run on the CPU; unset it to time on the GPU")
    if dtype not in op.spec.DTYPES:
        raise ValueError(f"{op.name} is defined for {', '.join(op.spec.DTYPES)}, not {dtype}")
    clocks_start = manifest.read_clocks()
    rungs = select_rungs(op, route, only)
    built: dict[str, BuiltRung] = {}
    for rung in rungs:
        if rung.skip_reason() is None:
            try:
                built[rung.id] = rung.build()
            except Exception:  # noqa: BLE001 - check_rung builds it again and reports the error
                pass
    checks = check_ladder(op, rungs=rungs, dtypes=[dtype], built=built)
    shapes = list(shapes or op.spec.BENCH_SHAPES)
    result = LadderResult(op, dtype, shapes, checks)
    result.not_timed += not_timed_after_checks(checks)
    correct = [rung for rung in rungs if checks[rung.id].passed]
    steps = 2 * len(correct) * len(shapes)
    if progress and steps:
        from rich.progress import Progress
        with Progress(transient=True) as bar:
            task = bar.add_task(f"{op.name} ladder ({dtype})", total=steps)
            for shape in shapes:
                _time_shape(op, dtype, shape, correct, built, result, lambda: bar.advance(task), cache=cache)
    else:
        for shape in shapes:
            _time_shape(op, dtype, shape, correct, built, result, lambda: None, cache=cache)
    if result.timed:
        result.record = ladder_record(result, route=route, clocks_start=clocks_start)
    if record_dir is not None and result.record is not None:
        _write(result, Path(record_dir))
    return result


# ------------------------------------------------------------------------------------------ the record


def _speedup(comparison) -> dict:
    """A record's speedup: Ratio.to_dict() and the verdict (the schema has no room for the margin)."""
    data = comparison.speedup.to_dict()
    data["verdict"] = comparison.verdict
    return data


def _evidence(edge: CheckReport | None, size: CheckReport) -> dict:
    evidence = size.evidence()
    if edge is not None:
        evidence = {**edge.evidence(), "timed_shape": size.evidence()}
        evidence["passed"] = edge.passed and size.passed
    return evidence


def ladder_record(result: LadderResult, *, route: str | None = None, device: dict | None = None,
                  environment: dict | None = None, clocks_start: dict | None = None, name: str | None = None) -> dict:
    """The record (kind "ladder") of a run: one entry per rung and shape.

    Torch rungs are the baselines (role "baseline"); ``speedups`` holds the paired speedup against
    ``v00_torch`` (the only baseline every entry shares a shape with). The speedup against the parent,
    usually a candidate and so not a schema baseline, goes in the entry's ``extra``.
    """
    op = result.op
    if environment is None:
        environment = manifest.environment_manifest()
        environment.update(clocks_start=clocks_start, clocks_end=manifest.read_clocks())
    device = device or device_from_manifest(environment)
    root = repository_root(op.path)
    entries = []
    for timed in result.timed:
        rung, header, measurement = timed.rung, timed.rung.metadata, timed.measurement
        extra = {"route": rung.route, "parent": header.parent, "change": header.change,
                 "hypothesis": header.hypothesis, "prediction": header.prediction, "outcome": header.outcome,
                 "stopped_by": measurement.stopped_by, "notes": measurement.notes}
        if timed.vs_parent is not None:
            extra["speedup_vs_parent"] = {"parent": header.parent_id, **_speedup(timed.vs_parent)}
        if timed.call_time is not None:
            extra["call_timing"] = {**timed.call_time.timing_dict(), "mode": "call"}
        entry = {"variant": rung.id, "role": "baseline" if rung.is_baseline else "candidate",
                 **rung_source_fields(rung, root), "shape": shape_label(timed.shape), "dtype": result.dtype,
                 "correctness": _evidence(result.checks.get(rung.id), timed.check),
                 "timing": measurement.timing_dict(),
                 "work": measurement.work.to_dict() if measurement.work else None,
                 "derived": measurement.rates.to_dict() if measurement.rates else None, "extra": extra}
        if timed.vs_torch is not None:
            entry["speedups"] = {TORCH_BASELINE: _speedup(timed.vs_torch)}
        if timed.vs_baselines:
            entry.setdefault("speedups", {}).update({name: _speedup(c) for name, c in timed.vs_baselines.items()})
        entries.append(entry)
    ceilings = None
    if device.get("slug") and environment.get("gpu"):
        cached = cached_ceilings()
        if cached is not None:
            ceilings = {"copy_bytes_per_s": cached.copy_bytes_per_s, "matmul_flops_per_s": cached.matmul_flops_per_s}
    name = name or ".".join(part for part in (op.name, route, result.dtype) if part)
    not_timed = [{"variant": rung_id, "shape": shape, "reason": why} for rung_id, shape, why in result.not_timed]
    return new_record(name, "ladder", device=device, environment=environment, entries=entries, ceilings=ceilings,
                      extra={"op": op.name, "route": route, "not_timed": not_timed,
                             "shapes": [shape_label(s) for s in result.shapes]})


def _write(result: LadderResult, record_dir: Path) -> None:
    from ..bench.plots import save
    result.record_path = write_record(result.record, record_dir, repo_root=repository_root(result.op.path),
                                      rules=record_rules(result.op.path.parent))
    result.plot_paths = save(result.figure(), result.record_path.with_suffix(""))    # NAME.png, NAME.svg beside it


# ------------------------------------------------------------------------------------------ tables


def _speedup_cell(comparison) -> str:
    if comparison is None:
        return "-"
    low, high = comparison.speedup.ci95
    return f"{comparison.speedup.value:.2f}x [{low:.2f}, {high:.2f}] {comparison.verdict}"


def ladder_table(result: LadderResult):
    """Time, rate, % of ceiling and the speedups (with their 95% intervals), one row per rung and shape.

    The last column holds the fastest rungs of each route (``contenders``) against the other baselines
    (torch.compile, peers).
    """
    from rich.table import Table

    caches = {timed.measurement.cache for timed in result.timed}
    flush = ", after a clean flush (cache=cold-clean): not comparable with the records" if "cold-clean" in caches else ""
    table = Table(title=f"{result.op.name} ladder, {result.dtype}{flush}")
    for column in ("rung", "shape", "median µs [95% CI]", "rate", "% of copy", "vs parent", "vs v00_torch",
                   "fastest of route vs"):
        table.add_column(column, justify="left" if column in ("rung", "shape") else "right")
    for timed in result.timed:
        summary, rates = timed.measurement.summary, timed.measurement.rates
        low, high = summary.ci95
        time = f"{format_figure(summary.median * 1e6)} [{format_figure(low * 1e6)}, {format_figure(high * 1e6)}]"
        rate, fraction = "-", "-"
        if rates is not None:
            # An add or a sum moves bytes, it does not compute: show GB/s unless FLOPs dominate.
            compute_bound = rates.arithmetic_intensity is not None and rates.arithmetic_intensity > 10
            if compute_bound and rates.tflop_per_s:
                rate = f"{format_figure(rates.tflop_per_s)} TFLOP/s"
                fraction = f"{rates.compute_fraction:.0%}" if rates.compute_fraction else "-"
            elif rates.gb_per_s:
                rate = f"{format_figure(rates.gb_per_s)} GB/s"
                fraction = f"{rates.bandwidth_fraction:.0%}" if rates.bandwidth_fraction else "-"
            if rates.suspect:
                rate, fraction = "SUSPECT", rates.suspect
        others = "\n".join(f"{name}: {_speedup_cell(comparison)}" for name, comparison in timed.vs_baselines.items())
        table.add_row(timed.rung.id, shape_label(timed.shape), time, rate, fraction,
                      _speedup_cell(timed.vs_parent), _speedup_cell(timed.vs_torch), others or "-")
    return table


def checks_table(op: Op, reports: dict[str, CheckReport]):
    """One row per rung: pass / FAIL / skipped, how many cases ran, the worst errors and the reason."""
    from rich.table import Table
    from rich.text import Text
    table = Table(title=f"{op.name}: correctness",
                  caption="error / allowed: the worst element's error over what its tolerance allows (a pass is "
                          "at most 1, whatever the magnitudes); refused: non-contiguous inputs refused before launch")
    for column in ("rung", "route", "status", "cases", "error / allowed", "reason"):
        table.add_column(column, justify="right" if column in ("cases", "error / allowed") else "left",
                         overflow="fold")
    styles = {"pass": "green", "FAIL": "bold red", "skipped": "yellow"}
    for rung_id, report in reports.items():
        rung = op.rung(rung_id)
        worst = report.worst_error_over_allowed
        if report.status == "pass":
            notes = [f"{case.dtype} not checked: {case.reason}" for case in report.cases if case.skipped]
            refused = report.evidence()["layouts_refused"]
            notes += [f"refused {', '.join(name.removeprefix('layout ') for name in refused)}"] if refused else []
            reason = "; ".join(sorted(set(notes)))
        else:
            reason = report.reason
        table.add_row(rung_id, rung.route, f"[{styles[report.status]}]{report.status}[/]", str(len(report.ran)),
                      f"{worst:.2g}" if worst is not None else "-", Text(reason))
    return table
