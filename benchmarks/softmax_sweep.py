"""Where do the softmax rungs lose? Two launch parameters swept, each paired against the rung to beat.

The ladder run of commit 2c2a085 (records/nvidia-h200/softmax.*.json) left two gaps:

  1. bfloat16 8192x8192: the best HIP rung, v05 (256 threads a row, 32 values a thread), reads
     3362 GB/s; Triton t03 (512 threads a row, 16 values a thread) 3914. Is it the block size?
     v05's kernel takes any whole number of warps that holds the row, so the sweep launches it with
     128 to 1024 threads per row and pairs each with t03.
  2. float32 4096x1024 (16 MiB, short rows): torch.compile takes 12.5 us, Liger 13.2, our best 13.2.
     The sweep runs t04's kernel with 1 to 16 rows per program and 2 to 16 warps, each paired with
     torch.compile.

Prints one JSON object: for each configuration its cold median and the paired speedup over the
rung it is compared with (> 1: the configuration is faster), with the 95% interval.

    python benchmarks/softmax_sweep.py > records/nvidia-h200/softmax-sweep.json
"""

from __future__ import annotations

import json

import torch
import triton

from hello_gpu.bench import compare, measure
from hello_gpu.ops import load_op

SECONDS = 0.5       # per measurement and per comparison: 40 configurations in ~1 minute


def figures(fn, baseline, seconds: float = SECONDS) -> dict:
    """Cold median of ``fn`` and its paired speedup over ``baseline`` (> 1: faster), with the 95% interval."""
    timing = measure(fn, cache="cold", max_seconds=seconds)
    paired = compare(baseline, fn, max_seconds=seconds)
    return {"median_us": timing.summary.median * 1e6, "speedup": paired.speedup.value,
            "ci95": list(paired.speedup.ci95)}


def hip_block_sweep(op) -> list[dict]:
    spec = op.spec
    (x,) = spec.make_inputs((8192, 8192), "bfloat16", seed=11, device="cuda")
    out = torch.empty_like(x)
    v05 = op.rung("v05_vector_128bit")
    kernel = v05.kernel(dtype="bfloat16")
    t03 = op.rung("t03_sixteen_warps").build()
    baseline = lambda: t03(x)                 # noqa: E731
    rows, columns = x.shape
    results = []
    for threads in (128, 256, 512, 1024):
        if threads * 32 < columns:            # the kernel holds at most 32 values a thread
            continue
        launch = lambda threads=threads: kernel(x, out, rows, columns, block=threads, grid=rows)  # noqa: E731
        launch()
        torch.testing.assert_close(out.float(), torch.softmax(x.float(), -1), rtol=2**-7, atol=1e-6)
        results.append({"rung": "v05_vector_128bit", "threads_per_row": threads, "vs": "t03_sixteen_warps",
                        **figures(launch, baseline)})
    return results


def triton_rows_sweep(op) -> list[dict]:
    spec = op.spec
    (x,) = spec.make_inputs((4096, 1024), "float32", seed=12, device="cuda")
    out = torch.empty_like(x)
    t04 = op.rung("t04_rows_per_program").build()
    kernel = t04.function.__globals__["softmax_rows_kernel"]
    compiled = op.rung("v00_torch_compile").build()
    baseline = lambda: compiled(x)           # noqa: E731
    rows, columns = x.shape
    results = []
    for rows_per_program in (1, 2, 4, 8, 16):
        for warps in (2, 4, 8, 16):
            grid = (triton.cdiv(rows, rows_per_program),)

            def launch(rows_per_program=rows_per_program, warps=warps, grid=grid):
                kernel[grid](x, out, rows, columns, x.stride(0), ROWS=rows_per_program, BLOCK=1024, num_warps=warps)

            launch()
            torch.testing.assert_close(out, torch.softmax(x, -1), rtol=2e-5, atol=1e-7)
            results.append({"rung": "t04_rows_per_program", "rows_per_program": rows_per_program, "num_warps": warps,
                            "vs": "v00_torch_compile", **figures(launch, baseline)})
    return results


def main() -> None:
    op = load_op("softmax")
    print(json.dumps({"device": torch.cuda.get_device_name(), "hip_bfloat16_8192x8192": hip_block_sweep(op),
                      "triton_float32_4096x1024": triton_rows_sweep(op)}, indent=1))


if __name__ == "__main__":
    main()
