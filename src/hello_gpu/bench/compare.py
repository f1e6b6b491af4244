"""``compare(baseline, candidate)``: is the candidate really faster?

Two separate measurements taken a minute apart can differ by several percent from clocks and
temperature alone. So the two are timed **paired and interleaved** in one process: each round runs
A B B A (the order flips so neither side always goes first), each call with the same cache treatment,
and the speedup is the median of the per-round ratios with a bootstrap 95% interval. The verdict is
"faster" only when the whole interval clears ``1 + margin``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from ..runtime.device import device_info, torch_module
from .stats import Ratio, Summary, paired_ratio, summarize, verdict
from .timing import Hold, _Flusher, batch_size, call_time_batch, check_mode, uses_gpu

DEFAULT_MARGIN = 0.02


@dataclass
class Comparison:
    speedup: Ratio                  # baseline time / candidate time: > 1 means the candidate is faster
    verdict: str                    # "faster", "slower" or "within noise"
    margin: float
    baseline: Summary
    candidate: Summary
    rounds: int
    order: str = "ABBA"
    notes: tuple[str, ...] = ()     # e.g. the GPU spin lengthened for a callable slow on the host (timing.Hold)

    def to_dict(self) -> dict:
        data = self.speedup.to_dict()
        data.update(verdict=self.verdict, margin=self.margin)
        return data

    def __str__(self) -> str:
        low, high = self.speedup.ci95
        return (f"speedup {self.speedup.value:.3f}x [{low:.3f}, {high:.3f}] over {self.rounds} ABBA rounds: "
                f"{self.verdict} (margin {self.margin:.0%})" + "".join(f"; {note}" for note in self.notes))

    _repr_pretty_ = lambda self, printer, cycle: printer.text(str(self))  # noqa: E731


def round_order(index: int) -> str:
    """Round 0 runs A B B A, round 1 B A A B, ...: drift and going-first effects cancel."""
    return "ABBA" if index % 2 == 0 else "BAAB"


def compare(baseline: Callable, candidate: Callable, *, margin: float = DEFAULT_MARGIN, cache: str = "cold",
            min_rounds: int = 10, max_rounds: int = 400, max_seconds: float = 4.0,
            target_ci_width: float = 0.02, mode: str = "device") -> Comparison:
    """Paired, interleaved timing of two callables; speedup = baseline time / candidate time.

    ``mode="call"`` pairs call times (each call from an idle GPU, host launch path included; see
    :func:`hello_gpu.bench.measure`) instead of device times."""
    for name, function in (("baseline", baseline), ("candidate", candidate)):
        if not callable(function):
            raise TypeError(f"compare(): {name} must be callable, got {type(function).__name__}")
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    check_mode(mode)
    timer = DeviceTimer(cache, mode) if uses_gpu(None) else WallTimer()
    functions = {"A": baseline, "B": candidate}
    timer.time_rounds(functions, ["ABAB"])           # warm-up, not counted: compiles, allocations, first touch
    probe = timer.time_rounds(functions, ["AB"])
    # Rounds queued per synchronize, as measure() batches its calls: ~1 ms of kernel time in flight,
    # so a short kernel is timed in a steady stream rather than right after an idle GPU.
    group = max(1, batch_size((probe["A"][0] + probe["B"][0]) / 2) // 4)
    times = {"A": [], "B": []}
    started = time.perf_counter()
    rounds = 0
    while rounds < max_rounds:
        count = min(group, max_rounds - rounds)
        measured = timer.time_rounds(functions, [round_order(rounds + index) for index in range(count)])
        times["A"] += measured["A"]
        times["B"] += measured["B"]
        before, rounds = rounds, rounds + count
        if rounds >= min_rounds and (rounds // 5 > before // 5 or count >= 5):
            ratio = _round_ratio(times)
            low, high = ratio.ci95
            if (high - low) / ratio.value < target_ci_width or time.perf_counter() - started > max_seconds:
                break
    ratio = _round_ratio(times)
    notes = tuple(timer.hold.notes()) if isinstance(timer, DeviceTimer) else ()
    if mode == "call" and isinstance(timer, DeviceTimer):
        notes += ("call time: each call from an idle GPU, its host launch path included",)
    return Comparison(ratio, verdict(ratio, margin), margin, summarize(times["A"]), summarize(times["B"]), rounds,
                      notes=notes)


def _round_ratio(times: dict[str, list[float]]) -> Ratio:
    """Each round holds two calls of each side: pair their sums."""
    a, b = times["A"], times["B"]
    baseline = [a[i] + a[i + 1] for i in range(0, len(a) - 1, 2)]
    candidate = [b[i] + b[i + 1] for i in range(0, len(b) - 1, 2)]
    return paired_ratio(baseline, candidate)


class DeviceTimer:
    def __init__(self, cache: str, mode: str = "device"):
        self.torch = torch_module()
        self.flush = _Flusher.for_cache(cache, device_info().l2_bytes)
        self.hold = Hold()              # one per comparison: a spin once lengthened stays so for both sides
        self.mode = mode

    def time_rounds(self, functions: dict, orders: list[str]) -> dict[str, list[float]]:
        """Queue every call of ``orders`` (e.g. ["ABBA", "BAAB"]), each between two events (after a
        flush when cold), synchronize once, and return the seconds of each call by label, in order.
        In call mode each call is timed from an idle GPU instead (timing.call_time_batch)."""
        torch = self.torch
        labels = [label for order in orders for label in order]
        if self.mode == "call":
            times: dict[str, list[float]] = {"A": [], "B": []}
            for label, seconds in zip(labels, call_time_batch([functions[label] for label in labels], self.flush)):
                times[label].append(seconds)
            return times
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in labels]

        def queue():                    # the host queues the whole group while the GPU spins: no host gaps
            for label, (start, end) in zip(labels, events):
                if self.flush is not None:
                    self.flush()
                start.record()
                functions[label]()
                end.record()
        self.hold.timed(queue, len(labels))
        times: dict[str, list[float]] = {"A": [], "B": []}
        for label, (start, end) in zip(labels, events):
            times[label].append(start.elapsed_time(end) / 1e3)
        return times


class WallTimer:
    def time_rounds(self, functions: dict, orders: list[str]) -> dict[str, list[float]]:
        times: dict[str, list[float]] = {"A": [], "B": []}
        for label in "".join(orders):
            begin = time.perf_counter()
            functions[label]()
            times[label].append(time.perf_counter() - begin)
        return times
