"""Why does our cold median of a 7.7 us torch.add (2^20 fp32) read 12% below do_bench's?

On the H200 (records/nvidia-h200/reference-check.json, commit 07370d1) ours was 7.66-7.70 us and
``triton.testing.do_bench(return_mode="median")`` 8.74-8.77 us, in three alternating rounds, while the
large cases agreed within 0.3%. Both zero a ~240 MiB buffer before each call and time with events.
What still differs, each isolated by one variant below:
  A. ours: measure(), batches of 10 then a synchronize and the stopping rule (the GPU idles between);
  B. do_bench itself;
  C. do_bench's loop written out here: every repetition queued, one synchronize at the end;
  D. as C, but flushing with our buffer instead of Triton's cache object;
  E. as A, flushing with Triton's cache object.
  F. as C, but the GPU spins ~20 us between the flush and the timed call: the L2 has time to write
     back the dirty lines the zeroing left, so the call starts with a clean L2;
  G. as C, flushing by reading the buffer (a sum): the L2 is left full of clean lines, nothing to
     write back when the timed call evicts them;
  H. as A, with batches of 100 calls between synchronizes instead of 10.
Prediction: if the idle gaps between our batches matter (clock or power state), C and D read like B
and E like A; if the buffer matters, D reads like A and E like B. If dirty lines left by the zeroing
are what the timed call pays for, F and G read faster than C.

    python benchmarks/flush_experiment.py        # prints one JSON object
"""

from __future__ import annotations

import json
import statistics

import torch
import triton
from triton.testing import do_bench

from hello_gpu.bench import measure
from hello_gpu.bench import timing


def queued_loop(fn, clear, repetitions: int = 1000) -> float:
    """do_bench's timed loop: clear, start, fn, end for every repetition, then one synchronize."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    for _ in range(20):
        fn()
    for start, end in zip(starts, ends):
        clear()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends))


def spin_after(clear):
    """Clear, then keep the GPU busy for ~20 us (40k cycles at ~1.98 GHz) before the timed call."""
    def clear_then_wait():
        clear()
        torch.cuda._sleep(40_000)
    return clear_then_wait


def main() -> None:
    a, b = torch.randn(2**20, device="cuda"), torch.randn(2**20, device="cuda")
    c = torch.empty_like(a)
    fn = lambda: torch.add(a, b, out=c)  # noqa: E731
    triton_cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    ours_buffer = timing._Flusher(torch.cuda.get_device_properties(0).L2_cache_size)
    results: dict[str, list[float]] = {k: [] for k in "ABCDEFGH"}
    read_buffer = torch.ones(ours_buffer.bytes // 4, dtype=torch.float32, device="cuda")
    for _ in range(3):
        results["A"].append(measure(fn, cache="cold", ceilings=False).median)
        results["B"].append(do_bench(fn, return_mode="median") / 1e3)
        results["C"].append(queued_loop(fn, triton_cache.zero_))
        results["D"].append(queued_loop(fn, ours_buffer))
        original = timing._Flusher.__call__
        timing._Flusher.__call__ = lambda self: triton_cache.zero_()
        try:
            results["E"].append(measure(fn, cache="cold", ceilings=False).median)
        finally:
            timing._Flusher.__call__ = original
        results["F"].append(queued_loop(fn, spin_after(triton_cache.zero_)))
        results["G"].append(queued_loop(fn, read_buffer.sum))
        batch = timing.BATCH
        timing.BATCH = 100
        try:
            results["H"].append(measure(fn, cache="cold", ceilings=False).median)
        finally:
            timing.BATCH = batch
    print(json.dumps({key: [round(v * 1e6, 3) for v in values] for key, values in results.items()}, indent=1))


if __name__ == "__main__":
    main()
