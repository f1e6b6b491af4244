"""Triton decode GEMV built for the memory system instead of tl.dot: each program streams 4 x ROWS weight
rows through K with 16-byte cp.async copies a few steps ahead and multiplies them by the M rows of A
with float32 FMAs in registers.

parent: t01_row_block
change: for M <= 8 in 16 bits and M <= 16 in float32, program p owns 4 x ROWS consecutive weight
  rows: warp w holds ROWS of them, each lane one 16-byte pack of each (8 bf16 or 4 float32), so one
  step of K is 512 contiguous bytes of every row, one warp load a row. The weight (each row a tile
  and a shared-memory buffer of its own, 16 bytes between lanes: no bank conflict) and A's step (the
  same 512 bytes for every warp) go through Triton's cp.async pipeline (tl.range with num_stages:
  stages - 1 steps in flight in shared memory); each thread FMAs its packs into one float32 chain per
  (row of A, row of W), a pack's products in order, and after the K loop a 5-step butterfly adds the
  32 lanes. The kernel is compiled for M rounded up to a power of two (padding rows re-read row
  M - 1 and are never stored): no tl.dot, no shared-memory transpose, no masked rows multiplied.
  Six configurations (ROWS x stages; those whose M x ROWS sums would spill left out), autotuned per
  (M, N, K). 16-bit M > 8 and any M > 16 run t01's kernel
hypothesis: decode reads the weight once and the bound is bytes in flight: a row has (stages - 1) x
  512 bytes in flight, the GPU N x 512 x (stages - 1): with 3 stages 109 KiB per SM at N = 14336 and
  31 KiB at N = 4096 (62 KiB with 5), above the ~25 KiB that covers DRAM latency (~700 ns x 4.8 TB/s
  / 132 SMs). So no split-K: 4096x14336 has 256 programs of 16 rows, all resident, each row streamed
  by one warp. Copy ceiling 4,250 GB/s (records/nvidia-h200/ceilings.json): 0.85 of it, 3,613 GB/s,
  reads the 117.4 MB of a 14336x4096 or 4096x14336 bf16 weight in 32.5 us, where F.linear took 40.5
  and 41.6 us (0.68 and 0.66 of copy; linear.bfloat16, run of 8b07192). The FMAs must fit under
  that: at copy speed an SM receives ~6.9 bf16 (3.5 float32) elements a clock and issues 128 thread
  instructions (4 SMSPs x 32 lanes), ~18 (~37) a weight element. The sm_90 SASS main loop spends 4.5
  at M = 1 in bf16, 12.8 at M = 8, 27.0 at M = 16 (16 FFMA, 7.5 to unpack bf16, loads) and 22.7 at
  M = 16 in float32 (nothing to unpack; benchmarks/matmul_sass_evidence.py). M = 16 in 16 bits would
  be issue-bound (~47 us at 1.98 GHz), so it stays on t01's tensor cores; float32 is memory-bound at
  every M <= 16
prediction: bf16, ~0.85 of copy: ~1.25x F.linear at 1x14336x4096, ~1.28x at 1x4096x14336 (~1.45x
  t01), ~0.95x at 1x128256x4096 (~0.9 of copy against F.linear's ~0.95 in shared/anchors-h200.md);
  16x14336x4096 is t01's kernel (~1.0x t01). float32, ~0.8 of copy (67 MB: a ~20 us kernel): ~1.6x
  F.linear at 1x4096x4096 and ~3.0x at 16x4096x4096 (~7.7x t01 at both)
outcome: 0.954x F.linear [0.946, 0.963] at 1x14336x4096 bfloat16 (predicted ~1.25x), 0.969x t01 [0.959, 0.976], 42.5 us,
  2,763 GB/s, 0.65 of copy, not ~0.85; 1.017x F.linear [1.006, 1.024] at 1x4096x14336 (predicted ~1.28x), 1.165x t01
  [1.158, 1.173], 40.3 us, 0.69 of copy (records linear.bfloat16, run of 6173353); float32: 1.194x F.linear
  [1.182, 1.205] at 1x4096x4096 (predicted ~1.6x), 27.3 us, 2,455 GB/s, 0.58 of copy, not ~0.8, and 0.810x
  [0.805, 0.819] max-autotune's kernel; 1.304x F.linear [1.286, 1.309] at 16x4096x4096 (predicted ~3.0x), 45.0 us,
  1,504 GB/s, 0.35 of copy (records linear.float32, run of b9c47ae)
deterministic: yes, each output element is one program's sum over K in a fixed order (no split-K, no
  atomics); the autotuner's choice is made once per (M, N, K) and dtype and kept
"""

# hello-gpu: record linear.float32
# hello-gpu: record linear.bfloat16

import os
from pathlib import Path

import torch
import triton
import triton.language as tl

from hello_gpu.ops.linear.launch import checked_output
from hello_gpu.ops.rung import load_module

_row_block = load_module(Path(__file__).resolve().with_name("t01_row_block.py"), "linear_t01_for_t02")

# Rows of A one pass over the weight serves with FMAs. Past these, t01's tl.dot kernel runs: in 16 bits
# at M = 16 the FMAs and conversions are ~27 instructions a weight element (sm_90 SASS of this kernel),
# more than the ~18 the SMs can issue per element at copy speed (4 SMSPs x 32 lanes a clock against
# ~7 bf16 elements a clock per SM at 3.6 TB/s); at M = 8 they are ~13. float32 has twice the issue
# slots per element (half the elements a byte) and no conversion: ~23 at M = 16 against ~37.
MAX_ROWS = {torch.float32: 16, torch.bfloat16: 8, torch.float16: 8}
WARPS = 4                  # A's step (32 lanes x 16 bytes = 512 bytes) is 4 bytes a thread, cp.async's
                           # smallest copy; with 8 warps it would be 2 and go through registers and a barrier
PACK_BYTES = 16            # one cp.async.cg 16 / LDG.E.128 per pack
MAX_SUMS = 64              # float32 sums a thread keeps (BLOCK_M x ROWS): 16 x 8 spills past 255 registers


def _config(rows, stages):
    return triton.Config({"ROWS": rows, "WARPS": WARPS, "STAGES": stages}, num_warps=WARPS, num_stages=stages)


# (rows a warp, stages). A program owns 4 x ROWS weight rows and keeps (stages - 1) steps of 512 bytes of
# each in flight in shared memory (8-64 KiB). 16-row programs suit both 4096 and 14336 rows (256 / 896
# programs); 8-row ones give 4096 rows 512 programs; 32-row ones read A (once a program) half as often.
CONFIGS = [_config(4, 3), _config(4, 5), _config(2, 4), _config(8, 3), _config(8, 5), _config(1, 6)]


def block_m(m: int) -> int:
    """Rows of A the kernel is compiled for: M rounded up to a power of two (tensor sizes are)."""
    return triton.next_power_of_2(m)


def fitting(configs, named_args, **kwargs):
    """The configurations whose BLOCK_M x ROWS float32 sums a thread can keep in registers."""
    return [c for c in configs if kwargs["BLOCK_M"] * c.kwargs["ROWS"] <= MAX_SUMS]


@triton.jit
def _halves(x):
    """(even, odd) elements of the last dimension of a 3-D tensor: in-thread, no data movement."""
    return tl.split(tl.reshape(x, [x.shape[0], x.shape[1], x.shape[2] // 2, 2]))


@triton.jit
def _fma_pack(w, a, acc):
    """acc + the sum over the pack (the last dimension) of w * a, as a chain of FMAs: a tl.sum adds a
    pack's 8 products as a tree, 12 instructions with the FMUL / FADD (sm_90 SASS) against these 8 FFMA."""
    if w.shape[2] == 1:
        return tl.fma(tl.reshape(w, [w.shape[0], w.shape[1]]), tl.reshape(a, [a.shape[0], a.shape[1]]), acc)
    else:
        w_even, w_odd = _halves(w)
        a_even, a_odd = _halves(a)
        return _fma_pack(w_odd, a_odd, _fma_pack(w_even, a_even, acc))


@triton.jit
def streaming_gemv_kernel(a_ptr, w_ptr, c_ptr, M, N, K, stride_am, stride_wn, stride_cm,
                          BLOCK_M: tl.constexpr, PACK: tl.constexpr, EVEN_K: tl.constexpr,
                          ROWS: tl.constexpr, WARPS: tl.constexpr, STAGES: tl.constexpr):
    # A step of one weight row is a [WARPS, 32, PACK] tile: warp w reads row first + w x ROWS + r, lane l
    # its pack l (k = step + l x PACK + e). The layout of the loads (16 bytes a lane, lanes along K) is
    # the one the FMAs use, so nothing is converted between them. Each of the ROWS rows is a tile (and a
    # shared-memory buffer) of its own: one [ROWS, WARPS, 32, PACK] tile would be laid out with a thread's
    # ROWS packs side by side, ROWS x 16 bytes between lanes, a 4-way bank conflict at ROWS = 4.
    BLOCK_N: tl.constexpr = ROWS * WARPS
    BLOCK_K: tl.constexpr = 32 * PACK
    first = tl.program_id(0) * BLOCK_N + tl.arange(0, WARPS)[:, None, None] * ROWS
    kk = tl.arange(0, 32)[None, :, None] * PACK + tl.arange(0, PACK)[None, None, :]
    w_tile = w_ptr + first.to(tl.int64) * stride_wn + kk
    a_tile = a_ptr + kk                      # [1, 32, PACK]: one copy of A's step, read by every warp
    # One float32 sum per (row i of A, row r of the warp's weight rows) and lane, at i x ROWS + r.
    sums = tl.zeros([WARPS, 32], dtype=tl.float32),
    for j in tl.static_range(1, BLOCK_M * ROWS):
        sums = sums + (tl.zeros([WARPS, 32], dtype=tl.float32),)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=STAGES):     # loads not feeding tl.dot: asked for by name
        w_rows = ()
        for r in tl.static_range(ROWS):
            if EVEN_K:
                w = tl.load(w_tile + r * stride_wn + k0, mask=first + r < N, other=0.0)
            else:
                w = tl.load(w_tile + r * stride_wn + k0, mask=(first + r < N) & (kk + k0 < K), other=0.0)
            w_rows = w_rows + (w.to(tl.float32),)
        summed = ()
        for i in tl.static_range(BLOCK_M):
            # Rows of A past M (BLOCK_M is a power of two) read row M - 1 again: no mask, never stored.
            a_row = a_tile + tl.minimum(i, M - 1).to(tl.int64) * stride_am + k0
            if EVEN_K:
                a = tl.load(a_row).to(tl.float32)
            else:
                a = tl.load(a_row, mask=kk + k0 < K, other=0.0).to(tl.float32)
            for r in tl.static_range(ROWS):
                summed = summed + (_fma_pack(w_rows[r], a, sums[i * ROWS + r]),)
        sums = summed
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, WARPS) * ROWS
    for i in tl.static_range(BLOCK_M):
        if i < M:
            for r in tl.static_range(ROWS):
                c = tl.sum(sums[i * ROWS + r], axis=1)           # the 32 lanes' sums: a 5-step butterfly
                tl.store(c_ptr + tl.full([], i, tl.int64) * stride_cm + rows + r, c.to(c_ptr.dtype.element_ty),
                         mask=rows + r < N)


# The Triton interpreter (TRITON_INTERPRET=1, read when this module is loaded) has no clock to tune
# with: there the first configuration that fits runs (the same kernel, so it is checked all the same).
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
TUNER = None if INTERPRETED else triton.autotune(configs=CONFIGS, key=["M", "N", "K"],
                                                 prune_configs_by={"early_config_prune": fitting})(
    streaming_gemv_kernel)


def winners() -> dict[str, str]:
    """The configuration the autotuner chose per (M, N, K, ...) key it has seen; empty in the interpreter."""
    return {} if TUNER is None else {str(key): str(config) for key, config in TUNER.cache.items()}


def run(a, weight, out=None):
    out = checked_output(a, weight, out)
    m, n = out.shape
    k = a.shape[1]
    if m > MAX_ROWS[a.dtype]:
        return _row_block.run(a, weight, out)
    if out.numel() == 0:
        return out
    pack = PACK_BYTES // a.element_size()
    constants = {"BLOCK_M": block_m(m), "PACK": pack, "EVEN_K": k % (32 * pack) == 0}
    arguments = (a, weight, out, m, n, k, a.stride(0), weight.stride(0), out.stride(0))
    if INTERPRETED:
        first = fitting(CONFIGS, None, **constants)[0]
        streaming_gemv_kernel[(triton.cdiv(n, first.kwargs["ROWS"] * first.kwargs["WARPS"]),)](
            *arguments, **constants, **first.kwargs, num_warps=first.num_warps, num_stages=first.num_stages)
        return out

    def grid(meta):
        return (triton.cdiv(n, meta["ROWS"] * meta["WARPS"]),)
    TUNER[grid](*arguments, **constants)
    return out
