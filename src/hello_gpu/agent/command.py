"""``hello-gpu agent ...``: what the command does once its arguments are parsed.

``cli.py`` parses the words and options into :class:`AgentOptions` and calls :func:`run_command`; the
choices (a new run on an operator or a problem file, ``resume RUN``, ``report RUN``, or ``--model
CONFIG``: the agent pointed at a whole model, :mod:`hello_gpu.agent.model`), their checks and their
messages live here, beside the loop they drive. Every message starts with ``agent:``; the exit
status is 0 (done), 1 (no record written, or no candidate could run here), 2 (a usage error or a run
that cannot start) or 130 (Ctrl-C: everything so far is stored, and ``resume`` continues it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..bench.records import RecordError, repository_root
from ..ops import HeaderError, SpecError, load_op
from .kernelbench import ProblemError, write_operator
from .loop import NAMED_REFERENCE, RunSetupError, run_agent
from .policies.llm import LLMError
from .report import write_report
from .task import Task
from .tools import record


@dataclass(frozen=True)
class AgentOptions:
    """The options of ``hello-gpu agent`` (None: the default, or on resume the run's own)."""

    start: str | None = None               # --from: the start rung (a rung file for a problem file)
    route: str | None = None
    rounds: int | None = None
    policy: str = "scripted"
    run_dir: Path | None = None
    seed: int = 0
    patience: int | None = None
    time_budget: float | None = None
    target: float | None = None
    ops_root: Path | None = None
    shape: object = None                   # an int or a tuple (hello_gpu.ops.shapes.parse_shape)
    dtype: str | None = None
    reference: str | None = None
    record: Path | None = None             # the records folder; None: no record
    counters: bool | None = None
    side_streams: bool = False             # --side-streams: kernels on streams joined before return allowed
    # --model CONFIG: the agent pointed at a whole model (a configuration name or a checkpoint folder)
    model: str | None = None
    batch: int = 1
    prompt: int = 512
    new: int = 256
    phase: str = "decode"
    steps: int = 5                         # profiled steps
    force_swap: bool = False               # swap the agent's kernel in checked but untimed (CPU correctness runs)


def default_runs_dir() -> Path:
    """Where a run goes without --run-dir: the user data folder (``~/.local/share/hello-gpu/agent-runs``
    on Linux), never the current folder, which may be a git checkout. ``HG_AGENT_RUNS`` overrides it."""
    import os

    import platformdirs
    return Path(os.environ.get("HG_AGENT_RUNS") or Path(platformdirs.user_data_dir("hello-gpu")) / "agent-runs")


def progress_printer(console) -> Callable[[dict], None]:
    """The loop's progress events as one line each on ``console``."""
    def show(event: dict) -> None:
        kind = event.get("event")
        if kind == "candidate":
            console.print(f"  candidate {event['id']}: {event['state']}  {event.get('action', '')}  "
                          f"{(event.get('reason') or '')[:160]}", markup=False, highlight=False, soft_wrap=True)
        elif kind == "round":
            console.print(f"round {event['round']} (best: candidate {event['best']})", markup=False, highlight=False)
        elif kind in ("stop", "start"):
            console.print(f"{kind}: {event.get('reason') or event.get('run_dir')}", markup=False, highlight=False)
        elif kind == "policy-failed":
            console.print(f"  {event['reason']}", markup=False, highlight=False, soft_wrap=True)
        elif kind == "final":
            console.print(f"final re-measurement: {event.get('remeasured')} (claimed {event.get('claimed')})",
                          markup=False, highlight=False)
        elif kind == "report":
            console.print(f"report: {event.get('markdown')}", markup=False, highlight=False)
    return show


def run_command(words: list[str], options: AgentOptions, console) -> int:
    """``hello-gpu agent OP | PROBLEM.py | resume RUN | report RUN``; returns the exit status."""
    def say(text: str) -> None:
        console.print(f"agent: {text}", markup=False, highlight=False, soft_wrap=True)

    if options.model:
        if words:
            say(f"give an operator or --model, not both (got {' '.join(words)} and --model {options.model})")
            return 2
        return _model_run(options, console, say)
    if not words:
        say("give an operator, a problem file, 'resume RUN' / 'report RUN', or --model CONFIG")
        return 2
    if words[0] in ("resume", "report"):
        if len(words) != 2:
            say(f"usage: hello-gpu agent {words[0]} RUN")
            return 2
        run_dir = Path(words[1])
        if not (run_dir / "candidates.sqlite").is_file():
            say(f"{run_dir} is not a run folder (no candidates.sqlite)")
            return 2
        if words[0] == "report":
            for kind, path in write_report(run_dir).items():
                say(f"wrote {path} ({kind})")
            return 0
        return _resume(run_dir, options, console, say)
    if len(words) != 1:
        say("give one operator, or 'resume RUN' / 'report RUN'")
        return 2
    if not options.start:
        say("--from RUNG is required for a new run")
        return 2
    if words[0].endswith(".py"):
        return _problem(Path(words[0]), options, console, say)
    return _new_operator_run(words[0], options, console, say)


def _resume(run_dir: Path, options: AgentOptions, console, say) -> int:
    try:
        result = run_agent(None, None, run_dir, rounds=options.rounds, time_budget_s=options.time_budget,
                           patience=options.patience, target_fraction=options.target, resume=True,
                           timeouts={} if options.counters is None else {"counters": options.counters},
                           progress=progress_printer(console))
    except KeyboardInterrupt:
        say(f"interrupted; everything done so far is stored: hello-gpu agent resume {run_dir}")
        return 130
    except (LLMError, RunSetupError) as error:   # a policy that cannot start
        say(f"cannot resume {run_dir}: {error}")
        return 2
    say(f"stopped: {result.stop_reason}")
    return 0


def _new_operator_run(op_name: str, options: AgentOptions, console, say) -> int:
    """A new run on an operator of the registry, from its rung ``options.start``."""
    try:
        op = load_op(op_name, options.ops_root)
        rung = op.rung(options.start)
    except (KeyError, ValueError) as error:
        say(str(error))
        return 2
    route = options.route or rung.route
    if rung.route != route:
        say(f"{options.start} is a {rung.route} rung, not {route}")
        return 2
    if not _can_run_here(route, op_name, say):
        return 2
    extra = {"ops_root": str(options.ops_root.resolve())} if options.ops_root else {}
    if options.reference:
        try:
            reference = op.rung(options.reference)
        except (KeyError, ValueError) as error:
            say(str(error))
            return 2
        if reference.route != route:
            say(f"--reference {options.reference} is a {reference.route} rung, not {route}")
            return 2
        extra["reference"] = {"rung": reference.id, "why": NAMED_REFERENCE}
    # Every dtype the starting rung takes is checked for every candidate (none may drop one); where a route's
    # rungs take some of the operator's dtypes only (matmul: the SIMT route float32, the tensor-core routes 16-bit),
    # those are the task's.
    dtypes = tuple(d for d in op.spec.DTYPES if rung.supports(d))
    if options.dtype:
        if options.dtype not in op.spec.DTYPES:
            say(f"{op_name} is defined for {', '.join(op.spec.DTYPES)}, not {options.dtype}")
            return 2
        if options.dtype not in dtypes:
            say(f"{options.start} takes {', '.join(dtypes)} (its header's dtypes), not {options.dtype}")
            return 2
        dtypes = (options.dtype, *(d for d in dtypes if d != options.dtype))
    task = Task(op_name, options.start, route, dtypes=dtypes, bench_shape=options.shape, extra=extra,
                side_streams=options.side_streams)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = options.run_dir or default_runs_dir() / f"{op_name}.{route}.{options.start}.{stamp}"
    status = _search(task, options, run_dir, console, say)
    if status == 0 and options.record:
        try:
            say(f"wrote {record(run_dir, directory=options.record, repo_root=repository_root(op.path))}")
        except RecordError as error:
            say(f"no record written: {error}")
            return 1
    return status


CPU_CAN_DO = ("on a machine without a GPU the agent runs Triton candidates in the Triton interpreter (minutes a "
              "candidate for the shipped operators: every check runs ~0.6 ms of Python per program), and the small "
              "fixture operator in tests/fixtures/ops (hello-gpu agent toy_add --ops-root tests/fixtures/ops --from "
              "t01_block_per_program) in about a minute; HIP candidates need a GPU (`hello-gpu compile-check` "
              "compiles them here)")


def _can_run_here(route: str, op_name: str, say) -> bool:
    """Say at once what this machine can do; False where the run cannot start (HIP without a GPU)."""
    from ..runtime.device import gpu_vendor
    if gpu_vendor() is not None:
        return True
    if route == "hip":
        say(f"no GPU here, so no {op_name} HIP candidate can be checked or timed: {CPU_CAN_DO}")
        return False
    say(f"no GPU here: {op_name} Triton candidates run in the interpreter, slowly; progress is shown per "
        f"candidate. ({CPU_CAN_DO})")
    return True


def _search(task, options: AgentOptions, run_dir: Path, console, say) -> int:
    """A new run of the search, with its progress shown; 130 after Ctrl-C (resume continues it)."""
    try:
        result = run_agent(task, options.policy, run_dir, rounds=options.rounds, seed=options.seed,
                           time_budget_s=options.time_budget, patience=options.patience,
                           target_fraction=options.target, timeouts={"counters": options.counters is not False},
                           progress=progress_printer(console))
    except KeyboardInterrupt:
        say(f"interrupted; everything done so far is stored: hello-gpu agent resume {run_dir}")
        return 130
    except (LLMError, RunSetupError) as error:       # a policy that cannot start, a folder already in use
        say(f"no run started: {error}")
        return 2
    say(f"stopped: {result.stop_reason}; report in {run_dir}")
    if result.best_id is None:
        say("no candidate could be checked and timed here, so there is no result: exit status 1")
        return 1
    return 0


def _problem(problem: Path, options: AgentOptions, console, say) -> int:
    """``hello-gpu agent PROBLEM.py --from KERNEL``: a KernelBench-style problem, starting from a rung
    file; the run folder holds the operator folder made for it (ops/), so ``resume`` finds it again."""
    run_dir = options.run_dir or default_runs_dir() / f"{problem.stem}.{time.strftime('%Y%m%d-%H%M%S')}"
    if (run_dir / "candidates.sqlite").exists():
        say(f"{run_dir} already holds a run: resume it with `hello-gpu agent resume {run_dir}`")
        return 2
    try:
        task, _ = write_operator(problem, Path(options.start), run_dir / "ops")
    except (ProblemError, HeaderError, SpecError) as error:
        say(str(error))
        return 2
    if options.route and options.route != task.route:
        say(f"{options.start} is a {task.route} kernel, not {options.route}")
        return 2
    task.side_streams = options.side_streams
    return _search(task, options, run_dir, console, say)


def _model_run(options: AgentOptions, console, say) -> int:
    """``hello-gpu agent --model CONFIG``: profile, rank, optimise the top operator with a ladder, swap it
    in, re-measure the model (:func:`hello_gpu.agent.model.optimise_model`)."""
    import os

    from ..models.checkpoint import CheckpointError
    from ..models.command import default_dtype, load_model
    from ..models.llama import parse_dtype
    from ..runtime.device import gpu_vendor
    from .model import ModelAgentError, optimise_model

    if options.shape is not None:
        say("--shape is not used with --model: the operator's shape is the one the model calls it with")
        return 2
    if options.route:
        say("--route is not used with --model: the route is the start rung's (--from)")
        return 2
    if gpu_vendor() is None:
        # Read when a Triton kernel is decorated: before the agent's kernel is imported into this process.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    checkpoint = options.model if Path(options.model).is_dir() else None
    try:
        dtype = parse_dtype(options.dtype) if options.dtype else default_dtype(device)
        model, _, note = load_model(config=None if checkpoint else options.model, checkpoint=checkpoint,
                                    device=device, dtype=dtype, seed=options.seed)
    except (ValueError, CheckpointError, OSError) as error:
        say(f"--model {options.model}: {error}")
        return 2
    run_dir = options.run_dir or default_runs_dir() / f"model.{model.config.name}.{options.phase}." \
                                                      f"{time.strftime('%Y%m%d-%H%M%S')}"
    say(f"{model.config.name}: {model.config.parameter_count() / 1e6:,.2f} M parameters, {note}, {device} "
        f"{str(dtype).removeprefix('torch.')}; run folder {run_dir}")
    try:
        result = optimise_model(
            model, run_dir, phase=options.phase, batch=options.batch, prompt=options.prompt, new=options.new,
            steps=options.steps, seed=options.seed, start=options.start, reference=options.reference,
            ops_root=options.ops_root, policy=options.policy, rounds=options.rounds, patience=options.patience,
            time_budget_s=options.time_budget, target_fraction=options.target,
            timeouts={"counters": options.counters is not False}, force_swap=options.force_swap, say=say,
            progress=progress_printer(console), console=console)
    except KeyboardInterrupt:
        say(f"interrupted; the operator run so far is stored: hello-gpu agent resume {run_dir / 'operator'}")
        return 130
    except (ModelAgentError, LLMError, RunSetupError) as error:
        say(f"no run started: {error}")
        return 2
    for line in result.limits():
        say(f"limit: {line}")
    say(f"report: {run_dir / 'report.md'} and report.json")
    if result.target is None or not result.agent or result.agent.get("best_id") is None:
        say("nothing was optimised (see the report): exit status 1")
        return 1
    if options.record:
        try:
            op = load_op(result.target.ladder, options.ops_root)
            say(f"wrote {record(run_dir / 'operator', directory=options.record, repo_root=repository_root(op.path))}")
        except RecordError as error:
            say(f"no record written: {error}")
            return 1
    return 0
