"""``measure(fn)``: time a GPU function so that the number can be defended.

What makes a kernel timing wrong, and what this does about each:
- **Asynchrony**: a launch returns before the kernel runs. Times come from device events recorded on
  the current stream around the call, never from the host clock around a launch.
- **First calls**: JIT compiles, module loads, first touches of memory. Warm-up runs until the
  timings settle (three consecutive windows within 5% of each other) and is never counted.
- **The cache**: repeated calls on the same 16 MB find it in the 60 MB L2 of an H200 and report a
  "bandwidth" above what DRAM can do. With ``cache="cold"`` a buffer of four times the L2 (read from
  the device; at least 256 MiB, as ``triton.testing.do_bench`` uses) is zeroed before every timed
  call, outside the timed region. (Twice the L2, 120 MB, left part of a 12 MB working set cached on
  the H200: a 2^20 add timed 12% faster than do_bench's.)
- **Dirty lines**: zeroing the flush buffer leaves the L2 full of *modified* lines, and every line a
  cold call allocates (its reads and its writes) first writes one of them back to DRAM. That is the
  convention of ``do_bench`` and of the anchors, and it is what ``cold`` does. ``cache="cold-clean"``
  reads the buffer after zeroing it, so the L2 holds only clean lines and the call pays for its own
  traffic alone: the two side by side show how much of a short kernel is other data's write-back
  (benchmarks/softmax_dirty_l2.py). Its writes may then stay in the L2 and never reach DRAM within
  the call, so only a ``cold`` time is held against the copy-bandwidth ceiling.
- **Host gaps**: a start event reached while the host is still launching the kernel counts launch
  latency as kernel time (a warm 4 MB copy timed 27 us instead of ~5). So the GPU is held by a short
  spin (``torch.cuda._sleep``, outside the timed region) while a batch is queued. The cold flush
  (~65 us of GPU work) is not enough on its own: a Python launcher of two or three kernels takes
  longer than that on the host, and a 2^20 two-stage sum timed 37 us instead of ~10 before the spin
  was added to cold batches too (records/nvidia-h200/reduce_sum.float32.json, commit a3e1cf2). A
  callable slower on the host than the spin is caught and timed again with a longer one (Hold).
- **Queue depth**: calls are queued in batches holding ~1 ms of kernel time (10 to 100 calls) before
  each synchronize. With batches of 10, a cold 2^20 add (7.5 us) timed 7.3-7.5 us against
  do_bench's 7.8-8.5 us, which queues every repetition; batches of 100 read 7.9-8.3 us
  (records/nvidia-h200/flush-experiment.json, variants A, B, H). A kernel timed right after the
  GPU drained its queue runs faster than one in a steady stream; a steady stream is what real work is.
- **Noise**: repeats continue until the bootstrap relative standard error of the median is under 1%
  (or a time cap); the median, p20/p80, min and a bootstrap 95% interval are reported, and the raw
  samples are kept on the result.
- **Device time or call time**: the spin above hides the host, so ``measure`` reports what the GPU
  spends (``mode="device"``, the default). A user calling from Python pays the host's launch path
  too: ``mode="call"`` waits until the GPU is idle (after the flush, when cold), records the start
  event and calls, with no spin, so each sample runs from the moment the host starts the call to the
  moment the GPU finishes it. (A flush alone does not show the host: ``do_bench``'s 256 MB zeroing
  keeps the GPU busy ~75 us while the host launches, hiding any launcher faster than that.) A
  function that wins on device time and loses on call time has not won for small tensors.
- **Launch overhead**: for kernels of a few microseconds the launch dominates. ``graph=True``
  captures several calls, each on its own input set (``inputs=``, rotated), into a CUDA graph and
  times its replay, so launch gaps shrink and the inputs are not all the same cached bytes.

On a machine without a GPU (or for CPU tensors) it times with the wall clock and says so.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..runtime.device import device_info, torch_module
from .records import CACHES
from .stats import Summary, relative_standard_error, summarize
from .roof import current_roof
from .work import Rates, Roof, Work, rates

SETTLE_TOLERANCE = 0.05       # warm-up ends when 3 window medians agree within 5%
WARMUP_WINDOW = 5
MAX_WARMUP_SECONDS = 2.0
BATCH = 10                    # timed calls between convergence checks, at least
MAX_BATCH = 100               # ... and at most
QUEUE_SECONDS = 1e-3          # kernel time queued per batch: short kernels get deep queues (see batch_size)
GRAPH_CALLS = 10              # calls captured per graph replay
MIN_FLUSH_BYTES = 256 * 2**20
FLUSH_L2_MULTIPLE = 4
HOLD_CYCLES_PER_CALL = 100_000   # ~50 us at 2 GHz: longer than a launch takes on the host
HOLD_MICROSECONDS_PER_CALL = 50
MAX_HOLD_CYCLES_PER_CALL = 32 * HOLD_CYCLES_PER_CALL   # ~1.6 ms a call; 100 calls a batch: 160 ms of spin


@dataclass
class Measurement:
    """The result of :func:`measure`: raw samples, their summary, and rates under a work model."""

    samples: list[float]              # seconds per call, every timed call
    summary: Summary
    cache: str                        # "cold", "cold-clean" or "warm"
    graph: bool
    clock: str                        # "device-events" or "wall"
    stopped_by: str                   # "relative standard error", "time cap" or "max repeats"
    warmup_calls: int
    flush_bytes: int
    device: str
    work: Work | None = None
    rates: Rates | None = None
    notes: list[str] = field(default_factory=list)
    mode: str = "device"              # "device": GPU time, host hidden; "call": host launch path included

    @property
    def median(self) -> float:
        return self.summary.median

    @property
    def suspect(self) -> str | None:
        return self.rates.suspect if self.rates else None

    def timing_dict(self) -> dict:
        """The timing part of a record entry (no raw samples: records stay small)."""
        from .records import timing_from_summary
        return timing_from_summary(self.summary, cache=self.cache, graph=self.graph, clock=self.clock)

    def __str__(self) -> str:
        low, high = self.summary.ci95
        text = (f"median {self.median * 1e6:.2f} us [{low * 1e6:.2f}, {high * 1e6:.2f}] "
                f"(n={self.summary.count}, {self.cache}{', graph' if self.graph else ''}, {self.clock}"
                f"{', call time' if self.mode == 'call' else ''})")
        if self.rates:
            if self.rates.gb_per_s:
                text += f", {self.rates.gb_per_s:.0f} GB/s"
                if self.rates.bandwidth_fraction:
                    text += f" ({self.rates.bandwidth_fraction:.0%} of copy)"
            if self.rates.tflop_per_s:
                text += f", {self.rates.tflop_per_s:.1f} TFLOP/s"
                if self.rates.compute_fraction:
                    text += f" ({self.rates.compute_fraction:.0%} of peak)"
            if self.rates.suspect:
                text += f"  SUSPECT: {self.rates.suspect}"
        return text

    _repr_pretty_ = lambda self, printer, cycle: printer.text(str(self))  # noqa: E731 - notebook display


def uses_gpu(device: str | None) -> bool:
    if device == "cpu":
        return False
    try:
        torch = torch_module()
    except ImportError:
        return False
    return torch.cuda.is_available()


class _Flusher:
    """Overwrites a buffer of four times the L2 before each cold call, evicting everything; with
    ``clean`` it then reads the buffer back, so the L2 is left holding clean lines only."""

    def __init__(self, l2_bytes: int, clean: bool = False):
        torch = torch_module()
        self.bytes = max(FLUSH_L2_MULTIPLE * l2_bytes, MIN_FLUSH_BYTES)
        self.buffer = torch.empty(self.bytes // 4, dtype=torch.int32, device="cuda")
        self.clean = clean

    @classmethod
    def for_cache(cls, cache: str, l2_bytes: int) -> "_Flusher | None":
        """The flush a ``cache`` setting asks for: none when warm."""
        if cache not in CACHES:
            raise ValueError(f"cache must be one of {', '.join(CACHES)}; got {cache!r}")
        return None if cache == "warm" else cls(l2_bytes, clean=cache == "cold-clean")

    def __call__(self):
        self.buffer.zero_()
        if self.clean:
            self.buffer.max()       # a read-only pass: the zeroed lines are written back here, untimed


def hold_gpu(calls: int, cycles_per_call: int = HOLD_CYCLES_PER_CALL):
    """Keep the GPU busy while the host queues ``calls`` timed calls, so no event waits on the host.

    Returns an event recorded where the spin ends (None where this torch has no ``_sleep``): if it has
    already completed once the calls are queued, the spin ran out before the host was done (see Hold)."""
    torch = torch_module()
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        return None
    sleep(cycles_per_call * calls)
    spin_end = torch.cuda.Event()
    spin_end.record()
    return spin_end


@dataclass
class Hold:
    """The GPU spin per queued call, doubled whenever the host fell behind it.

    A callable that spends more host time per call than the spin lasts (~50 us: Python launchers,
    torch.compile's guards) lets the GPU drain its queue; from then on each start event runs before
    the host has launched the kernel, and the call is timed with its host time. A softmax sweep pairing
    against torch.compile read 2.19x [1.37, 2.70] for a configuration whose own median was slower
    (records/nvidia-h200/softmax-sweep.json, run of commit db9e96d). So after queuing, the spin's end
    event is asked whether it has passed; if so the batch is timed again with twice the spin, up to
    MAX_HOLD_CYCLES_PER_CALL, and a batch still behind at the cap is kept and counted in the notes."""

    cycles_per_call: int = HOLD_CYCLES_PER_CALL
    doublings: int = 0
    behind: int = 0

    def timed(self, queue: Callable[[], None], calls: int) -> None:
        """Run ``queue()``, which queues ``calls`` timed calls, under the spin, then synchronize."""
        torch = torch_module()
        while True:
            spin_end = hold_gpu(calls, self.cycles_per_call)
            queue()
            fell_behind = spin_end is not None and spin_end.query()
            torch.cuda.synchronize()
            if not fell_behind:
                return
            if self.cycles_per_call * 2 > MAX_HOLD_CYCLES_PER_CALL:
                self.behind += 1
                return
            self.cycles_per_call *= 2
            self.doublings += 1

    def notes(self) -> list[str]:
        notes = []
        microseconds = self.cycles_per_call / HOLD_CYCLES_PER_CALL * HOLD_MICROSECONDS_PER_CALL
        if self.doublings:
            notes.append(f"the host took longer per call than the GPU spin: the spin was doubled {self.doublings} "
                         f"time(s), to ~{microseconds:.0f} us a call, and those batches timed again")
        if self.behind:
            notes.append(f"in {self.behind} batch(es) the host still fell behind a ~{microseconds:.0f} us spin a "
                         f"call: those calls include host time")
        return notes


def batch_size(seconds_per_call: float) -> int:
    """Calls per synchronize: about QUEUE_SECONDS of kernel time, between BATCH and MAX_BATCH."""
    if not seconds_per_call > 0:
        return BATCH
    return max(BATCH, min(MAX_BATCH, round(QUEUE_SECONDS / seconds_per_call)))


def _call(fn: Callable, inputs: Sequence[tuple] | None, index: int):
    return fn(*inputs[index % len(inputs)]) if inputs else fn()


MODES = ("device", "call")


def check_mode(mode: str, graph: bool = False) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if mode == "call" and graph:
        raise ValueError("mode='call' times what a Python caller pays; a CUDA graph replay has no Python "
                         "calls in it: use graph=True with mode='device'")


def measure(fn: Callable, *, work: Work | None = None, cache: str = "cold", graph: bool = False,
            inputs: Sequence[tuple] | None = None, target_rse: float = 0.01, max_seconds: float = 2.0,
            min_repeats: int = 10, max_repeats: int = 10_000, ceilings: Any = None,
            device: str | None = None, mode: str = "device",
            max_warmup_seconds: float = MAX_WARMUP_SECONDS) -> Measurement:
    """Time ``fn`` (no arguments, or one of ``inputs`` per call, rotated) and summarise.

    ``mode="device"`` (default) times the GPU's work with the host hidden; ``mode="call"`` times each
    call from an idle GPU, the host's launch path included (see the module's notes).

    ``max_warmup_seconds``: how long the settling windows may go on (0: the first, untimed call is the whole
    warm-up, for calls of tens of ms that a caller has already run: see hello_gpu.ops.ladder's time budget).

    ``work`` turns the time into GB/s and TFLOP/s; ``ceilings`` (a :class:`Ceilings`, default: the
    cached measured ceilings of this device, else the datasheet's peaks; ``False``: none) adds % of
    ceiling and the ``suspect`` flag (:mod:`hello_gpu.bench.roof`).
    If ``fn`` raises, the error propagates with its traceback and nothing is measured.
    """
    if not callable(fn):
        raise TypeError(f"measure() needs a callable, got {type(fn).__name__}")
    if cache not in CACHES:
        raise ValueError(f"cache must be one of {', '.join(CACHES)}; got {cache!r}")
    check_mode(mode, graph)
    if work is not None and not isinstance(work, Work):
        raise TypeError(f"work must be a hello_gpu.bench.Work, got {type(work).__name__}")
    if inputs is not None and (len(inputs) == 0 or not all(isinstance(i, tuple) for i in inputs)):
        raise ValueError("inputs must be a non-empty list of argument tuples")
    if uses_gpu(device):
        measurement = _measure_gpu(fn, inputs, cache, graph, target_rse, max_seconds, min_repeats, max_repeats,
                                   mode, max_warmup_seconds)
    else:
        measurement = _measure_wall(fn, inputs, target_rse, max_seconds, min_repeats, max_repeats)
    if work is not None:
        measurement.work = work
        # ceilings=False: no roof at all (the ceilings' own measurement). On the GPU the roof is always
        # armed: the measured ceilings when cached, the datasheet peaks otherwise (bench.roof).
        roof = Roof() if ceilings is False or measurement.clock != "device-events" else current_roof(work, ceilings)
        measurement.rates = rates(work, measurement.median, roof=roof, cold=measurement.cache == "cold")
        if ceilings is not False and measurement.clock == "device-events" and roof.copy_bandwidth is None:
            measurement.notes.append("no measured ceilings cached for this device (`hello-gpu ceilings` measures "
                                     "them): held against the datasheet peaks meanwhile"
                                     if roof.bandwidth else "no measured ceilings cached and the device is not in "
                                     "the datasheet table: nothing to hold the rates against; run `hello-gpu ceilings`")
    return measurement


def _measure_wall(fn, inputs, target_rse, max_seconds, min_repeats, max_repeats) -> Measurement:
    _call(fn, inputs, 0)            # first call: imports, allocations
    samples: list[float] = []
    started = time.perf_counter()
    stopped_by = "max repeats"
    while len(samples) < max_repeats:
        begin = time.perf_counter()
        _call(fn, inputs, len(samples))
        samples.append(time.perf_counter() - begin)
        if len(samples) >= min_repeats and len(samples) % BATCH == 0:
            if relative_standard_error(samples) < target_rse:
                stopped_by = "relative standard error"
                break
            if time.perf_counter() - started > max_seconds:
                stopped_by = "time cap"
                break
    return Measurement(samples, summarize(samples), "warm", False, "wall", stopped_by, 1, 0, "cpu",
                       notes=["no GPU: timed with the host wall clock, cache state not controlled"])


class _GraphReplay:
    """GRAPH_CALLS calls of ``fn`` captured in one CUDA graph, each on the next input set."""

    def __init__(self, fn, inputs):
        torch = torch_module()
        self.calls = GRAPH_CALLS
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):          # warm up on a side stream, as capture requires
            for index in range(3):
                _call(fn, inputs, index)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            for index in range(self.calls):
                _call(fn, inputs, index)

    def __call__(self):
        self.graph.replay()


def call_time_batch(steps: Sequence[Callable[[], Any]], flush) -> list[float]:
    """Seconds of each step as a caller pays it: the GPU idle (and flushed, when ``flush``) before each,
    so its start event runs at once and the step's host launch path lands inside the interval."""
    torch = torch_module()
    times = []
    for step in steps:
        if flush is not None:
            flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


# Launches the driver queues before a launch call blocks (CUDA's default queue is 1024 entries): an
# enqueue-only batch must stay below it, or it times the GPU again.
ENQUEUE_MAX_CALLS = 512


def host_times(functions: dict[str, Callable[[], Any]], rounds: int, calls: int,
               warmup_calls: int = 50, drain: bool = True) -> dict[str, list[float]]:
    """Host seconds per call of each function, one sample per round: ``calls`` back-to-back calls timed
    by the wall clock between two synchronizes, so a function slower on the host than on the GPU is
    timed by its host path. Rounds alternate the order (A B, then B A) so drift hits every function.

    ``drain=False`` stops the clock when the last call returns, before waiting for the GPU: the host's
    own time per call (its enqueue time), whatever the kernels take, as long as the launches fit the
    driver's queue (``calls`` <= ENQUEUE_MAX_CALLS). With ``drain`` a function the GPU cannot keep up
    with is timed by the GPU instead, which is what back-to-back calls cost but not where it goes."""
    if not drain and calls > ENQUEUE_MAX_CALLS:
        raise ValueError(f"an enqueue-only batch of {calls} calls could fill the launch queue and block on the "
                         f"GPU; use at most {ENQUEUE_MAX_CALLS}")
    torch = torch_module()
    for function in functions.values():              # warm-up: compiles, allocator, first calls
        for _ in range(warmup_calls):
            function()
    torch.cuda.synchronize()
    names = list(functions)
    times: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            function = functions[name]
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(calls):
                function()
            if drain:
                torch.cuda.synchronize()
            times[name].append((time.perf_counter() - started) / calls)
            if not drain:
                torch.cuda.synchronize()
    return times


def _measure_gpu(fn, inputs, cache, graph, target_rse, max_seconds, min_repeats, max_repeats,
                 mode="device", max_warmup_seconds=MAX_WARMUP_SECONDS) -> Measurement:
    torch = torch_module()
    info = device_info()
    flush = _Flusher.for_cache(cache, info.l2_bytes)
    calls_per_sample = 1
    if graph:
        replay = _GraphReplay(fn, inputs)
        step, calls_per_sample = replay, replay.calls
    else:
        counter = iter(range(2**62))
        step = lambda: _call(fn, inputs, next(counter))  # noqa: E731

    hold = Hold()

    def timed_batch(count: int) -> list[float]:
        if mode == "call":
            return call_time_batch([step] * count, flush)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]

        def queue():
            for start, end in zip(starts, ends):
                if flush is not None:
                    flush()
                start.record()
                step()
                end.record()
        hold.timed(queue, count)
        return [start.elapsed_time(end) / 1e3 / calls_per_sample for start, end in zip(starts, ends)]

    # Warm-up: the first call is never timed; then windows until three medians agree.
    step()
    torch.cuda.synchronize()
    warmup, window_medians, started = 1, [], time.perf_counter()
    while time.perf_counter() - started < max_warmup_seconds:
        window = timed_batch(WARMUP_WINDOW)
        warmup += WARMUP_WINDOW
        window_medians.append(sorted(window)[len(window) // 2])
        last = window_medians[-3:]
        if len(last) == 3 and max(last) <= min(last) * (1 + SETTLE_TOLERANCE):
            break
    samples: list[float] = []
    batch = batch_size(window_medians[-1] if window_medians else 0.0)
    started = time.perf_counter()
    stopped_by = "max repeats"
    while len(samples) < max_repeats:
        samples += timed_batch(min(batch, max_repeats - len(samples)))
        if len(samples) >= min_repeats and relative_standard_error(samples) < target_rse:
            stopped_by = "relative standard error"
            break
        if time.perf_counter() - started > max_seconds:
            stopped_by = "time cap"
            break
    notes = []
    if graph:
        notes.append(f"CUDA graph of {calls_per_sample} calls per replay; time per call = replay / {calls_per_sample}"
                     + ("; rotating over %d input sets" % len(inputs) if inputs else "; the same inputs each call"))
    if not math.isfinite(relative_standard_error(samples)) or relative_standard_error(samples) >= target_rse:
        notes.append(f"relative standard error {relative_standard_error(samples):.2%} is above the "
                     f"{target_rse:.0%} target ({stopped_by})")
    notes += hold.notes()
    if mode == "call":
        notes.append("call time: each call from an idle GPU, its host launch path included")
    return Measurement(samples, summarize(samples), cache, graph, "device-events", stopped_by, warmup,
                       flush.bytes if flush else 0, info.name, notes=notes, mode=mode)
