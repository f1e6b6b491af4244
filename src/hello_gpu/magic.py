"""Notebook cell magics: ``%load_ext hello_gpu`` then ``%%hip NAME`` or ``%%cuda NAME``.

The cell body is kernel source, or a whole program (kernels plus ``main()``; host code is left out of
the compile, see :mod:`hello_gpu.runtime.program`). The magic binds ``NAME`` in the notebook to:

- the kernel ``--entry`` names, or the kernel called ``NAME``, or the cell's only kernel: a
  :class:`~hello_gpu.Kernel`;
- otherwise (several kernels, or a template) every kernel of the cell: a
  :class:`~hello_gpu.runtime.loader.KernelModule` (``NAME.vector_add(...)``, ``NAME["tiled<16>"]``).

The kernels are compiled at once: for the visible GPU, for ``--arch``, or without either for a check
target (sm_90 through NVRTC), so a mistake shows when the cell runs. A failed build makes the cell
fail (IPython's ``UsageError``: the message, no traceback) with each error at its line *of the cell*,
the ``%%hip`` line being line 1, and leaves ``NAME`` as it was.

IPython refuses a cell magic whose body is empty before calling it, so ``%%hip --help`` alone in a
cell is turned into the line magic ``%hip --help``, which prints the options.
"""

from __future__ import annotations

import argparse
import re
import shlex

from IPython.core.error import UsageError

from .runtime import HelloGpuError, cuda, gpu_vendor, hip
from .runtime.loader import KernelModule
from .runtime.program import device_source


class _Stop(Exception):
    """Ends a magic early; the message (if any) is a one-line usage error."""


class _Parser(argparse.ArgumentParser):
    # argparse calls sys.exit on --help and on bad arguments; in a notebook that surfaces as a
    # SystemExit traceback, so turn both into an exception the magic handles.
    def exit(self, status=0, message=None):
        raise _Stop(message.strip() if message else "")

    def error(self, message):
        raise _Stop(f"{self.prog}: error: {message} (see {self.prog} --help)")


def _parser(magic: str, suffix: str) -> _Parser:
    parser = _Parser(prog=f"%%{magic}", allow_abbrev=False,
                     description=f"Compile the cell's {magic.upper()} kernels and bind them to NAME: the kernel "
                                 f"--entry names, or the one called NAME, or the cell's only kernel; with several "
                                 f"(a whole program), NAME holds them all (NAME.kernel_name, NAME[\"tiled<16>\"]).")
    parser.add_argument("name", metavar="NAME", nargs="?",
                        help=f"variable to bind; also the file name in errors (NAME{suffix}); with --exercise, "
                             f"optional: the report is bound to it")
    parser.add_argument("--exercise", metavar="OP", help="check the cell as a rung of the operator OP with "
                                                         "hello_gpu.exercise() (see docs/course/exercises.md) and "
                                                         "show the report")
    parser.add_argument("--entry", help="kernel to bind (default: NAME if the cell defines it, else the only kernel)")
    parser.add_argument("--arch", help="target, e.g. sm_90 or gfx1201 (default: the visible GPU; without one, "
                                       "sm_90 through NVRTC, as a check)")
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
            raise UsageError(str(stop)) from None
        return
    except ValueError as error:  # shlex: unbalanced quotes
        raise UsageError(f"%%{magic}: error: {error}") from None
    if args.exercise:
        _exercise(shell, magic, args, cell)
        return
    if args.name is None:
        raise UsageError(f"%%{magic}: error: the following arguments are required: NAME (see %%{magic} --help)")
    if not args.name.isidentifier():
        raise UsageError(f"%%{magic}: error: NAME must be a Python identifier, got {args.name!r}")

    # The %%hip line is the cell's line 1: one newline in front makes the compiler's line numbers the
    # cell's own, as the notebook shows them.
    source = "\n" + cell
    options = dict(arch=args.arch, defines=args.defines, std=args.std, optimization=f"-O{args.opt}",
                   fast_math=args.fast_math, name=f"{args.name}{suffix}")
    try:
        kernels = device_source(source, f"{args.name}{suffix}").kernels
        names = {kernel.name for kernel in kernels} | {kernel.qualified_name for kernel in kernels}
        plain = [kernel for kernel in kernels if not kernel.template]
        if args.entry or args.name in names or (len(kernels) == 1 and plain):
            # Naming the cell after its kernel is the common case, so NAME doubles as the entry.
            entry = args.entry or (args.name if args.name in names else None)
            bound = build(source, entry, **options)
        else:
            bound = KernelModule(source, dialect=magic, **options)
    except (HelloGpuError, ValueError) as error:  # SignatureError, ProgramError and option errors are ValueErrors
        # The message is the whole story (file:line, the line, a caret); a traceback would bury it.
        raise UsageError(str(error)) from None
    shell.user_ns[args.name] = bound
    if isinstance(bound, KernelModule):
        listed = ", ".join(f"{args.name}.{k.name}" if not k.template else f'{args.name}["{k.name}<...>"]'
                           for k in bound.declarations)
        print(f"{args.name}: {len(bound.declarations)} kernels: {listed}")
    if args.arch is None and gpu_vendor() is None and bound.target is not None:
        print(f"{args.name}: compiled for {bound.target[1]} as a check (no GPU visible; calling it needs one)")


def _exercise(shell, magic: str, args, cell: str) -> None:
    """``%%hip --exercise OP [NAME]``: the cell through hello_gpu.exercise(); the %%hip line is line 1."""
    from .exercises import ExerciseError, exercise
    if args.name is not None and not args.name.isidentifier():
        raise UsageError(f"%%{magic}: error: NAME must be a Python identifier, got {args.name!r}")
    try:
        report = exercise(args.exercise, "\n" + cell, route="hip")
    except ExerciseError as error:
        raise UsageError(f"%%{magic} --exercise: {error}") from None
    if args.name is not None:
        shell.user_ns[args.name] = report
    from IPython.display import display
    display(report)


_HELP_CELL = re.compile(r"\s*%%(hip|cuda)\b(.*)$")


def _help_cell(lines: list[str]) -> list[str]:
    """``%%hip --help`` alone in a cell -> ``%hip --help`` (IPython refuses empty cell magics first)."""
    match = _HELP_CELL.match(lines[0]) if lines else None
    if match and re.search(r"(^|\s)(-h|--help)(\s|$)", match.group(2)) and not "".join(lines[1:]).strip():
        return [lines[0].replace("%%", "%", 1)] + lines[1:]
    return lines


def _help_line(magic: str, suffix: str, line: str) -> None:
    if re.search(r"(^|\s)(-h|--help)(\s|$)", line):
        _parser(magic, suffix).print_help()
        return
    raise UsageError(f"%{magic} only prints help (%{magic} --help); a kernel goes in a cell that starts with "
                     f"%%{magic} NAME")


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
    ipython.register_magic_function(lambda line: _help_line("hip", ".hip", line), magic_kind="line", magic_name="hip")
    ipython.register_magic_function(lambda line: _help_line("cuda", ".cu", line), magic_kind="line",
                                    magic_name="cuda")
    if _help_cell not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(_help_cell)
