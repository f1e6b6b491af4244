"""``hg.load("kernels.hip")``: every kernel of a whole course-style file, compiled together.

The file may be a whole program (kernels, then ``main()`` with ``hipMalloc``...): its host code is
left out of the compile with every line keeping its number (see :mod:`program`). The kernels come
back as attributes (``mod.vector_add_v3_float4(a, b)``), templates by name (``mod["tiled<16>"]``),
each a :class:`~hello_gpu.runtime.kernel.Kernel`.

Every non-template kernel is compiled in one program, so a file of ten kernels costs one NVRTC
compile, and a compile error in any of them shows at ``load`` time, at the file's own line. A kernel
whose signature hello-gpu cannot call (a struct by value) does not stop the others: ``load`` warns,
and using that kernel raises the signature error.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from .compiler import CompileOptions, compile_source
from .errors import CompileError
from .device import gpu_vendor
from .kernel import Kernel, check_note, compile_target
from .program import LeftOut, ProgramError, device_source, read_program
from .signature import KernelDeclaration, SignatureError, parse_signature


class KernelModule:
    """The kernels of one program: ``module.NAME`` for a kernel, ``module["NAME<args>"]`` for a template."""

    def __init__(self, source: str, *, name: str = "program.hip", dialect: str = "hip", arch: str | None = None,
                 defines=None, std: str = "c++17", include_dirs=(), optimization: str = "-O3",
                 fast_math: bool = False, use_cache: bool = True):
        device = device_source(source, name)
        if not device.kernels:
            raise ProgramError(
                f"{name}: no __global__ kernel found. hello-gpu compiles the __global__ functions of a file "
                f"(host code such as main() is left out); write each kernel out with __global__ in the file")
        self.name = name
        self.source = source
        self.dialect = dialect
        self.compiled_source = device.text if device.has_host_code else source
        self.left_out: list[LeftOut] = device.left_out
        self.declarations: list[KernelDeclaration] = device.kernels
        self._options = dict(dialect=dialect, arch=arch, defines=defines, std=std, include_dirs=tuple(include_dirs),
                             optimization=optimization, fast_math=fast_math, name=name, use_cache=use_cache)
        self._kernels: dict[str, Kernel] = {}
        self.unusable: dict[str, SignatureError] = {}

        plain = [kernel for kernel in device.kernels if not kernel.template]
        expressions = {}
        for kernel in plain:
            try:
                expressions[kernel.qualified_name] = parse_signature(self.compiled_source,
                                                                     kernel.qualified_name).name_expression
            except SignatureError as error:
                self.unusable[kernel.qualified_name] = error
        binary = None
        self.target = target = compile_target(arch)     # (vendor, arch), None when nothing can compile
        if expressions and target is not None:
            options = CompileOptions.make(defines, std, include_dirs, optimization, fast_math)
            try:
                binary = compile_source(self.compiled_source, tuple(expressions.values()), file_name=name,
                                        dialect=dialect, vendor=target[0], arch=target[1], options=options,
                                        use_cache=use_cache)
            except CompileError as error:
                if arch is None and gpu_vendor() is None:
                    error.add_note_line(check_note(target[1]))
                raise
        for qualified, expression in expressions.items():
            self._kernels[qualified] = Kernel(source, qualified, **self._options,
                                              binary=binary.for_entry(expression) if binary is not None else None)
        if self.unusable:
            warnings.warn(f"{name}: {len(self.unusable)} kernel(s) cannot be called from Python: "
                          + "; ".join(str(error) for error in self.unusable.values()), stacklevel=3)

    # ------------------------------------------------------------------ lookup
    @property
    def kernels(self) -> list[str]:
        """Every kernel's name (namespace-qualified where it is in a named namespace), in file order."""
        return [kernel.qualified_name for kernel in self.declarations]

    @property
    def templates(self) -> list[str]:
        return [kernel.qualified_name for kernel in self.declarations if kernel.template]

    def _declaration(self, name: str) -> KernelDeclaration | None:
        bare = name.split("<")[0].strip()
        exact = [kernel for kernel in self.declarations if kernel.qualified_name == bare.lstrip(":")]
        if exact:
            return exact[0]
        by_name = [kernel for kernel in self.declarations if kernel.name == bare]
        if len(by_name) > 1:
            raise KeyError(f"{bare!r} is a kernel in several namespaces ("
                           f"{', '.join(kernel.qualified_name for kernel in by_name)}); use the qualified name")
        return by_name[0] if by_name else None

    def __getitem__(self, entry: str) -> Kernel:
        """A kernel by name, or a template instantiated by name (``"tiled<16>"``), compiled on first use."""
        declaration = self._declaration(entry)
        if declaration is None:
            raise KeyError(f"{self.name} has no kernel {entry!r}; kernels: {', '.join(self.kernels)}")
        if declaration.qualified_name in self.unusable:
            raise self.unusable[declaration.qualified_name]
        if not declaration.template:
            return self._kernels[declaration.qualified_name]
        if "<" not in entry:
            raise KeyError(f"{entry!r} is a template kernel; instantiate it by name, e.g. "
                           f"{self.name_hint(declaration)}")
        key = "".join(entry.split())
        if key not in self._kernels:
            self._kernels[key] = Kernel(self.source, entry, **self._options)
        return self._kernels[key]

    @staticmethod
    def name_hint(declaration: KernelDeclaration) -> str:
        return f"module[\"{declaration.name}<...>\"] with its template arguments"

    def __getattr__(self, name: str) -> Kernel:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            declaration = self._declaration(name)
        except KeyError as error:
            raise AttributeError(str(error).strip('"')) from None
        if declaration is None:
            raise AttributeError(f"{self.name} has no kernel {name!r}; kernels: {', '.join(self.kernels)}")
        if declaration.template:
            raise AttributeError(f"{name!r} is a template kernel; instantiate it by name: "
                                 f"{self.name_hint(declaration)}")
        return self[declaration.qualified_name]

    def __contains__(self, name: str) -> bool:
        try:
            return self._declaration(name) is not None
        except KeyError:
            return True

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {kernel.name for kernel in self.declarations if not kernel.template})

    def __repr__(self) -> str:
        lines = [f"<hello_gpu.KernelModule {self.name}: {len(self.declarations)} kernel(s)"]
        for declaration in self.declarations:
            if declaration.template:
                state = f"template: {self.name_hint(declaration)}"
            elif declaration.qualified_name in self.unusable:
                state = f"cannot be called: {self.unusable[declaration.qualified_name]}"
            else:
                state = self._kernels[declaration.qualified_name].signature.describe()
            lines.append(f"  line {declaration.line}: {declaration.qualified_name}  {state}")
        if self.left_out:
            lines.append("  left out (host code, or not used by a kernel): "
                         + ", ".join(str(part) for part in self.left_out))
        return "\n".join(lines) + ">"


def load(path_or_source, *, dialect: str | None = None, arch: str | None = None, name: str | None = None,
         include_dirs=(), **options) -> KernelModule:
    """Every kernel of a file (a path) or of source text, compiled together; see :class:`KernelModule`.

    A path's dialect comes from its suffix (``.cu`` is CUDA, others HIP) and its own folder is searched
    for ``#include "..."`` first. Without a GPU and without ``arch``, the kernels are compiled for a
    check target (sm_90 through NVRTC), so errors show at once; calling them needs a GPU."""
    if isinstance(path_or_source, Path) or (isinstance(path_or_source, str) and "\n" not in path_or_source
                                             and "__global__" not in path_or_source):
        path = Path(path_or_source)
        source, file_name, file_dialect = read_program(path)
        include_dirs = (str(path.resolve().parent), *include_dirs)
    elif isinstance(path_or_source, str):
        source, file_name, file_dialect = path_or_source, None, "hip"
    else:
        raise TypeError(f"load takes a path or source text, got {type(path_or_source).__name__}")
    dialect = dialect or file_dialect
    file_name = name or file_name or f"program.{'cu' if dialect == 'cuda' else 'hip'}"
    return KernelModule(source, name=file_name, dialect=dialect, arch=arch, include_dirs=include_dirs, **options)
