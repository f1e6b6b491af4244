"""Why does the best Triton sum stream slower than the HIP rungs? Stage-1 designs swept against torch.sum.

The ladder run of commit db9e96d (records/nvidia-h200/reduce_sum.float32.json) timed, at 2^28 float32:
torch.sum 258.9 us, HIP v07 251.4 us (4.27 TB/s), Triton t04 260.2 us (0.997x torch.sum). t04's stage 2
is ~2 us, so its stage 1 (one program per 4096 elements, 4 warps, a masked load) streams at ~4.15 TB/s.
Which of these moves it: the tile size and warps per program, an unmasked load when the tile divides n
(the mask is a compare and a predicate per element), an evict-first load (the data is read once, so it
need not stay in L2), or a few looping programs per SM instead of 65536 short ones (HIP's design)?

Every configuration uses t04's stage 2 (one program, 16384 partials a step), is checked against a
float64 sum, and is paired against torch.sum (> 1: faster) with its 95% interval.

    python benchmarks/reduce_sum_sweep.py > records/nvidia-h200/reduce_sum-sweep.json
"""

from __future__ import annotations

import json

import torch
import triton
import triton.language as tl

from hello_gpu.ops import load_op
from softmax_sweep import figures     # benchmarks/ is on the path when this file runs as a script

SECONDS = 1.0       # per measurement and per comparison: ~20 configurations in ~45 s
N = 2**28


@triton.jit
def tile_kernel(x_ptr, partials_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, EVICT_FIRST: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        if EVICT_FIRST:
            values = tl.load(x_ptr + offsets, eviction_policy="evict_first")
        else:
            values = tl.load(x_ptr + offsets)
    else:
        if EVICT_FIRST:
            values = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0, eviction_policy="evict_first")
        else:
            values = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(partials_ptr + pid, tl.sum(values, axis=0))


@triton.jit
def loop_kernel(x_ptr, partials_ptr, n, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    # A few programs per SM; each adds UNROLL independent tiles per step into one running vector.
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK * UNROLL
    running = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(pid * BLOCK * UNROLL, n, step):
        for u in tl.static_range(UNROLL):
            offsets = start + u * BLOCK + tl.arange(0, BLOCK)
            running += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(partials_ptr + pid, tl.sum(running, axis=0))


def _finish(t04_globals, partials, out) -> None:
    count = partials.numel()
    block = min(t04_globals["FINISH_BLOCK"], max(128, triton.next_power_of_2(count)))
    t04_globals["finish_kernel"][(1,)](partials, out, count, BLOCK=block,
                                       num_warps=t04_globals["FINISH_WARPS"] if block == t04_globals["FINISH_BLOCK"] else 4)


def configurations(x, out, t04_globals) -> list[tuple[dict, object]]:
    n = x.numel()
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    found = []
    for block, warps, even, evict in ((4096, 4, False, False), (4096, 8, False, False), (2048, 4, False, False),
                                      (8192, 8, False, False), (8192, 16, False, False), (16384, 16, False, False),
                                      (4096, 4, True, False), (4096, 4, False, True), (4096, 4, True, True),
                                      (8192, 8, True, True)):
        programs = triton.cdiv(n, block)
        partials = torch.empty(programs, dtype=torch.float32, device=x.device)

        def launch(block=block, warps=warps, even=even, evict=evict, programs=programs, partials=partials):
            tile_kernel[(programs,)](x, partials, n, BLOCK=block, EVEN=even, EVICT_FIRST=evict, num_warps=warps)
            _finish(t04_globals, partials, out)
        found.append(({"design": "tile per program", "block": block, "num_warps": warps, "unmasked": even,
                       "evict_first": evict}, launch))
    for per_sm, block, warps, unroll in ((4, 4096, 8, 1), (8, 4096, 4, 1), (8, 4096, 4, 2), (16, 2048, 4, 2),
                                         (4, 8192, 8, 2)):
        programs = per_sm * sms
        partials = torch.empty(programs, dtype=torch.float32, device=x.device)

        def launch(block=block, warps=warps, unroll=unroll, programs=programs, partials=partials):
            loop_kernel[(programs,)](x, partials, n, BLOCK=block, UNROLL=unroll, num_warps=warps)
            _finish(t04_globals, partials, out)
        found.append(({"design": "looping programs", "programs_per_sm": per_sm, "block": block, "num_warps": warps,
                       "unroll": unroll}, launch))
    return found


def main() -> None:
    op = load_op("reduce_sum")
    (x,) = op.spec.make_inputs(N, "float32", seed=21, device="cuda")
    out = torch.empty(1, dtype=torch.float32, device="cuda")
    expected = x.double().sum().item()
    t04 = op.rung("t04_wide_finish").build()
    t04_globals = t04.function.__globals__
    v07 = op.rung("v07_single_pass_last_block").build()
    baseline = lambda: torch.sum(x)          # noqa: E731
    results = []
    for name, fn in (("t04_wide_finish", lambda: t04(x)), ("v07_single_pass_last_block", lambda: v07(x))):
        fn()
        results.append({"rung": name, **figures(fn, baseline, SECONDS)})
    for config, launch in configurations(x, out, t04_globals):
        launch()
        torch.cuda.synchronize()
        error = abs(out.item() - expected) / max(abs(expected), 1.0)
        if error > 1e-5:
            results.append({**config, "error": f"relative error {error:.2e} against the float64 sum"})
            continue
        results.append({**config, **figures(launch, baseline, SECONDS)})
    print(json.dumps({"device": torch.cuda.get_device_name(), "n": N, "vs": "torch.sum",
                      "configurations": results}, indent=1))


if __name__ == "__main__":
    main()
