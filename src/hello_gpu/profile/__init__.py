"""profile/: where the time goes. Kernel tables, hardware counters, the roofline.

- :func:`kernel_table` runs a function under ``torch.profiler`` (CUDA and ROCm) and lists every device
  kernel it launched: calls, device time, grid, block, registers, shared memory, and who wrote it
  (hello-gpu, Triton, or a library: a fallback shows at a glance). ``hello-gpu profile OP RUNG``.
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

from .counters import CounterResult, KernelCounters, counters_for_rungs
from .kernel_table import KernelRow, KernelTable, kernel_table, table_from_trace
from .roofline import Roofline, Roofs, Verdict, classify, load_roofline

__all__ = ["CounterResult", "KernelCounters", "KernelRow", "KernelTable", "Roofline", "Roofs", "Verdict", "classify",
           "counters_for_rungs", "kernel_table", "load_roofline", "table_from_trace"]
