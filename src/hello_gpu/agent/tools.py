"""The agent's tools: compile, check, bench, compare, analyze, accept, record. Typed, JSON in and out.

Each tool takes :class:`~hello_gpu.agent.candidate.Candidate` objects and a
:class:`~hello_gpu.agent.task.Task` and returns a dataclass with ``to_dict()`` / ``from_dict()``, so a
policy, the loop and a person in a notebook call the same thing and store the same JSON::

    from hello_gpu.agent import tools
    result = tools.check(candidate, task)
    result.passed, result.reason, result.to_dict()

Every step that runs candidate code goes through :func:`hello_gpu.agent.sandbox.run_candidate_step`:
a child process with a time limit, so a hung or crashing candidate ends as a result (``status``
"timeout" or "crashed"), never as an exception here. Without a GPU, Triton candidates run in the
interpreter on CPU tensors and times come from the wall clock (``clock: "wall"``): fine for tests,
no figure for a record.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..bench.records import PLAIN, write_record
from ..ops.sources import repository_rules
from . import accept as accept_rule
from .candidate import Candidate
from .sandbox import run_candidate_step
from .store import task_to_dict

COMPILE_TIMEOUT_S = 180.0
CHECK_TIMEOUT_S = 600.0
BENCH_TIMEOUT_S = 300.0
COMPARE_TIMEOUT_S = 300.0
ANALYZE_TIMEOUT_S = 600.0


class _Result:
    """``to_dict`` / ``from_dict`` for the result dataclasses (unknown keys are ignored on the way in)."""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict):
        return cls(**{key: value for key, value in data.items() if key in cls.__dataclass_fields__})


def _failure_text(raw: dict) -> str:
    return f"{raw.get('status')}: {raw.get('detail', '')}".strip()


@dataclass
class CompileResult(_Result):
    ok: bool
    status: str                                  # the sandbox's: "ok", "timeout" or "crashed"
    route: str = ""
    message: str = ""
    errors: list = field(default_factory=list)   # {"line", "column", "message"} at the candidate's own lines
    resources: dict | None = None                # HIP: per dtype; Triton on a GPU: {"kernels": [...]} compiled
                                                 # by one call per dtype (registers, shared memory, spills)
    arch: str | None = None
    raw: dict = field(default_factory=dict)


@dataclass
class CheckResult(_Result):
    passed: bool                                     # correct and no cheat found: the loop may time it
    status: str
    reason: str = ""
    correct: bool | None = None                      # the checker's verdict alone, before the anti-cheat checks
    evidence: dict = field(default_factory=dict)     # seeds, shapes, dtypes, distributions, worst errors, checks
    failures: list = field(default_factory=list)
    cheats: list = field(default_factory=list)       # anti-cheat reasons; non-empty means rejected
    patched: list = field(default_factory=list)      # harness functions the candidate replaced
    raw: dict = field(default_factory=dict)


@dataclass
class BenchResult(_Result):
    ok: bool
    status: str
    median_s: float | None = None
    ci95: list | None = None
    relative_standard_error: float | None = None
    gb_per_s: float | None = None
    bandwidth_fraction: float | None = None         # of the measured copy bandwidth (GPU with cached ceilings)
    suspect: str | None = None
    clock: str | None = None                        # "device-events" or "wall" (CPU: not a GPU figure)
    device: str | None = None
    shape: str | None = None
    dtype: str | None = None
    notes: list = field(default_factory=list)
    raw: dict = field(default_factory=dict)


@dataclass
class CompareResult(_Result):
    ok: bool
    status: str
    speedup: float | None = None                    # baseline time / candidate time
    ci95: list | None = None
    pairs: int | None = None
    verdict: str | None = None
    noise: float | None = None                      # the baseline's relative standard error in this run
    suspect: str | None = None
    clock: str | None = None
    baseline_median_s: float | None = None
    candidate_median_s: float | None = None
    raw: dict = field(default_factory=dict)


@dataclass
class AnalyzeResult(_Result):
    ok: bool
    status: str
    bound: str | None = None                        # "memory", "compute", "latency" or "unknown"
    fraction_of_attainable: float | None = None
    reason: str = ""
    intensity: float | None = None
    top_kernel: dict | None = None
    counters: dict | None = None                    # DRAM bytes, occupancy ... where the vendor tool answers
    notes: list = field(default_factory=list)
    raw: dict = field(default_factory=dict)
    resources: dict | None = None                   # registers and spills of the kernels as launched (GPU)


def _payload(task, **candidates) -> dict:
    payload = {"task": task_to_dict(task)}
    for name, candidate in candidates.items():
        payload[name] = {"route": candidate.route, "source": candidate.source, "companion": candidate.companion}
    return payload


# ------------------------------------------------------------------------------------------ compile


def compile(candidate: Candidate, task, *, arch: str | None = None,   # noqa: A001 - the tool's name
            timeout_s: float = COMPILE_TIMEOUT_S) -> CompileResult:
    """Compile a HIP candidate for every dtype of the task (errors at its own lines, registers and
    spills), or import a Triton candidate (syntax errors, a missing ``run``) and call it once per dtype
    at the smallest check shape, which is when Triton compiles (compile errors at their lines; on a GPU
    the compiled kernels' registers and spills)."""
    payload = _payload(task, candidate=candidate)
    if arch:
        payload["arch"] = arch
    raw = run_candidate_step("compile", payload, timeout_s)
    if raw.get("status") != "ok":
        return CompileResult(False, raw.get("status", "crashed"), candidate.route, _failure_text(raw), raw=raw)
    return CompileResult(bool(raw.get("ok")), "ok", raw.get("route", candidate.route), raw.get("message", ""),
                         raw.get("errors", []), raw.get("resources"), raw.get("arch"), raw=raw)


# ------------------------------------------------------------------------------------------ check


def _anticheat():
    try:
        return importlib.import_module("hello_gpu.agent.anticheat")
    except ModuleNotFoundError as error:
        if error.name == "hello_gpu.agent.anticheat":
            return None
        raise


def inspect_candidate(candidate: Candidate, task, evidence: dict) -> list[str]:
    """The anti-cheat module's reasons to reject (``[]`` when it has none, or does not exist yet).
    An inspection that raises rejects: a checker that cannot look must not wave a candidate through."""
    module = _anticheat()
    if module is None or not hasattr(module, "inspect"):
        return []
    try:
        return [str(reason) for reason in module.inspect(candidate, task, evidence) or []]
    except Exception as error:  # noqa: BLE001 - fail closed
        return [f"anti-cheat inspection failed ({type(error).__name__}: {error}): rejected, not waved through"]


def check(candidate: Candidate, task, *, timeout_s: float = CHECK_TIMEOUT_S) -> CheckResult:
    """Correct on every check shape, dtype, >= 3 fresh seeds (drawn in the child, unseen by the
    candidate), >= 2 distributions; poisoned outputs, inputs compared bit for bit before and after,
    run twice where determinism is declared; then the anti-cheat inspection."""
    raw = run_candidate_step("check", _payload(task, candidate=candidate), timeout_s)
    if raw.get("status") != "ok":
        return CheckResult(False, raw.get("status", "crashed"), _failure_text(raw), raw=raw)
    patched = list(raw.get("patched") or [])
    evidence = {"check": raw, "compile": candidate.results.get("compile")}
    cheats = inspect_candidate(candidate, task, evidence)
    module = _anticheat()
    if module is not None and hasattr(module, "static_hints"):
        # Where the source scan was blind (x.add(y), a computed getattr): notes, never reasons; the run-time
        # evidence above judged those calls.
        raw["static_hints"] = module.static_hints(candidate)
    if raw.get("anticheat_error"):
        cheats.append(f"evidence missing: the anti-cheat run-time checks failed ({raw['anticheat_error']})")
    if patched:
        cheats.insert(0, f"patched the harness's timing or checking functions: {', '.join(patched)}")
    passed = bool(raw.get("passed")) and not cheats
    # The checker's failure first (what is wrong), then every cheat by its name ("partial write: ...").
    reason = "; ".join(([raw["reason"]] if not raw.get("passed") and raw.get("reason") else []) + cheats)
    return CheckResult(passed, "ok", reason, bool(raw.get("passed")), raw.get("evidence", {}), raw.get("failures", []),
                       cheats, patched, raw)


# ------------------------------------------------------------------------------------------ timing


def _suspect(raw: dict) -> str | None:
    """Why a timing cannot be a win: patched harness functions first, then the step's own reasons (beyond
    physics, wrong timed outputs, a clock the parent's disagrees with, tamper evidence)."""
    parts = [f"patched the harness: {', '.join(raw['patched'])}"] if raw.get("patched") else []
    return "; ".join(parts + ([raw["suspect"]] if raw.get("suspect") else [])) or None


def bench(candidate: Candidate, task, *, max_seconds: float = 2.0, timeout_s: float = BENCH_TIMEOUT_S) -> BenchResult:
    """Cold median with its 95% interval at the task's bench shape, GB/s, % of the measured ceiling,
    and the ``suspect`` flag when it beats physics; fresh inputs rotate across timed calls."""
    payload = _payload(task, candidate=candidate)
    payload["max_seconds"] = max_seconds
    raw = run_candidate_step("bench", payload, timeout_s)
    if raw.get("status") != "ok":
        return BenchResult(False, raw.get("status", "crashed"), notes=[_failure_text(raw)], raw=raw)
    suspect = _suspect(raw)
    return BenchResult(True, "ok", raw.get("median_s"), raw.get("ci95"), raw.get("relative_standard_error"),
                       raw.get("gb_per_s"), raw.get("bandwidth_fraction"), suspect, raw.get("clock"),
                       raw.get("device"), raw.get("shape"), raw.get("dtype"), raw.get("notes", []), raw)


def compare(baseline: Candidate, candidate: Candidate, task, *, min_rounds: int = 10, max_seconds: float = 4.0,
            timeout_s: float = COMPARE_TIMEOUT_S) -> CompareResult:
    """Paired, interleaved timing of baseline and candidate, each in its own child process, batch by batch
    in ABBA order on the same fresh inputs (:func:`hello_gpu.agent.session.run_compare`): speedup (baseline
    time / candidate time) with its bootstrap 95% interval, and the baseline's noise."""
    payload = _payload(task, baseline=baseline, candidate=candidate)
    payload.update(min_rounds=min_rounds, max_seconds=max_seconds)
    raw = run_candidate_step("compare", payload, timeout_s)
    if raw.get("status") != "ok":
        return CompareResult(False, raw.get("status", "crashed"), raw=raw)
    suspect = _suspect(raw)
    return CompareResult(True, "ok", raw.get("speedup"), raw.get("ci95"), raw.get("pairs"), raw.get("verdict"),
                         raw.get("noise"), suspect, raw.get("clock"), raw.get("baseline_median_s"),
                         raw.get("candidate_median_s"), raw)


def analyze(candidate: Candidate, task, *, median_s: float | None = None, counters: bool = True,
            timeout_s: float = ANALYZE_TIMEOUT_S) -> AnalyzeResult:
    """Where the candidate stands: memory-, compute- or latency-bound and the % of the attainable
    roofline bound, the kernel table's top kernel, the kernels' registers and spills and, with counters,
    DRAM bytes and occupancy. On a machine without a GPU the bound is "unknown" and the notes say counters are unavailable."""
    payload = _payload(task, candidate=candidate)
    payload.update(counters=counters)
    if median_s:
        payload["median_s"] = median_s
    raw = run_candidate_step("analyze", payload, timeout_s)
    if raw.get("status") != "ok":
        return AnalyzeResult(False, raw.get("status", "crashed"), "unknown", notes=[_failure_text(raw)], raw=raw)
    return AnalyzeResult(True, "ok", raw.get("bound"), raw.get("fraction_of_attainable"), raw.get("reason", ""),
                         raw.get("intensity"), raw.get("top_kernel"), raw.get("counters"), raw.get("notes", []), raw,
                         resources=raw.get("resources"))


# ------------------------------------------------------------------------------------------ accept


def accept(comparison, noise: float | None = None, *, correct: bool = True,
           suspect: str | None = None) -> accept_rule.Decision:
    """The accept rule (:mod:`hello_gpu.agent.accept`) on a :class:`CompareResult` or its dict."""
    if isinstance(comparison, CompareResult):
        comparison = comparison.to_dict()
    return accept_rule.decide(comparison, noise, correct=correct, suspect=suspect)


# ------------------------------------------------------------------------------------------ record


def record(run_dir: str | Path, *, directory: str | Path = "records", repo_root: str | Path | None = None,
           allow_cpu: bool = False) -> Path:
    """Write the run's result as a record (kind "agent"): the start and the best candidate at the
    bench shape, their timings and the final re-measured speedup. A record names a GPU: without one,
    :class:`~hello_gpu.bench.records.RecordError` unless ``allow_cpu`` (tests)."""
    from .report import build_record
    record_data = build_record(Path(run_dir), repo_root=Path(repo_root) if repo_root else None, allow_cpu=allow_cpu)
    return write_record(record_data, Path(directory), repo_root=Path(repo_root) if repo_root else None,
                        rules=repository_rules(Path(repo_root)) if repo_root else PLAIN)
