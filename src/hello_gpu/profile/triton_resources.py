"""Registers, spills and shared memory of the Triton kernels a process has launched.

Triton compiles a ``@triton.jit`` function once per specialisation (dtypes, constexprs, which integer
arguments are divisible by 16) at its first call, so its resources exist only after a call: this reads
them from the JIT's own cache of compiled kernels, the numbers the driver reported when it loaded each
binary (``CU_FUNC_ATTRIBUTE_NUM_REGS``; ``n_spills`` is the local memory in 4-byte words). In the
interpreter (``TRITON_INTERPRET=1``) nothing is compiled and the list is empty.

The HIP route gets the same numbers from the compiler's report (``Kernel.resources``); the agent's
analysis puts either beside the timing, so its policy can see a kernel that spills.
"""

from __future__ import annotations

import sys
from types import ModuleType

TRITON_WORD_BYTES = 4          # Triton divides the local memory size by 4 to report n_spills


def _jit_functions(module: ModuleType):
    """The JIT functions a module defines, unwrapping ``@triton.autotune`` / ``@triton.heuristics``."""
    for value in list(vars(module).values()):
        while type(value).__name__ in ("Autotuner", "Heuristics"):
            value = getattr(value, "fn", None)
        if type(value).__name__ == "JITFunction":
            yield value


def _compiled_kernels(function):
    """Every compiled specialisation in a JIT function's per-device caches. The cache's layout has
    changed between Triton releases (a tuple whose first item is ``{key: CompiledKernel}`` in 3.2-3.6);
    anything else yields nothing rather than a guess."""
    for cache in getattr(function, "device_caches", {}).values():
        kernels = cache[0] if isinstance(cache, tuple) and cache and isinstance(cache[0], dict) else {}
        yield from kernels.values()


def kernel_resources(modules: list[ModuleType]) -> list[dict]:
    """One dict per compiled kernel of ``modules``: name, registers per thread, spill bytes, shared
    memory bytes and warps. Kernels not yet loaded on the device are loaded first (that is where the
    driver reports registers); one that cannot be read is left out."""
    rows, seen = [], set()
    for module in modules:
        for function in _jit_functions(module):
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


def loaded_rung_modules(prefix: str = "_hello_gpu_ops_") -> list[ModuleType]:
    """The rung modules this process has imported (``hello_gpu.ops.rung.load_module`` names them with
    ``prefix``), including siblings a rung loads for their kernels."""
    return [module for name, module in list(sys.modules.items()) if name.startswith(prefix) and module is not None]
