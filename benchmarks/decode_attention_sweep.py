"""Which split, key tile, warps and stages let flash-decoding read the KV cache near the floor? Swept at issue 22's
four decode shapes, paired with the best SDPA backend of the same run.

What is known (records/nvidia-h100-80gb-hbm3/decode-attention-floor.json, run of 2d4889b, H100, copy 3,029 GB/s):
one Triton kernel that only reads K and V's bytes takes 11.6 us at 1x32x8x1x4096x128 (1.67x cuDNN, the best
backend) and reads 0.84 of copy at 1x32x8x1x32768x128, where the ladder's t06_flash_decoding reads 0.57 of copy
and is 0.59x cuDNN at S_kv = 4096. t06's split is fixed: 2 programs an SM, 64-key tiles, 4 warps, Triton's
default stages. At S_kv = 32768 that is 32 chunks of 1024 keys, 16 tiles a program, ~4 us a tile for two
programs an SM: latency, not bytes (a tile is 32 KiB of K and V). t07_parallel_merge replaces t06's serial
merge loop and keeps its chunk kernel, so what is left after t07 is the chunk kernel's shape.

The sweep: t06's chunk kernel (imported, unchanged) and t07's merge, with the split sized for PROGRAMS_PER_SM in
{1, 2, 4, 8} programs an SM, key tiles of 64 and 128, 4 and 8 warps, 2 to 4 pipeline stages (a configuration
whose shared memory does not fit is listed as refused). Each configuration's output is checked against the
best backend's (both within the spec's bound of the truth, so within twice it of each other) before it is timed.

Prediction (H100): more, shorter programs win where a program's tiles are few and latency-bound: at S_kv = 4096
(64 tiles a KV head) 4-8 programs an SM of one tile each, ~14-16 us (~1.2-1.4x cuDNN: the merge launch and the
partials keep it above the floor's 13.9 us with a merge launch); at 1x32x8x1x32768x128 4 programs an SM and
3-4 stages, ~0.75-0.8 of copy (~1.4x t06); at B = 16 (128 KV heads, already ~1 program an SM) ~t06's 1.0 of
copy whatever the split.

    python benchmarks/decode_attention_sweep.py > records/<device>/decode-attention-sweep.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import triton

from decode_attention_floor import SHAPES, backend_times   # benchmarks/ is on the path when run as a script
from gemv_sweep import copy_bytes_per_s
from softmax_sweep import figures

PROGRAMS_PER_SM = (1, 2, 4, 8)
BLOCK_NS = (64, 128)
WARPS = (4, 8)
STAGES = (2, 3, 4)
SECONDS = 0.2          # per measurement and per comparison: 48 configurations a shape, ~40 s a shape


def rungs():
    """t06's module (the chunk kernel, its split) and t07's (the merge)."""
    from hello_gpu.ops.rung import load_module
    folder = Path(__file__).resolve().parents[1] / "src" / "hello_gpu" / "ops" / "attention"
    return (load_module(folder / "t06_flash_decoding.py", "sweep_t06"),
            load_module(folder / "t07_parallel_merge.py", "sweep_t07"))


def configurations():
    """Every (programs an SM, key tile, warps, stages) the sweep times."""
    return [{"programs_per_sm": p, "block_n": n, "warps": w, "stages": s}
            for p in PROGRAMS_PER_SM for n in BLOCK_NS for w in WARPS for s in STAGES]


def launcher(q, k, v, out, d, t06, t07, programs_per_sm: int, block_n: int, warps: int, stages: int):
    """One configuration's call: the chunk kernel at this split and tile, then t07's merge."""
    from hello_gpu.ops.attention.launch import dot_precision, softmax_scale_log2
    block_m = max(16, triton.next_power_of_2(d.group * d.q_len))
    heads_in_flight = d.batch * d.kv_heads
    # t06's own sizing (its multiprocessors, or a few programs in the interpreter), scaled to this many an SM
    programs = programs_per_sm * t06.programs_wanted(q.device) // t06.PROGRAMS_PER_SM
    tiles = triton.cdiv(d.kv_len, block_n)
    wanted = max(1, min(tiles, triton.cdiv(programs, heads_in_flight)))
    chunk = triton.cdiv(tiles, wanted) * block_n
    chunks = triton.cdiv(d.kv_len, chunk)
    part_acc = torch.empty((heads_in_flight, chunks, block_m, d.head_dim), dtype=torch.float32, device=q.device)
    part_stats = torch.empty((heads_in_flight, chunks, block_m, 2), dtype=torch.float32, device=q.device)
    scale = softmax_scale_log2(d)
    precision = dot_precision(q)

    def call():
        t06.chunk_kernel[(chunks, heads_in_flight)](q, k, v, part_acc, part_stats, d.heads, d.kv_heads, d.q_len,
                                                    d.kv_len, chunk, chunks, scale, CAUSAL=d.causal,
                                                    HEAD_DIM=d.head_dim, BLOCK_M=block_m, BLOCK_N=block_n,
                                                    PRECISION=precision, num_warps=warps, num_stages=stages)
        t07.merge(part_acc, part_stats, out, d, chunks, block_m)
    return call, chunks


def sweep_shape(shape, copy: float, device: str = "cuda", dtype: str = "bfloat16", configs=None) -> dict:
    """One shape's configurations (``device``, ``dtype``, ``configs``: the tests' CPU run in the Triton
    interpreter, float16 there, a few configurations)."""
    from hello_gpu.ops.attention.launch import prepare
    from hello_gpu.ops.attention.sdpa import sdpa
    from hello_gpu.ops.registry import load_op
    op = load_op("attention")
    t06, t07 = rungs()
    q, k, v, causal = op.spec.make_inputs(shape, dtype, seed=91, device=device)
    kv_bytes = 2 * k.numel() * k.element_size()
    times = backend_times(q, k, v)
    timed = {name: t for name, t in times.items() if isinstance(t, float)}
    best = min(timed, key=timed.get)
    expected = sdpa(q, k, v, False, best).float()
    baseline = lambda: sdpa(q, k, v, False, best)             # noqa: E731
    rtol, atol = op.spec.tolerance((q, k, v, causal), dtype)
    d, out = prepare(q, k, v, causal, None)
    rows = []
    t07_call = lambda: t07.run(q, k, v, causal, out=out)      # noqa: E731
    rung = {"rung": "t07_parallel_merge", **figures(t07_call, baseline, SECONDS)}
    rung["of_copy"] = kv_bytes / (rung["median_us"] * 1e-6) / copy
    for config in configs or configurations():
        call, chunks = launcher(q, k, v, out, d, t06, t07, **config)
        out.fill_(float("nan"))
        try:
            call()
        except triton.runtime.errors.OutOfResources as error:      # the stages' tiles exceed shared memory
            rows.append({**config, "refused": str(error).splitlines()[0][:160]})
            continue
        if not torch.allclose(out.float(), expected, rtol=2 * rtol, atol=2 * atol):
            raise AssertionError(f"{config} disagrees with SDPA's {best} backend at {shape}")
        row = {**config, "chunks": chunks, **figures(call, baseline, SECONDS)}
        row["of_copy"] = kv_bytes / (row["median_us"] * 1e-6) / copy
        rows.append(row)
        print(f"{shape} {row}", file=sys.stderr)
    ranked = sorted((r for r in rows if "median_us" in r), key=lambda r: r["median_us"])
    return {"shape": "x".join(map(str, shape)), "kv_bytes": kv_bytes, "best_backend": best,
            "backends_us": {name: t * 1e6 if isinstance(t, float) else t for name, t in times.items()},
            "best_of_copy": kv_bytes / timed[best] / copy, "t07_parallel_merge": rung,
            "fastest": ranked[:5], "configurations": rows}


def main() -> None:
    copy = copy_bytes_per_s()
    print(json.dumps({"device": torch.cuda.get_device_name(), "copy_gb_per_s": copy / 1e9,
                      "shapes": [sweep_shape(shape, copy) for shape in SHAPES]}, indent=1))


if __name__ == "__main__":
    main()
