"""``run_agent``: measure -> locate -> change one thing -> measure again, automated, and hard to fool.

1. The starting candidate is the task's start rung, as it is on disk. It is compiled, checked, timed
   and analysed like any candidate; it must be correct, and it is the first "best".
2. Each round the policy proposes candidates from the context (the task, the current best, the
   history, the best's analysis, the round, the seed). Each one goes compile -> check -> compare
   with the current best (paired, interleaved) -> bench, every step in a sandboxed child process and
   every result written to the store before the next step. The accept rule
   (:mod:`hello_gpu.agent.accept`) decides; an accepted candidate becomes the best and is analysed.
3. The stop rules (:mod:`hello_gpu.agent.stop`) are checked between rounds; the reason is recorded.
4. Finally the start and the best are compared again in a fresh process (>= 5 interleaved pairs),
   and the report is written (:mod:`hello_gpu.agent.report`).

``resume=True`` reopens the run folder's store and goes on: candidates a crash or Ctrl-C left
half-evaluated are evaluated again, and the rounds continue from the last one stored.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..bench.records import device_from_manifest
from ..ops import load_op
from ..ops.shapes import shape_label
from ..runtime import manifest
from . import tools
from .candidate import FINAL_STATES, Candidate
from .stop import DEFAULT_PATIENCE, DEFAULT_ROUNDS, DEFAULT_TARGET_FRACTION, SearchState, StopRules
from .store import CandidateStore

FINAL_PAIRS = 10                # the final re-measurement: at least this many ABBA rounds (>= 5 pairs asked)
POLICY_FAILURES_TO_STOP = 3     # a policy that fails this many rounds running (an LLM endpoint down) ends the search
START_ACTION = "start"
REASON_CHARACTERS = 2000


@dataclass
class RunResult:
    run_dir: Path
    stop_reason: str
    start_id: int | None
    best_id: int | None
    final: dict | None = None
    report: dict = field(default_factory=dict)


def rung_candidate(task, rung_id: str, action: str, hypothesis: str) -> Candidate:
    """A hand-written rung of the task's operator as a candidate (its source, and its companion
    launcher for HIP)."""
    op = load_op(task.op, task.extra.get("ops_root"))
    rung = op.rung(rung_id)
    if rung.route != task.route:
        raise ValueError(f"{task.op}/{rung_id} is a {rung.route} rung; the task's route is {task.route}")
    companion = rung.companion.read_text(encoding="utf-8") if rung.companion else None
    return Candidate(None, None, task.route, rung.path.read_text(encoding="utf-8"), companion, action=action,
                     hypothesis=hypothesis)


def start_candidate(task) -> Candidate:
    """The task's start rung as a candidate."""
    return rung_candidate(task, task.start, START_ACTION, f"the starting rung {task.start}, as written")


NAMED_REFERENCE = "named with --reference"


def reference_for(task, environment: dict) -> dict | None:
    """The hand-written rung the run's best is measured against at the end ({"rung", "why"}), or None
    for a problem without a ladder (KernelBench) or a run on no GPU."""
    if task.problem_path or not environment.get("gpu"):
        return None
    from .reference import hand_written_best
    from .sandbox import _bench_shape, _dtypes
    op = load_op(task.op, task.extra.get("ops_root"))
    dtype = _dtypes(task, op)[0]
    rung, why = hand_written_best(op, task.route, dtype, shape_label(_bench_shape(task, op)),
                                  device_from_manifest(environment)["slug"])
    return {"rung": rung, "why": why}


def make_policy(name: str, **options):
    from .policies import make_policy as factory
    return factory(name, **options)


class _Run:
    """One run's state between the steps; the store holds everything that must survive."""

    def __init__(self, store: CandidateStore, task, seed: int, progress: Callable | None, timeouts: dict):
        self.store, self.task, self.seed = store, task, seed
        self.progress = progress or (lambda event: None)
        self.timeouts = timeouts

    def emit(self, event: str, **data) -> None:
        try:
            self.progress({"event": event, **data})
        except Exception:  # noqa: BLE001 - a broken progress display must not end the run
            pass

    def save(self, candidate: Candidate, tool: str, result: dict) -> None:
        candidate.results[tool] = result
        self.store.add_result(candidate.id, tool, result)
        self.store.update(candidate)

    def end(self, candidate: Candidate, state: str, reason: str) -> Candidate:
        candidate.state, candidate.reason = state, reason[:REASON_CHARACTERS]
        self.store.update(candidate)
        self.emit("candidate", id=candidate.id, state=state, reason=candidate.reason, action=candidate.action)
        return candidate

    # ------------------------------------------------------------------ one candidate
    def correctness(self, candidate: Candidate) -> bool:
        """compile, then check; False (and the candidate ended) when either fails."""
        if "compile" not in candidate.results or candidate.state == "proposed":
            compiled = tools.compile(candidate, self.task, timeout_s=self.timeouts.get("compile", tools.COMPILE_TIMEOUT_S))
            self.save(candidate, "compile", compiled.to_dict())
            if compiled.status != "ok":
                self.end(candidate, "crashed", f"compile {compiled.message}")
                return False
            if not compiled.ok:
                self.end(candidate, "compile-failed", compiled.message)
                return False
            candidate.state = "compiled"
            self.store.update(candidate)
        if candidate.state == "compiled":
            checked = tools.check(candidate, self.task, timeout_s=self.timeouts.get("check", tools.CHECK_TIMEOUT_S))
            self.save(candidate, "check", checked.to_dict())
            if checked.status != "ok":
                self.end(candidate, "crashed", f"check {checked.reason}")
                return False
            if not checked.correct:           # wrong answers first; the reason names any cheat found too
                self.end(candidate, "incorrect", checked.reason)
                return False
            if not checked.passed:            # right answers, got by cheating
                self.end(candidate, "rejected", checked.reason)
                return False
            candidate.state = "correct"
            self.store.update(candidate)
        return True

    def timing(self, candidate: Candidate) -> tools.BenchResult:
        bench = tools.bench(candidate, self.task, timeout_s=self.timeouts.get("bench", tools.BENCH_TIMEOUT_S),
                            max_seconds=self.timeouts.get("bench_seconds", 2.0))
        self.save(candidate, "bench", bench.to_dict())
        return bench

    def analysis(self, candidate: Candidate, bench: tools.BenchResult | None) -> None:
        result = tools.analyze(candidate, self.task, median_s=bench.median_s if bench and bench.ok else None,
                               counters=self.timeouts.get("counters", True),
                               timeout_s=self.timeouts.get("analyze", tools.ANALYZE_TIMEOUT_S))
        self.save(candidate, "analyze", result.to_dict())

    def evaluate_start(self, candidate: Candidate) -> bool:
        if not self.correctness(candidate):
            return False
        bench = self.timing(candidate)
        if not bench.ok:
            self.end(candidate, "crashed", f"bench {bench.notes[0] if bench.notes else ''}")
            return False
        self.analysis(candidate, bench)
        self.end(candidate, "accepted", "the starting rung: the first best, every candidate is measured against it")
        return True

    def evaluate(self, candidate: Candidate, best: Candidate) -> bool:
        """compile -> check -> compare with ``best`` -> bench -> accept; True when accepted."""
        if not self.correctness(candidate):
            return False
        comparison = tools.compare(best, candidate, self.task,
                                   max_seconds=self.timeouts.get("compare_seconds", 4.0),
                                   timeout_s=self.timeouts.get("compare", tools.COMPARE_TIMEOUT_S))
        comparison_dict = comparison.to_dict()
        comparison_dict["baseline_id"] = best.id
        self.save(candidate, "compare", comparison_dict)
        if not comparison.ok:
            self.end(candidate, "crashed", f"compare {comparison.raw.get('detail', '')}")
            return False
        candidate.state = "timed"
        self.store.update(candidate)
        bench = self.timing(candidate)
        suspect = comparison.suspect or (bench.suspect if bench.ok else None)
        decision = tools.accept(comparison, correct=True, suspect=suspect)
        self.save(candidate, "accept", decision.to_dict())
        if suspect:
            self.end(candidate, "suspect", decision.reason)
            return False
        if not decision.accepted:
            self.end(candidate, "rejected", decision.reason)
            return False
        self.analysis(candidate, bench)
        self.end(candidate, "accepted", decision.reason)
        return True


def _fraction(candidate: Candidate | None) -> float | None:
    if candidate is None:
        return None
    return (candidate.results.get("analyze") or {}).get("fraction_of_attainable")


def _start_of(store: CandidateStore) -> Candidate | None:
    return next((c for c in store.list() if c.parent_id is None and c.action == START_ACTION), None)


class RunSetupError(ValueError):
    """A run that cannot start or resume (no task, a folder already in use, a policy that cannot be made);
    raised before anything is written."""


def _policy(name: str, options: dict | None):
    try:
        return make_policy(name, **(options or {}))
    except ValueError as error:               # an unknown policy or option; an LLM policy's LLMError passes
        raise RunSetupError(str(error)) from None


def run_agent(task=None, policy="scripted", run_dir: str | Path = "agent-run", *, rounds: int | None = None,
              seed: int = 0, time_budget_s: float | None = None, patience: int | None = None,
              target_fraction: float | None = None, resume: bool = False,
              progress: Callable[[dict], None] | None = None, policy_options: dict | None = None,
              timeouts: dict | None = None, final_remeasure: bool = True, write_report: bool = True) -> RunResult:
    """Run (or with ``resume``, continue) the search; see the module docstring.

    ``rounds``: the most rounds in all (default 12; on resume, the run's own unless given).
    ``policy``: an object with ``name``, ``propose(context) -> list[Candidate]`` and ``exhausted``, or a
    name for :func:`hello_gpu.agent.policies.make_policy`. ``timeouts``: seconds per step ("compile",
    "check", "bench", "compare", "analyze") and "bench_seconds" / "compare_seconds" (time caps inside a
    step), "counters" (False skips the vendor profiler). ``progress`` gets one dict per event.
    """
    run_dir = Path(run_dir)
    if not resume:
        # Before the run folder is made: a new run that cannot start (no task, an LLM policy without an
        # endpoint) leaves no half-made folder behind.
        if task is None:
            raise RunSetupError("run_agent() needs a task")
        if isinstance(policy, str):
            policy = _policy(policy, policy_options)
    elif not (run_dir / "candidates.sqlite").is_file():
        raise RunSetupError(f"{run_dir} holds no run to resume (no candidates.sqlite)")
    store = CandidateStore(run_dir)
    info = store.run_info()
    timeouts = dict(timeouts or {})
    if resume:
        if info is None:
            raise RunSetupError(f"{run_dir} holds no run to resume")
        task = store.task()
        seed = info["seed"]
        settings = info["extra"].get("settings", {})
        rounds = rounds if rounds is not None else settings.get("rounds", DEFAULT_ROUNDS)
        # The run's own stop settings unless given again: a time budget counts the run's whole time.
        time_budget_s = time_budget_s if time_budget_s is not None else settings.get("time_budget_s")
        patience = patience if patience is not None else settings.get("patience", DEFAULT_PATIENCE)
        target_fraction = target_fraction if target_fraction is not None else \
            settings.get("target_fraction", DEFAULT_TARGET_FRACTION)
        timeouts = {**settings.get("timeouts", {}), **timeouts}      # e.g. counters switched off on resume
        store.update_run_extra(settings={**settings, "rounds": rounds, "time_budget_s": time_budget_s,
                                         "patience": patience, "target_fraction": target_fraction,
                                         "timeouts": timeouts})
        if isinstance(policy, str) or policy is None:
            policy = _policy(policy or info["policy"], policy_options)
    else:
        if info is not None:
            raise RunSetupError(f"{run_dir} already holds a run: resume it (resume=True) or choose another folder")
        rounds = DEFAULT_ROUNDS if rounds is None else rounds
        patience = DEFAULT_PATIENCE if patience is None else patience
        target_fraction = DEFAULT_TARGET_FRACTION if target_fraction is None else target_fraction
        environment = manifest.environment_manifest()
        if "reference" not in task.extra:
            reference = reference_for(task, environment)
            if reference is not None:
                task.extra["reference"] = reference
        store.start_run(task, getattr(policy, "name", type(policy).__name__), seed, extra={
            "environment": environment, "elapsed_s": 0.0,
            "settings": {"rounds": rounds, "time_budget_s": time_budget_s, "patience": patience,
                         "target_fraction": target_fraction, "timeouts": timeouts}})
    rules = StopRules(rounds, time_budget_s, patience, target_fraction)
    run = _Run(store, task, seed, progress, timeouts)
    store.set_stop_reason(None)
    started = time.perf_counter()
    elapsed_before = float(store.run_info()["extra"].get("elapsed_s", 0.0))
    run.emit("start", run_dir=str(run_dir), resume=resume, task=task.op, route=task.route)
    stop_reason = None
    try:
        start = _start_of(store)
        if start is None:
            start = store.add(start_candidate(task), 0)
        if start.state not in FINAL_STATES and not run.evaluate_start(start):
            stop_reason = f"the starting rung {task.start} is {start.state}: {start.reason}"
        elif start.state != "accepted":
            stop_reason = f"the starting rung {task.start} is {start.state}: {start.reason}"
        # Candidates a crash or Ctrl-C left half-way are evaluated again, against the best as it is.
        for candidate in store.list():
            if stop_reason is None and candidate.state not in FINAL_STATES:
                run.evaluate(candidate, store.best_accepted())
        rounds_done = store.last_round()
        accepted_rounds = [store.rounds()[c.id] for c in store.list("accepted")]
        rounds_since_accept = rounds_done - max(accepted_rounds, default=0)
        policy_failures_running = 0
        while stop_reason is None:
            best = store.best_accepted()
            state = SearchState(rounds_done, elapsed_before + time.perf_counter() - started, rounds_since_accept,
                                _fraction(best), bool(getattr(policy, "exhausted", False)))
            stop_reason = rules.reason(state)
            if stop_reason is not None:
                break
            round_number = rounds_done + 1
            history = store.list()
            context = {"task": task, "current": best, "history": history, "analysis": best.results.get("analyze") or {},
                       "round": round_number, "seed": seed}
            run.emit("round", round=round_number, best=best.id)
            try:
                proposals = list(policy.propose(context) or [])
            except Exception as error:  # noqa: BLE001 - a policy's failure (a malformed LLM reply, a timeout) costs a round
                failure = f"policy failed in round {round_number}: {type(error).__name__}: {error}"[:REASON_CHARACTERS]
                failures = [*store.run_info()["extra"].get("policy_failures", []), failure]
                store.update_run_extra(policy_failures=failures)
                run.emit("policy-failed", round=round_number, reason=failure)
                rounds_done, rounds_since_accept = round_number, rounds_since_accept + 1
                policy_failures_running += 1
                if policy_failures_running >= POLICY_FAILURES_TO_STOP:
                    stop_reason = f"the policy failed {policy_failures_running} rounds running; last: {failure}"
                continue
            policy_failures_running = 0
            suggestions = list(getattr(policy, "suggestions", None) or [])
            if suggestions and suggestions != store.run_info()["extra"].get("policy_suggestions"):
                store.update_run_extra(policy_suggestions=suggestions)     # moves it names but cannot write
            accepted_this_round = False
            for proposal in proposals:
                best = store.best_accepted()
                # A HIP edit of the .hip alone keeps the best's launcher (companion).
                companion = proposal.companion if proposal.companion is not None else best.companion
                candidate = Candidate(None, proposal.parent_id if proposal.parent_id is not None else best.id,
                                      task.route, proposal.source, companion, proposal.action, proposal.hypothesis)
                seen = store.by_sha256(candidate.source_sha256)
                if seen is not None:
                    run.emit("duplicate", of=seen.id, action=candidate.action)
                    continue
                store.add(candidate, round_number)
                run.emit("proposed", id=candidate.id, action=candidate.action, round=round_number)
                accepted_this_round |= run.evaluate(candidate, best)
            rounds_done = round_number
            rounds_since_accept = 0 if accepted_this_round else rounds_since_accept + 1
            store.update_run_extra(elapsed_s=elapsed_before + time.perf_counter() - started)
    except KeyboardInterrupt:
        stop_reason = "interrupted (Ctrl-C): continue with `hello-gpu agent resume RUN`"
        store.set_stop_reason(stop_reason)
        store.update_run_extra(elapsed_s=elapsed_before + time.perf_counter() - started)
        run.emit("stop", reason=stop_reason)
        raise
    store.set_stop_reason(stop_reason)
    store.update_run_extra(elapsed_s=elapsed_before + time.perf_counter() - started)
    run.emit("stop", reason=stop_reason)
    start, best = _start_of(store), store.best_accepted()
    final = None
    if final_remeasure:
        final = final_measurement(store, timeouts)
        run.emit("final", **(final or {}))
    result = RunResult(run_dir, stop_reason, start.id if start else None, best.id if best else None, final)
    if write_report:
        from .report import write_report as render
        result.report = {key: str(value) for key, value in render(run_dir).items()}
        run.emit("report", **result.report)
    store.close()
    return result


def claimed_speedup(store: CandidateStore) -> float | None:
    """The loop's claim: the product of the accepted candidates' paired speedups, start to best."""
    best = store.best_accepted()
    if best is None:
        return None
    claim = 1.0
    candidate = best
    while candidate.parent_id is not None:
        speedup = (candidate.results.get("compare") or {}).get("speedup")
        if speedup is None:
            return None
        claim *= speedup
        candidate = store.get((candidate.results.get("compare") or {}).get("baseline_id") or candidate.parent_id)
    return claim


def final_measurement(store: CandidateStore, timeouts: dict | None = None) -> dict | None:
    """Start vs best, paired and interleaved, in a fresh process; stored in the run's extra."""
    timeouts = timeouts or {}
    start, best = _start_of(store), store.best_accepted()
    if start is None or best is None:
        return None
    claim = claimed_speedup(store)
    if best.id == start.id:
        final = {"remeasured": None, "claimed": 1.0, "agree": None,
                 "note": "no candidate beat the starting rung: nothing to re-measure"}
    else:
        comparison = tools.compare(start, best, store.task(), min_rounds=FINAL_PAIRS,
                                   max_seconds=timeouts.get("compare_seconds", 4.0),
                                   timeout_s=timeouts.get("compare", tools.COMPARE_TIMEOUT_S))
        remeasured = comparison.speedup if comparison.ok else None
        agree = None
        if remeasured is not None and claim:
            agree = abs(remeasured / claim - 1) <= 0.03
        final = {"remeasured": remeasured, "ci95": comparison.ci95, "pairs": comparison.pairs,
                 "verdict": comparison.verdict, "clock": comparison.clock, "claimed": claim, "agree": agree,
                 "start_id": start.id, "best_id": best.id, "status": comparison.status,
                 "detail": comparison.raw.get("detail") if not comparison.ok else None}
    reference = _current_reference(store)
    if reference:
        final["vs_hand_written"] = versus_hand_written(store.task(), best, reference, timeouts)
    store.update_run_extra(final=final)
    return final


def _current_reference(store: CandidateStore) -> dict | None:
    """The hand-written rung to measure the best against now: the one named with --reference, else the
    fastest in this GPU's ladder record today (a resumed run meets the rungs added since it started),
    else the one picked when the run started."""
    task = store.task()
    stored = task.extra.get("reference")
    if stored and stored.get("why") == NAMED_REFERENCE:
        return stored
    try:
        return reference_for(task, store.run_info()["extra"].get("environment") or {}) or stored
    except Exception:  # noqa: BLE001 - no readable ladder record now: the run's own pick stands
        return stored


def versus_hand_written(task, best: Candidate, reference: dict, timeouts: dict) -> dict:
    """The best candidate's speed as a fraction of the hand-written rung's: paired, interleaved, in a
    fresh process, like the start-vs-best re-measurement (> 1: the agent's kernel is faster)."""
    rung = reference["rung"]
    hand_written = rung_candidate(task, rung, f"hand-written {rung}", f"the hand-written rung {rung}, as written")
    comparison = tools.compare(hand_written, best, task, min_rounds=FINAL_PAIRS,
                               max_seconds=timeouts.get("compare_seconds", 4.0),
                               timeout_s=timeouts.get("compare", tools.COMPARE_TIMEOUT_S))
    return {"rung": rung, "why": reference.get("why"), "fraction": comparison.speedup if comparison.ok else None,
            "ci95": comparison.ci95, "pairs": comparison.pairs, "status": comparison.status,
            "same_source": hand_written.source_sha256 == best.source_sha256,
            "detail": comparison.raw.get("detail") if not comparison.ok else None}
