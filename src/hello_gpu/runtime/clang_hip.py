"""AMD compile gate without an AMD GPU: compile a kernel to AMDGPU assembly with a stock clang.

Debian's ``clang-19`` plus ``libamdhip64-dev`` (HIP 5.2 headers) can compile HIP device code for any
AMD target, but cannot link it (the ROCm device libraries are not packaged). So the gate stops at
assembly (``--cuda-device-only -nogpulib -S``): enough to catch every front-end error and to see the
ISA, with no GPU and no ROCm install. ``scripts/install_amd_compile_tools.sh`` installs the tools.

Stdlib only, so it runs in the CPU test tier.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from .prelude import PRELUDE_NAME, compiler_headers, prelude_source

INSTALL_HINT = "run scripts/install_amd_compile_tools.sh (Debian 12: clang-19 + libamdhip64-dev)"

# ROCm 6's <hip/hip_bf16.h> (the CUDA-like bfloat16 API: __hip_bfloat16, __float2bfloat16, __hadd, ...), which
# the gate's HIP 5.2 headers lack: they have hip_bfloat16 alone, so a kernel written for the course's RX 9070 XT
# (ROCm 6.3 or later) failed the gate with "'hip/hip_bf16.h' file not found" while it compiles there. Served
# to the gate's clang alone (never to hipRTC on a real AMD GPU, whose ROCm has the header); where the installed
# headers have it, #include_next takes theirs. The subset: the names cuda_bf16.h users reach for first.
HIP_BF16_FOR_HIP_5 = """\
#pragma once
#if __has_include_next(<hip/hip_bf16.h>)
#include_next <hip/hip_bf16.h>
#else
#include <hip/hip_bfloat16.h>
typedef hip_bfloat16 __hip_bfloat16;
struct __hip_bfloat162 { __hip_bfloat16 x, y; };
#define HG_BF16_FN static inline __host__ __device__
HG_BF16_FN __hip_bfloat16 __float2bfloat16(float f) { return __hip_bfloat16(f); }
HG_BF16_FN __hip_bfloat16 __float2bfloat16_rn(float f) { return __hip_bfloat16(f); }
HG_BF16_FN float __bfloat162float(__hip_bfloat16 b) { return static_cast<float>(b); }
HG_BF16_FN __hip_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__hip_bfloat16(a), __hip_bfloat16(b)}; }
HG_BF16_FN __hip_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
HG_BF16_FN __hip_bfloat162 __bfloat162bfloat162(__hip_bfloat16 b) { return {b, b}; }
HG_BF16_FN float2 __bfloat1622float2(__hip_bfloat162 p) { return make_float2(float(p.x), float(p.y)); }
HG_BF16_FN float __low2float(__hip_bfloat162 p) { return float(p.x); }
HG_BF16_FN float __high2float(__hip_bfloat162 p) { return float(p.y); }
HG_BF16_FN __hip_bfloat16 __hadd(__hip_bfloat16 a, __hip_bfloat16 b) { return a + b; }
HG_BF16_FN __hip_bfloat16 __hsub(__hip_bfloat16 a, __hip_bfloat16 b) { return a - b; }
HG_BF16_FN __hip_bfloat16 __hmul(__hip_bfloat16 a, __hip_bfloat16 b) { return a * b; }
HG_BF16_FN __hip_bfloat16 __hdiv(__hip_bfloat16 a, __hip_bfloat16 b) { return a / b; }
HG_BF16_FN __hip_bfloat16 __hneg(__hip_bfloat16 a) { return -a; }
HG_BF16_FN __hip_bfloat16 __hfma(__hip_bfloat16 a, __hip_bfloat16 b, __hip_bfloat16 c) {
  return __hip_bfloat16(float(a) * float(b) + float(c));
}
HG_BF16_FN __hip_bfloat16 __hmax(__hip_bfloat16 a, __hip_bfloat16 b) { return float(a) < float(b) ? b : a; }
HG_BF16_FN __hip_bfloat16 __hmin(__hip_bfloat16 a, __hip_bfloat16 b) { return float(b) < float(a) ? b : a; }
#undef HG_BF16_FN
#endif
"""

# The half-precision max/min that HIP 5.2's <hip/hip_fp16.h> lacks (the gate's headers; later ROCm has them),
# served to the gate's clang alone, on top of the installed header.
HIP_FP16_FOR_HIP_5_2 = """\
#pragma once
#include_next <hip/hip_fp16.h>
#if defined(HIP_VERSION) && HIP_VERSION < 50300000
// As CUDA's and ROCm's: a NaN argument loses to the other.
static inline __host__ __device__ __half __hmax(__half a, __half b) { return (__hisnan(a) || __hlt(a, b)) ? b : a; }
static inline __host__ __device__ __half __hmin(__half a, __half b) { return (__hisnan(a) || __hlt(b, a)) ? b : a; }
static inline __host__ __device__ __half2 __hmax2(__half2 a, __half2 b) {
  return __halves2half2(__hmax(__low2half(a), __low2half(b)), __hmax(__high2half(a), __high2half(b)));
}
static inline __host__ __device__ __half2 __hmin2(__half2 a, __half2 b) {
  return __halves2half2(__hmin(__low2half(a), __low2half(b)), __hmin(__high2half(a), __high2half(b)));
}
#endif
"""

# What the gate's clang gets beside the prelude: ROCm's newer headers' names on the installed older ones.
GATE_HEADERS = {"hip/hip_bf16.h": HIP_BF16_FOR_HIP_5, "hip/hip_fp16.h": HIP_FP16_FOR_HIP_5_2}


class ClangNotFoundError(RuntimeError):
    """No clang to compile HIP with."""


@dataclass(frozen=True)
class AmdCompileResult:
    ok: bool
    arch: str
    log: str  # clang's diagnostics, with paths relative to the user's file name
    assembly: str  # AMDGPU assembly: the "isa" of the kernel; empty when ok is False
    seconds: float
    command: list[str]  # run in a temp dir, so file arguments are relative names


def find_clang() -> str | None:
    """Path of the clang to use: ``$HG_CLANG``, else ``clang-19``, else ``clang`` on PATH.

    Only looked up, not run: whether this clang supports HIP shows in the first compile's log,
    which keeps imports and test collection fast.
    """
    override = os.environ.get("HG_CLANG")
    if override:
        return shutil.which(override) or (override if os.path.isfile(override) else None)
    return shutil.which("clang-19") or shutil.which("clang")


def compile_for_amd(
    source: str,
    *,
    name: str = "kernel.hip",
    dialect: str = "hip",
    arch: str = "gfx1201",
    defines: Mapping[str, str] | None = None,
    std: str = "c++17",
    include_dirs: Sequence[str] = (),
    optimization: str = "-O3",
    fast_math: bool = False,
    timeout: float = 120,
) -> AmdCompileResult:
    """Compile ``source`` (``dialect`` "hip" or "cuda") for the AMD target ``arch``.

    A compile error gives ``ok=False`` with clang's log, never an exception; a missing clang
    raises :class:`ClangNotFoundError`.
    """
    clang = find_clang()
    if clang is None:
        raise ClangNotFoundError(f"no HIP-capable clang found (set HG_CLANG or {INSTALL_HINT})")
    prelude_source(dialect, "amd")  # validates dialect
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError(f"name must be a relative file name, got {name!r}")

    with tempfile.TemporaryDirectory(prefix="hg_amd_") as tmp:
        # The source keeps the user's name and the prelude is pre-included rather than pasted in,
        # so diagnostics read "name:LINE:COL" with the user's own line numbers.
        src_path = os.path.join(tmp, name)
        os.makedirs(os.path.dirname(src_path), exist_ok=True)
        with open(src_path, "w", encoding="utf-8") as f:
            f.write(source)
        # The prelude and the bridged includes (cuda_runtime.h for CUDA-dialect source), as hipRTC
        # serves them in memory on a real AMD GPU.
        headers_dir = os.path.join(tmp, "hg_headers")
        for header, text in {**compiler_headers(dialect, "amd"), **GATE_HEADERS}.items():
            path = os.path.join(headers_dir, header)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        asm_name = "hg_kernel_out.s"

        command = [
            clang,
            "-x", "hip",
            f"--offload-arch={arch}",
            "--cuda-device-only",  # device code only: no host compiler pass, no fat binary
            "-nogpulib",  # the ROCm device libraries are not installed; fine for -S
            "-S", "-o", asm_name,
            "-include", PRELUDE_NAME, "-Ihg_headers",
            f"-std={std}",
        ]
        if optimization:
            command.append(optimization)
        if fast_math:
            command.append("-ffast-math")
        command += [f"-D{key}={value}" for key, value in (defines or {}).items()]
        command += [f"-I{os.path.abspath(d)}" for d in include_dirs]
        command.append(name)

        start = time.perf_counter()
        try:
            proc = subprocess.run(
                command, cwd=tmp, capture_output=True, text=True, timeout=timeout, check=False
            )
        except FileNotFoundError as exc:  # HG_CLANG pointed at something that vanished
            raise ClangNotFoundError(f"cannot run {clang!r}: {exc}; {INSTALL_HINT}") from exc
        except subprocess.TimeoutExpired as exc:
            log = exc.stderr or ""
            log = log.decode(errors="replace") if isinstance(log, bytes) else log
            return AmdCompileResult(
                False, arch, _strip(log, tmp) + f"\nclang timed out after {timeout} s\n", "",
                time.perf_counter() - start, command,
            )
        seconds = time.perf_counter() - start

        asm_path = os.path.join(tmp, asm_name)
        ok = proc.returncode == 0 and os.path.isfile(asm_path)
        assembly = ""
        if ok:
            with open(asm_path, encoding="utf-8", errors="replace") as f:
                assembly = f.read()
        return AmdCompileResult(ok, arch, _strip(proc.stderr, tmp), assembly, seconds, command)


def matching_symbols(symbols: list[str], expression: str) -> list[str]:
    """The kernel symbols among ``symbols`` (an assembly's ``.amdhsa_kernel`` names) of the function
    ``expression`` names (``"vector_add"``, ``"course::tiled<16>"``): plain, or Itanium-mangled with the
    name's length in front (``_ZN6course5tiledILi16EEvPKfPf`` holds ``5tiled``)."""
    name = re.sub(r"<.*", "", expression).strip().split("::")[-1].strip()
    return [symbol for symbol in symbols if symbol == name or f"{len(name)}{name}" in symbol]


def emitted_symbol(symbols: list[str], expression: str) -> str:
    """The one symbol :func:`matching_symbols` finds, or "" when none or several match (several
    instantiations of one template): clang's assembly is for checking, so this name is informational."""
    matching = matching_symbols(symbols, expression)
    return matching[0] if len(matching) == 1 else ""


@functools.lru_cache(maxsize=8)
def clang_description(clang: str | None = None) -> str:
    """``path (first line of clang --version)``, or the path alone when it cannot be run."""
    clang = clang or find_clang()
    if clang is None:
        return "clang (not found)"
    try:
        first = subprocess.run([clang, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()
        return f"{clang} ({first[0].strip()})" if first else clang
    except (OSError, subprocess.SubprocessError):
        return clang


def _strip(log: str, tmp: str) -> str:
    """Drop the temp dir from paths so the log names files as the user did."""
    real = os.path.realpath(tmp)
    for prefix in {real, tmp}:
        log = log.replace(prefix + os.sep, "")
    return log.replace("hg_headers/", "").replace("./" + PRELUDE_NAME, PRELUDE_NAME)
