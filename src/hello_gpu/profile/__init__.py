"""profile/: where the time goes. Kernel tables, hardware counters, the roofline.

- :func:`kernel_table` runs a function under ``torch.profiler`` (CUDA and ROCm) and lists every device
  kernel it launched: calls, device time, grid, block, registers, shared memory, and who wrote it
  (hello-gpu, Triton, or a library: a fallback shows at a glance). ``hello-gpu profile OP RUNG``.
  This package is itself callable as that function: ``hello_gpu.profile(fn, a, b)``.
- Hardware counters come from the vendor's tool in a child process, ``ncu`` (:mod:`.ncu`) or
  ``rocprofv3`` (:mod:`.rocprof`), parsed into :class:`KernelCounters` per kernel: DRAM bytes,
  occupancy, SM and memory throughput, L2 hit rate, sectors per request, warp stall reasons.
  Where counters cannot be read, a one-line note says why; nothing raises.
  :func:`counters_for_rungs` is the hook for ``hello-gpu ladder --profile``.
- :mod:`.roofline` places each rung of a ladder record under the measured ceilings and datasheet
  peaks and says what bounds it; ``hello-gpu roofline OP`` prints the verdicts and saves the plot.
- :mod:`.record` writes the profile record (kind "profile") of an operator.

Parsers are pure functions of the tools' output, tested on saved files under ``tests/fixtures/profile/``.
"""

import sys
import types

from .counters import CounterResult, KernelCounters, counters_for_rungs
from .kernel_table import KernelRow, KernelTable, is_kernel_event, is_launch_event, kernel_table, table_from_trace
from .roofline import Roofline, RooflinePoint, Roofs, Verdict, classify, load_roofline, roofs_from

__all__ = ["CounterResult", "KernelCounters", "KernelRow", "KernelTable", "Roofline", "RooflinePoint", "Roofs", "Verdict",
           "classify", "roofs_from",
           "counters_for_rungs", "is_kernel_event", "is_launch_event", "kernel_table", "load_roofline",
           "table_from_trace"]


class _CallableModule(types.ModuleType):
    """This package, callable: ``hello_gpu.profile(fn, *args, **kwargs)`` is ``kernel_table(fn, *args, **kwargs)``.

    Issue 6 asks for ``hello_gpu.profile(fn, ...)``, and ``hello_gpu.profile`` is this subpackage: a
    function of that name in ``hello_gpu/__init__.py`` would be replaced by the subpackage the moment
    anything imports ``hello_gpu.profile.<module>`` (the import system sets the parent's attribute),
    and renaming the package would break ``from hello_gpu.profile import ...``. So the package keeps
    its name and its module object's class gains a ``__call__``.
    """

    def __call__(self, fn, *args, **kwargs) -> KernelTable:
        return _kernel_table(fn, *args, **kwargs)


# The function and the subpackage share the name "profile": the module object of this package becomes
# an instance of the callable subclass above (a module's __class__ may be set to a ModuleType subclass),
# so ``hello_gpu.profile`` is both the package and ``kernel_table``. The function is held under a
# private name so that nothing rebinding the public ``kernel_table`` (the submodule of that name) changes it.
_kernel_table = kernel_table
sys.modules[__name__].__class__ = _CallableModule
