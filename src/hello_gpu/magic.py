"""Notebook cell magics: ``%load_ext hello_gpu`` then ``%%hip NAME`` or ``%%cuda NAME``.

The cell body is the kernel source; the magic builds ``hello_gpu.hip(...)`` / ``hello_gpu.cuda(...)``
and binds the :class:`~hello_gpu.Kernel` to ``NAME`` in the notebook. A failed build shows only the
error text (a compile error points at the user's own line) and leaves ``NAME`` as it was.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from .runtime import HelloGpuError, cuda, gpu_vendor, hip
from .runtime.signature import list_kernels


class _Stop(Exception):
    """Ends a magic early; the message (if any) is a one-line usage error."""


class _Parser(argparse.ArgumentParser):
    # argparse calls sys.exit on --help and on bad arguments; in a notebook that surfaces as a
    # SystemExit traceback, so turn both into an exception the magic catches quietly.
    def exit(self, status=0, message=None):
        raise _Stop(message.strip() if message else "")

    def error(self, message):
        raise _Stop(f"{self.prog}: error: {message} (see {self.prog} --help)")


def _parser(magic: str, suffix: str) -> _Parser:
    parser = _Parser(prog=f"%%{magic}", allow_abbrev=False,
                     description=f"Compile the cell as a {magic.upper()} kernel and bind it to NAME.")
    parser.add_argument("name", metavar="NAME", help=f"variable to bind; also the file name in errors (NAME{suffix})")
    parser.add_argument("--entry", help="kernel to call (default: NAME if the cell defines it, else the only kernel)")
    parser.add_argument("--arch", help="target, e.g. sm_90 or gfx1201 (default: the visible GPU)")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="K=V", help="define a macro")
    parser.add_argument("--std", default="c++17", help="C++ standard (default: c++17)")
    # "-O3" parses as -O with value 3, like a compiler flag.
    parser.add_argument("-O", dest="opt", choices=["0", "1", "2", "3"], default="3", help="optimisation level")
    parser.add_argument("--fast-math", action="store_true", help="fast, less exact math")
    return parser


def _build(shell, magic: str, build, suffix: str, line: str, cell: str) -> None:
    parser = _parser(magic, suffix)
    try:
        args = parser.parse_args(shlex.split(line))
    except _Stop as stop:  # --help (usage already printed to stdout) or a usage error
        if str(stop):
            print(stop, file=sys.stderr)
        return
    except ValueError as error:  # shlex: unbalanced quotes
        print(f"%%{magic}: error: {error}", file=sys.stderr)
        return
    if not args.name.isidentifier():
        print(f"%%{magic}: error: NAME must be a Python identifier, got {args.name!r}", file=sys.stderr)
        return

    # Naming the cell after its kernel is the common case, so NAME doubles as the entry; otherwise
    # entry=None lets the Kernel pick the only kernel or list the candidates.
    entry = args.entry or (args.name if args.name in list_kernels(cell) else None)
    try:
        kernel = build(cell, entry, arch=args.arch, defines=args.defines, std=args.std,
                       optimization=f"-O{args.opt}", fast_math=args.fast_math, name=f"{args.name}{suffix}")
    except (HelloGpuError, ValueError) as error:  # SignatureError and option errors are ValueErrors
        # The message is the whole story (file:line, the line, a caret); a traceback would bury it.
        print(error, file=sys.stderr)
        return
    shell.user_ns[args.name] = kernel
    if args.arch is None and gpu_vendor() is None:
        # The Kernel compiles lazily here, so a compile error would only show at the first call.
        print(f"{args.name}: signature parsed, not compiled (no GPU visible); "
              f"pass --arch sm_90 (or gfx1201) to compile-check")


def register(ipython) -> None:
    """Register ``%%hip`` and ``%%cuda`` on an IPython shell (called by ``%load_ext hello_gpu``)."""
    def hip_magic(line: str, cell: str) -> None:
        _build(ipython, "hip", hip, ".hip", line, cell)

    def cuda_magic(line: str, cell: str) -> None:
        _build(ipython, "cuda", cuda, ".cu", line, cell)

    hip_magic.__doc__ = _parser("hip", ".hip").format_help()
    cuda_magic.__doc__ = _parser("cuda", ".cu").format_help()
    ipython.register_magic_function(hip_magic, magic_kind="cell", magic_name="hip")
    ipython.register_magic_function(cuda_magic, magic_kind="cell", magic_name="cuda")
