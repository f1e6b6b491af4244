"""Hardware counters per kernel, in one shape whichever vendor tool read them (ncu or rocprofv3).

A tool reports one row per kernel *launch*; :func:`aggregate_launches` folds the launches of one
kernel into a :class:`KernelCounters`: byte and sector counts are summed (divide by the profiled calls
for "per call"; a launch without a value counts as the mean of the others), percentages are averaged
weighted by each launch's duration (a 2 us launch must not count as much as a 2 ms one).

Where counters cannot be read (no tool, no permission, a tool that failed) the result is a
:class:`CounterResult` with no kernels and a one-line ``note`` saying why; nothing raises.

:func:`counters_for_rungs` is the hook a ladder calls to add counter columns: one child process per
rung, the vendor's tool chosen from the GPU that is here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..runtime.device import gpu_vendor
from .kernel_names import kernel_key

# The canonical per-launch fields every tool's parser fills (what it can), and how launches combine.
SUMMED = ("dram_read_bytes", "dram_write_bytes", "duration_seconds", "global_load_sectors", "global_load_requests")
WEIGHTED = ("achieved_occupancy_pct", "sm_throughput_pct", "memory_throughput_pct", "l2_hit_rate_pct")
STALL_PREFIX = "stall:"        # "stall:long_scoreboard" -> cycles per issued instruction
TOP_STALLS = 3


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class KernelCounters:
    """One kernel's counters, summed (bytes, sectors, time) or duration-weighted (percentages) over its launches."""

    name: str
    launches: int
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    duration_seconds: float | None = None
    achieved_occupancy_pct: float | None = None      # active warps / the SM's maximum, while active
    sm_throughput_pct: float | None = None           # busiest SM unit, % of its peak
    memory_throughput_pct: float | None = None       # busiest memory unit (DRAM, L2, L1), % of its peak
    l2_hit_rate_pct: float | None = None
    global_load_sectors: float | None = None         # 32-byte sectors moved by global loads (L1)
    global_load_requests: float | None = None        # warp-wide global load instructions
    stalls: dict[str, float] = field(default_factory=dict)   # reason -> cycles per issued instruction
    extra: dict[str, float] = field(default_factory=dict)    # other counters the tool gave (AMD: SQ_WAVES, ...)

    @property
    def key(self) -> str:
        return kernel_key(self.name)

    @property
    def dram_bytes(self) -> float | None:
        """Read + written, where both are known."""
        if self.dram_read_bytes is None or self.dram_write_bytes is None:
            return None
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def sectors_per_request(self) -> float | None:
        """32-byte sectors per warp-wide load: 4 when 32 lanes read 32 consecutive floats, 32 when each
        lane's address lands in a different sector (the uncoalesced pattern)."""
        if not self.global_load_requests or self.global_load_sectors is None:
            return None
        return self.global_load_sectors / self.global_load_requests

    def top_stalls(self, count: int = TOP_STALLS) -> list[tuple[str, float]]:
        """The largest stall reasons, largest first; reasons at zero are left out."""
        ranked = sorted(((r, v) for r, v in self.stalls.items() if v > 0), key=lambda item: -item[1])
        return ranked[:count]

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(key=self.key, dram_bytes=self.dram_bytes, sectors_per_request=self.sectors_per_request,
                    top_stalls=[[reason, value] for reason, value in self.top_stalls()])
        return data


def _weighted_mean(values: list[float | None], weights: list[float | None]) -> float | None:
    pairs = [(v, w) for v, w in zip(values, weights) if _finite(v)]
    if not pairs:
        return None
    if all(_finite(w) and w > 0 for _, w in pairs):
        return sum(v * w for v, w in pairs) / sum(w for _, w in pairs)
    return sum(v for v, _ in pairs) / len(pairs)


def aggregate_launches(launches: list[dict]) -> list[KernelCounters]:
    """Fold per-launch dicts (``name`` plus canonical fields, ``stall:*`` and any others) into one
    :class:`KernelCounters` per kernel name, in order of first launch."""
    by_name: dict[str, list[dict]] = {}
    for launch in launches:
        by_name.setdefault(launch["name"], []).append(launch)
    kernels = []
    for name, group in by_name.items():
        weights = [launch.get("duration_seconds") for launch in group]
        counters = KernelCounters(name=name, launches=len(group))
        for field_name in SUMMED:
            # A launch the tool printed n/a for counts as the mean of the others, so a sum stays a sum
            # over every launch (sectors / requests is then not skewed by one launch without sectors).
            known = [v for v in (launch.get(field_name) for launch in group) if _finite(v)]
            if known:
                setattr(counters, field_name, float(sum(known)) * len(group) / len(known))
        for field_name in WEIGHTED:
            setattr(counters, field_name, _weighted_mean([launch.get(field_name) for launch in group], weights))
        others = {key for launch in group for key in launch} - set(SUMMED) - set(WEIGHTED) - {"name", "grid", "block"}
        for key in sorted(others):
            value = _weighted_mean([launch.get(key) for launch in group], weights)
            if value is None:
                continue
            if key.startswith(STALL_PREFIX):
                counters.stalls[key[len(STALL_PREFIX):]] = value
            else:
                counters.extra[key] = value
        kernels.append(counters)
    return kernels


@dataclass
class CounterResult:
    """What a counter tool said about one profiled rung: per-kernel counters, or why there are none."""

    tool: str | None                     # "ncu", "rocprofv3", or None when no tool ran
    kernels: list[KernelCounters]
    calls: int                           # rung calls profiled: sums / calls = per call
    note: str | None = None              # one line: why counters are missing or partial
    command: list[str] = field(default_factory=list)
    missing_metrics: list[str] = field(default_factory=list)
    raw_output: str = field(default="", repr=False)   # the tool's own output, for --save-raw

    @property
    def available(self) -> bool:
        return bool(self.kernels)

    def for_kernel(self, name: str) -> KernelCounters | None:
        """The counters of the kernel a name (any tool's spelling) refers to; several kernels with one
        bare name (templates) are combined."""
        key = kernel_key(name)
        matches = [k for k in self.kernels if k.key == key]
        if not matches:
            return None
        if len(matches) == 1:
            return matches[0]
        return _combine(matches)

    def dram_bytes_per_call(self) -> float | None:
        """DRAM bytes read + written per rung call, all kernels together."""
        values = [k.dram_bytes for k in self.kernels]
        if not values or any(v is None for v in values) or self.calls <= 0:
            return None
        return sum(values) / self.calls

    def summary(self) -> dict:
        """Per-call figures over all kernels: the counter columns a ladder table shows."""
        if not self.kernels:
            return {"dram_bytes_per_call": None, "sectors_per_request": None, "achieved_occupancy_pct": None,
                    "top_stall": None, "note": self.note}
        combined = _combine(self.kernels)
        stall = combined.top_stalls(1)
        return {"dram_bytes_per_call": self.dram_bytes_per_call(), "sectors_per_request": combined.sectors_per_request,
                "achieved_occupancy_pct": combined.achieved_occupancy_pct,
                "top_stall": stall[0][0] if stall else None, "note": self.note}

    def to_dict(self) -> dict:
        return {"tool": self.tool, "calls": self.calls, "note": self.note, "command": list(self.command),
                "missing_metrics": list(self.missing_metrics), "kernels": [k.to_dict() for k in self.kernels],
                "summary": self.summary()}


def _combine(kernels: list[KernelCounters]) -> KernelCounters:
    """Several kernels as one: sums summed, percentages weighted by each kernel's total duration."""
    launches = []
    for k in kernels:
        launch = {"name": kernels[0].name, **{f: getattr(k, f) for f in SUMMED + WEIGHTED}}
        launch.update({STALL_PREFIX + reason: value for reason, value in k.stalls.items()})
        launches.append(launch)
    combined = aggregate_launches(launches)[0]
    combined.launches = sum(k.launches for k in kernels)
    return combined


def unavailable(note: str, *, tool: str | None = None, calls: int = 0, command=(), raw_output: str = "") -> CounterResult:
    """A result without counters, and the one line that says why."""
    return CounterResult(tool, [], calls, note, list(command), raw_output=raw_output)


def counters_for_rungs(op, rungs, shape, dtype: str, *, calls: int = 3, root=None) -> dict[str, CounterResult]:
    """Hardware counters of each rung at one shape and dtype: ``{rung id: CounterResult}``.

    ``op`` is an :class:`~hello_gpu.ops.Op` or its name; ``rungs`` are rung ids or :class:`~hello_gpu.ops.Rung`.
    Each rung runs in its own child process under the vendor's tool (ncu on NVIDIA, rocprofv3 on AMD),
    so a tool or kernel that fails costs that rung's counters, never the caller. For ``ladder --profile``.
    """
    op_name = op if isinstance(op, str) else op.name
    if root is None and not isinstance(op, str):
        # Here, not at the top: hello_gpu.profile (imported by this module's package) stays free of
        # PyTorch, which hello_gpu.ops imports, until a profile really runs.
        from ..ops.registry import ops_root
        if op.path.parent != ops_root():
            root = op.path.parent
    vendor = gpu_vendor()
    results = {}
    for rung in rungs:
        rung_id = rung if isinstance(rung, str) else rung.id
        if vendor == "nvidia":
            from .ncu import collect
        elif vendor == "amd":
            from .rocprof import collect
        else:
            results[rung_id] = unavailable("no GPU here: hardware counters are read on the GPU that runs the kernel")
            continue
        results[rung_id] = collect(op_name, rung_id, shape, dtype, calls=calls, root=root)
    return results
