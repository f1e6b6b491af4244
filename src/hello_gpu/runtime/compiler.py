"""Compile kernel source to a device binary: NVRTC -> cubin on NVIDIA, hipRTC -> code object on AMD.

One compile may hold several kernels (``entries``): a whole course file's kernels are one NVRTC
program, and each kernel's symbol comes from the compiler's name-expression API, never from a guess
at the C++ mangling (a kernel in an anonymous namespace gets a name that hashes the file name).
Without an AMD GPU and hip-python, an AMD target compiles through clang to assembly (see
:mod:`clang_hip`): enough to check the source, not to launch it.

Why cubin and not PTX: a newer NVRTC (13.5) emits PTX that an older driver (13.0 on the H200
machine) refuses to load; cubin for the exact arch has no such problem and skips the driver's JIT.
Why not ``torch.utils.cpp_extension``: a cold build there takes about a minute; NVRTC takes ~50 ms.

Results are cached on disk, keyed by everything that changes the binary (source, the headers it
includes from the include dirs, entry, options, arch, compiler version, prelude version), so a warm
compile is a file read.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .errors import CompileError
from .prelude import PRELUDE_NAME, PRELUDE_VERSION, compiler_headers

CACHE_FORMAT = 2   # 2: entries made while the compute cache could hide the ptxas report are dropped


@dataclass(frozen=True)
class CompileOptions:
    """What a user may change about a compile. Each field is part of the cache key."""

    defines: tuple[tuple[str, str], ...] = ()
    std: str = "c++17"
    include_dirs: tuple[str, ...] = ()
    optimization: str = "-O3"
    fast_math: bool = False

    @staticmethod
    def make(defines=None, std: str = "c++17", include_dirs=(), optimization: str = "-O3",
             fast_math: bool = False) -> "CompileOptions":
        if isinstance(defines, dict):
            pairs = tuple((str(k), str(v)) for k, v in defines.items())
        else:
            pairs = tuple(_split_define(d) for d in (defines or ()))
        if not re.fullmatch(r"-O[0-3]", optimization):
            raise ValueError(f"optimization must be one of -O0, -O1, -O2, -O3, got {optimization!r}")
        if not re.fullmatch(r"c\+\+(11|14|17|20)", std):
            raise ValueError(f"std must be c++11, c++14, c++17 or c++20, got {std!r}")
        return CompileOptions(pairs, std, tuple(str(d) for d in include_dirs), optimization, bool(fast_math))


def _split_define(define: str) -> tuple[str, str]:
    define = define[2:] if define.startswith("-D") else define
    name, _, value = define.partition("=")
    if not re.fullmatch(r"[A-Za-z_]\w*", name.strip()):
        raise ValueError(f"-D {define!r}: {name!r} is not a macro name")
    return name.strip(), value if value else "1"


@dataclass
class Binary:
    """A compiled kernel: the device binary plus what the compiler said about it."""

    vendor: str
    arch: str
    entry: str
    lowered_name: str          # the symbol to look up in the binary (mangled C++ name)
    image: bytes               # cubin (NVIDIA) or code object (AMD)
    ptx: str                   # NVIDIA only; "" on AMD
    log: str                   # compiler output, including ptxas -v resource lines
    compiler_version: str
    seconds: float             # time of the compile that produced it (0 on cache hits' reads)
    cache_hit: bool = False
    key: str = ""
    extra: dict = field(default_factory=dict)
    lowered_names: dict = field(default_factory=dict)   # every entry of the compile -> its symbol

    def for_entry(self, entry: str) -> "Binary":
        """This binary seen as one of its entries: that entry's symbol, and a log narrowed to the
        compiler's messages plus that kernel's ptxas report (so registers read as its own)."""
        if entry in self.lowered_names:
            lowered = self.lowered_names[entry]
        elif entry == self.entry:        # an entry cached before lowered_names existed
            lowered = self.lowered_name
        else:
            raise KeyError(f"{entry!r} was not compiled here; entries: {', '.join(self.lowered_names)}")
        if self.log.count("Compiling entry function") <= 1 and entry == self.entry:
            return self
        return replace(self, entry=entry, lowered_name=lowered, log=entry_log(self.log, lowered))


def ptxas_section(log: str, lowered_name: str) -> str:
    """The part of a ptxas report about one entry function (a program's report covers all of them)."""
    start = log.find(f"Compiling entry function '{lowered_name}'")
    if start < 0:
        return log
    end = log.find("Compiling entry function", start + 1)
    return log[start:end if end >= 0 else len(log)]


def entry_log(log: str, lowered_name: str) -> str:
    """The compiler's own messages (warnings: not ptxas lines) and one entry's ptxas report; a log
    with no report for that entry (AMD, or NVRTC's compute cache) is returned as it is."""
    if f"Compiling entry function '{lowered_name}'" not in log:
        return log
    messages = "".join(line for line in log.splitlines(keepends=True) if not line.startswith("ptxas"))
    return messages + ptxas_section(log, lowered_name)


def cache_dir() -> Path:
    """``$HG_CACHE_DIR`` or the user cache dir (``~/.cache/hello-gpu`` on Linux)."""
    if os.environ.get("HG_CACHE_DIR"):
        return Path(os.environ["HG_CACHE_DIR"])
    try:
        import platformdirs
        return Path(platformdirs.user_cache_dir("hello-gpu")) / "kernels"
    except ImportError:  # platformdirs is a small dependency; stay usable without it
        return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hello-gpu" / "kernels"


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def included_headers(source: str, include_dirs) -> list[Path]:
    """Every file that ``source`` includes, directly or through another header, found in ``include_dirs``.

    The rule the compilers follow for the files hello-gpu compiles: a header's own ``#include``
    resolves beside that header first, then in ``include_dirs`` in order; the source itself is a
    string with no folder, so its includes resolve in ``include_dirs`` only (a rung passes its own
    folder first). A name found nowhere is a system or prelude header (``hip/hip_runtime.h``), which
    the compiler and prelude versions in the cache key already cover, or a missing one, which the
    compile reports. An ``#include`` inside a comment or a false ``#if`` is followed too: hashing a
    file too many only costs a recompile.
    """
    found: list[Path] = []
    pending = [(source, None)]
    while pending:
        text, folder = pending.pop()
        for name in _INCLUDE.findall(text):
            candidates = ([folder] if folder is not None else []) + [Path(d) for d in include_dirs]
            path = next((c / name for c in candidates if (c / name).is_file()), None)
            if path is None:
                continue
            path = path.resolve()
            if path not in found:
                found.append(path)
                pending.append((path.read_text(encoding="utf-8", errors="replace"), path.parent))
    return found


def cache_key(source: str, entry: str, dialect: str, vendor: str, arch: str,
              options: CompileOptions, compiler_version: str) -> str:
    # The headers' bytes, not only their names: editing a header must never serve a stale binary.
    headers = {str(path): hashlib.sha256(path.read_bytes()).hexdigest()
               for path in included_headers(source, options.include_dirs)}
    payload = json.dumps({
        "format": CACHE_FORMAT, "prelude": PRELUDE_VERSION, "source": source, "entry": entry,
        "dialect": dialect, "vendor": vendor, "arch": arch, "options": asdict(options),
        "compiler": compiler_version, "headers": headers,
    }, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _cache_read(key: str) -> Binary | None:
    meta_path = cache_dir() / f"{key}.json"
    image_path = cache_dir() / f"{key}.bin"
    try:
        meta = json.loads(meta_path.read_text())
        image = image_path.read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(image).hexdigest() != meta.get("image_sha256"):
        return None   # a torn or edited entry: compile again rather than load garbage
    meta.pop("image_sha256")
    return Binary(image=image, cache_hit=True, **meta)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _cache_write(binary: Binary) -> None:
    meta = asdict(binary)
    image = meta.pop("image")
    meta.pop("cache_hit")
    meta["image_sha256"] = hashlib.sha256(image).hexdigest()
    try:
        # Image first, metadata last: a reader that finds the metadata finds a whole image.
        _atomic_write(cache_dir() / f"{binary.key}.bin", image)
        _atomic_write(cache_dir() / f"{binary.key}.json", json.dumps(meta).encode())
    except OSError:
        pass  # a read-only or full cache dir costs speed, never correctness


# --------------------------------------------------------------------------------------- NVRTC


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc
    _, major, minor = nvrtc.nvrtcVersion()
    return f"nvrtc-{major}.{minor}"


@functools.cache
def _nvrtc_include_dirs() -> tuple[str, ...]:
    """CUDA headers (cuda_fp16.h, cuda_bf16.h): the NVRTC wheel has none; cuda.pathfinder finds them. Then
    CCCL's (libcu++: cuda/std/..., nv/target) where it finds them, which <cooperative_groups.h> includes;
    searched last, so a header found before is found the same, and only includes that failed now resolve.
    Without CCCL, a cooperative-groups kernel fails naming cuda/std/type_traits."""
    found = []
    for library in ("cudart", "cccl"):
        try:
            from cuda import pathfinder
            directory = pathfinder.find_nvidia_header_directory(library)
        except Exception:  # noqa: BLE001 - any failure means "not found"; NVRTC then says what is missing
            directory = None
        if directory:
            found.append(directory)
    return tuple(found)


def _check(result, what: str):
    status = result[0]
    if int(status) != 0:
        raise RuntimeError(f"{what} failed: {status!r}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def nvrtc_option_list(arch: str, options: CompileOptions) -> list[str]:
    if not re.fullmatch(r"sm_\d+[af]?", arch):
        raise ValueError(f"NVIDIA arch must look like 'sm_90' or 'sm_90a', got {arch!r}")
    flags = [f"-arch={arch}", f"--std={options.std}", f"-Xptxas={options.optimization}", "-Xptxas=-v",
             "-lineinfo", f"--pre-include={PRELUDE_NAME}"]
    flags += [f"-D{name}={value}" for name, value in options.defines]
    flags += [f"-I{directory}" for directory in (*options.include_dirs, *_nvrtc_include_dirs())]
    if options.fast_math:
        flags.append("--use_fast_math")
    return flags


def _entries(entry) -> tuple[str, ...]:
    entries = (entry,) if isinstance(entry, str) else tuple(entry)
    if not entries:
        raise ValueError("nothing to compile: no entry given")
    return entries


def compile_nvrtc(source: str, entry, *, file_name: str, dialect: str, arch: str,
                  options: CompileOptions) -> Binary:
    """``entry``: one name expression, or several (a whole file's kernels in one program)."""
    from cuda.bindings import nvrtc
    entries = _entries(entry)

    headers = compiler_headers(dialect, "nvidia")
    # Keeps the ptxas -v report (see hello_gpu/__init__.py); too late if the driver is already up.
    os.environ.setdefault("CUDA_CACHE_DISABLE", "1")
    flags = nvrtc_option_list(arch, options)
    started = time.perf_counter()
    program = _check(nvrtc.nvrtcCreateProgram(
        source.encode(), file_name.encode(), len(headers),
        [text.encode() for text in headers.values()], [name.encode() for name in headers]),
        "nvrtcCreateProgram")
    try:
        for expression in entries:
            _check(nvrtc.nvrtcAddNameExpression(program, expression.encode()), "nvrtcAddNameExpression")
        status = nvrtc.nvrtcCompileProgram(program, len(flags), [f.encode() for f in flags])[0]
        size = _check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
        log_buffer = b" " * size
        nvrtc.nvrtcGetProgramLog(program, log_buffer)
        log = log_buffer.rstrip(b"\x00").decode(errors="replace")
        if int(status) != 0:
            raise CompileError(file_name, source, log, compiler=nvrtc_version(), command=" ".join(flags))
        lowered = {expression: _check(nvrtc.nvrtcGetLoweredName(program, expression.encode()),
                                      "nvrtcGetLoweredName").decode() for expression in entries}
        size = _check(nvrtc.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize")
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(program, cubin)
        size = _check(nvrtc.nvrtcGetPTXSize(program), "nvrtcGetPTXSize")
        ptx = b" " * size
        nvrtc.nvrtcGetPTX(program, ptx)
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return Binary("nvidia", arch, entries[0], lowered[entries[0]], cubin, ptx.rstrip(b"\x00").decode(), log,
                  nvrtc_version(), time.perf_counter() - started, lowered_names=lowered)


# -------------------------------------------------------------------------------------- hipRTC


def hiprtc_version() -> str:
    from hip import hiprtc
    _, major, minor = hiprtc.hiprtcVersion()
    return f"hiprtc-{major}.{minor}"


def hip_python_available() -> bool:
    """Is hip-python (the ``hip`` module, hipRTC's bindings) importable?"""
    import importlib.util
    return importlib.util.find_spec("hip") is not None


def compile_hiprtc(source: str, entry, *, file_name: str, dialect: str, arch: str,
                   options: CompileOptions) -> Binary:
    """hipRTC for the device's gfx arch (needs hip-python and ROCm; not exercised on NVIDIA CI)."""
    from hip import hiprtc
    entries = _entries(entry)

    headers = compiler_headers(dialect, "amd")
    flags = [f"--offload-arch={arch}", f"-std={options.std}", options.optimization,
             "-include", PRELUDE_NAME]
    flags += [f"-D{name}={value}" for name, value in options.defines]
    flags += [f"-I{directory}" for directory in options.include_dirs]
    if options.fast_math:
        flags.append("-ffast-math")
    started = time.perf_counter()
    program = _check(hiprtc.hiprtcCreateProgram(
        source.encode(), file_name.encode(), len(headers),
        [text.encode() for text in headers.values()], [name.encode() for name in headers]),
        "hiprtcCreateProgram")
    try:
        for expression in entries:
            _check(hiprtc.hiprtcAddNameExpression(program, expression.encode()), "hiprtcAddNameExpression")
        status = hiprtc.hiprtcCompileProgram(program, len(flags), [f.encode() for f in flags])[0]
        size = _check(hiprtc.hiprtcGetProgramLogSize(program), "hiprtcGetProgramLogSize")
        log_buffer = bytearray(size)
        hiprtc.hiprtcGetProgramLog(program, log_buffer)
        log = bytes(log_buffer).rstrip(b"\x00").decode(errors="replace")
        if int(status) != 0:
            raise CompileError(file_name, source, log, compiler=hiprtc_version(), command=" ".join(flags))
        lowered = {expression: _check(hiprtc.hiprtcGetLoweredName(program, expression.encode()),
                                      "hiprtcGetLoweredName") for expression in entries}
        size = _check(hiprtc.hiprtcGetCodeSize(program), "hiprtcGetCodeSize")
        code = bytearray(size)
        hiprtc.hiprtcGetCode(program, code)
    finally:
        hiprtc.hiprtcDestroyProgram(program.createRef())
    lowered = {expression: name.decode() if isinstance(name, bytes) else str(name)
               for expression, name in lowered.items()}
    return Binary("amd", arch, entries[0], lowered[entries[0]], bytes(code), "", log, hiprtc_version(),
                  time.perf_counter() - started, lowered_names=lowered)


# ------------------------------------------------------------------------- clang (AMD, no GPU)


def clang_version() -> str:
    from .clang_hip import clang_description
    return clang_description()


def compile_clang(source: str, entry, *, file_name: str, dialect: str, arch: str,
                  options: CompileOptions) -> Binary:
    """AMD assembly through clang (the compile gate's path): for checking a kernel without an AMD GPU.

    The binary holds no loadable code object (``image`` is empty; ``extra["assembly"]`` has the ISA),
    so it cannot be launched. A template entry is instantiated by taking its address, and each
    entry's symbol is the one ``.amdhsa_kernel`` of the assembly that names it."""
    from .clang_hip import ClangNotFoundError, INSTALL_HINT, compile_for_amd, emitted_symbol
    entries = _entries(entry)
    tail = "".join(f"\nstatic auto* const hg_instantiate_{index} = &{expression};"
                   for index, expression in enumerate(entries) if "<" in expression)
    try:
        result = compile_for_amd(source + tail + "\n", name=file_name, dialect=dialect, arch=arch,
                                 defines=dict(options.defines), std=options.std, include_dirs=options.include_dirs,
                                 optimization=options.optimization, fast_math=options.fast_math)
    except ClangNotFoundError as error:
        raise ClangNotFoundError(f"compiling for {arch} without an AMD GPU needs clang: {error}. With an AMD GPU, "
                                 f"hipRTC compiles instead (install hip-python and ROCm); {INSTALL_HINT}") from None
    version = clang_version()
    if not result.ok:
        raise CompileError(file_name, source, result.log, compiler=version, command=" ".join(result.command))
    symbols = re.findall(r"^\s*\.amdhsa_kernel\s+(\S+)", result.assembly, flags=re.M)
    lowered = {expression: emitted_symbol(symbols, expression) for expression in entries}
    return Binary("amd", arch, entries[0], lowered[entries[0]], b"", "", result.log, version, result.seconds,
                  extra={"assembly": result.assembly}, lowered_names=lowered)


# Targets for compiling without a GPU, so a kernel's errors show at once: NVRTC needs no GPU or driver.
CHECK_TARGETS = (("nvidia", "sm_90"), ("amd", "gfx1201"))


def check_target() -> tuple[str, str] | None:
    """(vendor, arch) to compile for when no GPU is visible: sm_90 through NVRTC if it is installed,
    else gfx1201 through clang if there is one, else None."""
    import importlib.util
    try:
        has_nvrtc = importlib.util.find_spec("cuda.bindings") is not None
    except (ImportError, ValueError):
        has_nvrtc = False
    if has_nvrtc:
        return CHECK_TARGETS[0]
    from .clang_hip import find_clang
    return CHECK_TARGETS[1] if find_clang() is not None else None


def compile_source(source: str, entry, *, file_name: str, dialect: str, vendor: str, arch: str,
                   options: CompileOptions, use_cache: bool = True) -> Binary:
    """Compile (or fetch from the disk cache) ``entry`` of ``source`` for ``vendor``/``arch``.

    ``entry`` is a name expression (``"vector_add"``, ``"course::tiled<16>"``) or a sequence of them,
    compiled as one program (``Binary.for_entry`` gives each one's view). On AMD without hip-python
    the compile goes through clang to assembly (:func:`compile_clang`): a check, not a launchable binary.
    """
    entries = _entries(entry)
    if vendor == "nvidia":
        compiler, version = compile_nvrtc, nvrtc_version()
    elif hip_python_available():
        compiler, version = compile_hiprtc, hiprtc_version()
    else:
        compiler, version = compile_clang, "clang"
    # One entry keeps its plain name in the key, so single-kernel cache entries stay valid.
    key = cache_key(source, entries[0] if len(entries) == 1 else "\n".join(entries), dialect, vendor, arch,
                    options, version)
    if compiler is compile_clang:
        use_cache = False   # clang's assembly is a check, and its version is not read without running it
    if use_cache:
        cached = _cache_read(key)
        if cached is not None:
            return cached
    binary = compiler(source, entries if len(entries) > 1 else entries[0], file_name=file_name, dialect=dialect,
                      arch=arch, options=options)
    binary.key = key
    if use_cache:
        _cache_write(binary)
    return binary
