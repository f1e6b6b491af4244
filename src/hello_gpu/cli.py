"""The ``hello-gpu`` command line (also ``python -m hello_gpu``).

Each subcommand is one entry in :data:`COMMANDS`: a help line, a function that adds its arguments to
its argparse parser, and a function that runs it and returns the exit status. To add a subcommand,
write those two functions and add an entry; ``main`` does the rest.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console


@dataclass(frozen=True)
class Subcommand:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Console], int]


def make_console() -> Console:
    """Colours and the terminal's width on a TTY; plain text, 140 columns wide, in logs and pipes."""
    terminal = sys.stdout.isatty()
    return Console(highlight=False, emoji=False, width=None if terminal else 140)


# ------------------------------------------------------------------------------------------ doctor


def _doctor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of tables")
    parser.add_argument("--cpu-ok", action="store_true",
                        help="a machine without a GPU is fine: exit 0 when the CPU-side checks pass")


def _doctor(args: argparse.Namespace, console: Console) -> int:
    from .runtime.doctor import render, run_doctor

    report = run_doctor(cpu_ok=args.cpu_ok)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        render(report, console)
    return report.exit_code


# ----------------------------------------------------------------------------------- compile-check


def _compile_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."],
                        help=".hip/.cu files or directories to search (default: the current directory tree)")
    parser.add_argument("--arch", default="sm_90", help="NVIDIA target for NVRTC (default: sm_90)")
    parser.add_argument("--amd-arch", default="gfx1201", help="AMD target for clang (default: gfx1201)")
    parser.add_argument("--no-amd", action="store_true", help="compile for NVIDIA only")
    parser.add_argument("--report", metavar="FILE.json", help="also write the results as JSON")


def _compile_check(args: argparse.Namespace, console: Console) -> int:
    from .runtime import compile_gate

    try:
        report = compile_gate.check(args.paths, arch=args.arch, amd_arch=args.amd_arch, amd=not args.no_amd)
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


def _records(args: argparse.Namespace, console: Console) -> int:
    from pathlib import Path

    from .bench import records

    root = Path(args.root)
    if not root.is_dir():
        console.print(f"records: --root {root} is not a directory", markup=False, highlight=False, soft_wrap=True)
        return 2
    if args.records_command == "check":
        report = records.check_records(root)
        records.render_check(report, console)
        return 0 if report.ok else 1
    files = [Path(name) for name in args.files] or records.default_table_files(root)
    try:
        changed = records.update_tables(files, root, check=args.check)
    except (records.RecordError, OSError) as error:
        console.print(f"records tables: {error}", markup=False, highlight=False, soft_wrap=True, style="bold red")
        return 1
    records.render_tables(changed, len(files), args.check, console)
    return 1 if args.check and changed else 0


# ----------------------------------------------------------------------------------------- version


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def _version(args: argparse.Namespace, console: Console) -> int:
    from . import __version__

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


COMMANDS: dict[str, Subcommand] = {
    "doctor": Subcommand("check that this machine can run kernels (3 gates)", _doctor_arguments, _doctor),
    "compile-check": Subcommand("compile every kernel of .hip/.cu files for NVIDIA and AMD, without a GPU",
                                _compile_check_arguments, _compile_check),
    "records": Subcommand("check the measurement records and regenerate the tables made from them",
                          _records_arguments, _records),
    "ceilings": Subcommand("measure (or show cached) copy bandwidth, matmul peaks and launch overhead of this GPU",
                           _ceilings_arguments, _ceilings),
    "version": Subcommand("print hello-gpu's version", _no_arguments, _version),
}


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

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
