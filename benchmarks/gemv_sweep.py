"""Why does the decode GEMV read its weight at ~0.65-0.69 of copy bandwidth? Tiles and split-K swept, against
a pure read of the same bytes and paired with F.linear.

What is known (records/nvidia-h200/linear.bfloat16.json, runs of 6173353 and earlier): at M = 1 in bfloat16,
F.linear (cuBLAS) reads a 14336x4096 weight at 2,956 GB/s and a 4096x14336 one at 2,875; our
t02_streaming_gemv (one warp a row, cp.async steps of 512 bytes) at 2,763 and 2,918; Inductor's
max-autotune kernel at 3,086 and 3,486 GB/s (1.207x F.linear [1.20, 1.21] at 4096x14336: 4096 rows of
14336, few rows for 132 SMs, a long K each). t02's header predicted ~0.85 of copy from bytes in flight
alone and got 0.65-0.69, so bytes in flight are not the whole story. The model backend (issue 23) leaves
every projection on cuBLAS (hello-gpu linear 0.97x eager over a decode step), and its decode step is
mostly these reads: 2.47 GB of 1B weights a step, 16 GB of 8B.

Two questions, each answered per weight shape of the two model sizes:

1. What is the floor? ``read floor``: the weight read as contiguous 16 KiB tiles, one float written a
   tile (no x, no FMA): the fastest order DRAM can serve these bytes in. Every GEMV below is a fraction
   of it as well as a ratio to F.linear.
2. What does a GEMV need to approach it? ``tiled``: a program owns BLOCK_N rows and walks its share of K
   in [BLOCK_N, BLOCK_K] tiles (2-D loads: BLOCK_N rows of BLOCK_K contiguous elements, pipelined by
   ``tl.range(num_stages=3)``), FMAs into a float32 tile, sums it at the end. ``SPLIT`` programs share a
   row block's K (split-K): more programs for few long rows, each adding its partial sum into a float32
   output zeroed first (``out.zero_()`` is timed with it: what a split-K design pays for the zeroing).

Prediction: if DRAM order is the limit, the read floor sits near copy's read half (~4.2 TB/s of reads on
the H200) and tiles of 16-32 rows x 512-1024 contiguous elements reach ~0.85 of it at 14336x4096; at
4096x14336 and the 1B down projection (2048x8192: 2048 rows, 128 row blocks of 16 for 132 SMs) split-K
2-4 is needed to fill the SMs, and its zeroing (~2 us) costs less than it gains (~8 us at 4096x14336).

What it found at one row (records/nvidia-h100-80gb-hbm3/gemv-sweep.json, run of 75500b4, H100): [8, 512]
tiles with one split read at 0.95-0.98 of the floor and 1.02-1.10x F.linear at all four shapes; split-K
2-8 was slower at every shape. The read floor itself is 2,350 GB/s at 14336x4096 (a 50 us read) against
3,023 GB/s of copy: a single weight's read never reaches copy speed.

3. ``--rows 16`` (batch-16 decode, issue 21's M = 16 target): the same weights against 16 rows of x,
   where FMAs alone would be issue-bound (linear t02's header: ~27 instructions a weight element at
   M = 16 in bf16 against ~18 the SMs issue at copy speed), so tensor cores: ``dot``, a program owns
   BLOCK_N weight rows and all 16 rows of x and walks K in [BLOCK_N, BLOCK_K] tiles with ``tl.dot`` (as
   linear t01 does with its single [32, 256] tile and no choice of stages). Prediction: the floor is the
   same bytes (x is 16 x K x 2 bytes, ~1% more), so the best tile reads within ~5% of the one-row best
   (~0.9 of the floor), where t01 read 0.977x F.linear at 16x14336x4096 on the H200.

4. ``--loads`` (session 20): why does Inductor's max-autotune kernel beat every tile here? On the H100 it read
   a 14336x4096 weight in 44.6 us (2,634 GB/s, 0.87 of copy) where t03_tiled_gemv took 51.5 us
   (records/nvidia-h100-80gb-hbm3/linear.bfloat16.json, run of 9ef0910), faster than this sweep's read floor.
   At M = 1 Inductor turns the mm into a product and a sum over K (torch/_inductor/decomposition.py, with
   coordinate-descent tuning on) and tunes that reduction's block sizes and warps; its reductions load a
   tensor read once with eviction_policy="evict_first" and do not pipeline through shared memory. So: one
   split, tiles from [1, 2048] to [16, 512], each with and without the 3-stage cp.async pipeline and with
   and without evict_first; and Inductor's own kernel at the shape, its source and the launch it kept
   (inductor_code.py). Prediction: without the pipeline (plain loads straight to registers, more loads in
   flight a thread) the [8, 512] tile moves from ~0.78 of copy towards Inductor's ~0.87; evict_first alone
   changes little for a weight read once (it only frees L2 sooner).
   What it found (records/nvidia-h100-80gb-hbm3/gemv-sweep.loads.json, run of 91a281a): the prediction was wrong
   about which change pays. At 1x16384x2048, [8, 512]: 34.8 us with the pipeline under either policy, 34.6 us
   without it under the default policy, 29.4 us without it and evict_first. The hint pays on plain loads only
   (through cp.async it does nothing), and the one-stage evict-first tiles were the fastest at all four shapes,
   1.12-1.29x F.linear. The read floor's own kernel loads with the default policy, so it is no floor under the
   cold protocol's dirty L2 (linear t04_evict_first_gemv's header; a cold-clean control has not run).

5. ``--rows 16 --loads`` (session 26): does the one-row finding carry to 16 rows? The 16-row sweep above pipelined
   every tl.dot tile through cp.async (3 or 5 stages) with the default policy: its best read 0.94-0.97 of the floor,
   1.01-1.04x F.linear (records/nvidia-h100-80gb-hbm3/gemv-sweep.m16.json), where one row's one-stage evict-first
   tiles read 1.06-1.18 of the same floor. So: each tl.dot tile with 1 and 3 stages, with and without evict_first,
   and split-K (2, 4) where the row blocks are fewer than twice the SMs (4096 rows in 64-row blocks: 64 programs for
   132 SMs). Prediction: the one-stage evict-first tiles gain what they gained at one row, ~+10%: ~1.1x F.linear
   and ~1.05 of the floor at 16x14336x4096; at 16x4096x14336 only with split-K, the partial sums added by float32
   atomics into an output zeroed first (timed with it). Issue 21's M = 16 target is 1.0x F.linear and 0.85 of copy.

6. ``--warps`` (session 27): why does Inductor's kernel still beat the one-stage evict-first tiles? In the loads
   sweep of session 27 (records/nvidia-h100-80gb-hbm3/gemv-sweep.loads.session27.json, run of 2d4889b) the best tile
   read 14336x4096 in 47.6 us (0.813 of copy) and Inductor's kernel in 44.2 us (0.876 of copy; 45.9 us at
   4096x14336 against 47.7). Its launch: one row a program (XBLOCK 1), the whole row a step (R0_BLOCK 4096; 2048
   at K = 14336), **16 warps**, one stage, the weight evict-first. The tiles here ran 4 warps (8 beyond 4096
   elements, warps_for): a [1, 4096] tile over 512 threads is one 16-byte load a thread a step, over 128 threads
   four, so the same bytes are in flight with a quarter of the registers a thread, and 4x the warps to hide each
   load's latency behind. So: tiles [1, 2048], [1, 4096], [2, 2048], [2, 4096], [4, 1024], each with 4, 8 and 16
   warps, one stage, evict-first, one split, and Inductor's kernel again. Prediction: warps are the lever, not the
   tile: [1, 4096] with 16 warps within 2% of Inductor's 44.2 us at 14336x4096 (~1.07x the 4-warp tiles), [1, 2048]
   with 16 warps near its 45.9 us at 4096x14336; at the 1B's 2048 rows (1x2048x8192: 2048 programs of 16 warps,
   ~2 waves) smaller gains.

Every mode also measures, in the same run, a 2 GiB copy (read and write counted, as hello-gpu ceilings counts them:
issue 21's decode target is 0.85 of it on the weight bytes) and a second floor per shape, ``evict-first read``:
linear t04's own loop without x ([2, 2048] tiles straight to registers, evict-first, each row summed), so each
figure is also a fraction of copy (``of_copy``), and the target can be set against what one read of one weight
reaches under the same cold protocol.

Prints one JSON object: the read floor and F.linear per shape, then every configuration's cold median,
GB/s on the weight bytes, fraction of the read floor and paired speedup over F.linear (> 1: faster),
with the 95% interval. Each configuration's output is checked against a float64 reference first.

    python benchmarks/gemv_sweep.py > records/<device>/gemv-sweep.json
    python benchmarks/gemv_sweep.py --rows 16 > records/<device>/gemv-sweep.m16.json
    python benchmarks/gemv_sweep.py --loads > records/<device>/gemv-sweep.loads.json
    python benchmarks/gemv_sweep.py --rows 16 --loads > records/<device>/gemv-sweep.m16.loads.json
    python benchmarks/gemv_sweep.py --warps > records/<device>/gemv-sweep.warps.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# (N, K) of every decode projection: Llama-3-8B's gate/up (14336x4096) and down (4096x14336), Llama-3.2-1B's
# gate_up (16384x2048, gate and up as one matrix, models/llama.py) and down (2048x8192).
SHAPES = ((14336, 4096), (4096, 14336), (16384, 2048), (2048, 8192))
# (BLOCK_N, BLOCK_K): a float32 tile of BLOCK_N x BLOCK_K sums, at most 32 a thread (4 warps up to 4096
# elements, 8 warps beyond), so nothing spills.
TILES = ((8, 512), (16, 512), (32, 256), (8, 1024), (16, 1024), (32, 512))
SPLITS = (1, 2, 4, 8)
STAGES = 3
# (BLOCK_N, BLOCK_K) of the 16-row tl.dot tiles, each at DOT_STAGES; a [16, BLOCK_N] float32 accumulator
DOT_TILES = ((16, 256), (32, 256), (64, 128), (32, 512), (64, 256), (128, 128))
DOT_STAGES = (3, 5)
DOT_ROWS = 16
# --loads: (BLOCK_N, BLOCK_K) at one split, each at LOAD_STAGES and with each eviction policy ("": the default)
LOAD_TILES = ((1, 2048), (2, 2048), (4, 1024), (8, 512), (16, 512))
LOAD_STAGES = (1, 3)
EVICTIONS = ("", "evict_first")
# --warps: one-row tiles, one stage, evict-first, each with every count of warps (Inductor's GEMV: [1, 4096], 16)
WARP_TILES = ((1, 2048), (1, 4096), (2, 2048), (2, 4096), (4, 1024))
WARP_COUNTS = (4, 8, 16)
# --rows 16 --loads: the tl.dot tiles at LOAD_STAGES with each policy, split-K where row blocks are few
DOT_SPLITS = (1, 2, 4)
READ_TILE = 8192         # elements of the read floor's tile: 16 KiB of bfloat16
EVICT_READ_TILE = (2, 2048)   # linear t04's [BLOCK_N, BLOCK_K]
SM_COUNT = 132           # the H100's and H200's SMs: split-K is swept only below two row blocks an SM
SECONDS = 0.3            # per measurement and per comparison: ~100 configurations in ~2 minutes


@triton.jit
def read_floor_kernel(w_ptr, out_ptr, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    tl.store(out_ptr + tl.program_id(0), tl.sum(tl.load(w_ptr + offsets).to(tl.float32), axis=0))


@triton.jit
def evict_read_kernel(w_ptr, out_ptr, N, K, stride_w, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """linear t04's loop without x: [BLOCK_N, BLOCK_K] tiles straight to registers, evict-first, each row's sum
    stored (so no load can be dropped)."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=1):
        columns = k0 + tl.arange(0, BLOCK_K)
        acc += tl.load(w_ptr + rows[:, None].to(tl.int64) * stride_w + columns[None, :],
                       mask=(rows[:, None] < N) & (columns < K)[None, :], other=0.0,
                       eviction_policy="evict_first").to(tl.float32)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1), mask=rows < N)


@triton.jit
def tiled_gemv_kernel(x_ptr, w_ptr, out_ptr, N, K, stride_w, k_per_split,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr, STAGES: tl.constexpr,
                      EVICT: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    first_k = tl.program_id(1) * k_per_split
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in tl.range(first_k, first_k + k_per_split, BLOCK_K, num_stages=STAGES):
        columns = k0 + tl.arange(0, BLOCK_K)
        inside = columns < K
        w = tl.load(w_ptr + rows[:, None].to(tl.int64) * stride_w + columns[None, :],
                    mask=(rows[:, None] < N) & inside[None, :], other=0.0, eviction_policy=EVICT)
        x = tl.load(x_ptr + columns, mask=inside, other=0.0)
        acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
    partial = tl.sum(acc, axis=1)
    if SPLIT == 1:
        tl.store(out_ptr + rows, partial, mask=rows < N)
    else:
        tl.atomic_add(out_ptr + rows, partial, mask=rows < N)


@triton.jit
def dot_gemv_kernel(x_ptr, w_ptr, out_ptr, M, N, K, stride_x, stride_w, stride_out, k_per_split,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr,
                    EVICT: tl.constexpr = "", SPLIT: tl.constexpr = 1):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    x_rows = tl.arange(0, BLOCK_M)
    first_k = tl.program_id(1) * k_per_split
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in tl.range(first_k, first_k + k_per_split, BLOCK_K, num_stages=STAGES):
        columns = k0 + tl.arange(0, BLOCK_K)
        inside = columns < K
        x = tl.load(x_ptr + x_rows[:, None] * stride_x + columns[None, :],
                    mask=(x_rows[:, None] < M) & inside[None, :], other=0.0)
        w = tl.load(w_ptr + rows[:, None].to(tl.int64) * stride_w + columns[None, :],
                    mask=(rows[:, None] < N) & inside[None, :], other=0.0, eviction_policy=EVICT)
        acc = tl.dot(x, tl.trans(w), acc)
    where = out_ptr + x_rows[:, None] * stride_out + rows[None, :]
    live = (x_rows[:, None] < M) & (rows[None, :] < N)
    if SPLIT == 1:
        tl.store(where, acc, mask=live)
    else:
        tl.atomic_add(where, acc, mask=live)


def dot_launch(x, weight, out, block_n: int, block_k: int, stages: int, evict: str = "", split: int = 1):
    """A callable running the tl.dot GEMV of ``x`` (M <= 16, K) by ``weight`` (N, K) into float32 ``out`` (M, N);
    with ``split`` > 1, that many programs share a row block's K and add into ``out``, zeroed first (timed)."""
    (m, k), n = x.shape, weight.shape[0]
    if m > DOT_ROWS:
        raise ValueError(f"the dot GEMV holds {DOT_ROWS} rows of x a program, got {m}")
    k_per_split = triton.cdiv(triton.cdiv(k, split), block_k) * block_k   # a whole number of tiles a split
    grid = (triton.cdiv(n, block_n), triton.cdiv(k, k_per_split))

    def launch():
        if grid[1] > 1:
            out.zero_()
        dot_gemv_kernel[grid](x, weight, out, m, n, k, x.stride(0), weight.stride(0), out.stride(0), k_per_split,
                              BLOCK_M=DOT_ROWS, BLOCK_N=block_n, BLOCK_K=block_k, STAGES=stages, EVICT=evict,
                              SPLIT=grid[1], num_warps=4)
    return launch


def warps_for(block_n: int, block_k: int) -> int:
    return 4 if block_n * block_k <= 4096 else 8


def tiled_launch(x, weight, out, block_n: int, block_k: int, split: int, stages: int = STAGES, evict: str = "",
                 warps: int | None = None):
    """A callable running the tiled GEMV of ``x`` (K,) by ``weight`` (N, K) into the float32 ``out`` (N,), with
    ``warps`` a program (default :func:`warps_for` the tile)."""
    n, k = weight.shape
    k_per_split = triton.cdiv(triton.cdiv(k, split), block_k) * block_k   # a whole number of tiles a split
    grid = (triton.cdiv(n, block_n), triton.cdiv(k, k_per_split))

    def launch():
        if grid[1] > 1:
            out.zero_()
        tiled_gemv_kernel[grid](x, weight, out, n, k, weight.stride(0), k_per_split, BLOCK_N=block_n,
                                BLOCK_K=block_k, SPLIT=grid[1], STAGES=stages, EVICT=evict,
                                num_warps=warps or warps_for(block_n, block_k))
    return launch


def read_floor_launch(weight, partials):
    if weight.numel() % READ_TILE or partials.numel() != weight.numel() // READ_TILE:
        raise ValueError(f"the read floor takes whole tiles of {READ_TILE} elements, one partial each: "
                         f"{weight.numel()} elements, {partials.numel()} partials")
    tiles = weight.numel() // READ_TILE
    return lambda: read_floor_kernel[(tiles,)](weight, partials, TILE=READ_TILE, num_warps=8)


def evict_read_launch(weight, sums):
    """A callable reading ``weight`` (N, K) as linear t04 does, without x, each row's sum into ``sums`` (N,)."""
    n, k = weight.shape
    if sums.shape != (n,):
        raise ValueError(f"one sum a row: {n} rows, {tuple(sums.shape)} sums")
    return lambda: evict_read_kernel[(triton.cdiv(n, EVICT_READ_TILE[0]),)](
        weight, sums, n, k, weight.stride(0), BLOCK_N=EVICT_READ_TILE[0], BLOCK_K=EVICT_READ_TILE[1], num_warps=4,
        num_stages=1)


def copy_bytes_per_s() -> float:
    """A 2 GiB device copy's bytes a second, its read and its write counted (the ceilings' convention)."""
    from hello_gpu.bench import measure
    source = torch.ones(2**30, device="cuda", dtype=torch.bfloat16)
    target = torch.empty_like(source)
    timed = measure(lambda: target.copy_(source), cache="warm", max_seconds=1.0)
    return 2 * source.numel() * source.element_size() / timed.summary.median


def check(launch, out, x, weight) -> None:
    """The launch's output against float64, within the float32 accumulation's own error over K."""
    out.fill_(float("nan"))
    launch()
    expected = x.double() @ weight.double().t()
    bound = 1e-5 * (x.double().abs() @ weight.double().abs().t()) + 1e-6
    error = (out.double() - expected).abs()
    if not bool((error <= bound).all()):
        worst = int(torch.argmax(error / bound))
        flat = out.reshape(-1), expected.reshape(-1), bound.reshape(-1)
        where = f"row {worst}" if out.dim() == 1 else f"x row {worst // out.shape[1]}, row {worst % out.shape[1]}"
        raise AssertionError(f"{where}: {float(flat[0][worst])} against {float(flat[1][worst])} (allowed "
                             f"{float(flat[2][worst]):.3g})")


def configurations(rows: int, x, weight, out, loads: bool = False, warps: bool = False):
    """(fields, launch) of every configuration swept at this many rows of x: tiles and splits at one row,
    tl.dot tiles and stages at 16; with ``loads``, one row's tiles at one split with each number of stages and
    each eviction policy; with ``warps``, one row's tiles at one stage, evict-first, with each count of warps."""
    n, k = weight.shape
    if warps:
        for block_n, block_k in WARP_TILES:
            if block_k > k:                  # a step past the row would be half masked loads
                continue
            for count in WARP_COUNTS:
                yield ({"block_n": block_n, "block_k": block_k, "stages": 1, "evict": "evict_first", "warps": count,
                        "programs": triton.cdiv(n, block_n)},
                       tiled_launch(x, weight, out, block_n, block_k, 1, 1, "evict_first", count))
        return
    if loads and rows > 1:
        for block_n, block_k in DOT_TILES:
            blocks = triton.cdiv(n, block_n)
            for split in DOT_SPLITS:
                # split-K only where the row blocks are fewer than twice the SMs, each split a few tiles of K
                if split > 1 and (blocks >= 2 * SM_COUNT or k // split < 4 * block_k):
                    continue
                for stages in LOAD_STAGES:
                    for evict in EVICTIONS:
                        yield ({"block_n": block_n, "block_k": block_k, "split": split, "stages": stages,
                                "evict": evict or "default", "warps": 4, "programs": blocks * split},
                               dot_launch(x, weight, out, block_n, block_k, stages, evict, split))
        return
    if loads:
        for block_n, block_k in LOAD_TILES:
            for stages in LOAD_STAGES:
                for evict in EVICTIONS:
                    yield ({"block_n": block_n, "block_k": block_k, "stages": stages, "evict": evict or "default",
                            "warps": warps_for(block_n, block_k), "programs": triton.cdiv(n, block_n)},
                           tiled_launch(x, weight, out, block_n, block_k, 1, stages, evict))
        return
    if rows == 1:
        for block_n, block_k in TILES:
            for split in SPLITS:
                if k % split or (k // split) < block_k:
                    continue
                yield ({"block_n": block_n, "block_k": block_k, "split": split, "warps": warps_for(block_n, block_k),
                        "programs": triton.cdiv(n, block_n) * split}, tiled_launch(x, weight, out, block_n, block_k, split))
        return
    for block_n, block_k in DOT_TILES:
        for stages in DOT_STAGES:
            yield ({"block_n": block_n, "block_k": block_k, "stages": stages, "warps": 4,
                    "programs": triton.cdiv(n, block_n)}, dot_launch(x, weight, out, block_n, block_k, stages))


def inductor_gemv(x_rows, weight, seconds, baseline) -> dict:
    """F.linear compiled as the linear ladder's max-autotune peer compiles it (ops/matmul/max_autotune.py's
    options): the Triton source, the launch Inductor kept, its cold median and its speedup over F.linear."""
    from inductor_code import inductor_kernels

    from hello_gpu.bench import compare
    from hello_gpu.ops.matmul.max_autotune import OPTIONS
    code = inductor_kernels(F.linear, x_rows, weight, options=OPTIONS)
    compiled = torch.compile(F.linear, options=OPTIONS)
    expected = x_rows.double() @ weight.double().t()
    got = compiled(x_rows, weight).double()
    bound = 1e-2 * (x_rows.double().abs() @ weight.double().abs().t()) + 1e-3      # bf16 output: 2^-8 relative
    if not bool(((got - expected).abs() <= bound).all()):
        raise AssertionError("Inductor's GEMV disagrees with float64")
    median = seconds(lambda: compiled(x_rows, weight))
    paired = compare(baseline, lambda: compiled(x_rows, weight), max_seconds=SECONDS)
    return {**code, "median_us": median * 1e6, "gb_per_s": weight.numel() * weight.element_size() / median / 1e9,
            "vs_f_linear": paired.speedup.value, "ci95": list(paired.speedup.ci95)}


def sweep_shape(n: int, k: int, seed: int, rows: int = 1, loads: bool = False, copy: float | None = None,
                warps: bool = False) -> dict:
    from hello_gpu.bench import compare, measure
    generator = torch.Generator(device="cuda").manual_seed(seed)
    weight = (torch.randn(n, k, device="cuda", generator=generator) * 0.02).to(torch.bfloat16)
    x = torch.randn(rows, k, device="cuda", generator=generator).to(torch.bfloat16)
    weight_bytes = weight.numel() * weight.element_size()
    x_rows = x
    if rows == 1:
        x = x.view(k)                       # the one-row kernels take x as (K,)

    def baseline():
        return F.linear(x_rows, weight)
    partials = torch.empty(weight.numel() // READ_TILE, device="cuda", dtype=torch.float32)
    floor = read_floor_launch(weight, partials)
    floor()
    torch.testing.assert_close(partials.sum().double(), weight.double().sum(), rtol=1e-3, atol=1e-2)

    def seconds(fn) -> float:
        return measure(fn, cache="cold", max_seconds=SECONDS).summary.median
    sums = torch.empty(n, device="cuda", dtype=torch.float32)
    evict_floor = evict_read_launch(weight, sums)
    evict_floor()
    torch.testing.assert_close(sums.double(), weight.double().sum(dim=1), rtol=1e-3, atol=1e-2)
    floor_s, linear_s, evict_s = seconds(floor), seconds(baseline), seconds(evict_floor)

    def of_copy(median: float) -> float | None:
        return weight_bytes / median / copy if copy else None
    results = []
    out = torch.empty((n,) if rows == 1 else (rows, n), device="cuda", dtype=torch.float32)
    for fields, launch in configurations(rows, x, weight, out, loads, warps):
        check(launch, out, x, weight)
        median = seconds(launch)
        paired = compare(baseline, launch, max_seconds=SECONDS)
        results.append({**fields, "median_us": median * 1e6, "gb_per_s": weight_bytes / median / 1e9,
                        "of_read_floor": floor_s / median, "of_copy": of_copy(median),
                        "vs_f_linear": paired.speedup.value,
                        "ci95": list(paired.speedup.ci95)})
        print(f"{rows}x{n}x{k} {results[-1]}", file=sys.stderr)
    best = max(results, key=lambda row: row["vs_f_linear"])
    inductor = inductor_gemv(x_rows, weight, seconds, baseline) if loads or warps else None
    if inductor is not None:
        print(f"{rows}x{n}x{k} inductor {inductor['launches']} {inductor['median_us']:.1f} us "
              f"{inductor['vs_f_linear']:.3f}x F.linear", file=sys.stderr)
    return {"shape": f"{rows}x{n}x{k}", "dtype": "bfloat16", "weight_bytes": weight_bytes, "inductor": inductor,
            "read_floor": {"median_us": floor_s * 1e6, "gb_per_s": weight_bytes / floor_s / 1e9,
                           "of_copy": of_copy(floor_s)},
            "evict_read_floor": {"median_us": evict_s * 1e6, "gb_per_s": weight_bytes / evict_s / 1e9,
                                 "of_copy": of_copy(evict_s), "tile": list(EVICT_READ_TILE)},
            "f_linear": {"median_us": linear_s * 1e6, "gb_per_s": weight_bytes / linear_s / 1e9,
                         "of_read_floor": floor_s / linear_s, "of_copy": of_copy(linear_s)},
            "best": best, "configurations": results}


def main() -> None:
    parser = argparse.ArgumentParser(description="decode GEMV tiles against a pure read of the weight and F.linear")
    parser.add_argument("--rows", type=int, choices=(1, DOT_ROWS), default=1,
                        help="rows of x: 1 (tiles and split-K, FMAs) or 16 (tl.dot tiles and stages)")
    parser.add_argument("--loads", action="store_true",
                        help="stages and eviction policies (one row: at one split; 16 rows: the tl.dot tiles, with "
                             "split-K where row blocks are few), and Inductor's own kernel")
    parser.add_argument("--warps", action="store_true",
                        help="one row: tiles at one stage, evict-first, with 4, 8 and 16 warps, and Inductor's kernel")
    args = parser.parse_args()
    rows, loads, warps = args.rows, args.loads, args.warps
    if warps and (loads or rows != 1):
        parser.error("--warps sweeps one row's tiles: it takes neither --loads nor --rows 16")
    copy = copy_bytes_per_s()
    results = [sweep_shape(n, k, seed=70 + index, rows=rows, loads=loads, copy=copy, warps=warps)
               for index, (n, k) in enumerate(SHAPES)]
    stages = [1] if warps else list(LOAD_STAGES) if loads else STAGES if rows == 1 else list(DOT_STAGES)
    print(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows, "loads": loads, "warps": warps,
                      "stages": stages, "copy": {"gb_per_s": copy / 1e9}, "shapes": results}, indent=1))


if __name__ == "__main__":
    main()
