"""The ``hello-gpu`` command line (also ``python -m hello_gpu``).

Each subcommand is one entry in :data:`COMMANDS`: a help line, a function that adds its arguments to
its argparse parser, and a function that runs it and returns the exit status. To add a subcommand,
write those two functions and add an entry; ``main`` does the rest.

Each subcommand imports what it uses inside its own function, not at the top: ``hello_gpu.ops`` (and so
``profile`` and ``agent``) imports PyTorch, about 2 s, and ``bench`` another 0.05 s; ``hello-gpu --help``
and ``doctor`` must not pay for every command's layer. At the top: only what ``import hello_gpu`` has
already loaded (the runtime) and the console.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from . import __version__
from .runtime.device import gpu_vendor


@dataclass(frozen=True)
class Subcommand:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Console], int]


def make_console() -> Console:
    """Colours and the terminal's width on a TTY; plain text in logs and pipes, as wide as COLUMNS says
    (a log's reader sets it, e.g. COLUMNS=220 for a ladder's nine columns) or else 140 columns."""
    terminal = sys.stdout.isatty()
    columns = os.environ.get("COLUMNS", "")
    width = None if terminal else int(columns) if columns.isdigit() and int(columns) > 0 else 140
    return Console(highlight=False, emoji=False, width=width)


# ------------------------------------------------------------------------------------------ doctor


def _doctor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of tables")
    parser.add_argument("--cpu-ok", action="store_true",
                        help="a machine without a GPU is fine: exit 0 when the CPU-side checks pass")


def _doctor(args: argparse.Namespace, console: Console) -> int:
    from .runtime.doctor import render, run_doctor

    report = run_doctor(cpu_ok=args.cpu_ok, version=__version__)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        render(report, console)
    return report.exit_code


# ----------------------------------------------------------------------------------- compile-check


def _compile_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."],
                        help=".hip/.cu files or directories to search (default: the current directory tree)")
    parser.add_argument("--arch", default="sm_90", help="NVIDIA target for NVRTC (default: sm_90); a rung whose header "
                                                        "declares an arch (arch: sm_90a) is compiled for that")
    parser.add_argument("--amd-arch", default="gfx1201", help="AMD target for clang (default: gfx1201)")
    parser.add_argument("--no-amd", action="store_true", help="compile for NVIDIA only")
    parser.add_argument("--report", metavar="FILE.json", help="also write the results as JSON")


def _compile_check(args: argparse.Namespace, console: Console) -> int:
    from .ops.rung import INCLUDE_DIR
    from .runtime import compile_gate

    try:
        from .ops.header import declared_target, rung_instantiations
        report = compile_gate.check(args.paths, arch=args.arch, amd_arch=args.amd_arch, amd=not args.no_amd,
                                    instantiations=rung_instantiations, targets=declared_target,
                                    include_dirs=[INCLUDE_DIR])
    except (OSError, ValueError) as error:
        console.print(f"compile-check: {error}", markup=False, highlight=False, soft_wrap=True)
        return 2
    compile_gate.render(report, console)
    if args.report:
        compile_gate.write_report(report, args.report)
    return 0 if report.ok else 1


# ----------------------------------------------------------------------------------------- records


def _records_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="records_command", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="validate records/, find stale entries and claims without a record",
                               description="Validate every records/**/*.json, report entries whose source changed "
                                           "since it was measured, and claims (hello-gpu: record NAME) without a record.")
    check.add_argument("--root", default=".", metavar="DIR", help="repository root (default: the current directory)")
    tables = actions.add_parser("tables", help="regenerate the Markdown tables marked <!-- hello-gpu:table ... -->",
                                description="Regenerate every marked table from its record.")
    tables.add_argument("files", nargs="*", metavar="FILE",
                        help="Markdown files (default: README.md, README.zh-CN.md, docs/**/*.md under --root)")
    tables.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is out of date")
    tables.add_argument("--root", default=".", metavar="DIR", help="repository root (default: the current directory)")


def table_renderers() -> dict:
    """The kinds of generated Markdown region besides the records' ``table``: ``outline`` (the course's table
    of contents, hello_gpu.course), ``agent-runs`` (the agent's committed runs, hello_gpu.agent.runs_table), the
    whole-model regions of the course's Part 4 (hello_gpu.course.model_tables) and ``rungs`` (the rung tables of
    hello_gpu.ops.rung_tables) once that module exists."""
    from .agent.runs_table import render_agent_runs
    from .course import render_region
    from .course.model_tables import RENDERERS as MODEL_RENDERERS

    renderers = {"outline": render_region, "agent-runs": render_agent_runs, **MODEL_RENDERERS}
    try:
        from .ops.rung_tables import render_rungs
    except ModuleNotFoundError as error:
        if error.name != "hello_gpu.ops.rung_tables":
            raise
        return renderers
    return {**renderers, "rungs": render_rungs}


def _records(args: argparse.Namespace, console: Console) -> int:
    from pathlib import Path

    from .bench import records

    root = Path(args.root)
    if not root.is_dir():
        console.print(f"records: --root {root} is not a directory", markup=False, highlight=False, soft_wrap=True)
        return 2
    if args.records_command == "check":
        from .ops.sources import repository_rules
        report = records.check_records(root, repository_rules(root))
        records.render_check(report, console)
        return 0 if report.ok else 1
    files = [Path(name) for name in args.files] or records.default_table_files(root)
    try:
        changed = records.update_tables(files, root, check=args.check, renderers=table_renderers())
    except (records.RecordError, OSError) as error:
        console.print(f"records tables: {error}", markup=False, highlight=False, soft_wrap=True, style="bold red")
        return 1
    records.render_tables(changed, len(files), args.check, console)
    return 1 if args.check and changed else 0


# ----------------------------------------------------------------------------------------- version


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def _version(args: argparse.Namespace, console: Console) -> int:
    print(f"hello-gpu {__version__}")
    return 0



# ---------------------------------------------------------------------------------------- ceilings


def _ceilings_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--refresh", action="store_true", help="measure again even if cached for this device and driver")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (1/8 of the copy, 4096^3 matmuls)")
    parser.add_argument("--json", action="store_true", help="print the ceilings as JSON")
    parser.add_argument("--record", type=Path, metavar="RECORDS_DIR",
                        help="also write them as a record under RECORDS_DIR/<device>/ceilings.json")


def _ceilings(args: argparse.Namespace, console: Console) -> int:
    from .bench.ceilings_report import run_ceilings

    return run_ceilings(refresh=args.refresh, quick=args.quick, as_json=args.json, record_dir=args.record,
                        console=console)


# ------------------------------------------------------------------------------- list, run, ladder


def _parse_shape(text: str):
    """--shape and --shapes: :func:`hello_gpu.ops.shapes.parse_shape`, its error as argparse's own; every
    size at least 1 (``--shapes -5`` was read as a shape of -5 elements and ended in a traceback)."""
    from .ops.shapes import parse_shape
    try:
        shape = parse_shape(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if min(shape if isinstance(shape, tuple) else (shape,)) < 1:
        raise argparse.ArgumentTypeError(f"not a shape: {text!r} (every size must be at least 1; write 4097, "
                                         f"2**24 or 1823x781)")
    return shape


# What people type for a dtype -> the torch name the specs use.
DTYPE_ALIASES = {"fp32": "float32", "f32": "float32", "float": "float32", "single": "float32",
                 "bf16": "bfloat16", "fp16": "float16", "f16": "float16", "half": "float16",
                 "fp64": "float64", "f64": "float64", "double": "float64"}


def resolve_dtype(command: str, op, text: str | None, console: Console) -> tuple[bool, str | None]:
    """(ok, dtype): ``text`` as the spec's dtype name (aliases such as fp32, bf16, half accepted), or
    (False, None) after printing the names ``op`` is defined for. ``text`` None stays None."""
    if text is None:
        return True, None
    dtype = DTYPE_ALIASES.get(text.lower(), text.lower().removeprefix("torch."))
    if dtype in op.spec.DTYPES:
        return True, dtype
    aliases = ", ".join(f"{alias}={name}" for alias, name in DTYPE_ALIASES.items() if name in op.spec.DTYPES)
    console.print(f"{command}: {op.name} is defined for {', '.join(op.spec.DTYPES)}, not {text!r}"
                  f"{f' (aliases: {aliases})' if aliases else ''}", markup=False, highlight=False, soft_wrap=True,
                  style="bold red")
    return False, None


def _load_op(command: str, name: str, root, console: Console, rung: str | None = None):
    """The operator (and that it has ``rung``), or None after printing why not: a typo is no traceback."""
    from .ops import HeaderError, SpecError, load_op
    try:
        op = load_op(name, root)
        if rung is not None:
            op.rung(rung)
        return op
    except (HeaderError, SpecError, KeyError) as error:
        message = error.args[0] if isinstance(error, KeyError) else error
        console.print(f"{command}: {message}", markup=False, highlight=False, soft_wrap=True, style="bold red")
        return None


def _root_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", metavar="DIR", help="folder of operators (default: the package's ops/)")


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", nargs="?", help="operator (default: every operator)")
    _root_argument(parser)


def _list(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text
    from rich.tree import Tree

    from .ops import list_ops

    names = [args.op] if args.op else list_ops(args.root)
    if not names:
        console.print("no operators yet")
    for name in names:
        op = _load_op("list", name, args.root, console)
        if op is None:
            return 2
        tree = Tree(Text(f"{op.name} ({len(op.rungs)} rungs)", style="bold"))

        def add(node, rung):
            label = Text(f"{rung.id}", style="bold")
            label.append(f" [{rung.route}] {rung.metadata.change}")
            if rung.metadata.requires:
                unmet = rung.unmet_requirement()
                label.append(f" ({unmet}: skipped)" if unmet else f" (requires {rung.metadata.requires})",
                             style="dim")
            branch = node.add(label)
            for child in rung.children():
                add(branch, child)

        for rung in op.roots():
            add(tree, rung)
        console.print(tree)
    return 0


def _no_gpu(command: str, console: Console) -> bool:
    if gpu_vendor() is not None:
        return False
    console.print(f"hello-gpu {command}: no GPU here; rungs are timed on the GPU they describe. "
                  f"`hello-gpu ladder OP --check-only` checks what can run here (Triton rungs in the interpreter).",
                  markup=False, highlight=False, soft_wrap=True)
    return True


def _show_ladder(result, console: Console) -> int:
    from .ops.ladder import checks_table
    console.print(checks_table(result.op, result.checks))
    if result.timed:
        console.print(result.table())
    for rung_id, shape, why in result.not_timed:
        console.print(f"not timed: {rung_id} ({shape}): {why}", markup=False, highlight=False, soft_wrap=True)
    if result.record_path:
        console.print(f"wrote {result.record_path} and {', '.join(str(p) for p in result.plot_paths)}",
                      markup=False, highlight=False, soft_wrap=True)
    return 1 if any(report.status == "FAIL" for report in result.checks.values()) else 0


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", help="operator, e.g. vector_add")
    parser.add_argument("rung", help="rung id, e.g. v03_warp_shuffle")
    parser.add_argument("--shape", type=_parse_shape, help="shape to time (default: the spec's largest BENCH_SHAPES)")
    parser.add_argument("--dtype", default="float32", help="dtype (default: float32; fp32, bf16, fp16/half also read)")
    _cache_argument(parser)
    _root_argument(parser)


def _cache_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache", choices=("cold", "cold-clean"), default="cold",
                        help="the flush before each timed call: cold zeroes a buffer of 4x the L2 (do_bench's "
                             "convention, the records'); cold-clean then reads it back, so no modified lines are "
                             "left for the kernel to write back (not with --record)")


def _run(args: argparse.Namespace, console: Console) -> int:
    from .ops import run_ladder

    op = _load_op("run", args.op, args.root, console, args.rung)   # a typo is reported before the GPU question
    if op is None:
        return 2
    ok, dtype = resolve_dtype("run", op, args.dtype, console)
    if not ok:
        return 2
    if _no_gpu("run", console):
        return 2
    shape = args.shape or op.spec.BENCH_SHAPES[-1]
    return _show_ladder(run_ladder(op, shapes=[shape], dtype=dtype, only=[args.rung],
                                   progress=console.is_terminal, cache=args.cache), console)


def _ladder_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", help="operator, e.g. vector_add")
    parser.add_argument("--route", choices=("hip", "cuda", "triton"),
                        help="only this route's rungs (plus the baselines: torch and the peers)")
    parser.add_argument("--shapes", nargs="+", type=_parse_shape, metavar="SHAPE",
                        help="shapes to time (default: the spec's BENCH_SHAPES); with --check-only, shapes to check")
    parser.add_argument("--dtype", help="dtype (default: float32; with --check-only every dtype of the spec; "
                                        "fp32, bf16, fp16/half also read)")
    parser.add_argument("--record", nargs="?", const="records", type=Path, metavar="RECORDS_DIR",
                        help="write a record and its plot under RECORDS_DIR/<device>/ (default: records/ of the repo)")
    parser.add_argument("--check-only", action="store_true",
                        help="check correctness only; without a GPU, Triton rungs run in the interpreter "
                             "on small shapes")
    parser.add_argument("--profile", action="store_true",
                        help="after timing, read each rung's hardware counters (ncu / rocprofv3, one child process "
                             "per rung) at the largest shape: DRAM bytes, sectors per request, occupancy, top stall")
    _cache_argument(parser)
    _root_argument(parser)


def _ladder(args: argparse.Namespace, console: Console) -> int:
    from .ops import run_ladder

    op = _load_op("ladder", args.op, args.root, console)
    if op is None:
        return 2
    if not op.rungs:
        console.print(f"ladder: {op.name} has a spec but no rungs yet; add v00_torch.py, vNN_name.hip, vNN_name.cu or tNN_name.py "
                      f"beside {op.path / 'spec.py'}", markup=False, highlight=False, soft_wrap=True)
        return 2
    ok, dtype = resolve_dtype("ladder", op, args.dtype, console)
    if not ok:
        return 2
    if args.check_only:
        return _check_only(op, args, dtype, console)
    if args.cache != "cold" and args.record is not None:
        console.print(f"ladder: --record keeps cold timings only (the convention of every committed record); "
                      f"run --cache {args.cache} without --record", markup=False, highlight=False, soft_wrap=True)
        return 2
    if _no_gpu("ladder", console):
        return 2
    result = run_ladder(op, route=args.route, shapes=args.shapes, dtype=dtype or "float32",
                        record_dir=args.record, progress=console.is_terminal, cache=args.cache)
    status = _show_ladder(result, console)
    if args.profile and result.timed:
        console.print(_ladder_counters_table(result))
    return status


def _check_only(op, args: argparse.Namespace, dtype: str | None, console: Console) -> int:
    """``ladder --check-only``: the correctness table, with a progress bar on a terminal; 1 if a rung failed,
    2 if nothing could be checked here."""
    import warnings

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .ops.checking import INTERPRETER_MAX_ELEMENTS
    from .ops.ladder import check_ladder, checks_table

    limit = None
    if gpu_vendor() is None:
        # Read when each Triton rung is imported (fresh, by the registry), so setting it here is in time.
        os.environ.setdefault("TRITON_INTERPRET", "1")
        limit = INTERPRETER_MAX_ELEMENTS
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with warnings.catch_warnings(), Progress(*columns, console=console, transient=True,
                                             disable=not console.is_terminal) as bar:
        # The interpreter runs kernels in numpy, which warns on inf - inf (the -inf rows of softmax, a NaN
        # by design): IEEE arithmetic the checker compares, not a problem to print.
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")

        def progress(total: int):
            task = bar.add_task(f"checking {op.name}", total=total)
            return lambda: bar.advance(task)

        reports = check_ladder(op, route=args.route, shapes=args.shapes, dtypes=[dtype] if dtype else None,
                               max_elements=None if args.shapes else limit, progress=progress)
    console.print(checks_table(op, reports))
    if any(report.status == "FAIL" for report in reports.values()):
        return 1
    if not any(report.ran for report in reports.values()):
        console.print(f"ladder: no rung of {op.name} could be checked here (see the reasons above)",
                      markup=False, highlight=False, soft_wrap=True, style="bold red")
        return 2
    return 0


def _ladder_counters_table(result):
    """The counter columns of ``ladder --profile``: each timed rung at the ladder's largest shape."""
    from rich.table import Table

    from .ops.shapes import numel, shape_label
    from .profile.counters import counters_for_rungs
    shape = max(result.shapes, key=numel)
    rungs = [timed.rung for timed in result.timed if timed.shape == shape]
    counted = {timed.rung.id: timed.measurement.work.bytes for timed in result.timed
               if timed.shape == shape and timed.measurement.work is not None}
    counters = counters_for_rungs(result.op, rungs, shape, result.dtype)
    table = Table(title=f"{result.op.name} counters at {shape_label(shape)} {result.dtype}")
    for column in ("rung", "DRAM MB/call", "measured / counted", "sectors/request", "occupancy", "top stall", "note"):
        table.add_column(column, justify="left" if column in ("rung", "top stall", "note") else "right")
    for rung_id, found in counters.items():
        summary = found.summary()
        dram = summary["dram_bytes_per_call"]
        ratio = dram / counted[rung_id] if dram is not None and counted.get(rung_id) else None
        table.add_row(rung_id, f"{dram / 1e6:,.1f}" if dram is not None else "-", f"{ratio:.2f}x" if ratio else "-",
                      f"{summary['sectors_per_request']:.1f}" if summary["sectors_per_request"] is not None else "-",
                      f"{summary['achieved_occupancy_pct']:.0f}%" if summary["achieved_occupancy_pct"] is not None
                      else "-", summary["top_stall"] or "-", summary["note"] or "")
    return table


# ----------------------------------------------------------------------------------- profile, roofline


def _profile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", help="operator, e.g. vector_add")
    parser.add_argument("rung", help="rung id, e.g. v02_strided_chunks")
    parser.add_argument("--shape", type=_parse_shape, help="shape to profile (default: the spec's largest BENCH_SHAPES)")
    parser.add_argument("--dtype", default="float32", help="dtype (default: float32)")
    parser.add_argument("--counters", action=argparse.BooleanOptionalAction, default=True,
                        help="hardware counters from ncu (NVIDIA) or rocprofv3 (AMD) in a child process (default: on)")
    parser.add_argument("--record", nargs="?", const="records", type=Path, metavar="RECORDS_DIR",
                        help="add the result to RECORDS_DIR/<device>/OP.DTYPE.profile.json (default: records/ of the repo)")
    parser.add_argument("--repeats", type=int, default=10, help="calls under torch.profiler (default: 10)")
    parser.add_argument("--calls", type=int, default=3,
                        help="calls under the counter tool, which replays each kernel once per counter pass (default: 3)")
    parser.add_argument("--save-raw", type=Path, metavar="DIR",
                        help="also save the torch.profiler trace and the counter tool's CSV there (test fixtures)")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    _root_argument(parser)


def _profile(args: argparse.Namespace, console: Console) -> int:
    from .profile.rung_profile import run_profile

    # A typo in the operator or rung is reported before the GPU question.
    if _load_op("profile", args.op, args.root, console, args.rung) is None or _no_gpu("profile", console):
        return 2
    return run_profile(args.op, args.rung, shape=args.shape, dtype=args.dtype, counters=args.counters,
                       record_dir=args.record, save_raw=args.save_raw, repeats=args.repeats, calls=args.calls,
                       root=args.root, as_json=args.json, console=console)


def _roofline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", help="operator, e.g. vector_add")
    parser.add_argument("--route", choices=("hip", "cuda", "triton"),
                        help="only this route's rungs (plus the torch baselines)")
    parser.add_argument("--dtype", help="dtype (default: float32, or the dtype of --record's entries)")
    parser.add_argument("--record", type=Path, metavar="FILE",
                        help="the ladder record to place (default: RECORDS/<device>/OP[.ROUTE].DTYPE.json)")
    parser.add_argument("--records", type=Path, metavar="DIR",
                        help="folder of records (default: ./records, else records/ of the repository)")
    parser.add_argument("--device", metavar="SLUG", help="device folder under the records, e.g. nvidia-h200")
    parser.add_argument("--out", type=Path, metavar="PATH",
                        help="where the plot goes, without suffix (default: the user data folder, e.g. "
                             "~/.local/share/hello-gpu/roofline/DEVICE/NAME.roofline; never the tracked records/)")
    parser.add_argument("--json", action="store_true", help="print the roofs and verdicts as JSON")


def _roofline(args: argparse.Namespace, console: Console) -> int:
    from .bench.records import default_records_dir
    from .profile.roofline_report import run_roofline

    return run_roofline(args.op, dtype=args.dtype, route=args.route, record_file=args.record,
                        records_dir=args.records or default_records_dir(), device=args.device, out=args.out,
                        as_json=args.json, console=console)


# ---------------------------------------------------------------------------------------- exercise


def _exercise_arguments(parser: argparse.ArgumentParser) -> None:
    from .ops.registry import list_ops
    parser.add_argument("op", metavar="OP", help=f"the operator: {', '.join(list_ops())}")
    parser.add_argument("file", metavar="FILE", help="your kernel: a .hip or Triton .py file written like the "
                                                     "operator's rung files (src/hello_gpu/ops/OP/)")
    parser.add_argument("--route", choices=["hip", "triton"], help="default: the file's kind")
    parser.add_argument("--dtype", help="check and time one dtype (default: every dtype the operator declares)")


def _exercise(args: argparse.Namespace, console: Console) -> int:
    from .exercises import ExerciseError, exercise

    try:
        report = exercise(args.op, args.file, route=args.route, dtype=args.dtype)
    except ExerciseError as error:
        console.print(f"exercise: {error}", markup=False, highlight=False, soft_wrap=True)
        return 2
    console.print(report)
    return 1 if report.passed is False else 0


# ------------------------------------------------------------------------------------------- agent


def _agent_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("words", nargs="*", metavar="OP | PROBLEM.py | resume RUN | report RUN",
                        help="an operator to optimise (e.g. softmax), a KernelBench-style problem file (with "
                             "--from KERNEL_FILE), or 'resume RUN' / 'report RUN' for a run folder; none with --model")
    parser.add_argument("--from", dest="start", metavar="RUNG",
                        help="the rung the search starts from (new runs); for a problem file, a rung file")
    parser.add_argument("--route", choices=("hip", "triton"), help="hip or triton (new runs; default: the start rung's)")
    parser.add_argument("--rounds", type=int, help="max rounds (default 12; on resume: the run's own, or this many in all)")
    parser.add_argument("--policy", default="scripted", help="scripted (offline, default) or llm")
    parser.add_argument("--run-dir", type=Path, metavar="DIR",
                        help="the run folder (default: the user data folder, e.g. "
                             "~/.local/share/hello-gpu/agent-runs/OP.ROUTE.START.<time>; never the current folder)")
    parser.add_argument("--seed", type=int, default=0, help="the policy's seed (default 0)")
    parser.add_argument("--patience", type=int,
                        help="stop after this many rounds without an accept (default 4; on resume: the run's own)")
    parser.add_argument("--time-budget", type=float, metavar="SECONDS",
                        help="stop after this long (on resume: the run's whole time, replacing its own budget)")
    parser.add_argument("--target", type=float,
                        help="stop at this fraction of the roofline (default 0.9; on resume: the run's own)")
    parser.add_argument("--ops-root", type=Path, metavar="DIR", help="operators folder (default: the package's ops/)")
    parser.add_argument("--shape", type=_parse_shape,
                        help="the shape candidates are timed at (default: the spec's last BENCH_SHAPES)")
    parser.add_argument("--dtype", help="the dtype candidates are timed in (default: the spec's first); "
                                        "every dtype of the spec is still checked")
    parser.add_argument("--reference", metavar="RUNG",
                        help="the hand-written rung the best is measured against at the end (default: the "
                             "route's fastest in this GPU's ladder record)")
    parser.add_argument("--record", nargs="?", const="records", type=Path, metavar="RECORDS_DIR",
                        help="also write the run as a record agent.OP.ROUTE.DTYPE under RECORDS_DIR/<device>/")
    parser.add_argument("--counters", action=argparse.BooleanOptionalAction, default=None,
                        help="hardware counters (ncu / rocprofv3) in each accepted candidate's analysis (default: on, "
                             "on resume the run's own; off saves ~15 s an accept on the H200, and the roofline still "
                             "classifies from the time)")
    model = parser.add_argument_group(
        "a whole model (--model)", "profile the model, rank its operations by time share, run the agent on the top "
        "one that has an operator ladder (at the shape and dtype the model calls it with), swap the result in and "
        "re-measure the model; --from, --rounds, --policy, --seed ... apply to that operator run, --dtype is the "
        "model's dtype")
    model.add_argument("--model", metavar="CONFIG", help="tiny, 1b or 8b (random weights), or a Hugging Face Llama "
                                                         "folder")
    model.add_argument("--batch", type=int, default=1, help="sequences (default 1)")
    model.add_argument("--prompt", type=int, default=512, help="prompt tokens (default 512)")
    model.add_argument("--new", type=int, default=256, help="new tokens of the re-measurement (default 256)")
    model.add_argument("--phase", choices=("decode", "prefill"), default="decode",
                       help="the step profiled and optimised (default decode)")
    model.add_argument("--steps", type=int, default=5, help="profiled steps (default 5)")
    model.add_argument("--force-swap", action="store_true",
                       help="swap the agent's kernel into the model checked but not timed against eager (correctness "
                            "runs, e.g. on the CPU, where nothing is timed and the decision is 'not measured')")
    parser.add_argument("--side-streams", action="store_true",
                        help="allow candidates to run kernels on other CUDA streams, provided every call joins them "
                             "to the caller's stream before it returns (checked in the device trace, each call queued "
                             "behind a spin on the timed stream; see docs/agent.md)")


def _agent(args: argparse.Namespace, console: Console) -> int:
    from .agent.command import AgentOptions, run_command

    options = AgentOptions(**{name: getattr(args, name) for name in AgentOptions.__dataclass_fields__})
    return run_command(args.words, options, console)


# ------------------------------------------------------------------------------------------ course


def _course_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="course_command", metavar="ACTION", required=True)
    sync = actions.add_parser("sync", help="write the READMEs' tables of contents from docs/course/outline.json and "
                                           "check the written chapters' pages",
                              description="Validate docs/course/outline.json, write the course tables between "
                                          "<!-- hello-gpu:outline --> markers in README.md and README.zh-CN.md, and "
                                          "check that each written chapter's page exists and starts with its H1.")
    sync.add_argument("--check", action="store_true", help="change nothing; exit 1 naming every drift")
    sync.add_argument("--root", default=".", metavar="DIR", help="repository root (default: the current directory)")
    notebooks = actions.add_parser("notebooks", help="write notebooks/*.ipynb from their percent scripts; --check for "
                                                     "CI; --execute runs them into --out",
                                   description="Regenerate every notebooks/chNN_*.ipynb whose cells differ from its "
                                               "script (jupytext percent format, the source); notebooks whose cells "
                                               "agree keep their outputs.")
    notebooks.add_argument("--check", action="store_true", help="change nothing; exit 1 naming every stale notebook "
                                                               "(outputs are ignored)")
    notebooks.add_argument("--execute", action="store_true", help="run the notebooks (nbclient) and write the "
                                                                 "executed copies into --out")
    notebooks.add_argument("--out", metavar="DIR", help="where --execute writes (required with it; never the "
                                                       "tracked notebooks/)")
    notebooks.add_argument("--only", nargs="+", metavar="NAME", help="with --execute: these notebooks only "
                                                                    "(ch04 or ch04_first_kernel)")
    notebooks.add_argument("--timeout", type=int, default=600, metavar="S", help="seconds a cell may run (default 600)")
    notebooks.add_argument("--root", default=".", metavar="DIR", help="repository root (default: the current directory)")


def _course_notebooks(args: argparse.Namespace, console: Console) -> int:
    from .course.notebooks import NOTEBOOKS, NotebookToolsMissing, execute, sync

    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    root = Path(args.root)
    if args.execute and (not args.out or Path(args.out).resolve() == (root / NOTEBOOKS).resolve()):
        say("course notebooks: --execute needs --out DIR (not notebooks/: executed copies are not written over "
            "tracked files)")
        return 2
    try:
        changed, problems = sync(root, check=args.check or args.execute)
        for path in changed:
            say(f"updated: {path}")
        for problem in problems:
            say(f"course: {problem}")
        if args.execute:
            results = execute(root, Path(args.out), names=args.only, timeout=args.timeout)
            for result in results:
                say(f"{'ok  ' if result.ok else 'FAIL'} {result.name} ({result.seconds:.0f} s) -> {result.path}"
                    + (f": {result.error}" if result.error else ""))
            return 1 if problems or not all(result.ok for result in results) else 0
    except (NotebookToolsMissing, ValueError) as error:
        say(f"course notebooks: {error}")
        return 2
    if not problems:
        say("course notebooks: every notebook matches its script" if args.check or not changed
            else f"course notebooks: {len(changed)} notebook(s) written")
    return 1 if problems else 0


def _course(args: argparse.Namespace, console: Console) -> int:
    from .course import OutlineError, sync

    if args.course_command == "notebooks":
        return _course_notebooks(args, console)
    try:
        changed, problems = sync(Path(args.root), check=args.check)
    except OutlineError as error:
        console.print(f"course: {error}", markup=False, highlight=False, soft_wrap=True)
        return 2
    for path in changed if not args.check else ():
        console.print(f"updated: {path}", markup=False, highlight=False)
    for problem in problems:
        console.print(f"course: {problem}", markup=False, highlight=False, soft_wrap=True)
    if not problems:
        console.print("course: outline, READMEs and chapter pages agree" if args.check or not changed
                      else f"course sync: {len(changed)} README(s) updated", markup=False, highlight=False)
    return 1 if problems else 0


# ------------------------------------------------------------------------------------------- model


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    run = actions.add_parser("run", help="prefill and decode tokens/s of each backend against the bandwidth bound",
                             description="Generate greedily with each backend on the same weights: prefill and "
                                         "decode tokens/s, the bandwidth bound, peak memory, the kernels swapped in.")
    profile = actions.add_parser("profile", help="rank a model's operations by time share and category, with the "
                                                 "Amdahl bound of replacing each",
                                 description="Profile decode steps (or prefills) of the Llama model, or a vision "
                                             "model with --vision, under torch.profiler; works on the CPU too.")
    for action in (run, profile):
        action.add_argument("--config", help="tiny (default), 1b (Llama-3.2-1B sizes) or 8b (Llama-3-8B sizes); "
                                             "random weights")
        action.add_argument("--checkpoint", metavar="DIR", help="a local Hugging Face Llama folder (config.json + "
                                                                "*.safetensors) instead of random weights")
        action.add_argument("--batch", type=int, default=1, help="sequences (default 1)")
        action.add_argument("--prompt", type=int, default=512, help="prompt tokens (default 512)")
        action.add_argument("--device", help="cuda or cpu (default: cuda when there is a GPU)")
        action.add_argument("--dtype", help="bf16, fp16, fp32 or fp64 (default: bf16 on a GPU, fp32 on the CPU)")
        action.add_argument("--seed", type=int, default=0, help="seed of the random weights and prompt (default 0)")
        action.add_argument("--out", metavar="DIR", help="where the JSON (and trace) go (default: the user data "
                                                         "folder, e.g. ~/.local/share/hello-gpu/models/...)")
        action.add_argument("--json", action="store_true", help="also print the result as JSON")
    run.add_argument("--new", type=int, default=256, help="new tokens (default 256)")
    run.add_argument("--backend", default="eager", help="comma-separated: eager, compile, compile-reduce-overhead, "
                                                        "hello-gpu, hello-gpu-pdl (ours with programmatic dependent "
                                                        "launches, sm_90+), hello-gpu-unfolded (ours without the "
                                                        "norm folds) (default: eager)")
    run.add_argument("--force", nargs="+", metavar="OP", help="hello-gpu: swap these kernels in without timing them "
                                                              "(still checked), e.g. rms_norm")
    run.add_argument("--text", help="a text prompt (needs --checkpoint with tokenizer.json and tokenizers)")
    run.add_argument("--check-logits", action=argparse.BooleanOptionalAction, default=True,
                     help="compare each backend's logits with eager's, step by step with eager's tokens fed in "
                          "(default: on; one more decode per backend and one of eager, untimed)")
    profile.add_argument("--backend", default="eager", help="one backend (default: eager, whose operations are "
                                                            "labelled by category)")
    profile.add_argument("--phase", choices=("decode", "prefill"), default="decode", help="default: decode")
    profile.add_argument("--steps", type=int, default=5, help="profiled steps (default 5)")
    profile.add_argument("--vision", action="store_true", help="profile the vision model instead: torchvision's "
                                                               "ResNet-50 if installed, else our small CNN")
    profile.add_argument("--image-size", type=int, default=224, help="--vision: image side (default 224)")


def _model(args: argparse.Namespace, console: Console) -> int:
    from .models.command import model_profile, model_run

    return model_run(args, console) if args.model_command == "run" else model_profile(args, console)


COMMANDS: dict[str, Subcommand] = {
    "doctor": Subcommand("check that this machine can run kernels (3 gates)", _doctor_arguments, _doctor),
    "compile-check": Subcommand("compile every kernel of .hip/.cu files for NVIDIA and AMD, without a GPU",
                                _compile_check_arguments, _compile_check),
    "records": Subcommand("check the measurement records and regenerate the tables made from them",
                          _records_arguments, _records),
    "ceilings": Subcommand("measure (or show cached) copy bandwidth, matmul peaks and launch overhead of this GPU",
                           _ceilings_arguments, _ceilings),
    "list": Subcommand("show the operators' ladders as trees (rung, route, what it changes)", _list_arguments, _list),
    "run": Subcommand("check one rung, then time it against its parent and the torch baseline (GPU)",
                      _run_arguments, _run),
    "ladder": Subcommand("check, time and compare every rung of an operator; --record writes a record (GPU); "
                         "--check-only runs anywhere", _ladder_arguments, _ladder),
    "profile": Subcommand("the kernels one rung launches, with hardware counters and counted vs measured bytes (GPU)",
                          _profile_arguments, _profile),
    "roofline": Subcommand("place each rung of a ladder record under the measured and datasheet roofs; saves PNG and SVG",
                           _roofline_arguments, _roofline),
    "agent": Subcommand("optimise an operator automatically: propose, check, time, accept or reject (GPU; "
                        "'agent resume RUN', 'agent report RUN')", _agent_arguments, _agent),
    "exercise": Subcommand("check your kernel for an operator with the ladder's checker, time it against the "
                           "ladder (GPU), with hints for common mistakes", _exercise_arguments, _exercise),
    "model": Subcommand("run a whole Llama-architecture model with each backend (tokens/s against the bandwidth "
                        "bound), or profile it by category with Amdahl bounds ('model run', 'model profile')",
                        _model_arguments, _model),
    "version": Subcommand("print hello-gpu's version", _no_arguments, _version),
    "course": Subcommand("sync the course outline (docs/course/outline.json) into the READMEs, and the notebooks "
                         "from their scripts; --check for CI",
                         _course_arguments, _course),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hello-gpu", description="Write GPU kernels inline and check the machine.")
    parser.add_argument("--version", action="version", version=f"hello-gpu {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.add_arguments(subparsers.add_parser(name, help=command.help, description=command.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return COMMANDS[args.command].run(args, make_console())
