"""Triton decode GEMV at M = 1: t04's kernel launched with one weight row a program, the row in steps of up to
4096 columns, and 16 warps.

parent: t04_evict_first_gemv
change: the launch only; the kernel is t04's (loads straight to registers, the weight evict-first, one float32
  sum a column slot, tl.sum at the end). A program owns 1 weight row instead of 2 (14336 programs at N = 14336),
  walks it in steps of 4096 columns (2048 where K is a multiple of 2048 but not of 4096, as the 8B's down_proj's
  14336: 7 whole steps instead of 3.5), and runs 16 warps instead of 4: a [1, 4096] step is one 16-byte load a
  thread over 512 threads, where t04's [2, 2048] step is four a thread over 128. M > 1 runs t04's path (t02's
  kernel, t01's from 9 rows in 16 bits), as t04 does
hypothesis: Inductor's max-autotune GEMV, a reduction over K with this launch (XBLOCK 1, R0_BLOCK 4096 and 2048
  at K = 14336, 16 warps, one stage, the weight evict-first), read a 14336x4096 bf16 weight in 44.2 us on the
  H100 (0.876 of the 3,030 GB/s copy) and a 4096x14336 one in 45.9 us, where the best of our one-row tiles, all
  at 4 warps, took 47.6 and 47.7 us (records/nvidia-h100-80gb-hbm3/gemv-sweep.loads.session27.json, run of
  2d4889b). The same bytes in flight a step with a quarter of the registers a thread, and 4x the warps an SM
  to hide each load's latency behind: the lever should be the warps (benchmarks/gemv_sweep.py --warps, not yet
  run, separates them from the tile)
prediction: on the H100, cold: ~44 us at 1x14336x4096 (~1.07x t04, ~1.20x F.linear, ~0.87 of copy: issue 21's
  0.85) and ~46 us at 1x4096x14336 (~1.04x t04, ~1.18x F.linear, ~0.84 of copy)
outcome: not measured yet (written in session 27 after its GPU time was spent)
deterministic: yes, each output element is one program's sum in a fixed order: every step's products into the
  same accumulator slot, then one tl.sum over the slots
"""

# hello-gpu: record linear.bfloat16

from pathlib import Path

import triton

from hello_gpu.ops.linear.launch import checked_output
from hello_gpu.ops.rung import load_module

_t04 = load_module(Path(__file__).resolve().with_name("t04_evict_first_gemv.py"), "linear_t04_for_t05")
evict_first_gemv_kernel = _t04.evict_first_gemv_kernel

BLOCK_N = 1         # rows a program: 14336 programs at N = 14336, 2048 at the 1B's down_proj (~15 an SM on 132)
BLOCK_K = 4096      # columns a step: 8 KiB of the row in bf16, one 16-byte load a thread over 16 warps
WARPS = 16


def columns_a_step(k: int) -> int:
    """BLOCK_K, or 2048 where K is a multiple of 2048 but not of 4096 (whole steps), or K's next power of two
    below 4096 (a short row in one step)."""
    if k % BLOCK_K and k % (BLOCK_K // 2) == 0:
        return BLOCK_K // 2
    return min(BLOCK_K, triton.next_power_of_2(max(k, 1)))


def run(a, weight, out=None):
    out = checked_output(a, weight, out)
    m, n = out.shape
    if m != 1:
        return _t04.run(a, weight, out)
    if out.numel() == 0:
        return out
    k = a.shape[1]
    step = columns_a_step(k)
    evict_first_gemv_kernel[(triton.cdiv(n, BLOCK_N),)](a, weight, out, n, k, weight.stride(0), BLOCK_N=BLOCK_N,
                                                        BLOCK_K=step, EVEN_K=k % step == 0, num_warps=WARPS,
                                                        num_stages=1)
    return out
