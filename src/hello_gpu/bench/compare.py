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

from ..runtime.device import torch_module
from .stats import Ratio, Summary, paired_ratio, summarize, verdict
from .timing import _Flusher, _uses_gpu, hold_gpu

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

    def to_dict(self) -> dict:
        data = self.speedup.to_dict()
        data.update(verdict=self.verdict, margin=self.margin)
        return data

    def __str__(self) -> str:
        low, high = self.speedup.ci95
        return (f"speedup {self.speedup.value:.3f}x [{low:.3f}, {high:.3f}] over {self.rounds} ABBA rounds: "
                f"{self.verdict} (margin {self.margin:.0%})")

    _repr_pretty_ = lambda self, printer, cycle: printer.text(str(self))  # noqa: E731


def round_order(index: int) -> str:
    """Round 0 runs A B B A, round 1 B A A B, ...: drift and going-first effects cancel."""
    return "ABBA" if index % 2 == 0 else "BAAB"


def compare(baseline: Callable, candidate: Callable, *, margin: float = DEFAULT_MARGIN, cache: str = "cold",
            min_rounds: int = 10, max_rounds: int = 400, max_seconds: float = 4.0,
            target_ci_width: float = 0.02) -> Comparison:
    """Paired, interleaved timing of two callables; speedup = baseline time / candidate time."""
    for name, function in (("baseline", baseline), ("candidate", candidate)):
        if not callable(function):
            raise TypeError(f"compare(): {name} must be callable, got {type(function).__name__}")
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    timer = _DeviceTimer(cache) if _uses_gpu(None) else _WallTimer()
    for function in (baseline, candidate, baseline, candidate):     # warm-up, not counted
        timer.time(function)
    times = {"A": [], "B": []}
    functions = {"A": baseline, "B": candidate}
    started = time.perf_counter()
    rounds = 0
    while rounds < max_rounds:
        for label in round_order(rounds):
            times[label].append(timer.time(functions[label]))
        rounds += 1
        if rounds >= min_rounds and rounds % 5 == 0:
            ratio = _round_ratio(times)
            low, high = ratio.ci95
            if (high - low) / ratio.value < target_ci_width or time.perf_counter() - started > max_seconds:
                break
    ratio = _round_ratio(times)
    return Comparison(ratio, verdict(ratio, margin), margin, summarize(times["A"]), summarize(times["B"]), rounds)


def _round_ratio(times: dict[str, list[float]]) -> Ratio:
    """Each round holds two calls of each side: pair their sums."""
    a, b = times["A"], times["B"]
    baseline = [a[i] + a[i + 1] for i in range(0, len(a) - 1, 2)]
    candidate = [b[i] + b[i + 1] for i in range(0, len(b) - 1, 2)]
    return paired_ratio(baseline, candidate)


class _DeviceTimer:
    def __init__(self, cache: str):
        from ..runtime.device import device_info
        self.torch = torch_module()
        self.flush = _Flusher(device_info().l2_bytes) if cache == "cold" else None

    def time(self, function: Callable) -> float:
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if self.flush is not None:
            self.flush()
        else:
            hold_gpu(1)
        start.record()
        function()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


class _WallTimer:
    def time(self, function: Callable) -> float:
        begin = time.perf_counter()
        function()
        return time.perf_counter() - begin
