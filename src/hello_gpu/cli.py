"""The ``hello-gpu`` command line (also ``python -m hello_gpu``).

Each subcommand is one entry in :data:`COMMANDS`: a help line, a function that adds its arguments to
its argparse parser, and a function that runs it and returns the exit status. To add a subcommand,
write those two functions and add an entry; ``main`` does the rest.
"""

from __future__ import annotations

import argparse
import json
import sys
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


# ----------------------------------------------------------------------------------------- version


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def _version(args: argparse.Namespace, console: Console) -> int:
    from . import __version__

    print(f"hello-gpu {__version__}")
    return 0


COMMANDS: dict[str, Subcommand] = {
    "doctor": Subcommand("check that this machine can run kernels (3 gates)", _doctor_arguments, _doctor),
    "compile-check": Subcommand("compile every kernel of .hip/.cu files for NVIDIA and AMD, without a GPU",
                                _compile_check_arguments, _compile_check),
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
