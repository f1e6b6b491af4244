"""What Triton's JIT knows about the kernels a process has compiled: resources, and where an error is.

Triton compiles a ``@triton.jit`` function once per specialisation (dtypes, constexprs, which integer
arguments are divisible by 16) at its first call, so a Triton kernel has no registers or compile errors
until it is called. This module reads them back from the JIT:

- :func:`kernel_resources`: registers, spills and shared memory of every compiled specialisation, the
  numbers the driver reported when it loaded each binary (``CU_FUNC_ATTRIBUTE_NUM_REGS``; Triton's
  ``n_spills`` is the local memory in 4-byte words). In the interpreter (``TRITON_INTERPRET=1``)
  nothing is compiled and the list is empty.
- :func:`compile_error_location`: the file, line and column of a ``CompilationError``, whose own
  ``at 3:25:`` counts lines from the kernel's ``def``, not from the top of its file.

The HIP route gets the same numbers from the compiler's report (``Kernel.resources``).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from types import ModuleType

TRITON_WORD_BYTES = 4          # Triton divides the local memory size by 4 to report n_spills


def jit_functions(modules: list[ModuleType]):
    """The JIT functions the modules define, unwrapping ``@triton.autotune`` / ``@triton.heuristics``."""
    for module in modules:
        for value in list(vars(module).values()):
            while type(value).__name__ in ("Autotuner", "Heuristics"):
                value = getattr(value, "fn", None)
            if type(value).__name__ == "JITFunction":
                yield value


def modules_named(prefix: str) -> list[ModuleType]:
    """The modules of this process whose name starts with ``prefix`` (the ops registry imports each rung
    under a unique ``_hello_gpu_ops_...`` name, siblings a rung loads for their kernels included)."""
    return [module for name, module in list(sys.modules.items()) if name.startswith(prefix) and module is not None]


def _compiled_kernels(function):
    """Every compiled specialisation in a JIT function's per-device caches. The cache's layout has
    changed between Triton releases (a tuple whose first item is ``{key: CompiledKernel}`` in 3.2-3.9);
    anything else yields nothing rather than a guess."""
    for cache in getattr(function, "device_caches", {}).values():
        kernels = cache[0] if isinstance(cache, tuple) and cache and isinstance(cache[0], dict) else {}
        yield from kernels.values()


def kernel_resources(modules: list[ModuleType]) -> list[dict]:
    """One dict per compiled kernel of ``modules``: name, registers per thread, spill bytes, shared
    memory bytes and warps. Kernels not yet loaded on the device are loaded first (that is where the
    driver reports registers); one that cannot be read is left out."""
    rows, seen = [], set()
    for function in jit_functions(modules):
        for compiled in _compiled_kernels(function):
            if id(compiled) in seen:
                continue
            seen.add(id(compiled))
            try:
                if getattr(compiled, "n_regs", None) is None:
                    compiled._init_handles()          # Triton loads a binary lazily, at its first launch
                metadata = compiled.metadata
                rows.append({"name": getattr(compiled, "name", None) or function.__name__,
                             "registers_per_thread": int(compiled.n_regs),
                             "spill_bytes": int(compiled.n_spills) * TRITON_WORD_BYTES,
                             "shared_bytes": int(getattr(metadata, "shared", 0) or 0),
                             "num_warps": int(getattr(metadata, "num_warps", 0) or 0)})
            except Exception:  # noqa: BLE001 - a kernel whose numbers cannot be read is left out, not guessed
                continue
    return rows


def compile_error_location(error: BaseException, modules: list[ModuleType]) -> dict | None:
    """``{"file", "line", "column", "function"}`` of a Triton ``CompilationError`` raised for a kernel of
    ``modules``, in the kernel's own file; None when the error carries no position or its kernel is not
    among them. The error holds the kernel's source from its ``def`` line and an AST node numbered from
    there, so the file line is the ``def`` line's number plus the node's, less one."""
    node, source = getattr(error, "node", None), getattr(error, "src", None)
    if getattr(node, "lineno", None) is None or not isinstance(source, str):
        return None
    for function in jit_functions(modules):
        if getattr(function, "src", None) != source:
            continue
        try:
            lines, first = inspect.getsourcelines(function.fn)
            file = inspect.getsourcefile(function.fn)
        except (OSError, TypeError):
            return None
        # getsourcelines starts at the decorator; the error counts from the def
        def_offset = next((i for i, text in enumerate(lines) if text.lstrip().startswith("def ")), 0)
        return {"file": Path(file).name if file else None, "line": first + def_offset + node.lineno - 1,
                "column": getattr(node, "col_offset", None), "function": function.__name__}
    return None
