"""Is the short-row softmax slow, or does it pay for the flush's dirty lines? Both flushes, side by side.

At float32 4096x1024 every rung and torch.compile take ~12.5 us for 33.6 MB (records/nvidia-h200/
softmax.float32.json, run of abc4538): ~2.7 TB/s of the ~4.25 a copy reaches. ncu (its own clean
cache between replays) counted 16.8 MB of DRAM reads and almost no writes. The timed cold call runs
after a zeroing flush, which leaves the L2 full of modified lines: each line the kernel allocates
(16.8 MB read, 16.8 MB written) first writes one back, ~50 MB of DRAM traffic in all.

This times each function under both flushes of hello_gpu.bench (``cold``: the zeroing one, as the
ladder and do_bench; ``cold-clean``: the same, then a read of the buffer, so the L2 holds clean lines
only) and pairs it with torch.compile under the same flush (> 1: faster), with the 95% interval. A
16 MB copy is the floor. If the dirty lines are the cost, every function is much faster clean, and
t09 (loads marked evict-first) keeps most of that gain under the usual flush. The Triton source
torch.compile writes for the shape is kept, with its launch (``inductor``).

Found (runs of d982f25 and d6d38eb): every function only 9-19% faster clean (~1.5 us of ~12.5), so
the dirty lines are not the short-row gap; the hint's share of it did not repeat (t09 1.095x, then
1.169x dirty/clean). Inductor's kernel: one row a program on one warp, no hints (hence t10).

    python benchmarks/softmax_dirty_l2.py > records/nvidia-h200/softmax-dirty-l2.json
"""

from __future__ import annotations

import json

import torch

from hello_gpu.bench import compare, measure
from hello_gpu.ops import load_op
from inductor_code import inductor_kernels   # benchmarks/ is on the path when this file runs as a script

SHAPE = (4096, 1024)
DTYPE = "float32"
SECONDS = 1.0
RUNGS = ("v00_torch_compile", "peer_liger", "t07_short_rows_tuned", "t08_static_width", "t09_evict_first",
         "t10_one_warp_per_row")


def main() -> None:
    op = load_op("softmax")
    (x,) = op.spec.make_inputs(SHAPE, DTYPE, seed=41, device="cuda")
    expected = torch.softmax(x.double(), -1)
    copy_out = torch.empty_like(x)
    functions = {"copy (x to a new tensor)": lambda: copy_out.copy_(x)}
    errors = {}
    for rung_id in RUNGS:
        try:
            built = op.rung(rung_id).build()
            result = built(x)                         # a peer imports its package at its first call
            torch.testing.assert_close(result.double(), expected, rtol=2e-5, atol=1e-7)
        except Exception as error:  # noqa: BLE001 - a peer that is not installed is named, not fatal
            errors[rung_id] = f"{type(error).__name__}: {error}"
            continue
        functions[rung_id] = lambda built=built: built(x)
    baseline = functions["v00_torch_compile"]
    flushes = {}
    for cache in ("cold", "cold-clean"):
        rows = []
        for name, function in functions.items():
            timing = measure(function, cache=cache, max_seconds=SECONDS)
            row = {"function": name, "median_us": timing.summary.median * 1e6,
                   "ci95_us": [bound * 1e6 for bound in timing.summary.ci95], "notes": timing.notes}
            if function is not baseline:
                paired = compare(baseline, function, cache=cache, max_seconds=SECONDS)
                row.update(vs="v00_torch_compile", speedup=paired.speedup.value, ci95=list(paired.speedup.ci95),
                           rounds=paired.rounds)
            rows.append(row)
        flushes[cache] = rows
    # The flushes cannot be paired within one comparison (both sides get the same one): the
    # dirty/clean ratio of each function is of two medians from this run, each with its interval.
    dirty_over_clean = {row["function"]: row["median_us"] / clean["median_us"]
                        for row, clean in zip(flushes["cold"], flushes["cold-clean"])}
    print(json.dumps({"device": torch.cuda.get_device_name(), "shape": "x".join(map(str, SHAPE)), "dtype": DTYPE,
                      "flushes": flushes, "dirty_over_clean": dirty_over_clean, "errors": errors,
                      "inductor": inductor_kernels(lambda x: torch.softmax(x, -1), x)}, indent=1))


if __name__ == "__main__":
    main()
