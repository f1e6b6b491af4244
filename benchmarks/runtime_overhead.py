"""How long the runtime itself takes: compile (cold and cached) and the Python cost of a launch.

Targets from the runtime issue, on the H200: cold compile of the README kernel under 0.3 s, a cached
compile under 10 ms, and a prepared launcher's per-call cost within 1.5x of ``torch.add`` on a
1-element tensor. Launch costs are compared as paired, interleaved (ABBA) rounds in one process,
and the ratio comes with a bootstrap 95% confidence interval over rounds.

    python benchmarks/runtime_overhead.py --out records/nvidia-h200/runtime-overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hello_gpu.bench.timing import host_times

README_KERNEL = r"""
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}"""

COLD_COMPILE_CHILD = r"""
import json, sys, time
started = time.perf_counter()
import hello_gpu as hg
from hello_gpu.runtime.device import device_info
imported = time.perf_counter()
info = device_info()          # CUDA context and device query: paid once per process, not per compile
ready = time.perf_counter()
kernel = hg.hip(sys.argv[1] + "// sample %s" % sys.argv[2], entry="vector_add", use_cache=False)
binary = kernel.compile()
done = time.perf_counter()
# a second, different source in the same process: NVRTC and the CUDA headers already loaded
kernel2 = hg.hip(sys.argv[1] + "// second %s" % sys.argv[2], entry="vector_add", use_cache=False)
kernel2.compile()
print(json.dumps({"import_s": imported - started, "gpu_init_s": ready - imported, "first_compile_s": done - ready,
                  "nvrtc_s": binary.seconds, "second_compile_s": time.perf_counter() - done}))
"""


def bootstrap_ratio(numerator: list[float], denominator: list[float], resamples: int = 10000, seed: int = 0):
    """Median ratio of paired rounds, and its 95% percentile-bootstrap interval."""
    ratios = np.asarray(numerator) / np.asarray(denominator)
    rng = np.random.default_rng(seed)
    draws = rng.choice(ratios, size=(resamples, len(ratios)), replace=True)
    medians = np.median(draws, axis=1)
    return float(np.median(ratios)), float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def compile_times(samples: int) -> dict:
    """Cold compiles in fresh processes (each pays NVRTC's load), then cached compiles in this one."""
    cold = []
    for sample in range(samples):
        with tempfile.TemporaryDirectory() as cache:
            environment = dict(os.environ, HG_CACHE_DIR=cache)
            done = subprocess.run([sys.executable, "-c", COLD_COMPILE_CHILD, README_KERNEL, str(sample)],
                                  capture_output=True, text=True, env=environment, check=True)
            cold.append(json.loads(done.stdout))
    import hello_gpu as hg
    with tempfile.TemporaryDirectory() as cache:
        os.environ["HG_CACHE_DIR"] = cache
        hg.hip(README_KERNEL, entry="vector_add").compile()           # fill the cache
        warm = []
        for _ in range(50):
            started = time.perf_counter()
            kernel = hg.hip(README_KERNEL, entry="vector_add")
            binary = kernel.compile()
            warm.append(time.perf_counter() - started)
            assert binary.cache_hit
    return {
        "cold_first_compile_in_process_s": summary([c["first_compile_s"] for c in cold]),
        "cold_second_compile_in_process_s": summary([c["second_compile_s"] for c in cold]),
        "nvrtc_call_s": summary([c["nvrtc_s"] for c in cold]),
        "import_hello_gpu_s": summary([c["import_s"] for c in cold]),
        "gpu_init_s": summary([c["gpu_init_s"] for c in cold]),
        "warm_cached_compile_s": summary(warm),
        "targets": {"cold_compile_s": 0.3, "warm_compile_s": 0.010},
    }


def summary(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1], "samples": len(ordered)}


def launch_overhead(rounds: int, calls: int) -> dict:
    """Host time per call of each launcher, interleaved A B B A so drift hits both equally."""
    import torch
    import hello_gpu as hg
    a = torch.randn(1, device="cuda")
    b = torch.randn(1, device="cuda")
    out = torch.empty_like(a)
    kernel = hg.hip(README_KERNEL, entry="vector_add")
    prepared = kernel.prepare(a, b, out)
    candidates = {
        "torch.add(a, b)": lambda: torch.add(a, b),
        "torch.add(a, b, out=c)": lambda: torch.add(a, b, out=out),
        "prepared launcher": prepared,
        "kernel(a, b, out) with checks": lambda: kernel(a, b, out),
    }
    times = host_times(candidates, rounds, calls, warmup_calls=200)
    torch.testing.assert_close(out, a + b)
    result = {name: {"median_us": statistics.median(values) * 1e6} for name, values in times.items()}
    for baseline in ("torch.add(a, b)", "torch.add(a, b, out=c)"):
        for candidate in ("prepared launcher", "kernel(a, b, out) with checks"):
            ratio, low, high = bootstrap_ratio(times[candidate], times[baseline])
            result[f"{candidate} / {baseline}"] = {"ratio": ratio, "ci95": [low, high]}
    result["rounds"], result["calls_per_round"], result["target_ratio"] = rounds, calls, 1.5
    return result


def profile_checked_call(path: Path, calls: int = 2000) -> None:
    """Where a full checked call spends its host time (cProfile, sorted by own time)."""
    import cProfile
    import io
    import pstats
    import torch
    import hello_gpu as hg
    a, b = torch.randn(1, device="cuda"), torch.randn(1, device="cuda")
    out = torch.empty_like(a)
    kernel = hg.hip(README_KERNEL, entry="vector_add")
    for _ in range(100):
        kernel(a, b, out)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        kernel(a, b, out)
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
    path.write_text(text.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write the JSON record here")
    parser.add_argument("--compile-samples", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--profile", type=Path, help="also write a cProfile of checked calls here")
    arguments = parser.parse_args()
    if arguments.profile:
        profile_checked_call(arguments.profile)
    from hello_gpu.runtime.manifest import environment_manifest
    record = {"benchmark": "runtime_overhead", "environment": environment_manifest(),
              "compile": compile_times(arguments.compile_samples),
              "launch": launch_overhead(arguments.rounds, arguments.calls)}
    text = json.dumps(record, indent=2)
    if arguments.out:
        arguments.out.parent.mkdir(parents=True, exist_ok=True)
        arguments.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
