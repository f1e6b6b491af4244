"""The agent pointed at a whole model (issue 23, part 5): rank, optimise the top operator, re-measure the model.

``hello-gpu agent --model CONFIG`` does five things, each kept in this run folder:

1. **Profile** the model with the eager backend, every :class:`~hello_gpu.models.llama.ModelOps`
   operation in a labelled range (:func:`hello_gpu.models.profile.profile_llama`), and **rank** the
   operations by their share ``s`` of a step, each with its Amdahl bounds: ``1 / (1 - s)`` if it took
   no time, ``1 / (1 - s / 2)`` if it ran twice as fast.
2. **Map** each operation to a hello-gpu operator ladder where one exists (:data:`LADDERS`): today
   ``rms_norm`` and the norm of ``add_rms_norm`` -> the rms_norm ladder. Every other operation is
   ranked as "no ladder yet", with what it waits for (the registry's own words); none is faked.
3. Take the top operation that has a ladder, derive the operator **shape and dtype the model calls it
   with** (``(batch * tokens, hidden)`` in the model's dtype; tokens = 1 at decode), and run the
   agent's loop (:func:`hello_gpu.agent.loop.run_agent`) on that operator at that shape, from the rung
   the hello-gpu backend uses today (:data:`hello_gpu.ops.functions.BEST`) unless ``--from`` says
   otherwise. Its run folder is ``operator/`` (``hello-gpu agent report RUN/operator`` rewrites its report).
4. **Swap** the agent's accepted best into the hello-gpu backend, through the backend's registry of
   replacements: first the agent's checker runs on it again (fresh seeds, every anti-cheat check:
   nothing unchecked reaches the model), then the registry checks it against the float64 eager
   operation at the model's shape and eps, and on a GPU swaps it in only when a paired timing says it
   beats eager (:func:`hello_gpu.models.backends.choose_replacements`). On the CPU nothing is timed: the
   decision says "not measured", unless ``--force-swap`` asks for a checked, untimed swap.
5. **Re-measure** the whole model (:func:`hello_gpu.models.run.run_model`): eager, hello-gpu with the
   agent's kernel, and on a GPU hello-gpu with no kernel (its decode CUDA graph alone), so the report
   can split the model's speed-up into the graph's part and the kernel's part; then write
   ``report.md`` and ``report.json``: the ranking, the bounds, what the agent reached on the operator,
   the model's measured speed-up against the Amdahl prediction, and what limits it.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch

from ..models.backends import REPLACEMENTS
from ..models.llama import OP_CATEGORIES, Llama
from ..models.profile import HOST, LAUNCH_GAPS, ModelProfile, amdahl, profile_llama
from ..models.run import BackendRun, ModelRun, agreement, device_label, run_backend, run_model
from ..models.work import step_work
from ..ops import INTERPRETER_MAX_ELEMENTS, load_op, numel, shape_label
from ..ops.functions import BEST
from ..runtime.device import gpu_vendor
from ..runtime.triton_replay import replayable
from . import tools
from .loop import NAMED_REFERENCE, run_agent
from .sandbox import materialize
from .store import CandidateStore
from .task import Task

OPERATOR_RUN = "operator"          # the agent's run folder inside the model run's folder
WINNER_FOLDER = "winner"           # the accepted best, written as a rung of a copy of its operator folder
GRAPH_ONLY = "hello-gpu, no kernel (CUDA graph only)"


class ModelAgentError(ValueError):
    """A model run that cannot start (a dtype no ladder defines, a HIP start without a GPU, a used folder)."""


# ------------------------------------------------------------------------------------------ operations -> ladders


@dataclass(frozen=True)
class LadderMap:
    """How one model operation maps onto an operator ladder of ``hello_gpu.ops``."""

    ladder: str            # the operator folder
    replaces: str          # the ModelOps operation the ladder's kernel is swapped in for (the registry's name)
    covers: str            # what of this operation that kernel does

    def shape(self, config, rows: int) -> tuple[int, int]:
        """The operator shape of the model's call: rows of the hidden size (both maps here are norms)."""
        return (rows, config.hidden_size)


LADDERS: dict[str, LadderMap] = {
    "rms_norm": LadderMap("rms_norm", "rms_norm", "the whole operation"),
    # The backend swaps the rms_norm kernel in for the norm after the add (models.backends.ops_with).
    "add_rms_norm": LadderMap("rms_norm", "rms_norm", "the RMSNorm after the add, with the residual add a torch "
                                                      "add, where the backend's fused add + RMSNorm kernel is not "
                                                      "swapped in (where it is, it does both)"),
}


def ladder_of(name: str, ops_root=None) -> tuple[LadderMap | None, str]:
    """(the map, "") for an operation with a ladder that exists, else (None, why there is none)."""
    mapping = LADDERS.get(name)
    if mapping is None:
        replacement = REPLACEMENTS.get(name)
        if replacement is not None and replacement.load is not None:    # the backend has a kernel; the agent no map
            return None, (f"no ladder for the agent yet: the backend already swaps in {replacement.description}, "
                          f"and the agent has no map from this operation to a ladder's rungs")
        why = replacement.missing if replacement is not None and replacement.missing else \
            "no hello-gpu operator ladder does this operation"
        return None, f"no ladder yet: {why}"
    try:
        load_op(mapping.ladder, ops_root)
    except (KeyError, ValueError, FileNotFoundError) as error:
        return None, f"no ladder yet: the {mapping.ladder} ladder cannot be loaded here ({error})"
    return mapping, ""


@dataclass
class RankedOperation:
    name: str
    category: str
    calls_per_step: int | None
    seconds_per_step: float
    share: float
    bound_if_free: float
    bound_if_2x: float
    ladder: str | None
    note: str                       # what the ladder covers, or why there is none

    def to_dict(self) -> dict:
        return asdict(self)


def rank_operations(profile: ModelProfile, model: Llama, *, batch: int, tokens: int, cache_length: int,
                    ops_root=None) -> list[RankedOperation]:
    """Every labelled operation of the profile, largest share of a step first."""
    steps = max(profile.steps, 1)
    work = step_work(model.config, model.dtype, batch=batch, tokens=tokens, cache_length=cache_length,
                     fused=profile.operations)
    ranked = []
    for name, seconds in profile.operations.items():
        share = seconds / profile.wall_seconds if profile.wall_seconds else 0.0
        mapping, why = ladder_of(name, ops_root)
        ranked.append(RankedOperation(
            name, OP_CATEGORIES.get(name, "other"), work[name].calls if name in work else None, seconds / steps,
            share, amdahl(share), amdahl(share, 2.0), mapping.ladder if mapping else None,
            f"{mapping.ladder} ladder: {mapping.covers}" if mapping else why))
    return sorted(ranked, key=lambda row: -row.share)


@dataclass
class Target:
    """The operation the agent optimises, the operator and shape it runs, and its Amdahl bounds."""

    operation: str
    ladder: str
    replaces: str
    shape: tuple
    dtype: str
    share: float                    # of the chosen operation alone
    covered: list[str]              # every operation the ladder's kernel is swapped in for
    covered_share: float

    def to_dict(self) -> dict:
        return {**asdict(self), "shape": shape_label(self.shape), "bound_if_free": amdahl(self.share),
                "bound_if_2x": amdahl(self.share, 2.0), "covered_bound_if_free": amdahl(self.covered_share),
                "covered_bound_if_2x": amdahl(self.covered_share, 2.0)}


def choose_target(ranking: list[RankedOperation], model: Llama, rows: int, ops_root=None) -> Target | None:
    """The top-ranked operation that has a ladder, or None."""
    top = next((row for row in ranking if row.ladder is not None and row.share > 0), None)
    if top is None:
        return None
    mapping, _ = ladder_of(top.name, ops_root)
    covered = [row for row in ranking if row.ladder == mapping.ladder]
    dtype = str(model.dtype).removeprefix("torch.")
    return Target(top.name, mapping.ladder, mapping.replaces, mapping.shape(model.config, rows), dtype, top.share,
                  [row.name for row in covered], sum(row.share for row in covered))


# ------------------------------------------------------------------------------------------ the operator run


def interpreted_here() -> bool:
    """No GPU: Triton candidates (and the agent's kernel in the model) run in Triton's interpreter."""
    return gpu_vendor() is None


def check_shapes(spec, shape, *, interpreted: bool) -> tuple[tuple, str]:
    """The spec's edge shapes and the model's own shape; in the interpreter only those of at most
    INTERPRETER_MAX_ELEMENTS elements (the ladder's --check-only limit: rms_norm's 1823x781 alone is
    1823 interpreted programs a call, ~50 calls a check), with a note naming the rest."""
    shapes = tuple(dict.fromkeys([*spec.EDGE_SHAPES, tuple(shape)]))
    if not interpreted:
        return shapes, ""
    kept = tuple(s for s in shapes if numel(s) <= INTERPRETER_MAX_ELEMENTS)
    dropped = [shape_label(s) for s in shapes if s not in kept]
    note = (f"checked in the Triton interpreter at {', '.join(shape_label(s) for s in kept)}; "
            f"{', '.join(dropped)} (over {INTERPRETER_MAX_ELEMENTS} elements) only on a GPU") if dropped else ""
    return kept, note


def operator_task(target: Target, *, start: str | None = None, reference: str | None = None,
                  ops_root=None) -> tuple[Task, str]:
    """The agent's task for ``target``: its ladder from ``start`` (default: the rung the hello-gpu backend
    runs today), the model's dtype timed first, the model's shape timed; and a note on the check shapes."""
    op = load_op(target.ladder, ops_root)
    start = start or BEST.get(target.ladder)
    if start is None:
        raise ModelAgentError(f"the {target.ladder} ladder has no best rung named in hello_gpu.ops.functions.BEST: "
                              f"give one with --from RUNG")
    try:
        rung = op.rung(start)
    except (KeyError, ValueError) as error:
        raise ModelAgentError(str(error)) from None
    if rung.route == "hip" and interpreted_here():
        raise ModelAgentError(f"--from {start} is a HIP rung: no GPU here to check or time its candidates "
                              f"(start from a Triton rung to run in the interpreter)")
    if target.dtype not in op.spec.DTYPES:
        raise ModelAgentError(f"the model runs in {target.dtype}; the {target.ladder} ladder is defined for "
                              f"{', '.join(op.spec.DTYPES)} (use --dtype)")
    extra = {"ops_root": str(Path(ops_root).resolve())} if ops_root else {}
    if reference:
        try:
            extra["reference"] = {"rung": op.rung(reference).id, "why": NAMED_REFERENCE}
        except (KeyError, ValueError) as error:
            raise ModelAgentError(str(error)) from None
    shapes, note = check_shapes(op.spec, target.shape, interpreted=interpreted_here())
    dtypes = (target.dtype, *(d for d in op.spec.DTYPES if d != target.dtype))
    task = Task(target.ladder, start, rung.route, dtypes=dtypes, check_shapes=shapes, bench_shape=target.shape,
                extra={**extra, "model_operation": target.operation})
    return task, note


# ------------------------------------------------------------------------------------------ the swap


@dataclass
class Swap:
    """The agent's best on its way into the model: re-checked, built, wrapped; ``function`` None when refused."""

    candidate_id: int | None
    source_sha256: str | None
    rechecked: dict = field(default_factory=dict)        # the agent's checker, run again now
    file: str | None = None                              # the rung file the model imports
    refused: str = ""                                    # why it is not offered to the registry
    function: Callable | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("function")
        return data


def model_function(built, *, spec_eps: float, model_eps: float) -> tuple[Callable | None, str]:
    """``f(x, weight, eps)`` on x of any leading shape, from a built rms_norm rung; or (None, why not).

    A rung whose ``run`` takes ``eps`` gets the model's (Llama uses 1e-5; the spec checks at 1e-6). A rung
    with the spec's eps fixed is refused for a model with another one: the difference (~4e-6 relative on
    rows of mean square ~1) hides under a bf16 tolerance, so the registry's own check could not see it."""
    run = getattr(built.function, "__wrapped__", built.function)     # the rung's run(), not its replay
    try:
        takes_eps = "eps" in inspect.signature(run).parameters
    except (TypeError, ValueError):
        takes_eps = False
    if takes_eps:
        def launch(rows, weight, eps):
            return run(rows, weight, eps=eps)
    elif model_eps == spec_eps:
        def launch(rows, weight, eps):
            return run(rows, weight)
    else:
        return None, (f"its run() takes no eps: it normalises with the spec's {spec_eps:g}, the model with "
                      f"{model_eps:g}")
    # Repeated call signatures replay the recorded launches, as hello_gpu.ops.rms_norm does for the ladder's
    # best: the two kernels then pay the same host cost a call, and the registry compares kernels.
    launch = replayable(launch) if built.rung.route == "triton" and not built.interpreted else launch

    def rms_norm(x, weight, eps):
        rows = x.reshape(-1, x.shape[-1])
        return launch(rows if rows.is_contiguous() else rows.contiguous(), weight.contiguous(), eps).view(x.shape)
    return rms_norm, ""


def prepare_swap(run_dir: Path, task: Task, *, model_eps: float, recheck: bool = True) -> Swap:
    """The agent's accepted best, checked again by the agent's checker, written as a rung and built."""
    with CandidateStore(run_dir / OPERATOR_RUN) as store:
        best = store.best_accepted()
    if best is None:
        return Swap(None, None, refused="the agent accepted no candidate (not even its start)")
    swap = Swap(best.id, best.source_sha256)
    if recheck:
        # The loop checked it; checking again here means the source the model imports is one this
        # process saw pass the checker (fresh seeds, every anti-cheat check), whatever happened to the store.
        checked = tools.check(best, task)
        swap.rechecked = {"passed": checked.passed, "status": checked.status, "reason": checked.reason,
                          "cheats": checked.cheats, "seeds": (checked.evidence or {}).get("seeds")}
        if not checked.passed:
            swap.refused = f"the agent's checker refuses it now: {checked.reason or checked.status}"
            return swap
    op, names = materialize(task, {"best": {"route": best.route, "source": best.source,
                                            "companion": best.companion}}, run_dir / WINNER_FOLDER)
    rung = op.rung(names["best"])
    swap.file = str(rung.path)
    try:
        built = rung.build()
    except Exception as error:  # noqa: BLE001 - a kernel that cannot be built here is reported, not fatal
        swap.refused = f"cannot be built in this process: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
        return swap
    swap.function, why = model_function(built, spec_eps=op.spec.EPS, model_eps=model_eps)
    if swap.function is None:
        swap.refused = f"not offered to the model: {why}"
    return swap


def registry_with(swap: Swap, target: Target, run_dir: Path) -> dict:
    """The backend's registry with the agent's kernel in place of ``target.replaces`` (the registry then
    checks it against float64 eager and decides by measurement), or the registered kernel left out
    where the swap was refused (the re-measurement then shows the model without it)."""
    registered = REPLACEMENTS[target.replaces]
    if swap.function is None:
        entry = replace(registered, load=None, missing=f"the agent's kernel was refused: {swap.refused}")
    else:
        function = swap.function
        entry = replace(registered, load=lambda: function,
                        description=f"the agent's best (candidate {swap.candidate_id} of {run_dir / OPERATOR_RUN}, "
                                    f"sha256 {swap.source_sha256[:12]})")
    return {**REPLACEMENTS, target.replaces: entry}


# ------------------------------------------------------------------------------------------ the model again


def remeasure(model: Llama, registry: dict, *, batch: int, prompt: int, new: int, seed: int, force: bool,
              replaces: str, console=None, progress: bool = False) -> tuple[ModelRun, BackendRun | None]:
    """Eager and hello-gpu (with ``registry``) on one prompt; on a GPU also hello-gpu with no kernel."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.config.vocab_size, (batch, prompt), generator=generator)
    result = run_model(model, ["eager", "hello-gpu"], batch=batch, prompt_length=prompt, new=new, seed=seed,
                       prompt=tokens, force=(replaces,) if force else (), console=console, progress=progress,
                       replacements=registry)
    graph_only = None
    if model.device.type == "cuda":
        graph_only = run_backend(model, "hello-gpu", tokens.to(model.device), new, bound=result.bound, replacements={})
        graph_only.backend = GRAPH_ONLY
        graph_only.agreement = agreement(graph_only.tokens, result.runs[0].tokens)
    return result, graph_only


# ------------------------------------------------------------------------------------------ the result


def _rate(run: BackendRun | None, phase: str) -> float | None:
    if run is None:
        return None
    return run.decode_tokens_per_s if phase == "decode" else run.prefill_tokens_per_s


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None


@dataclass
class ModelAgentResult:
    """Everything ``hello-gpu agent --model`` found; ``to_dict`` is report.json, ``markdown`` report.md."""

    run_dir: Path
    model: dict                     # the configuration
    device: str
    dtype: str
    batch: int
    prompt: int
    new: int
    phase: str
    gpu: bool                       # True: times are GPU measurements
    profile: ModelProfile
    ranking: list[RankedOperation]
    target: Target | None = None
    check_note: str = ""
    agent: dict = field(default_factory=dict)
    swap: Swap | None = None
    model_run: ModelRun | None = None
    graph_only: BackendRun | None = None
    notes: list[str] = field(default_factory=list)

    # ---- figures
    def runs(self) -> dict[str, BackendRun]:
        runs = {run.backend: run for run in self.model_run.runs} if self.model_run else {}
        if self.graph_only is not None:
            runs[GRAPH_ONLY] = self.graph_only
        return runs

    def choice(self) -> dict | None:
        """The registry's decision on the agent's kernel (from the hello-gpu run)."""
        run = self.runs().get("hello-gpu")
        if run is None or self.target is None:
            return None
        return next((c for c in run.choices if c["name"] == self.target.replaces), None)

    def speedups(self) -> dict:
        """The model's measured speed-ups (hello-gpu over eager; split into the graph's and the kernel's
        parts on a GPU) and Amdahl's prediction from the kernel's measured speed-up over eager."""
        runs = self.runs()
        eager, ours, graph = (_rate(runs.get(name), self.phase) for name in ("eager", "hello-gpu", GRAPH_ONLY))
        choice = self.choice() or {}
        kernel = choice.get("speedup") if choice.get("used") else None
        share = self.target.covered_share if self.target else 0.0
        data = {"measured": _ratio(ours, eager), "graph_part": _ratio(graph, eager), "kernel_part": _ratio(ours, graph),
                "kernel_vs_eager_op": choice.get("speedup"), "kernel_used": bool(choice.get("used")),
                "predicted": amdahl(share, kernel) if kernel else None, "predicted_share": share,
                "predicted_after_graph": None, "share_after_graph": None}
        # With the decode step in a CUDA graph the launch gaps are gone, so the norms take a larger share
        # of the (shorter) step: their kernel seconds from the eager profile over the graphed step's time.
        if kernel and graph and self.phase == "decode" and self.profile.device == "gpu":
            covered = sum(row.seconds_per_step for row in self.ranking if self.target and row.name in self.target.covered)
            after = min(covered / (self.batch / graph), 1.0)
            data.update(share_after_graph=after, predicted_after_graph=amdahl(after, kernel))
        return data

    def limits(self) -> list[str]:
        """What bounds the result, strongest first, in words with the figures."""
        lines = []
        if not self.gpu:
            lines.append("No GPU here: no figure in this report is a GPU measurement. Times are the host's wall "
                         "clock (eager PyTorch on the CPU, our kernels in the Triton interpreter), so the ranking is "
                         "where a CPU spends a step, not an H200; no kernel is swapped in by a measurement here (the "
                         "registry's decision says 'not measured', or 'forced' with --force-swap: checked, untimed).")
        if self.target is None:
            lines.append("No operation of the model has an operator ladder yet: nothing for the agent to optimise.")
        else:
            t = self.target
            lines.append(f"Amdahl: the {t.ladder} kernel replaces {', '.join(t.covered)}, {t.covered_share:.1%} of a "
                         f"step; a kernel that took no time would make the model at most "
                         f"{amdahl(t.covered_share):.3f}x faster, one twice as fast {amdahl(t.covered_share, 2.0):.3f}x.")
            if "add_rms_norm" in t.covered:
                lines.append(f"add_rms_norm: {LADDERS['add_rms_norm'].covers}, so part of its share stays eager.")
        bigger = [row for row in self.ranking if row.ladder is None and self.target and row.share > self.target.share]
        for row in bigger:
            lines.append(f"{row.name} takes {row.share:.1%} of a step (free: {row.bound_if_free:.2f}x) and has "
                         f"{row.note}.")
        gaps = self.profile.share(LAUNCH_GAPS) if self.profile.device == "gpu" else 0.0
        if gaps:
            lines.append(f"Launch gaps are {gaps:.1%} of an eager step: the decode step's CUDA graph removes them, "
                         f"not a kernel.")
        elif self.profile.device == "cpu":
            lines.append(f"Host time outside every labelled operation is {self.profile.share(HOST):.1%} of a CPU step.")
        final = self.agent.get("final") or {}
        if self.agent and self.agent.get("best_id") is not None and self.agent.get("best_id") == self.agent.get("start_id"):
            lines.append(f"The agent found nothing faster than its start {self.agent['task']['start']} at "
                         f"{shape_label(self.target.shape) if self.target else '-'}: the model gets the kernel it "
                         f"started from.")
        elif final.get("remeasured") is not None and final.get("verdict") != "faster":
            lines.append(f"The agent's best re-measured at {final['remeasured']:.3f}x its start ({final.get('verdict')}): "
                         f"not a difference beyond noise.")
        if self.swap is not None and self.swap.refused:
            lines.append(f"The agent's kernel is not in the model: {self.swap.refused}.")
        choice = self.choice()
        if choice is not None and not choice["used"] and not (self.swap and self.swap.refused):
            lines.append(f"The registry did not swap it in: {choice['reason']}.")
        speed = self.speedups()
        if speed["predicted"] is not None and speed["measured"] is not None:
            lines.append(f"The kernel is {speed['kernel_vs_eager_op']:.2f}x the eager operation at the decode shape; "
                         f"with the share {speed['predicted_share']:.1%}, Amdahl predicts {speed['predicted']:.3f}x for "
                         f"the model; measured {speed['measured']:.3f}x.")
        if speed["graph_part"] is not None and speed["kernel_part"] is not None:
            after = (f" (Amdahl after the graph: {speed['predicted_after_graph']:.3f}x at a share of "
                     f"{speed['share_after_graph']:.1%})" if speed["predicted_after_graph"] else "")
            lines.append(f"Of the measured {speed['measured']:.3f}x, the CUDA graph alone gives {speed['graph_part']:.3f}x "
                         f"and the kernel {speed['kernel_part']:.3f}x on top{after}.")
        return lines

    # ---- output
    def to_dict(self) -> dict:
        profile = self.profile.to_dict()
        return {
            "kind": "agent-model", "run_dir": str(self.run_dir), "model": self.model, "device": self.device,
            "dtype": self.dtype, "batch": self.batch, "prompt": self.prompt, "new": self.new, "phase": self.phase,
            "gpu_measurements": self.gpu,
            "not_gpu_measurements": [] if self.gpu else ["profile", "ranking shares", "agent timings",
                                                         "model tokens/s", "speed-ups"],
            "profile": {key: profile[key] for key in ("title", "device", "steps", "wall_seconds", "categories", "notes")},
            "ranking": [row.to_dict() for row in self.ranking],
            "target": self.target.to_dict() if self.target else None, "check_shapes_note": self.check_note,
            "agent": self.agent, "swap": self.swap.to_dict() if self.swap else None, "choice": self.choice(),
            "model_run": self.model_run.to_dict() if self.model_run else None,
            "graph_only": self.graph_only.to_dict() if self.graph_only else None,
            "speedups": self.speedups(), "limits": self.limits(), "notes": self.notes}

    def _recheck_text(self) -> str:
        rechecked = self.swap.rechecked if self.swap else {}
        if not rechecked:
            return "not run"
        seeds = f" (seeds {rechecked['seeds']})" if rechecked.get("seeds") else ""
        return ("passed" if rechecked.get("passed") else f"FAILED: {rechecked.get('reason')}") + seeds

    def markdown(self) -> str:
        def figure(value, digits=3, suffix="x"):
            return "-" if value is None else f"{value:.{digits}f}{suffix}"

        def interval(bounds):
            return f"[{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else ""
        name = self.model.get("name")
        lines = [f"# Agent on a model: {name}, {self.phase}, batch {self.batch}, prompt {self.prompt}", "",
                 f"- device: {self.device}, {self.dtype}; new tokens: {self.new}; run folder: `{self.run_dir}`"]
        if not self.gpu:
            lines += ["", "> **Not GPU measurements.** No GPU here: every time below is the host's wall clock (eager "
                          "PyTorch on the CPU, our kernels in the Triton interpreter). The flow ran end to end; the "
                          "figures say nothing about a GPU, and the swap decision is 'not measured'."]
        lines += ["", "## 1. Operations by time share (eager, labelled)", "",
                  f"{self.profile.title}: {self.profile.steps} steps, "
                  f"{self.profile.wall_seconds / max(self.profile.steps, 1) * 1e3:.3f} ms a step ({self.profile.device}).",
                  "", "| operation | category | calls/step | ms/step | share | bound if free | bound if 2x | ladder |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in self.ranking:
            lines.append(f"| {row.name} | {row.category} | {row.calls_per_step if row.calls_per_step is not None else '-'} "
                         f"| {row.seconds_per_step * 1e3:.3f} | {row.share:.1%} | {row.bound_if_free:.3f}x "
                         f"| {row.bound_if_2x:.3f}x | {row.note} |")
        lines += ["", "## 2. The operation optimised", ""]
        if self.target is None:
            lines.append("None: no ranked operation has an operator ladder yet.")
        else:
            t = self.target
            lines += [f"- **{t.operation}** ({t.share:.1%} of a step): the **{t.ladder}** ladder at the shape the model "
                      f"calls it with, {shape_label(t.shape)} {t.dtype}",
                      f"- Amdahl bound of {t.operation} alone: {amdahl(t.share):.3f}x if free, "
                      f"{amdahl(t.share, 2.0):.3f}x if 2x faster",
                      f"- the kernel is swapped in for {', '.join(t.covered)} ({t.covered_share:.1%} together): "
                      f"bound {amdahl(t.covered_share):.3f}x if free, {amdahl(t.covered_share, 2.0):.3f}x if 2x faster"]
            if self.check_note:
                lines.append(f"- check shapes: {self.check_note}")
        lines += ["", "## 3. What the agent reached on the operator", ""]
        if self.agent:
            final = self.agent.get("final") or {}
            task = self.agent.get("task", {})
            lines += [f"- {task.get('op')} ({task.get('route')}) from {task.get('start')} at "
                      f"{shape_label(tuple(task['bench_shape'])) if task.get('bench_shape') else '-'}, "
                      f"policy {self.agent.get('policy')}; stopped: {self.agent.get('stop_reason')}",
                      "- candidates: " + ", ".join(f"{n} {state}" for state, n in self.agent.get("counts", {}).items()),
                      f"- start: candidate {self.agent.get('start_id')}; best: candidate {self.agent.get('best_id')}"
                      + (f" ({' -> '.join(self.agent['accepted_actions'])})" if self.agent.get("accepted_actions") else ""),
                      f"- best vs start, re-measured in a fresh process: {figure(final.get('remeasured'))} "
                      f"{interval(final.get('ci95'))} ({final.get('verdict') or final.get('note') or '-'}; clock: "
                      f"{final.get('clock') or 'not timed'})",
                      f"- the best on the roofline: {self.agent.get('best_roofline') or 'not placed (no GPU roofs here)'}",
                      f"- the operator run's own report: `{self.agent.get('report')}`"]
        else:
            lines.append("The agent did not run.")
        lines += ["", "## 4. The swap", ""]
        if self.swap is not None:
            lines += [f"- candidate {self.swap.candidate_id} (sha256 `{(self.swap.source_sha256 or '')[:16]}`), "
                      f"file `{self.swap.file or '-'}`",
                      "- the agent's checker, run again before the swap: " + self._recheck_text()]
            if self.swap.refused:
                lines.append(f"- refused: {self.swap.refused}")
        choice = self.choice()
        if choice is not None:
            lines.append(f"- the registry's decision: {'USED' if choice['used'] else 'not used'}: {choice['reason']}")
        lines += ["", "## 5. The model, re-measured", ""]
        runs = self.runs()
        if runs:
            lines += ["| backend | prefill tok/s | decode tok/s | of bound | kernels swapped in | tokens vs eager |",
                      "|---|---|---|---|---|---|"]
            for run in runs.values():
                lines.append(f"| {run.backend} | {run.prefill_tokens_per_s:,.1f} | "
                             f"{'-' if run.decode_tokens_per_s is None else f'{run.decode_tokens_per_s:,.1f}'} | "
                             f"{'-' if run.of_bound is None else f'{run.of_bound:.0%}'} | {', '.join(run.used) or 'none'} "
                             f"| {run.agreement} |")
            speed = self.speedups()
            lines += ["", f"- the model's {self.phase} speed-up, hello-gpu over eager: {figure(speed['measured'])}"
                      + ("" if self.gpu else " (host wall clock: not a GPU measurement)"),
                      f"- Amdahl's prediction from the kernel's speed-up over the eager operation: "
                      f"{figure(speed['predicted'])}"
                      + ("" if speed["predicted"] is not None else " (no timed kernel in the model)")]
            if speed["graph_part"] is not None:
                lines.append(f"- of it, the CUDA graph alone: {figure(speed['graph_part'])}; the kernel on top: "
                             f"{figure(speed['kernel_part'])}")
            if self.model_run is not None:
                lines.append(f"- bandwidth bound: {self.model_run.bound.note}")
        else:
            lines.append("Not re-measured.")
        lines += ["", "## What limits it", ""] + [f"- {line}" for line in self.limits()]
        if self.notes:
            lines += ["", "## Notes", ""] + [f"- {note}" for note in self.notes]
        return "\n".join(lines) + "\n"

    def write(self) -> dict[str, Path]:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        paths = {"json": self.run_dir / "report.json", "markdown": self.run_dir / "report.md"}
        paths["json"].write_text(json.dumps(self.to_dict(), indent=2, default=str), encoding="utf-8")
        paths["markdown"].write_text(self.markdown(), encoding="utf-8")
        return paths


def agent_summary(operator_dir: Path) -> dict:
    """The operator run's outcome, from its report data."""
    from .report import report_data
    data = report_data(operator_dir)
    accepted = [c for c in data["candidates"] if c["state"] == "accepted" and c["id"] != data["start_id"]]
    best = next((c for c in data["candidates"] if c["id"] == data["best_id"]), None)
    analysis = ((best or {}).get("evidence") or {}).get("analyze") or {}
    roofline = None
    if analysis.get("fraction_of_attainable") is not None:
        roofline = f"{analysis['fraction_of_attainable']:.0%} of the attainable roof ({analysis.get('bound')}-bound)"
    return {"run_dir": str(operator_dir), "task": data["task"], "policy": data["policy"],
            "stop_reason": data["stop_reason"], "counts": data["counts"], "start_id": data["start_id"],
            "best_id": data["best_id"], "final": data["final"], "agreement": data["agreement"],
            "accepted_actions": [c["action"] for c in accepted], "best_roofline": roofline,
            "report": str(operator_dir / "report.md"), "rerun": data["rerun"]}


# ------------------------------------------------------------------------------------------ the whole flow


def optimise_model(model: Llama, run_dir: str | Path, *, phase: str = "decode", batch: int = 1, prompt: int = 512,
                   new: int = 256, steps: int = 5, seed: int = 0, start: str | None = None, reference: str | None = None,
                   ops_root=None, policy="scripted", rounds: int | None = None, patience: int | None = None,
                   time_budget_s: float | None = None, target_fraction: float | None = None,
                   timeouts: dict | None = None, force_swap: bool = False, recheck: bool = True,
                   say: Callable[[str], None] | None = None, progress: Callable[[dict], None] | None = None,
                   console=None) -> ModelAgentResult:
    """Profile, rank, optimise the top operator with a ladder, swap it in, re-measure; the report is written
    (``run_dir``/report.md and report.json) whatever step the flow ends at."""
    say = say or (lambda text: None)
    run_dir = Path(run_dir)
    if phase not in ("decode", "prefill"):
        raise ModelAgentError(f"--phase must be decode or prefill, got {phase!r}")
    if min(batch, prompt) < 1 or new < 2:
        raise ModelAgentError("--batch and --prompt must be at least 1, --new at least 2")
    if prompt + new > model.config.max_position:
        raise ModelAgentError(f"--prompt {prompt} + --new {new} exceed the model's {model.config.max_position} positions")
    if (run_dir / OPERATOR_RUN / "candidates.sqlite").exists():
        raise ModelAgentError(f"{run_dir} already holds a model run (its operator run: hello-gpu agent resume "
                              f"{run_dir / OPERATOR_RUN})")
    gpu = model.device.type == "cuda"
    tokens = 1 if phase == "decode" else prompt
    run_dir.mkdir(parents=True, exist_ok=True)

    say(f"1/5 profiling {model.config.name} ({phase}, batch {batch}, prompt {prompt}) with the eager backend")
    profile = profile_llama(model, backend="eager", batch=batch, prompt=prompt, phase=phase, steps=steps,
                            trace_path=run_dir / "trace.json")
    ranking = rank_operations(profile, model, batch=batch, tokens=tokens, cache_length=prompt + 1, ops_root=ops_root)
    result = ModelAgentResult(run_dir, model.config.to_dict(), device_label(model.device),
                              str(model.dtype).removeprefix("torch."), batch, prompt, new, phase, gpu, profile, ranking)
    for row in ranking:
        say(f"  {row.name:<13} {row.share:6.1%} of a step (bound {row.bound_if_free:.3f}x if free, "
            f"{row.bound_if_2x:.3f}x if 2x faster): {row.note}")
    result.target = choose_target(ranking, model, batch * tokens, ops_root)
    if result.target is None:
        result.write()
        return result
    t = result.target
    say(f"2/5 top operation with a ladder: {t.operation} ({t.share:.1%} of a step) -> the {t.ladder} ladder at "
        f"{shape_label(t.shape)} {t.dtype}; Amdahl bound {amdahl(t.share):.3f}x if free, {amdahl(t.share, 2.0):.3f}x "
        f"if 2x faster")
    task, result.check_note = operator_task(t, start=start, reference=reference, ops_root=ops_root)

    say(f"3/5 the agent on {task.op} from {task.start} ({task.route}) at {shape_label(t.shape)}")
    run_agent(task, policy, run_dir / OPERATOR_RUN, rounds=rounds, seed=seed, time_budget_s=time_budget_s,
              patience=patience, target_fraction=target_fraction, timeouts=timeouts, progress=progress)
    result.agent = agent_summary(run_dir / OPERATOR_RUN)
    if result.agent["best_id"] is None:
        result.write()
        return result

    say("4/5 the agent's best: checked again by the agent's checker, then offered to the backend's registry")
    result.swap = prepare_swap(run_dir, task, model_eps=model.config.rms_norm_eps, recheck=recheck)
    registry = registry_with(result.swap, t, run_dir)

    say(f"5/5 re-measuring the model: eager, hello-gpu{' and ' + GRAPH_ONLY if gpu else ''}")
    result.model_run, result.graph_only = remeasure(
        model, registry, batch=batch, prompt=prompt, new=new, seed=seed,
        force=force_swap and result.swap.function is not None, replaces=t.replaces, console=console,
        progress=bool(console is not None and console.is_terminal))
    if force_swap:
        result.notes.append("--force-swap: the agent's kernel was swapped in checked (against float64 eager) but "
                            "not timed against eager")
    result.write()
    return result
