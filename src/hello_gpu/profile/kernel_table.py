"""The kernel table: every device kernel a call launches, with its time, launch shape and resources.

    table = kernel_table(fn, a, b, warmup=3, repeats=10)
    console.print(table.render())

``fn`` runs ``warmup`` times unprofiled (JIT compiles, first touches), then ``repeats`` times under
``torch.profiler`` with CUDA activity (CUPTI on NVIDIA; on ROCm PyTorch the same activity is
roctracer/rocprofiler). Each call is wrapped in a ``record_function`` labelled :data:`CALL_LABEL` and
ends with a synchronize, so every kernel can be assigned to the call that launched it.

The profiler's own view of a kernel (grid, block, registers, shared memory) exists only in the
Chrome trace it exports, so the trace is exported and read back: :func:`table_from_trace` is a pure
function of that JSON, tested on saved traces. The arguments differ by platform:

- CUDA (kineto's CUPTI activity): the kernel event's ``args`` hold ``"grid"``, ``"block"`` ([x, y, z]),
  ``"registers per thread"``, ``"shared memory"`` (static + dynamic, bytes), ``"correlation"``.
- ROCm (kineto's rocprofiler activity): the kernel event holds ``"grid"``, ``"block"``, ``"correlation"``;
  ``"shared memory"`` (the group segment) is on the launching runtime event (``hipModuleLaunchKernel``
  ...) with the same ``"correlation"``; there is no register count.

Per-call device time is the sum of the call's kernel durations (gaps between kernels are not counted).
"""

from __future__ import annotations

import bisect
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .counters import CounterResult, KernelCounters
from .cupti_teardown import keep_cupti_for_graphs
from .kernel_names import LIBRARY, OTHER, OURS, TRITON, kernel_key, kernel_source

CALL_LABEL = "hello_gpu.call"          # record_function name of profiled call i: "hello_gpu.call#i"
# A library kernel taking 5% or more of the device time of a rung that launches its own kernels is
# called out. A helper such as a 2 us memset of an accumulator in a 50 us call stays under it (4%);
# a rung that fell back to torch or cuBLAS shows ~100%.
FALLBACK_SHARE = 0.05
SOURCE_STYLES = {OURS: "green", TRITON: "cyan", LIBRARY: "bold yellow", OTHER: "magenta"}


# ------------------------------------------------------------------------------------------ the table


@dataclass
class KernelRow:
    """One kernel (name and launch shape) and all its launches during the profiled calls."""

    name: str
    source: str                           # "hello-gpu", "triton", "library" or "other"
    library: str | None                   # which library, for source "library"
    launches: int
    total_seconds: float
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    registers_per_thread: int | None
    shared_memory_bytes: int | None
    counters: KernelCounters | None = None

    @property
    def key(self) -> str:
        return kernel_key(self.name)

    @property
    def mean_seconds(self) -> float:
        return self.total_seconds / self.launches

    def to_dict(self) -> dict:
        return {"name": self.name, "key": self.key, "source": self.source, "library": self.library,
                "launches": self.launches, "total_seconds": self.total_seconds, "mean_seconds": self.mean_seconds,
                "grid": list(self.grid) if self.grid else None, "block": list(self.block) if self.block else None,
                "registers_per_thread": self.registers_per_thread, "shared_memory_bytes": self.shared_memory_bytes,
                "counters": self.counters.to_dict() if self.counters else None}


@dataclass
class KernelTable:
    """The kernels of ``calls`` profiled calls, largest total time first."""

    rows: list[KernelRow]
    calls: int
    per_call_seconds: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    title: str = "kernels"
    expects_own_kernels: bool = False     # the caller named its own kernels: library time is a fallback
    counted_bytes: float | None = None    # the work model's bytes per call, to set against DRAM bytes
    counters: CounterResult | None = None

    @property
    def total_seconds(self) -> float:
        return sum(row.total_seconds for row in self.rows)

    def share(self, row: KernelRow) -> float:
        total = self.total_seconds
        return row.total_seconds / total if total else 0.0

    def library_share(self) -> float:
        """Fraction of the device time spent in library kernels."""
        return sum(self.share(row) for row in self.rows if row.source == LIBRARY)

    def fallback_warning(self) -> str | None:
        """A line when a rung that launches its own kernels spent a real share of its time in a library."""
        share = self.library_share()
        if not self.expects_own_kernels or share < FALLBACK_SHARE:
            return None
        names = sorted({row.library or "library" for row in self.rows if row.source == LIBRARY})
        return (f"{share:.0%} of the device time is in library kernels ({', '.join(names)}), not in the rung's own: "
                f"a fallback?")

    def with_counters(self, result: CounterResult) -> "KernelTable":
        """Attach each kernel's hardware counters (matched by bare kernel name); returns self."""
        self.counters = result
        for row in self.rows:
            row.counters = result.for_kernel(row.name)
        if result.note:
            self.notes.append(f"counters: {result.note}")
        return self

    def bytes_comparison(self) -> dict | None:
        """Counted (work model) against measured (DRAM) bytes per call, and their ratio."""
        measured = self.counters.dram_bytes_per_call() if self.counters else None
        if self.counted_bytes is None and measured is None:
            return None
        read = write = None
        if measured is not None:
            read = sum(k.dram_read_bytes for k in self.counters.kernels) / self.counters.calls
            write = sum(k.dram_write_bytes for k in self.counters.kernels) / self.counters.calls
        ratio = measured / self.counted_bytes if measured is not None and self.counted_bytes else None
        return {"counted_bytes": self.counted_bytes, "measured_dram_bytes": measured, "dram_read_bytes": read,
                "dram_write_bytes": write, "measured_over_counted": ratio}

    def to_dict(self) -> dict:
        return {"title": self.title, "calls": self.calls, "total_seconds": self.total_seconds,
                "per_call_seconds": list(self.per_call_seconds), "notes": list(self.notes),
                "library_share": self.library_share(), "fallback_warning": self.fallback_warning(),
                "bytes": self.bytes_comparison(), "counters": self.counters.to_dict() if self.counters else None,
                "kernels": [{**row.to_dict(), "share": self.share(row), "launches_per_call": row.launches / self.calls}
                            for row in self.rows]}

    def render(self):
        """A ``rich`` table; counter columns appear when counters were attached."""
        from .kernel_table_render import render_table
        return render_table(self)

    def __rich__(self):
        return self.render()


# ------------------------------------------------------------------------------------------ parsing


def _dims(value) -> tuple[int, int, int] | None:
    """[256, 1, 1], "[256, 1, 1]", "(256, 1, 1)" or 256 -> (256, 1, 1); None when absent."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        numbers = [value]
    elif isinstance(value, (list, tuple)):
        numbers = list(value)
    elif isinstance(value, str):
        numbers = re.findall(r"\d+", value)
    else:
        return None
    try:
        dims = [int(n) for n in numbers][:3]
    except (TypeError, ValueError):
        return None
    return tuple(dims + [1] * (3 - len(dims))) if dims else None


def _integer(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _shared_memory(args: dict) -> int | None:
    """Bytes of shared memory per block: "shared memory", or static + dynamic where given apart."""
    if _integer(args.get("shared memory")) is not None:
        return _integer(args["shared memory"])
    parts = [_integer(args.get(key)) for key in ("static shared memory", "dynamic shared memory")]
    return sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None


def trace_events(trace) -> list[dict]:
    """The event list of a Chrome trace: the ``traceEvents`` of an exported file, or a list as given."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    return [event for event in events if isinstance(event, dict)]


def is_kernel_event(event: dict) -> bool:
    return event.get("ph") == "X" and str(event.get("cat", "")).lower() == "kernel"


def is_launch_event(event: dict) -> bool:
    """A host-side API event with a correlation id (cudaLaunchKernel, cuLaunchKernelEx, hipModuleLaunchKernel...);
    device-side events (kernels, gpu_memcpy, gpu_memset) carry the same ids and are not launches."""
    category = str(event.get("cat", "")).lower()
    return (event.get("ph") == "X" and isinstance(event.get("args"), dict) and "correlation" in event["args"]
            and category != "kernel" and not category.startswith("gpu_"))


def _call_starts(events: list[dict]) -> list[float]:
    """Start times of the profiled calls (the CPU-side record_function events), in order."""
    return sorted(float(e["ts"]) for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                  and str(e.get("name", "")).startswith(CALL_LABEL) and "ts" in e)


def table_from_trace(trace, *, calls: int | None = None, ours=(), triton=(), title: str = "kernels") -> KernelTable:
    """A :class:`KernelTable` from a torch.profiler Chrome trace (the exported dict, or its event list).

    Kernels with the same name, grid and block are one row. ``calls`` is how many calls were
    profiled (default: the number of call labels in the trace, else 1); ``ours``/``triton`` name the
    caller's own kernels (see :func:`~hello_gpu.profile.kernel_names.kernel_source`).
    """
    events = trace_events(trace)
    launches = {e["args"]["correlation"]: e for e in events if is_launch_event(e)}
    starts = _call_starts(events)
    calls = calls or len(starts) or 1
    per_call = [0.0] * len(starts)
    grouped: dict[tuple, KernelRow] = {}
    for event in (e for e in events if is_kernel_event(e)):
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        launch = launches.get(args.get("correlation"), {})
        launch_args = launch.get("args", {}) if isinstance(launch.get("args"), dict) else {}
        seconds = float(event.get("dur", 0.0)) * 1e-6          # Chrome trace times are microseconds
        name = str(event.get("name", "?"))
        grid = _dims(args.get("grid", launch_args.get("grid")))
        block = _dims(args.get("block", launch_args.get("block")))
        row = grouped.get((name, grid, block))
        if row is None:
            source, library = kernel_source(name, ours=ours, triton=triton)
            shared = _shared_memory(args)
            row = grouped[(name, grid, block)] = KernelRow(
                name, source, library, 0, 0.0, grid, block, _integer(args.get("registers per thread")),
                shared if shared is not None else _shared_memory(launch_args))
        row.launches += 1
        row.total_seconds += seconds
        # The call that launched it: by its launch's CPU time where the correlation is known, else by
        # its own start (the GPU clock is aligned to the CPU's in the trace, and each call synchronizes).
        moment = launch.get("ts", event.get("ts"))
        index = bisect.bisect_right(starts, float(moment)) - 1 if moment is not None else -1
        if 0 <= index < len(per_call):
            per_call[index] += seconds
    rows = sorted(grouped.values(), key=lambda row: -row.total_seconds)
    notes = [] if rows else ["no device kernels were recorded: no GPU here, the profiler had no CUDA activity, "
                             "or the function ran on the CPU"]
    return KernelTable(rows, calls, per_call if any(per_call) else [], notes, title,
                       expects_own_kernels=bool(tuple(ours)) or bool(tuple(triton)))


# ------------------------------------------------------------------------------------------ profiling


def _synchronize(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def kernel_table(fn, *args, warmup: int = 3, repeats: int = 10, ours=(), triton=(), title: str = "kernels",
                 trace_path: str | Path | None = None, **kwargs) -> KernelTable:
    """Run ``fn(*args, **kwargs)`` under torch.profiler and return the table of its device kernels.

    ``ours``/``triton``: names of the kernels the caller launches itself, so that any other kernel
    (a cuBLAS or ATen fallback) is labelled by its library. ``trace_path`` keeps the exported Chrome
    trace (open it in https://ui.perfetto.dev). Without a GPU the table is empty and says why.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, supported_activities

    for _ in range(warmup):
        fn(*args, **kwargs)
    _synchronize(torch)
    activities = [ProfilerActivity.CPU]
    if ProfilerActivity.CUDA in supported_activities() and torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    keep_cupti_for_graphs()
    with profile(activities=activities) as profiler:
        for index in range(repeats):
            with record_function(f"{CALL_LABEL}#{index}"):
                fn(*args, **kwargs)
                _synchronize(torch)
    with tempfile.TemporaryDirectory(prefix="hello-gpu-trace-") as folder:
        path = Path(trace_path) if trace_path is not None else Path(folder) / "trace.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        profiler.export_chrome_trace(str(path))
        trace = json.loads(path.read_text(encoding="utf-8"))
    return table_from_trace(trace, calls=repeats, ours=ours, triton=triton, title=title)
