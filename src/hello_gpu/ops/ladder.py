"""``run_ladder``: check every rung, time the correct ones in one run, compare each with its parent and
with the torch baseline, and write it all down as a record.

Order matters. Correctness first: a rung that fails is reported and never timed, since a fast wrong
answer is not a data point. Then, per benchmark shape, one set of inputs is drawn, every rung is
checked once more at that very size (a bug can hide above the edge shapes: an int32 index, a grid
limit), timed cold with :func:`hello_gpu.bench.measure` under the spec's work model, and compared
paired and interleaved (ABBA, :func:`hello_gpu.bench.compare`) with its parent and with ``v00_torch``,
all in the same process, so clocks and temperature are shared.

Time is bounded and accounted for. A spec may set ``TIMING_SECONDS``: what one measurement or one paired
comparison of a rung may take at one shape, warm-up included; a call too slow for the usual procedure within it
is timed fewer times (:func:`measure_limits`, :func:`compare_limits`), and its notes and interval say so. Each
finished step prints one line on stderr (:class:`LadderLog`), flushed, so a run killed at a time limit still shows
where its time went. With a record directory, the record is written after every shape, merged with the record
already there (:func:`merge_ladder_records`): the shapes of an earlier run that this one does not measure are kept
while every file they ran is as it was, so a ladder can be split over several calls.

The checks of a ladder share their cases (:class:`~.checking.CaseCache`): each (shape, dtype, seed,
distribution)'s inputs, block probe and reference are made once, on the GPU, for all the rungs, one
shape at a time so that only one shape's cases are held. The timed inputs are the timing shape's
"normal" case, proven unchanged after each rung's timing.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..bench import compare, measure
from ..bench.ceilings import cached_ceilings
from ..bench.records import (device_from_manifest, device_slug, entry_findings, format_figure, load_json, new_record,
                             repository_root, validate_record, write_record)
from ..bench.timing import BATCH, WARMUP_WINDOW
from ..runtime import manifest
from ..runtime.device import device_info, require_gpu
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
                 built: dict[str, BuiltRung] | None = None, progress=None, log=None) -> dict[str, CheckReport]:
    """check_rung for every selected rung on the edge shapes (only those up to ``max_elements``: the
    Triton interpreter takes ~0.6 ms per program), with one set of seeds shared by all rungs, and one set
    of cases: a shape at a time, each case (inputs, probe, reference) is made once and every rung is
    checked against it (:class:`~.checking.CaseCache`).

    ``progress(total)`` returns the function to call after each case (a progress bar: see ``cli``); ``log``
    (a :class:`LadderLog`) gets one line a shape: how long its checks took and which rungs took longest
    (a rung's first call at a shape includes its compiles: Triton JIT and autotuning, torch.compile)."""
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
        seconds: dict[str, float] = {}
        for rung in runnable:
            started = time.perf_counter()
            part = check_rung(rung, op, [shape], dtypes, seeds, built=built[rung.id], progress=advance, cases=cases)
            seconds[rung.id] = time.perf_counter() - started
            report = reports.setdefault(rung.id, part)
            if report is not part:         # a dtype skipped for the rung is reported once, not once per shape
                report.cases += [case for case in part.cases if not (case.skipped and case in report.cases)]
        if log is not None:
            log(f"edge shape {shape_label(shape)}: {len(runnable)} rungs checked in {sum(seconds.values()):.1f} s"
                f"{_slowest(seconds)}")
    for rung in runnable:                  # no shape left to check (max_elements): a report with no cases
        reports.setdefault(rung.id, CheckReport(rung.id, seeds))
    return {rung.id: reports[rung.id] for rung in rungs}


def _slowest(seconds: dict[str, float], count: int = 3) -> str:
    """" (slowest: t03 12.1 s, peer_x 4.0 s, ...)" for the ``count`` largest of ``seconds``."""
    ranked = sorted(seconds.items(), key=lambda item: item[1], reverse=True)[:count]
    return f" (slowest: {', '.join(f'{name} {value:.1f} s' for name, value in ranked)})" if ranked else ""


def _duration(seconds: float) -> str:
    """137 ms, 2.02 us, 1.3 s: a call's time in the unit that reads at a glance."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e6:.3g} us"


class LadderLog:
    """One line a finished step, on stderr, flushed at once, with the seconds since the ladder began: a run that
    is killed (a time limit, a hung kernel) still shows which rung and shape its time went to. The table and
    the record come at the end; these lines are the evidence on the way (issue 22: two attention ladders were
    killed at 290 s and 548 s with nothing printed)."""

    def __init__(self, op_name: str, dtype: str, stream=None):
        self.prefix = f"ladder {op_name} {dtype}"
        self.stream = stream
        self.started = time.perf_counter()

    def __call__(self, text: str) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        print(f"[{self.prefix} +{time.perf_counter() - self.started:.0f}s] {text}", file=stream, flush=True)


# ------------------------------------------------------------------------------------------ time budget

# A spec's TIMING_SECONDS bounds each measurement and each paired comparison of one rung at one shape, warm-up
# included (attention's: the time model in its spec.py). Without it the bench defaults apply, unchanged.
MIN_BUDGET_REPEATS = 3                             # timed calls, or ABBA rounds, kept however slow a call is
MEASURE_CALLS = 1 + 3 * WARMUP_WINDOW + BATCH      # 26: measure()'s least (one untimed, three settling windows, 10)
COMPARE_CALLS_A_SIDE = 3 + 2 * 10                  # 23: compare()'s warm-up (ABAB, AB), then its 10 ABBA rounds


def measure_limits(limits: dict, seconds_per_call: float | None, budget: float | None) -> tuple[dict, str | None]:
    """``measure()``'s arguments for a call of ``seconds_per_call`` within ``budget`` seconds, and a note.

    As given (``max_seconds`` = the budget) while measure's least (MEASURE_CALLS calls) fits the budget; else
    the first call is the whole warm-up (the check has just run the rung at this shape: compiled, and its
    memory touched) and as many calls as fit are timed, MIN_BUDGET_REPEATS at least. A 137 ms call (attention
    v02 at 4x32x32x4096x4096x128) took 26 calls, 3.6 s, a measurement; with a 1 s budget it takes 6, 0.8 s."""
    if budget is None or seconds_per_call is None or MEASURE_CALLS * seconds_per_call <= budget:
        return limits, None
    calls = max(MIN_BUDGET_REPEATS, int(budget / seconds_per_call) - 1)
    note = (f"time budget {budget:g} s a measurement: one call takes ~{seconds_per_call * 1e3:.3g} ms, so {calls} "
            f"timed calls after one untimed call (not settled warm-up windows and {BATCH} or more): a wider interval")
    return {**limits, "max_warmup_seconds": 0.0, "min_repeats": calls, "max_repeats": calls}, note


def compare_limits(limits: dict, seconds_per_pair: float, budget: float | None) -> dict:
    """``compare()``'s arguments for two callables taking ``seconds_per_pair`` together, within ``budget``: as
    given while its warm-up and 10 ABBA rounds fit (COMPARE_CALLS_A_SIDE pairs), else the rounds that fit,
    MIN_BUDGET_REPEATS at least. The record's ``pairs`` and interval say how many were paired."""
    if budget is None or COMPARE_CALLS_A_SIDE * seconds_per_pair <= budget:
        return limits
    rounds = max(MIN_BUDGET_REPEATS, int((budget / seconds_per_pair - 3) / 2))
    return {**limits, "min_rounds": rounds, "max_rounds": rounds}


def _seconds_per_call(function, inputs) -> float:
    """One call's wall time, the GPU drained before and after: what the budget divides (host time included)."""
    import torch
    on_gpu = torch.cuda.is_available() and torch.cuda.is_initialized()
    if on_gpu:
        torch.cuda.synchronize()
    started = time.perf_counter()
    function(*inputs)
    if on_gpu:
        torch.cuda.synchronize()
    return time.perf_counter() - started


def release_device_memory() -> None:
    """Hand what PyTorch's caching allocator holds unused back to the device before the next rung: a materialising
    rung's 8 GiB of scores at 4x32x32x4096x4096x128, the ~26 GiB of temporaries of an Inductor graph that
    materialises them, would otherwise stay reserved beside the next rung's own."""
    import torch
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------ timing


def _time_shape(op: Op, dtype: str, shape, rungs: list[Rung], built: dict[str, BuiltRung], result: LadderResult,
                advance, *, device: str = "cuda", seconds: float | None = None, cache: str = "cold",
                log=None) -> None:
    """Check, time and compare ``rungs`` at one shape, a rung at a time: its check at this size, its measurement,
    its comparisons with torch and with its parent. Then each route's fastest against the other baselines,
    and the call times.

    ``seconds`` is the time budget of each measurement and comparison (measure_limits, compare_limits;
    default: the bench defaults, no budget); ``device="cpu"`` times with the wall clock (the CPU-tier test);
    ``cache`` is the flush before every timed call (bench.timing: "cold" or "cold-clean"); ``log`` (a
    :class:`LadderLog`) gets one line a rung as it finishes, and one for the comparisons with the baselines."""
    limits = {"cache": cache, **({"max_seconds": seconds} if seconds else {})}
    log = log or (lambda text: None)
    spec = op.spec
    seed = fresh_seeds(1)[0]
    label = shape_label(shape)
    started = time.perf_counter()
    # The inputs, block probe and references of this shape, made once for every rung (issue 22: rebuilt per
    # rung, attention's four shapes did not finish in 290 s); the timed inputs are the "normal" case's.
    cases = CaseCache(spec)
    timed_case = cases.case(shape, dtype, seed, "normal", device)
    inputs = timed_case.inputs
    work = spec.work(shape, dtype)
    log(f"{label}: inputs and reference made in {time.perf_counter() - started:.1f} s")
    timed: dict[str, TimedRung] = {}
    # torch first: every rung is compared with it as soon as it is timed; parents precede their children.
    for rung in sorted(rungs, key=lambda rung: rung.id != TORCH_BASELINE):
        call = built[rung.id]
        begun = time.perf_counter()
        check = check_rung(rung, op, [shape], [dtype], [seed], ("normal",), built=call, cases=cases)
        checked = time.perf_counter()
        if not check.passed:
            result.not_timed.append((rung.id, label, f"incorrect at this size: {check.reason}"))
            log(f"{label} {rung.id}: not timed, incorrect at this size ({checked - begun:.1f} s): {check.reason[:160]}")
            advance()
            advance()
            continue
        per_call = _seconds_per_call(call, inputs) if seconds else None
        arguments, note = measure_limits(limits, per_call, seconds)
        measurement = measure(lambda call=call: call(*inputs), work=work, **arguments)
        if note:
            measurement.notes.append(note)
        measured = time.perf_counter()
        changed = timed_case.changed_inputs()
        if changed:         # the check's calls left them alone, the timed ones did not: void, and restored
            timed_case.restore()
            result.not_timed.append((rung.id, label, f"wrote into its input(s) {changed} while timed: "
                                                     f"inputs must be read-only"))
            log(f"{label} {rung.id}: not timed, it wrote into its inputs")
            advance()
            advance()
            continue
        entry = timed[rung.id] = TimedRung(rung, shape, measurement, check)
        advance()
        _compare_with_torch_and_parent(entry, timed, built, inputs, limits, seconds)
        release_device_memory()
        log(f"{label} {rung.id}: checked {checked - begun:.1f} s, timed {measured - checked:.1f} s "
            f"({measurement.summary.count} calls, median {_duration(measurement.median)}), compared "
            f"{time.perf_counter() - measured:.1f} s")
        advance()
    begun = time.perf_counter()
    contending = _compare_best_with_baselines(timed, built, inputs, limits, seconds)
    compared = time.perf_counter()
    _measure_call_times([entry for entry in timed.values() if entry.rung.is_baseline] + contending, built, inputs,
                        limits, measure, seconds)
    fastest = ", ".join(entry.rung.id for entry in contending) or "none"
    log(f"{label}: {sum(len(entry.vs_baselines) for entry in contending)} comparison(s) of the routes' fastest "
        f"({fastest}) with the baselines in {compared - begun:.1f} s, call times in "
        f"{time.perf_counter() - compared:.1f} s; shape done in {time.perf_counter() - started:.0f} s")
    changed = timed_case.changed_inputs()
    if changed:
        raise RuntimeError(f"{op.name} {label}: input(s) {changed} changed during the paired comparisons, though "
                           f"every rung left them alone when checked and timed alone; these comparisons are void")
    result.timed += timed.values()
    release_device_memory()


def _compare_with_torch_and_parent(entry: TimedRung, timed: dict[str, TimedRung], built: dict[str, BuiltRung], inputs,
                                   limits: dict, budget: float | None) -> None:
    """``entry`` paired with v00_torch and with its parent, where those were timed at this shape."""
    function = built[entry.rung.id]
    candidate = lambda: function(*inputs)      # noqa: E731
    baseline = timed.get(TORCH_BASELINE)
    parent = timed.get(entry.rung.metadata.parent_id or "")

    def paired(other: TimedRung):
        other_function = built[other.rung.id]
        pair = other.measurement.median + entry.measurement.median
        return compare(lambda: other_function(*inputs), candidate, **compare_limits(limits, pair, budget))
    if baseline is not None and entry is not baseline:
        entry.vs_torch = paired(baseline)
    if parent is not None and parent is not baseline:
        entry.vs_parent = paired(parent)
    elif parent is not None:
        entry.vs_parent = entry.vs_torch                         # the parent is the baseline: one comparison


CALL_TIME_SECONDS = 1.0      # per measurement: the call time is a second figure beside the device time


def _measure_call_times(entries: list[TimedRung], built: dict[str, BuiltRung], inputs, limits, measure,
                        budget: float | None = None) -> None:
    """What a user pays per call (``measure(mode="call")``: from an idle GPU, host launch path included)
    for the baselines and each route's contenders: a rung that wins on device time and loses on call
    time has not won at sizes where the host is the cost."""
    seconds = min(limits.get("max_seconds", CALL_TIME_SECONDS), CALL_TIME_SECONDS)
    for entry in entries:
        function = built[entry.rung.id]
        arguments, note = measure_limits({**limits, "max_seconds": seconds}, entry.measurement.median,
                                         None if budget is None else min(budget, seconds))
        entry.call_time = measure(lambda function=function: function(*inputs), mode="call", **arguments)
        if note:
            entry.call_time.notes.append(note)


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


def _compare_best_with_baselines(timed: dict[str, TimedRung], built: dict[str, BuiltRung], inputs, limits,
                                 budget: float | None = None) -> list[TimedRung]:
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
                pair = best.measurement.median + other.measurement.median
                best.vs_baselines[other.rung.id] = compare(lambda baseline=baseline: baseline(*inputs),
                                                           lambda function=function: function(*inputs),
                                                           **compare_limits(limits, pair, budget))
            release_device_memory()
    return contending


def not_timed_after_checks(checks: dict[str, CheckReport]) -> list[tuple[str, str, str]]:
    """(rung id, "all", why) for each rung the edge-shape checks keep from timing: a FAIL, a build error,
    or a skip with its reason (``skipped: requires nvidia sm_90a; this GPU is amd gfx1201``). They go
    into the record's ``not_timed``, so a rung this machine cannot run is visible there, never a pass."""
    return [(rung_id, "all", f"{report.status}: {report.reason}") for rung_id, report in checks.items()
            if not report.passed]


def run_ladder(op: Op | str, route: str | None = None, shapes=None, dtype: str = "float32", record_dir=None,
               progress: bool = True, *, root=None, only: list[str] | None = None, cache: str = "cold",
               seconds: float | None = None, log=None) -> LadderResult:
    """Check, time and compare the ladder of ``op`` on this GPU; write a record when ``record_dir`` is given.

    ``route`` keeps one route's rungs (with the torch baselines); ``only`` keeps the named rungs (with
    their parents and v00_torch); ``shapes`` defaults to the spec's BENCH_SHAPES. A relative
    ``record_dir`` is taken from the repository root; the record there is rewritten after every shape,
    merged with the one it replaces (:func:`merge_ladder_records`), and the plot is saved next to it at the end.
    ``cache="cold-clean"`` times after a flush that leaves no modified lines in the L2 (see
    bench.timing): to see what a short kernel pays for other data's write-back. Records hold
    ``cold`` timings only, the convention every committed figure and target uses.
    ``seconds``: the time budget of each measurement and comparison (default: the spec's TIMING_SECONDS, else
    none); ``log``: where the progress lines go (default: a :class:`LadderLog` on stderr).
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
    log = log or LadderLog(op.name, dtype)
    seconds = seconds if seconds is not None else getattr(op.spec, "TIMING_SECONDS", None)
    clocks_start = manifest.read_clocks()
    rungs = select_rungs(op, route, only)
    built: dict[str, BuiltRung] = {}
    build_seconds: dict[str, float] = {}
    for rung in rungs:
        if rung.skip_reason() is None:
            started = time.perf_counter()
            try:
                built[rung.id] = rung.build()
            except Exception:  # noqa: BLE001 - check_rung builds it again and reports the error
                pass
            build_seconds[rung.id] = time.perf_counter() - started
    log(f"{len(built)} of {len(rungs)} rungs built in {sum(build_seconds.values()):.1f} s{_slowest(build_seconds)}")
    checks = check_ladder(op, rungs=rungs, dtypes=[dtype], built=built, log=log)
    shapes = list(shapes or op.spec.BENCH_SHAPES)
    result = LadderResult(op, dtype, shapes, checks)
    result.not_timed += not_timed_after_checks(checks)
    correct = [rung for rung in rungs if checks[rung.id].passed]
    log(f"edge checks done: {len(correct)} of {len(rungs)} rungs correct; timing {len(shapes)} shape(s)"
        + (f", {seconds:g} s a measurement or comparison at most" if seconds else ""))
    previous = _previous_record(result, route, Path(record_dir), log) if record_dir is not None else None
    done: list = []
    said: list[str] = []

    def time_shapes(advance):
        for shape in shapes:
            _time_shape(op, dtype, shape, correct, built, result, advance, cache=cache, seconds=seconds, log=log)
            done.append(shape)
            if record_dir is not None and result.timed and len(done) < len(shapes):
                # What is measured so far, on disk: a run killed at a later shape keeps this one.
                result.record = _merged_record(result, route, clocks_start, previous, done, said, log)
                _write(result, Path(record_dir), plot=False)
                log(f"record written after {shape_label(shape)}: {result.record_path}")

    steps = 2 * len(correct) * len(shapes)
    if progress and steps:
        from rich.progress import Progress
        with Progress(transient=True) as bar:
            task = bar.add_task(f"{op.name} ladder ({dtype})", total=steps)
            time_shapes(lambda: bar.advance(task))
    else:
        time_shapes(lambda: None)
    if result.timed:
        result.record = _merged_record(result, route, clocks_start, previous, shapes, said, log)
    if record_dir is not None and result.record is not None:
        _write(result, Path(record_dir))
        log(f"record written: {result.record_path}")
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
                  environment: dict | None = None, clocks_start: dict | None = None, name: str | None = None,
                  shapes=None) -> dict:
    """The record (kind "ladder") of a run: one entry per rung and shape.

    Torch rungs are the baselines (role "baseline"); ``speedups`` holds the paired speedup against
    ``v00_torch`` (the only baseline every entry shares a shape with). The speedup against the parent,
    usually a candidate and so not a schema baseline, goes in the entry's ``extra``. ``shapes``: the shapes
    the record covers (default: every shape of the run; fewer while it is still running).
    """
    op = result.op
    shapes = result.shapes if shapes is None else shapes
    labels = {shape_label(s) for s in shapes}
    if environment is None:
        environment = manifest.environment_manifest()
        environment.update(clocks_start=clocks_start, clocks_end=manifest.read_clocks())
    device = device or device_from_manifest(environment)
    root = repository_root(op.path)
    entries = []
    for timed in result.timed:
        if shape_label(timed.shape) not in labels:
            continue
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
    name = name or record_name(op, route, result.dtype)
    not_timed = [{"variant": rung_id, "shape": shape, "reason": why} for rung_id, shape, why in result.not_timed
                 if shape == "all" or shape in labels]
    return new_record(name, "ladder", device=device, environment=environment, entries=entries, ceilings=ceilings,
                      extra={"op": op.name, "route": route, "not_timed": not_timed,
                             "shapes": [shape_label(s) for s in shapes]})


def record_name(op: Op, route: str | None, dtype: str) -> str:
    """A ladder record's name: ``OP[.ROUTE].DTYPE`` (its file: records/<device>/NAME.json)."""
    return ".".join(part for part in (op.name, route, dtype) if part)


def _write(result: LadderResult, record_dir: Path, plot: bool = True) -> None:
    from ..bench.plots import save
    result.record_path = write_record(result.record, record_dir, repo_root=repository_root(result.op.path),
                                      rules=record_rules(result.op.path.parent))
    if plot:
        result.plot_paths = save(result.figure(), result.record_path.with_suffix(""))    # NAME.png, NAME.svg beside it


# ------------------------------------------------------------------------------------------ merging records


def _previous_record(result: LadderResult, route: str | None, record_dir: Path, log) -> dict | None:
    """The record this run's would replace (same file: device, op, route, dtype), read before anything is
    written, or None (there is none)."""
    root = repository_root(result.op.path)
    directory = record_dir if record_dir.is_absolute() else root / record_dir
    path = directory / device_slug(device_info().name) / f"{record_name(result.op, route, result.dtype)}.json"
    if not path.is_file():
        return None
    data, error = load_json(path, root)
    if error:
        log(f"the record there is not merged, it is replaced: {error}")
        return None
    log(f"merging into {path}: its shapes this run does not measure are kept while their files are unchanged")
    return data


def _merged_record(result: LadderResult, route: str | None, clocks_start, previous: dict | None, shapes,
                   said: list[str], log) -> dict:
    """The record of ``shapes`` so far, merged with ``previous``; what the merge leaves out is logged once."""
    record = ladder_record(result, route=route, clocks_start=clocks_start, shapes=shapes)
    if previous is None:
        return record
    merged, dropped = merge_ladder_records(previous, record, repository_root(result.op.path),
                                           record_rules(result.op.path.parent))
    for line in dropped:
        if line not in said:
            said.append(line)
            log(line)
    return merged


# The environment of each run a merged record holds (extra.runs): what a kept shape was measured with.
RUN_ENVIRONMENT = ("torch", "triton", "nvrtc", "driver", "cuda_runtime", "hip_runtime")


def _run_summary(record: dict, shapes: list[str]) -> dict:
    environment = record.get("environment", {})
    git = environment.get("git", {})
    return {"created": record["created"], "commit": git.get("commit"), "dirty": git.get("dirty"), "shapes": shapes,
            **{key: environment[key] for key in RUN_ENVIRONMENT if key in environment}}


def _shapes_of(record: dict) -> list[str]:
    """A ladder record's shapes, in its order: ``extra.shapes``, then any shape only its entries name."""
    shapes = list(record.get("extra", {}).get("shapes") or [])
    for entry in record["entries"]:
        if entry["shape"] not in shapes:
            shapes.append(entry["shape"])
    return shapes


def merge_ladder_records(previous: dict, current: dict, repo_root: Path, rules) -> tuple[dict, list[str]]:
    """``current`` (this run's record) with the shapes of ``previous`` (the record it replaces) that it did not
    measure, and what was left out and why.

    A shape is the unit: each shape's entries, baselines and paired speedups come from one run, so a speedup
    never pairs figures of two runs. A shape of ``previous`` is kept when ``current`` does not cover it and
    every entry of it is as measured (``records check``'s test: no file it ran has changed, none gone, none
    added); a shape with one stale entry is dropped whole (its speedups name its baselines). ``previous`` is
    not merged at all when it is not a valid ladder record of the same name, device, op, route and dtype.
    The result's ``extra.runs`` lists each run it holds (created, commit, versions, shapes), present only
    when more than one run contributed."""
    current_extra = current["extra"]
    problems = validate_record(previous)
    if not problems:
        extra = previous.get("extra", {})
        dtypes = {entry["dtype"] for entry in previous["entries"] + current["entries"]}
        problems = [f"its {what} differs" for what, same in (
            ("kind", previous["kind"] == "ladder"), ("name", previous["name"] == current["name"]),
            ("device", previous["device"]["slug"] == current["device"]["slug"]),
            ("op", extra.get("op") == current_extra["op"]), ("route", extra.get("route") == current_extra["route"]),
            ("dtype", len(dtypes) <= 1)) if not same]
    if problems:
        return current, [f"the previous record {previous.get('name')!r} is replaced, not merged: {problems[0]}"]
    measured = set(current_extra["shapes"])
    findings = entry_findings(previous, repo_root, rules)
    kept, dropped = [], []
    for shape in _shapes_of(previous):
        if shape in measured:
            continue
        stale = [f"{entry['variant']}: {finding[0]}" for entry, finding in zip(previous["entries"], findings)
                 if entry["shape"] == shape and finding]
        if stale:
            dropped.append(f"previous record, shape {shape} dropped: {stale[0]}"
                           + (f" (and {len(stale) - 1} more)" if len(stale) > 1 else ""))
        else:
            kept.append(shape)
    if not kept:
        return current, dropped
    order = [shape for shape in _shapes_of(previous) if shape in kept or shape in measured]
    order += [shape for shape in current_extra["shapes"] if shape not in order]
    by_shape: dict[str, list] = {shape: [] for shape in order}
    for entry in previous["entries"]:
        if entry["shape"] in kept:
            by_shape[entry["shape"]].append(entry)
    for entry in current["entries"]:
        by_shape[entry["shape"]].append(entry)
    runs = [dict(run, shapes=[shape for shape in run["shapes"] if shape in kept])
            for run in previous["extra"].get("runs") or [_run_summary(previous, _shapes_of(previous))]]
    runs = [run for run in runs if run["shapes"]] + [_run_summary(current, current_extra["shapes"])]
    not_timed = current_extra["not_timed"] + [item for item in previous["extra"].get("not_timed", [])
                                              if item.get("shape") in kept]
    merged = dict(current, entries=[entry for shape in order for entry in by_shape[shape]],
                  extra={**current_extra, "shapes": order, "not_timed": not_timed, "runs": runs})
    return merged, dropped


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
