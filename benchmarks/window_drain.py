"""Why do honest calls read ~3 us of work left running once the call window is held?

The agent's worker opens a window before every call (worker.CallWindow: an event on the caller's stream, then
``cuCtxWaitEvent`` of the primary context on it) and measures after every counted call how long the context's work
ran past the call's end event (worker.ContextDrain: a context event, waited for on a stream of its own and compared
with a plain wait for the end event on another). Without the window an honest call read ~0 (the H100, session 14).
With it (session 16), honest calls read ~3 us in 27-47% of them, on the H200 (2.85 us, 40 of 128 calls) and the
H100 (2.66-3.17 us in six benches), and the probes' marks, which have no kernel between their events, did not.

Each variant below changes one thing of the worker's timed loop (flush, a spin where the stream is idle, the
window, start event, an honest 2^24 float32 add, end event, the drain), on 4 batches of 64 calls:

  A. no window (the loop before session 15): expected ~0;
  B. the window, as the worker holds it: expected to read ~3 us in about a third of the calls;
  C. the window, but the drain's ``captured`` is a plain event on the timed stream instead of a context event:
     reads ~0 if what is slow is a context event recorded after a context wait;
  D. the window, and a 20 us spin on the timed stream after the end event, before the drain: reads ~0 if the
     reading is host time between the drain's records on an idle device (the records fire as they are queued);
  E. the window held on a stream of the harness's own (made to wait for the caller's) instead of the caller's:
     reads ~0 if the context wait costs the first work queued on the stream it was recorded on;
  F. the window, then each of the drain's two streams made to wait for ``opened`` before the call: reads ~0 if
     the context wait is a dependency each stream takes on with its next work (the drain's ``stream`` would then
     carry it beside the context event, ``ends`` merged with the end event of the same stream), and is the fix.
  G. no window, and the drain's streams made to wait for an event of their own on the timed stream before the
     call (what would hold where no window can be, a driver without cuCtxWaitEvent): reads like F if the wait
     itself, not the window's event, is what removes the ~3 us.

Prediction: B reads as the GPU tier did; one of C to F reads like A, and that one names the cause.

Outcome (the H100, session 17, records/nvidia-h100-80gb-hbm3/window-drain.session17.call2.json): A read 2.8-2.9 us in the median
call, 70-73% of calls over 2 us, so the ~3 us is not the window's; B 0 in the median, 30-34% over 2 us; C 1-9%;
D 21.6 us (the measurement still sees real work); E 55%; F none over 2 us, the largest 1.3 us. F is now the worker's
(ContextDrain.begin).
A second run (the H100, session 17, call 4, with G): A 3.1 us median, 73% over 2 us; B 34%; F 1 call in 256 over
2 us, the largest 3.2 us; G 43% and 69%: a wait of the drain's own does not do what the window's event does.

    python benchmarks/window_drain.py        # prints one JSON object
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import torch

from hello_gpu.agent.worker import CALL_HOLD_CYCLES, CallWindow, ContextDrain
from hello_gpu.bench.compare import DeviceTimer

BATCHES, CALLS = 4, 64
ELEMENTS = 2**24
AFTER_SPIN_CYCLES = 40_000            # ~20 us at 2 GHz: longer than the host's way through the drain's records


class StreamDrain(ContextDrain):
    """The drain with ``captured`` recorded on the timed stream: what a plain event reads in its place (variant C)."""

    def after(self, index: int, end) -> None:
        captured, reference, drained = self._slot(index)
        captured.record(torch.cuda.current_stream())
        self.stream.wait_event(captured)
        drained.record(self.stream)
        self.ends.wait_event(end)
        reference.record(self.ends)


def run(variant: str) -> dict:
    a, b = (torch.rand(ELEMENTS, device="cuda") + 0.5 for _ in range(2))
    out = torch.empty_like(a)
    flush = DeviceTimer("cold").flush
    timed = torch.cuda.default_stream()
    drain = StreamDrain() if variant == "C" else ContextDrain()
    window = None if variant in "AG" else CallWindow()
    own = torch.cuda.Stream()
    own_event = torch.cuda.Event()
    readings, times = [], []
    for _ in range(BATCHES):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(CALLS)]
        for index, (start, end) in enumerate(events):
            if timed.query():
                torch.cuda._sleep(CALL_HOLD_CYCLES)   # noqa: SLF001 - as the worker: the stream busy as a call begins
            flush()
            if variant == "E":
                own.wait_stream(timed)
                window.hold(own)
            elif window is not None:
                window.hold(timed)
            if variant == "F":
                drain.stream.wait_event(window.opened)
                drain.ends.wait_event(window.opened)
            elif variant == "G":
                own_event.record(timed)
                drain.stream.wait_event(own_event)
                drain.ends.wait_event(own_event)
            start.record(timed)
            torch.add(a, b, out=out)
            end.record(timed)
            if variant == "D":
                torch.cuda._sleep(AFTER_SPIN_CYCLES)  # noqa: SLF001
            drain.after(index, end)
        torch.cuda.synchronize()
        readings += [drain.left_running_s(index) for index in range(CALLS)]
        times += [start.elapsed_time(end) / 1e3 for start, end in events]
    readings.sort()

    def share_over(seconds: float) -> float:
        return sum(reading > seconds for reading in readings) / len(readings)

    return {"variant": variant, "calls": len(readings), "call_median_us": statistics.median(times) * 1e6,
            "left_running_us": {"median": readings[len(readings) // 2] * 1e6,
                                "p75": readings[3 * len(readings) // 4] * 1e6,
                                "p90": readings[9 * len(readings) // 10] * 1e6, "max": readings[-1] * 1e6},
            "share_over_2us": share_over(2e-6), "share_over_5us": share_over(5e-6)}


def main() -> None:
    # Each variant in a process of its own, twice (run-to-run spread): a context wait, once made, is the context's
    # for its life, and must not reach the variants after it.
    if len(sys.argv) == 3 and sys.argv[1] == "--variant":
        print(json.dumps(run(sys.argv[2])))
        return
    results = []
    for variant in "ABCDEFG" * 2:
        done = subprocess.run([sys.executable, __file__, "--variant", variant], capture_output=True, text=True)
        results.append(json.loads(done.stdout) if done.returncode == 0
                       else {"variant": variant, "error": done.stderr.strip().splitlines()[-1:]})
    print(json.dumps({"device": torch.cuda.get_device_name(), "elements": ELEMENTS, "results": results}, indent=1))


if __name__ == "__main__":
    main()
