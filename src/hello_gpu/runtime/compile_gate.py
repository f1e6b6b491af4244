"""``hello-gpu compile-check``: compile every kernel of every ``.hip``/``.cu`` file, for both vendors, no GPU.

Each ``__global__`` kernel is compiled with NVRTC for an NVIDIA arch (cubin; the ptxas report gives
registers and spills per kernel) and each file once with clang for an AMD arch (assembly; see
:mod:`clang_hip`). ``.hip`` files are the HIP dialect, ``.cu`` files the CUDA dialect; each goes through
the prelude that maps it onto the other vendor.

A template kernel has no code until it is instantiated, so a file names the instantiations to check
in comment lines::

    // hello-gpu: instantiate scale<float, 256>

A whole program's host code instantiates its templates too (``hipLaunchKernelGGL(HIP_KERNEL_NAME(
tiled<16>), ...)`` or ``tiled<16><<<grid, block>>>``), and those instantiations are checked as well.
A template kernel instantiated nowhere is reported as skipped, with that reason. Files whose format
says more (a ladder rung derives its instantiations from its header's ``entry`` and ``dtypes``) get
theirs from the ``instantiations`` function the caller passes to :func:`check`.

A file may declare its target: a ladder rung's header says ``arch: sm_90a`` or ``vendor: nvidia``
(a ``.cu`` rung is NVIDIA's), and the ``targets`` function the caller passes to :func:`check` reads it.
Such a file is compiled for that vendor at that arch (a rung for sm_90a, whatever ``--arch`` says),
and the other vendor's column reads ``n/a`` with the reason: not applicable, neither a failure nor
a silent gap.

A course-style file that is a whole program (kernels, then ``main()`` with ``hipMalloc`` and
``<vector>``) is compiled as its device half, host code blanked with every line kept (see
:mod:`program`), the same text for both vendors, so the NVIDIA and AMD gates agree. A file whose
kernels a macro makes fails with a message naming the macro; a file with no kernel is listed as skipped.
"""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .clang_hip import INSTALL_HINT, clang_description, compile_for_amd, find_clang, matching_symbols
from .compiler import CompileOptions, compile_source, nvrtc_version, ptxas_section
from .errors import CompileError
from .program import ProgramError, device_source, launched_instantiations
from .resources import parse_ptxas_report
from .signature import KernelDeclaration, find_kernels

SUFFIXES = {".hip": "hip", ".cu": "cuda"}
NOT_APPLICABLE = "n/a"
SKIP_DIRS = {"build", "dist", "site-packages", "node_modules", "__pycache__", "venv", "env"}
INSTANTIATE = re.compile(r"^\s*//\s*hello-gpu:\s*instantiate\s+(?P<entry>\S.*?)\s*$", re.M)
@dataclass
class Outcome:
    """One compile of one kernel for one vendor."""

    status: str                    # "ok", "fail", "skip" or "n/a" (the file declares another vendor: error says so)
    seconds: float = 0.0
    error: str = ""
    registers: int | None = None   # NVIDIA only, from the ptxas report
    spill_stores: int | None = None
    spill_loads: int | None = None
    stack_bytes: int | None = None
    shared_bytes: int | None = None
    cache_hit: bool | None = None
    note: str | None = None
    arch: str | None = None        # the arch compiled for, where the file's declared one replaced the gate's


@dataclass
class KernelResult:
    file: str
    kernel: str                    # the name, or the instantiation ("scale<float, 256>")
    line: int
    template: bool
    nvidia: Outcome
    amd: Outcome | None            # None with --no-amd

    @property
    def failed(self) -> bool:
        return self.nvidia.status == "fail" or (self.amd is not None and self.amd.status == "fail")

    @property
    def skipped(self) -> bool:
        return self.nvidia.status == "skip"


@dataclass
class GateReport:
    arch: str
    amd_arch: str | None           # None with --no-amd
    nvrtc: str
    clang: str | None
    files: list[str]
    kernels: list[KernelResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[KernelResult]:
        return [k for k in self.kernels if k.failed]

    @property
    def ok(self) -> bool:
        return bool(self.files) and not self.failures

    def to_dict(self) -> dict:
        return {
            "ok": self.ok, "arch": self.arch, "amd_arch": self.amd_arch, "nvrtc": self.nvrtc, "clang": self.clang,
            "seconds": round(self.seconds, 3), "files": self.files,
            "summary": {"kernels": len(self.kernels), "failed": len(self.failures),
                        "skipped": sum(k.skipped for k in self.kernels),
                        "not_applicable": sum(outcome is not None and outcome.status == NOT_APPLICABLE
                                              for k in self.kernels for outcome in (k.nvidia, k.amd)),
                        "ok": sum(not k.failed and not k.skipped for k in self.kernels)},
            "kernels": [_kernel_dict(k) for k in self.kernels],
        }


def _kernel_dict(kernel: KernelResult) -> dict:
    """A kernel's JSON entry; an outcome lists only the fields that apply (AMD has no ptxas report)."""
    entry = asdict(kernel)
    for vendor in ("nvidia", "amd"):
        if entry[vendor] is not None:
            entry[vendor] = {key: round(value, 4) if key == "seconds" else value
                             for key, value in entry[vendor].items() if value is not None}
    return entry


# ------------------------------------------------------------------------------------ finding kernels


def find_sources(paths) -> list[Path]:
    """Every .hip/.cu file under ``paths`` (files are taken as given), skipping hidden and build dirs."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_file():
            if path.suffix not in SUFFIXES:
                raise ValueError(f"{path} is not a .hip or .cu file")
            found.append(path)
        elif path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS
                                 and not d.endswith(".egg-info"))
                found += [Path(root) / name for name in sorted(files) if Path(name).suffix in SUFFIXES]
        else:
            raise FileNotFoundError(f"no such file or directory: {path}")
    return list(dict.fromkeys(found))


def instantiations(source: str) -> list[str]:
    """The entries named by ``// hello-gpu: instantiate NAME<...>`` lines, in order."""
    return [m.group("entry") for m in INSTANTIATE.finditer(source)]


def _base_name(entry: str) -> str:
    return entry.split("<")[0].strip().split("::")[-1]


# ------------------------------------------------------------------------------------ compiling


NO_PTXAS_REPORT = ("no ptxas report: NVRTC served this compile from its compute cache (~/.nv/ComputeCache, "
                   "used where a driver is installed); set CUDA_CACHE_DISABLE=1 before the process's first compile")


def compile_nvidia(source: str, entry: str, *, label: str, dialect: str, arch: str, include_dirs) -> Outcome:
    options = CompileOptions.make(include_dirs=include_dirs)
    started = time.perf_counter()
    try:
        binary = compile_source(source, entry, file_name=label, dialect=dialect, vendor="nvidia", arch=arch,
                                options=options)
        section = ptxas_section(binary.log, binary.lowered_name)
    except CompileError as error:
        return Outcome("fail", time.perf_counter() - started, str(error))
    except Exception as error:  # noqa: BLE001 - the gate reports every failure, it never crashes
        return Outcome("fail", time.perf_counter() - started, f"{type(error).__name__}: {error}")
    seconds = time.perf_counter() - started
    if "Used " not in section:
        return Outcome("ok", seconds, cache_hit=binary.cache_hit, note=NO_PTXAS_REPORT)
    report = parse_ptxas_report(section)
    return Outcome("ok", seconds, "", report["registers"], report["spill_stores"], report["spill_loads"],
                   report["stack"], report["shared"], binary.cache_hit)


@dataclass
class AmdFileResult:
    ok: bool
    seconds: float
    log: str
    symbols: list[str]


def compile_amd_file(source: str, entries: list[str], *, path: Path, label: str, dialect: str,
                     arch: str, include_dirs) -> AmdFileResult:
    """One clang compile of the whole file, with the requested template instantiations appended."""
    # Taking a specialisation's address instantiates it, and clang then emits the kernel.
    tail = "".join(f"\nstatic auto* const hg_instantiate_{i} = &{entry};" for i, entry in enumerate(entries))
    result = compile_for_amd(source + tail + "\n", name=path.name, dialect=dialect, arch=arch,
                             include_dirs=include_dirs)
    log = re.sub(rf"(?m)^{re.escape(path.name)}:", lambda _: f"{label}:", result.log)
    if not result.ok and "hip_runtime.h' file not found" in log:
        log += f"\nhint: the HIP headers are missing; {INSTALL_HINT}\n"
    symbols = re.findall(r"^\s*\.amdhsa_kernel\s+(\S+)", result.assembly, flags=re.M)
    return AmdFileResult(result.ok, result.seconds, log, symbols)


def _label(path: Path) -> str:
    """How a file is named in messages: relative to the current directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# (path, source) -> the entries to instantiate, or None where the file's comment lines say.
Instantiations = Callable[[Path, str], "list[str] | None"]
# (path, source) -> the (vendor, arch or None) the file declares it runs on, or None: both vendors, the gate's archs.
Targets = Callable[[Path, str], "tuple[str, str | None] | None"]


@dataclass(frozen=True)
class FileTargets:
    """Where one file is compiled: an arch per vendor, or the reason that vendor does not apply."""

    nvidia_arch: str
    amd_arch: str
    nvidia_not_applicable: str | None = None
    amd_not_applicable: str | None = None


def file_targets(declared: tuple[str, str | None] | None, arch: str, amd_arch: str) -> FileTargets:
    """The gate's archs, narrowed by what a file declares: its vendor only, at its arch when it names one."""
    if declared is None:
        return FileTargets(arch, amd_arch)
    vendor, declared_arch = declared
    said = f"its target is {vendor}" + (f" {declared_arch}" if declared_arch else "") + " (rung header, or a .cu rung)"
    if vendor == "nvidia":
        return FileTargets(declared_arch or arch, amd_arch, amd_not_applicable=f"{said}: not compiled for AMD")
    return FileTargets(arch, declared_arch or amd_arch, nvidia_not_applicable=f"{said}: not compiled for NVIDIA")


def check(paths=(".",), *, arch: str = "sm_90", amd_arch: str = "gfx1201", amd: bool = True,
          instantiations: Instantiations | None = None, targets: Targets | None = None,
          include_dirs=()) -> GateReport:
    """Compile every kernel under ``paths``; raises FileNotFoundError/ValueError for a bad path only.

    ``instantiations(path, source)`` names a file's template instantiations (None: its
    ``// hello-gpu: instantiate`` lines do); a ValueError it raises fails that file's kernels.
    ``targets(path, source)`` names the (vendor, arch) a file declares (None: both vendors at ``arch``
    and ``amd_arch``); the other vendor is reported ``n/a`` with the reason; a ValueError fails the file.
    A file's ``#include "x"`` resolves beside the file first, then in ``include_dirs`` (the caller
    passes the rungs' shared headers, ``hello_gpu.ops`` being above this layer)."""
    started = time.perf_counter()
    sources = find_sources(paths)
    clang = find_clang() if amd else None
    report = GateReport(arch, amd_arch if amd else None, nvrtc_version(),
                        clang_description(clang) if clang else None, [_label(p) for p in sources])
    files = []
    for path in sources:
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            device = device_source(source, _label(path))
        except ProgramError as error:
            report.kernels.append(KernelResult(_label(path), "(file)", 0, False, Outcome("fail", error=str(error)),
                                               Outcome("fail", error=str(error)) if amd else None))
            continue
        if not device.kernels:
            why = "no __global__ kernel in this file"
            report.kernels.append(KernelResult(_label(path), "(file)", 0, False, Outcome("skip", error=why),
                                               Outcome("skip", error=why) if amd else None))
            continue
        try:
            where = file_targets(targets(path, source) if targets else None, arch, amd_arch)
        except ValueError as error:
            report.kernels += [KernelResult(_label(path), kernel.name, kernel.line, kernel.template,
                                            Outcome("fail", error=str(error)),
                                            Outcome("fail", error=str(error)) if amd else None)
                               for kernel in find_kernels(source)]
            continue
        # The same text goes to both compilers: the file's device half (the file itself when it has no host code).
        compiled = device.text if device.has_host_code else source
        files.append((path, _label(path), SUFFIXES[path.suffix], compiled, _plan(path, source, instantiations), where))

    # clang runs as a subprocess: start every file's AMD compile now, and run NVRTC meanwhile.
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        amd_jobs = {}
        if amd and clang:
            for path, label, dialect, source, plan, where in files:
                if where.amd_not_applicable:
                    continue
                templates = [_expression(kernel, entry) for kernel, entry, status, _ in plan
                             if status == "compile" and "<" in entry]
                amd_jobs[label] = pool.submit(compile_amd_file, source, templates, path=path, label=label,
                                              dialect=dialect, arch=where.amd_arch,
                                              include_dirs=_include_dirs(path, include_dirs))
        for path, label, dialect, source, plan, where in files:
            amd_file = amd_jobs[label].result() if label in amd_jobs else None
            for kernel, entry, status, message in plan:
                if status != "compile":
                    outcome = Outcome(status, error=message)
                    report.kernels.append(KernelResult(label, entry, kernel.line, kernel.template, outcome,
                                                       Outcome(status, error=message) if amd else None))
                    continue
                if where.nvidia_not_applicable:
                    nvidia = Outcome(NOT_APPLICABLE, error=where.nvidia_not_applicable)
                else:
                    nvidia = compile_nvidia(source, _expression(kernel, entry), label=label, dialect=dialect,
                                            arch=where.nvidia_arch, include_dirs=_include_dirs(path, include_dirs))
                    nvidia.arch = where.nvidia_arch if where.nvidia_arch != arch else None
                amd_outcome = None
                if amd and where.amd_not_applicable:
                    amd_outcome = Outcome(NOT_APPLICABLE, error=where.amd_not_applicable)
                elif amd and clang is None:
                    amd_outcome = Outcome("fail", error=f"no clang to compile for AMD: {INSTALL_HINT} "
                                                        f"(or pass --no-amd)")
                elif amd_file is not None:
                    amd_outcome = _amd_outcome(amd_file, _expression(kernel, entry))
                    amd_outcome.arch = where.amd_arch if where.amd_arch != amd_arch else None
                report.kernels.append(KernelResult(label, entry, kernel.line, kernel.template, nvidia, amd_outcome))
    report.seconds = time.perf_counter() - started
    return report


def _expression(kernel: KernelDeclaration, entry: str) -> str:
    """The name expression of ``entry`` (a kernel of ``kernel``'s namespace), as C++ names it globally."""
    bare = entry.strip().lstrip(":")
    if kernel.scope and not bare.startswith(kernel.scope + "::"):
        return f"{kernel.scope}::{bare}"
    return bare


def _plan(path: Path, source: str, instantiations: Instantiations | None) -> list:
    try:
        requested = instantiations(path, source) if instantiations else None
    except ValueError as error:
        return [(kernel, kernel.name, "fail", str(error)) for kernel in find_kernels(source)]
    return plan_file(source, requested)


def _include_dirs(path: Path, extra) -> list[str]:
    return [str(path.parent.resolve()), *(str(Path(d).resolve()) for d in extra)]


def plan_file(source: str, requested: list[str] | None = None) -> list[tuple[KernelDeclaration, str, str, str]]:
    """What to do with each kernel of a file: (declaration, entry, "compile"/"skip"/"fail", why).

    ``requested``: the template instantiations to compile; None: the file's ``// hello-gpu: instantiate``
    lines."""
    declared = {k.name: k for k in find_kernels(source)}
    from_comments = requested is None
    if from_comments:
        requested = instantiations(source)
        requested += [entry for entry in launched_instantiations(source, [k.name for k in declared.values()
                                                                           if k.template])
                      if entry.replace(" ", "") not in {r.replace(" ", "") for r in requested}]
    plan = []
    for kernel in declared.values():
        if not kernel.template:
            plan.append((kernel, kernel.name, "compile", ""))
            continue
        entries = [entry for entry in requested if _base_name(entry) == kernel.name]
        plan += [(kernel, entry, "compile", "") for entry in entries]
        if not entries:
            plan.append((kernel, kernel.name, "skip",
                         f"template kernel instantiated nowhere: add a line '// hello-gpu: instantiate "
                         f"{kernel.name}<...>' with its template arguments to compile it" if from_comments else
                         "template kernel that the header's entry and dtypes do not instantiate"))
    for entry in requested:
        kernel = declared.get(_base_name(entry))
        said = f"'// hello-gpu: instantiate {entry}'" if from_comments else f"the header's entry {entry!r}"
        if kernel is None:
            plan.append((KernelDeclaration(_base_name(entry), 0, True), entry, "fail",
                         f"{said} names no __global__ function of this file"))
        elif not kernel.template:
            plan.append((kernel, entry, "fail", f"{said}: {kernel.name} is not a template kernel"))
    return plan


def _amd_outcome(amd_file: AmdFileResult, expression: str) -> Outcome:
    if not amd_file.ok:
        return Outcome("fail", amd_file.seconds, amd_file.log)
    if not matching_symbols(amd_file.symbols, expression):
        return Outcome("fail", amd_file.seconds, f"clang emitted no kernel named {expression}")
    return Outcome("ok", amd_file.seconds)


# ------------------------------------------------------------------------------------ output


def _seconds(outcome: Outcome) -> str:
    if outcome.status != "ok":
        return ""
    return f"{outcome.seconds:.2f}" + (" (cached)" if outcome.cache_hit else "")


def _cell(outcome: Outcome | None) -> str:
    if outcome is None:
        return "-"
    cell = {"ok": "ok", "fail": "FAIL", "skip": "skip", NOT_APPLICABLE: NOT_APPLICABLE}[outcome.status]
    return f"{cell} {outcome.arch}" if outcome.arch else cell


def render(report: GateReport, console) -> None:
    """The table, then each failure's error text once, then a one-line summary."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    styles = {"ok": "green", "FAIL": "bold red", "skip": "yellow", NOT_APPLICABLE: "cyan", "-": "dim"}
    table = Table(title=f"compile-check: NVIDIA {report.arch}"
                        + (f" (NVRTC), AMD {report.amd_arch} (clang, one compile per file)" if report.amd_arch else ""),
                  box=box.SIMPLE_HEAD if console.is_terminal else box.ASCII2, title_justify="left")
    for column in ("file", "kernel", report.arch, "regs", "spills (st/ld B)", "s"):
        numeric = column in ("regs", "spills (st/ld B)", "s")
        table.add_column(column, justify="right" if numeric else "left", overflow="fold")
    if report.amd_arch:
        table.add_column(report.amd_arch)
        table.add_column("s", justify="right")
    for row in report.kernels:
        nvidia = row.nvidia
        cells = [Text(row.file), Text(row.kernel), Text(_cell(nvidia), style=styles[_cell(nvidia).split()[0]]),
                 Text("?" if nvidia.note else "" if nvidia.registers is None else str(nvidia.registers)),
                 Text("?" if nvidia.note else "" if nvidia.spill_stores is None else
                      f"{nvidia.spill_stores}/{nvidia.spill_loads}"),
                 Text(_seconds(nvidia))]
        if report.amd_arch:
            cells += [Text(_cell(row.amd), style=styles[_cell(row.amd).split()[0]]),
                      Text(f"{row.amd.seconds:.2f}" if row.amd and row.amd.seconds else "")]
        table.add_row(*cells)
    console.print(table)

    shown = set()
    for row in report.kernels:
        failed = [(f"{vendor} {target}", outcome) for vendor, target, outcome in
                  (("NVIDIA", report.arch, row.nvidia), ("AMD", report.amd_arch, row.amd))
                  if outcome is not None and outcome.status == "fail"]
        for index, (where, outcome) in enumerate(failed):
            if (row.file, outcome.error) in shown:
                continue
            shown.add((row.file, outcome.error))
            if index == 0 and len(failed) == 2 and failed[1][1].error == outcome.error:
                where += f" and {failed[1][0]}"
            console.print(f"FAIL {where}: {row.file} :: {row.kernel}", style="bold red", markup=False,
                          highlight=False, soft_wrap=True)
            console.print(outcome.error.rstrip() + "\n", markup=False, highlight=False, soft_wrap=True)
    if any(row.nvidia.note for row in report.kernels):
        console.print(f"regs ?: {NO_PTXAS_REPORT}", markup=False, highlight=False, soft_wrap=True)
    for row in report.kernels:
        if row.skipped:
            console.print(f"skipped {row.file} :: {row.kernel}: {row.nvidia.error}", markup=False,
                          highlight=False, soft_wrap=True)
    said = set()
    for row in report.kernels:
        for vendor, outcome in (("NVIDIA", row.nvidia), ("AMD", row.amd)):
            if outcome is not None and outcome.status == NOT_APPLICABLE and (row.file, vendor) not in said:
                said.add((row.file, vendor))
                console.print(f"not applicable on {vendor}: {row.file}: {outcome.error}", markup=False,
                              highlight=False, soft_wrap=True)

    summary = report.to_dict()["summary"]
    if not report.files:
        line = "compile-check: FAIL: no .hip or .cu files found"
    else:
        line = (f"compile-check: {'FAIL' if report.failures else 'ok'}: {summary['kernels']} kernel(s) in "
                f"{len(report.files)} file(s): {summary['ok']} ok, {summary['failed']} failed, "
                f"{summary['skipped']} skipped"
                + (f", {summary['not_applicable']} vendor compile(s) not applicable" if summary["not_applicable"] else "")
                + f" ({report.seconds:.1f} s)")
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def write_report(report: GateReport, path: str) -> None:
    Path(path).write_text(json.dumps(report.to_dict(), indent=2) + "\n")
