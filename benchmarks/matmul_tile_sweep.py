"""The tile sizes of matmul v08_tuned_tiles (the SIMT float32 route), swept on the GPU that will run them.

v08's kernel (warp_tiling.h) takes nine compile-time sizes, HG_MATMUL_BM ... HG_MATMUL_THREADS. Each
candidate of CANDIDATES is compiled with its sizes as -D defines, checked against float64 on an odd
shape (1823x781x517: every edge path) and on the timed shape, then timed at 4096^3 float32 and
paired with torch.mm (cuBLAS, TF32 off; > 1: faster) and with v07_warp_tiling. The JSON names the
winner and the #define lines to put in v08_tuned_tiles.hip (one measured change: then run the ladder).

    python benchmarks/matmul_tile_sweep.py > records/nvidia-h200/matmul-tile-sweep.json
"""

from __future__ import annotations

import json
import sys

import torch

from hello_gpu import hip
from hello_gpu.ops import load_op
from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.rung import include_dirs_for, load_module
from hello_gpu.runtime.device import device_info, require_gpu
from softmax_sweep import figures       # benchmarks/ is on the path when this file runs as a script

SHAPE, CHECK_SHAPE, DTYPE = (4096, 4096, 4096), (1823, 781, 517), "float32"
SECONDS = 1.0        # per measurement and comparison: ~4 ms a call at 4096^3, a few hundred calls each
NAMES = ("BM", "BN", "BK", "WM", "WN", "WNITER", "TM", "TN", "THREADS")
# (BM, BN, BK, WM, WN, WNITER, TM, TN, THREADS). Each satisfies warp_tiling.h's static_asserts: a warp
# tile is 32 threads' TM x TN blocks, (BM / WM) x (BN / WN) warp tiles = THREADS / 32, and the tile
# loads come out in whole passes. The first is v07's (the A6000 worklog's), the second v08's default.
CANDIDATES = (
    (128, 128, 16, 64, 64, 4, 8, 4, 128),
    (128, 128, 16, 64, 32, 2, 8, 4, 256),
    (128, 128, 8, 64, 32, 2, 8, 4, 256),
    (128, 256, 16, 64, 64, 4, 8, 4, 256),
    (256, 128, 16, 128, 32, 2, 8, 4, 256),
    (64, 128, 16, 32, 64, 4, 4, 4, 128),
    (128, 64, 16, 64, 32, 2, 4, 4, 128),
    (128, 128, 32, 64, 64, 4, 8, 4, 128),
)


def main() -> None:
    require_gpu()
    op = load_op("matmul")
    v08 = op.rung("v08_tuned_tiles")
    launcher = load_module(v08.companion, "matmul_v08_launcher_for_sweep")
    source = v08.path.read_text(encoding="utf-8")
    a, b = op.spec.make_inputs(SHAPE, DTYPE, seed=21, device="cuda")
    check_inputs = op.spec.make_inputs(CHECK_SHAPE, DTYPE, seed=22, device="cuda")
    out = torch.empty((SHAPE[0], SHAPE[1]), dtype=a.dtype, device="cuda")
    cublas = lambda: torch.mm(a, b, out=out)                                    # noqa: E731
    v07 = op.rung("v07_warp_tiling").build()
    v07_out = torch.empty_like(out)
    v07_call = lambda: v07(a, b, out=v07_out)                                   # noqa: E731
    results = []
    for candidate in CANDIDATES:
        tiles = dict(zip(NAMES, candidate))
        entry = {"tiles": tiles}
        try:
            kernel = hip(source, entry="matmul_tuned_tiles", name=v08.path.name, include_dirs=include_dirs_for(v08.path),
                         defines={f"HG_MATMUL_{name}": value for name, value in tiles.items()})
            for inputs in (check_inputs, (a, b)):
                problem = output_failure(op.spec, inputs, launcher.run(kernel, *inputs), DTYPE)
                if problem:
                    raise ValueError(f"wrong answer: {problem}")
        except Exception as error:  # noqa: BLE001 - a candidate that fails is reported, and the sweep goes on
            entry["error"] = f"{type(error).__name__}: {error}"
            results.append(entry)
            print(f"{candidate}: {entry['error']}", file=sys.stderr)
            continue
        call = lambda kernel=kernel: launcher.run(kernel, a, b, out=out)        # noqa: E731
        entry["vs_cublas"] = figures(call, cublas, SECONDS)
        entry["vs_v07"] = figures(call, v07_call, SECONDS)
        entry["tflop_s"] = op.spec.work(SHAPE, DTYPE).flops / (entry["vs_cublas"]["median_us"] * 1e-6) / 1e12
        results.append(entry)
        print(f"{candidate}: {entry['tflop_s']:.1f} TFLOP/s, {entry['vs_cublas']['speedup']:.3f}x cuBLAS", file=sys.stderr)
    timed = [entry for entry in results if "error" not in entry]
    best = max(timed, key=lambda entry: entry["vs_cublas"]["speedup"]) if timed else None
    print(json.dumps({
        "device": device_info().name, "shape": "x".join(map(str, SHAPE)), "dtype": DTYPE, "check_shape":
        "x".join(map(str, CHECK_SHAPE)), "candidates": results,
        "winner": best and {"tiles": best["tiles"], "vs_cublas": best["vs_cublas"],
                            "defines": [f"#define HG_MATMUL_{k} {v}" for k, v in best["tiles"].items()]},
    }, indent=1))


if __name__ == "__main__":
    main()
