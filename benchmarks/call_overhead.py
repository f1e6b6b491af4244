"""What a user pays per call: host time of every public entry point against its torch counterpart.

The ladders' records time GPU work with the host hidden (a spin keeps the GPU busy while the host
queues). A user calling ``hello_gpu.ops.softmax(x)`` from Python pays the host's launch path too, and
at decode sizes (16 x 4096) that path, not the kernel, is the time. Three questions, one run:

1. **Host time per call** at 16x4096 (and a 1-element add; the public functions on a 3-D input
   too): N back-to-back calls, wall clock over the batch after a synchronize, divided by N; paired
   with the counterpart in interleaved ABBA rounds; the ratio is the median of the per-round ratios
   with a bootstrap 95% interval. Counterparts: ``torch.add(a, b, out=c)`` for a checked kernel call
   and a HIP rung's ``prepare()``d launcher, torch eager and Liger-Kernel for the operators, a bare
   ``kernel[grid](...)`` of the very launch a Triton rung makes (captured from the rung's own call)
   for our Triton launch path.
2. **Call time** at the ladder's target shapes against torch eager, torch.compile and Liger, two
   ways: from an idle GPU (``compare(mode="call")``: each call after the L2 flush and an idle wait,
   host launch path included), and do_bench-style as the issue words its target
   (``triton.testing.do_bench``, its own L2 flush, calls back to back: the host path is hidden
   wherever it is shorter than the flush), interleaved rounds, paired ratio of per-round medians.
3. **CUDA graphs**: 64 ``rms_norm`` calls at 16x4096 captured once and replayed, paired with the same
   64 calls timed on the device (host hidden), i.e. the sum of their device times.

    python benchmarks/call_overhead.py --out records/nvidia-h200/call-overhead.json
"""

# hello-gpu: record call-overhead

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

import hello_gpu as hg
from hello_gpu.bench import compare
from hello_gpu.bench.records import device_from_manifest, new_record, source_entries, timing_from_summary, write_record
from hello_gpu.bench.stats import paired_ratio, summarize, verdict
from hello_gpu.bench.timing import host_times
from hello_gpu.ops import rms_norm, softmax
from hello_gpu.ops import functions
from hello_gpu.ops.functions import BEST, best_launcher
from hello_gpu.ops.registry import load_op
from hello_gpu.ops.sources import repository_rules
from hello_gpu.runtime import compiled_replay
from hello_gpu.runtime import kernel as kernel_runtime
from hello_gpu.runtime.manifest import environment_manifest
from hello_gpu.runtime.triton_replay import plan_of

ROOT = Path(__file__).resolve().parents[1]
MARGIN = 0.02
ENQUEUE_CALLS = 200           # an enqueue-only batch stays well under the driver's launch queue
README_KERNEL = r"""
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}"""


def captured_triton_launch(call):
    """Run ``call()`` once and return a zero-argument bare ``kernel[grid](*args, **kwargs)`` of the
    last Triton launch it made: the same kernel, arguments and launch options, without our Python."""
    seen = []
    original = triton.runtime.jit.JITFunction.run

    def recording(self, *args, grid, warmup, **kwargs):
        seen.append((self, grid, args, kwargs))
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    triton.runtime.jit.JITFunction.run = recording
    try:
        call()
    finally:
        triton.runtime.jit.JITFunction.run = original
    if not seen:
        raise RuntimeError("the call launched no Triton kernel")
    kernel, grid, args, kwargs = seen[-1]
    return lambda: kernel[grid](*args, **kwargs), kernel.fn.__name__


def replayed_launch(launcher, *args):
    """The floor of our Triton route: the plan ``launcher(*args)`` replays (its result allocated, its
    recorded launches called with these pointers), with none of the public function's own checks."""
    launcher(*args)
    plan = plan_of(launcher, *args)
    if plan is None:
        raise RuntimeError(f"the best rung's launch {launcher} has no replay plan for these arguments")
    return lambda: plan(args)


def replay_parts(launcher, *args) -> dict:
    """Where a replayed call's host time goes, part by part: the fast path's signature key, the result's
    allocation, and the recorded launches into a result allocated once (issue 18: the public softmax at
    16x4096 stayed 1.39x torch's host time while its replay alone was 1.11x; these rows split that)."""
    x = args[0]
    plan = plan_of(launcher, *args)
    result = plan.allocate(args)
    return {"softmax part: the signature key": lambda: (x.dtype, x.shape, x.stride(), x.get_device(),
                                                        x.data_ptr() % 16 == 0),
            "softmax part: the result's allocation": lambda: plan.allocate(args),
            "softmax part: the recorded launches alone": lambda: plan.launch_into(args, result)}


def captured_hip_launch(call):
    """Run ``call()`` once and return the ``Kernel.prepare``d launcher of the last HIP kernel call it
    made: checked and packed once, so calling it only launches (a HIP rung's floor)."""
    seen = []
    original = hg.Kernel.__call__

    def recording(kernel, *args, **kwargs):
        seen.append((kernel, args, kwargs))
        return original(kernel, *args, **kwargs)

    hg.Kernel.__call__ = recording
    try:
        call()
    finally:
        hg.Kernel.__call__ = original
    if not seen:
        raise RuntimeError("the call launched no HIP kernel")
    kernel, args, kwargs = seen[-1]
    return kernel.prepare(*args, **kwargs)


class Entries:
    """Record entries: one per (variant, shape, dtype), baselines first where they are measured."""

    def __init__(self):
        self.items: list[dict] = []
        # Every entry was measured by this file; the framework it calls (runtime, ops.functions) is
        # described by the record's environment (package_source_sha256), as for every record.
        self.sources = source_entries(Path(__file__).resolve().relative_to(ROOT), ROOT, repository_rules(ROOT))

    def add(self, variant: str, role: str, shape: str, dtype: str, timing: dict, extra: dict | None = None,
            reuse: bool = False):
        """A new entry; with ``reuse``, the existing one of that (variant, shape, dtype) when there is one
        (a call-time candidate paired with several baselines). Any other repeat is a naming mistake."""
        same = [e for e in self.items if e["variant"] == variant and e["shape"] == shape and e["dtype"] == dtype]
        if same and reuse:
            return same[0]
        if same:
            raise ValueError(f"two entries for {variant!r} at {shape} {dtype}: give them distinct names")
        entry = {"variant": variant, "role": role, "source": self.sources[0], "sources": self.sources, "shape": shape,
                 "dtype": dtype, "correctness": None, "timing": timing, "work": None, "derived": None}
        if extra:
            entry["extra"] = extra
        self.items.append(entry)
        return entry


def host_comparison(entries: Entries, shape: str, dtype: str, candidates: dict, baselines: dict,
                    rounds: int, calls: int, lines: list[str], drain: bool = True) -> None:
    """Host time per call of each candidate and baseline, interleaved, with paired ratios. ``drain=False``:
    the host's enqueue time alone (the clock stops when the last call returns; names get " [enqueue]")."""
    suffix = "" if drain else " [enqueue]"
    candidates = {name + suffix: function for name, function in candidates.items()}
    baselines = {name + suffix: function for name, function in baselines.items()}
    functions = {**baselines, **candidates}
    times = host_times(functions, rounds, calls, drain=drain)
    extra = {"measure": f"host time per call: {calls} back-to-back calls per sample, wall clock between "
                        f"synchronizes, {rounds} interleaved rounds" if drain else
                        f"host enqueue time per call: {calls} back-to-back calls per sample, the clock stopped when "
                        f"the last call returned (before waiting for the GPU), {rounds} interleaved rounds"}
    for name in baselines:
        entries.add(name, "baseline", shape, dtype,
                    timing_from_summary(summarize(times[name]), cache="warm", graph=False, clock="wall"), extra)
    for name in candidates:
        entry = entries.add(name, "candidate", shape, dtype,
                            timing_from_summary(summarize(times[name]), cache="warm", graph=False, clock="wall"), extra)
        entry["speedups"] = {}
        for baseline in baselines:
            ratio = paired_ratio(times[baseline], times[name])
            entry["speedups"][baseline] = {**ratio.to_dict(), "verdict": verdict(ratio, MARGIN)}
            lines.append(f"{shape} {dtype} host: {name} {summarize(times[name]).median * 1e6:.1f} us, "
                         f"{baseline} {summarize(times[baseline]).median * 1e6:.1f} us: "
                         f"ratio (baseline/ours) {ratio.value:.3f} [{ratio.ci95[0]:.3f}, {ratio.ci95[1]:.3f}]")


def call_time_comparison(entries: Entries, shape: str, dtype: str, name: str, function, baselines: dict,
                         lines: list[str]) -> None:
    """compare(mode='call') of ``function`` against each baseline, cold L2."""
    suffix = " [call time]"
    extra = {"measure": "call time: each call from an idle GPU after the L2 flush, host launch path included "
                        "(hello_gpu.bench.compare(mode='call'))"}
    candidate = None
    for baseline_name, baseline in baselines.items():
        result = compare(baseline, function, cache="cold", mode="call", margin=MARGIN)
        entries.add(baseline_name + suffix, "baseline", shape, dtype,
                    timing_from_summary(result.baseline, cache="cold", graph=False, clock="device-events"), extra)
        candidate = entries.add(name + suffix, "candidate", shape, dtype,
                                timing_from_summary(result.candidate, cache="cold", graph=False,
                                                    clock="device-events"), extra, reuse=True)
        candidate.setdefault("speedups", {})[baseline_name + suffix] = {**result.speedup.to_dict(),
                                                                        "verdict": result.verdict}
        lines.append(f"{shape} {dtype} call: {name} vs {baseline_name}: {result}")


def do_bench_comparison(entries: Entries, shape: str, dtype: str, name: str, function, baselines: dict,
                        rounds: int, lines: list[str]) -> None:
    """``triton.testing.do_bench`` of ``function`` and each baseline in interleaved rounds (ABBA order),
    its median per round; the ratio of each pair of per-round medians, median and bootstrap 95% CI."""
    suffix = " [call time, do_bench]"
    extra = {"measure": f"call time, do_bench-style: triton.testing.do_bench median (its own L2 flush before "
                        f"each call, calls back to back with no idle wait, so the host launch path is hidden "
                        f"wherever it is shorter than the flush), {rounds} interleaved rounds; ratio: median of "
                        f"the per-round ratios with a bootstrap 95% interval"}
    functions = {**baselines, name: function}
    order = list(functions)
    medians: dict[str, list[float]] = {key: [] for key in order}
    for index in range(rounds):
        for key in order if index % 2 == 0 else order[::-1]:
            medians[key].append(triton.testing.do_bench(functions[key], return_mode="median") * 1e-3)  # ms -> s
    for baseline_name in baselines:
        entries.add(baseline_name + suffix, "baseline", shape, dtype,
                    timing_from_summary(summarize(medians[baseline_name]), cache="cold", graph=False,
                                        clock="device-events"), extra)
    candidate = entries.add(name + suffix, "candidate", shape, dtype,
                            timing_from_summary(summarize(medians[name]), cache="cold", graph=False,
                                                clock="device-events"), extra)
    candidate["speedups"] = {}
    for baseline_name in baselines:
        ratio = paired_ratio(medians[baseline_name], medians[name])
        candidate["speedups"][baseline_name + suffix] = {**ratio.to_dict(), "verdict": verdict(ratio, MARGIN)}
        lines.append(f"{shape} {dtype} call (do_bench): {name} {summarize(medians[name]).median * 1e6:.1f} us, "
                     f"{baseline_name} {summarize(medians[baseline_name]).median * 1e6:.1f} us: "
                     f"ratio (baseline/ours) {ratio.value:.3f} [{ratio.ci95[0]:.3f}, {ratio.ci95[1]:.3f}]")


def graph_replay(entries: Entries, lines: list[str]) -> dict:
    """64 rms_norm calls at 16x4096 bfloat16 in one CUDA graph, against the same calls' device times."""
    x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    outputs = []

    def calls():
        outputs.clear()
        for _ in range(64):
            outputs.append(rms_norm(x, weight))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        calls()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        calls()
    captured = list(outputs)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    reference = F.rms_norm(x.float(), (4096,), weight.float(), 1e-6).to(torch.bfloat16)
    wrong = sum(not torch.allclose(out.float(), reference.float(), rtol=2e-2, atol=2e-2) for out in captured)
    # Device time of the 64 eager calls (host hidden by the spin) against the replay: ratio > 1 means the
    # replay is faster than the sum of the device times.
    result = compare(calls, graph.replay, cache="warm", mode="device", margin=MARGIN)
    lines.append(f"graph of 64 rms_norm calls at 16x4096 bfloat16: sum of device times / replay {result} "
                 f"({wrong} of 64 replayed outputs wrong)")
    return {"calls": 64, "shape": "16x4096", "dtype": "bfloat16", "replayed_outputs_wrong": wrong,
            "sum_of_device_times_us": result.baseline.median * 1e6, "replay_us": result.candidate.median * 1e6,
            "replay_over_sum": {"value": 1 / result.speedup.value,
                                "ci95": [1 / result.speedup.ci95[1], 1 / result.speedup.ci95[0]]},
            "target": "replay within 1.2x of the sum of the device times"}


def python_replay(call):
    """``call`` with the compiled replay set aside: the public function's Python fast path, for the
    comparison with the compiled one (swapping it costs two list stores per call, ~0.05 us)."""
    def run():
        saved, functions._COMPILED[0] = functions._COMPILED[0], None
        try:
            return call()
        finally:
            functions._COMPILED[0] = saved
    return run


def compiled_rows(name: str, *args) -> dict:
    """The public function through the Python replay, and the compiled replay's own call, once the
    function has made its plan for ``args`` (a call of it before); empty when it is not built."""
    call = softmax if name == "softmax" else rms_norm
    call(*args)
    replay = compiled_replay.function()
    rows = {f"hello_gpu.ops.{name}, Python replay": python_replay(lambda: call(*args))}
    if replay is not None and replay(compiled_replay.table(name), *args) is not None:
        table = compiled_replay.table(name)
        rows[f"{name}: compiled replay alone"] = lambda: replay(table, *args)
    return rows


def compiled_use(status: str) -> dict:
    """Whether the public functions served their calls from the compiled replay: its build status, whether
    they took it up, the plans each table holds and the extension's last refusal (the run of 8b07192
    built it, and the functions never used it: a record must say so, not leave it to a missing row); and
    whether checked kernel calls keyed their plans by its signature() (else in Python)."""
    replay = compiled_replay.function()
    return {"status": status, "taken_up_by_functions": replay is not None and functions._COMPILED[0] is replay,
            "kernel_calls_keyed_by_it": replay is not None and kernel_runtime._EXTENSION[0] is compiled_replay.extension(),
            "plans": compiled_replay.plans_held(), "last_refusal": compiled_replay.last_refusal()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the record file to write (…/call-overhead.json)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--bench-rounds", type=int, default=15, help="interleaved rounds of do_bench per comparison")
    args = parser.parse_args()
    torch.manual_seed(0)
    entries, lines = Entries(), []
    # The C++ replay is built before anything is timed (~30 s the first time on a machine), so every
    # public call below that has a plan takes it; the record says whether it was built.
    compiled_status = compiled_replay.start(wait=True)
    lines.append(f"compiled replay: {compiled_status}")
    liger = {op: load_op(op).rung("peer_liger") for op in ("softmax", "rms_norm")}
    liger_built = {op: rung.build() for op, rung in liger.items() if rung.skip_reason() is None}

    # 1. A checked kernel call against torch.add, at 1 element and 16x4096.
    kernel = hg.hip(README_KERNEL, entry="vector_add")
    for shape in ((1,), (16, 4096)):
        a, b = torch.randn(*shape, device="cuda"), torch.randn(*shape, device="cuda")
        c = torch.empty_like(a)
        prepared = kernel.prepare(a, b, c)
        host_comparison(entries, "x".join(map(str, shape)), "float32",
                        {"kernel(a, b, c) checked": lambda: kernel(a, b, c),
                         "kernel(a, b) checked, output allocated": lambda: kernel(a, b),
                         "kernel.prepare(a, b, c)()": prepared},
                        {"torch.add(a, b, out=c)": lambda: torch.add(a, b, out=c), "torch.add(a, b)": lambda: torch.add(a, b)},
                        args.rounds, args.calls, lines)
        torch.testing.assert_close(kernel(a, b), a + b)

    # 2. The public operators at a decode size, host time.
    x = torch.randn(16, 4096, device="cuda")
    baselines = {"torch.softmax(x, -1)": lambda: torch.softmax(x, -1)}
    if "softmax" in liger_built:
        baselines["Liger softmax"] = lambda: liger_built["softmax"](x)
    bare, kernel_name = captured_triton_launch(lambda: softmax(x))
    baselines[f"bare {kernel_name}[grid](...)"] = bare
    # A HIP rung too (the last of the softmax ladder): its built call (a checked kernel call) and the
    # prepare()d launch of that same kernel call.
    hip_rung = [rung for rung in load_op("softmax").rungs if rung.route == "hip" and rung.skip_reason() is None][-1]
    hip_built = hip_rung.build()
    hip_prepared = captured_hip_launch(lambda: hip_built(x))
    host_comparison(entries, "16x4096", "float32",
                    {"hello_gpu.ops.softmax": lambda: softmax(x),
                     **compiled_rows("softmax", x),
                     "softmax: replayed launch alone": replayed_launch(best_launcher("softmax"), x),
                     **replay_parts(best_launcher("softmax"), x),
                     f"HIP rung {hip_rung.id}: built rung call": lambda: hip_built(x),
                     f"HIP rung {hip_rung.id}: kernel.prepare(...)()": hip_prepared},
                    baselines, args.rounds, args.calls, lines)
    # The same calls, the host's own time only: is torch's 10 us at 16x4096 its host or its GPU?
    host_comparison(entries, "16x4096", "float32",
                    {"hello_gpu.ops.softmax": lambda: softmax(x),
                     **compiled_rows("softmax", x),
                     "softmax: replayed launch alone": replayed_launch(best_launcher("softmax"), x),
                     **replay_parts(best_launcher("softmax"), x)},
                    {"torch.softmax(x, -1)": lambda: torch.softmax(x, -1)}, args.rounds, ENQUEUE_CALLS, lines,
                    drain=False)
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1))
    rtol, atol = load_op("softmax").spec.TOLERANCE["float32"]
    torch.testing.assert_close(hip_prepared(), torch.softmax(x, -1), rtol=rtol, atol=atol)
    for dtype in (torch.bfloat16, torch.float32):
        xr = torch.randn(16, 4096, device="cuda", dtype=dtype)
        weight = torch.randn(4096, device="cuda", dtype=dtype)
        baselines = {"F.rms_norm": lambda: F.rms_norm(xr, (4096,), weight, 1e-6)}
        if "rms_norm" in liger_built:
            baselines["Liger rms_norm"] = lambda: liger_built["rms_norm"](xr, weight)
        bare, kernel_name = captured_triton_launch(lambda: rms_norm(xr, weight))
        baselines[f"bare {kernel_name}[grid](...)"] = bare
        host_comparison(entries, "16x4096", str(dtype).removeprefix("torch."),
                        {"hello_gpu.ops.rms_norm": lambda: rms_norm(xr, weight),
                         **compiled_rows("rms_norm", xr, weight, 1e-6),
                         "rms_norm: replayed launch alone": replayed_launch(best_launcher("rms_norm"), xr, weight, 1e-6)},
                        baselines, args.rounds, args.calls, lines)

    # The public functions on a 3-D input (a batch of 4 sequences of 4 tokens: the same 16 rows), which
    # the functions see as rows of the last dimension.
    x3 = torch.randn(4, 4, 4096, device="cuda")
    host_comparison(entries, "4x4x4096", "float32", {"hello_gpu.ops.softmax": lambda: softmax(x3)},
                    {"torch.softmax(x, -1)": lambda: torch.softmax(x3, -1)}, args.rounds, args.calls, lines)
    torch.testing.assert_close(softmax(x3), torch.softmax(x3, -1))
    x3 = torch.randn(4, 4, 4096, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    host_comparison(entries, "4x4x4096", "bfloat16", {"hello_gpu.ops.rms_norm": lambda: rms_norm(x3, weight)},
                    {"F.rms_norm": lambda: F.rms_norm(x3, (4096,), weight, 1e-6)}, args.rounds, args.calls, lines)

    # 3. Call time at the ladders' target shapes, cold L2.
    x = torch.randn(4096, 1024, device="cuda")
    compiled_softmax = torch.compile(lambda t: torch.softmax(t, -1))
    baselines = {"torch.softmax(x, -1)": lambda: torch.softmax(x, -1),
                 "torch.compile(torch.softmax)": lambda: compiled_softmax(x)}
    if "softmax" in liger_built:
        baselines["Liger softmax"] = lambda: liger_built["softmax"](x)
    call_time_comparison(entries, "4096x1024", "float32", "hello_gpu.ops.softmax", lambda: softmax(x), baselines,
                         lines)
    do_bench_comparison(entries, "4096x1024", "float32", "hello_gpu.ops.softmax", lambda: softmax(x), baselines,
                        args.bench_rounds, lines)
    for shape in ((8192, 4096), (4096, 5120)):
        xr = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
        weight = torch.randn(shape[1], device="cuda", dtype=torch.bfloat16)
        baselines = {"F.rms_norm": lambda: F.rms_norm(xr, (shape[1],), weight, 1e-6)}
        if "rms_norm" in liger_built:
            baselines["Liger rms_norm"] = lambda: liger_built["rms_norm"](xr, weight)
        call_time_comparison(entries, "x".join(map(str, shape)), "bfloat16", "hello_gpu.ops.rms_norm",
                             lambda: rms_norm(xr, weight), baselines, lines)
        do_bench_comparison(entries, "x".join(map(str, shape)), "bfloat16", "hello_gpu.ops.rms_norm",
                            lambda: rms_norm(xr, weight), baselines, args.bench_rounds, lines)

    graph = graph_replay(entries, lines)
    compiled = compiled_use(compiled_status)
    lines.append(f"compiled replay in use: {compiled}")
    manifest = environment_manifest()
    record = new_record("call-overhead", "benchmark", device=device_from_manifest(manifest), environment=manifest,
                        entries=entries.items,
                        extra={"best": dict(BEST), "cuda_graph": graph, "compiled_replay": compiled, "liger": sorted(liger_built),
                               "targets": {"kernel(a, b, c) / torch.add(out=c) host time": "<= 1.5x",
                                           "ops.softmax, ops.rms_norm at 16x4096 / torch eager host time": "<= 1.2x",
                                           "Triton rung / bare kernel[grid] host time": "<= 1.2x"}})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_record(record, args.out.parent.parent, repo_root=ROOT, rules=repository_rules(ROOT))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
