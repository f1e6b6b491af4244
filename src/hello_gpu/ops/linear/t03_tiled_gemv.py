"""Triton decode GEMV at M = 1 as 2-D tiles of whole weight rows: a program owns 8 rows and walks K in
[8, 512] tiles, one float32 product tile a step, summed once after the loop.

parent: t02_streaming_gemv
change: at M = 1, program p owns weight rows 8p .. 8p + 7 and walks K in steps of 512 columns: each step
  loads an [8, 512] tile (8 rows of 1 KiB in bf16, contiguous in each row; the 4 warps' lanes each read
  16 bytes), the same 512 elements of x, and adds tile x x into a float32 [8, 512] accumulator (32 sums a
  thread); Triton's tl.range pipelines the loads 3 stages deep (cp.async into shared memory). After the
  loop one tl.sum per row adds the 512 columns and the row's bf16 result is stored. Nothing is chosen at
  run time: one configuration, no autotuning, no split-K. M > 1 runs t02's kernel
hypothesis: t02 gives each weight row to one warp and streams it through shared memory 512 bytes a step;
  it read the weight at 0.65-0.69 of copy on the H200. benchmarks/gemv_sweep.py (stage gemv-sweep,
  records/nvidia-h100-80gb-hbm3/gemv-sweep.json, run of 75500b4) timed plain [BLOCK_N, BLOCK_K] tiles
  against a pure read of the same bytes (the read floor: 2,350 GB/s for the 117 MB of a 14336x4096 bf16
  weight on the H100, a 50 us read that never reaches copy speed) and against F.linear: [8, 512] tiles
  with one split read at 0.973 of the floor at 1x14336x4096 (1.036x F.linear [1.025, 1.041]), 0.982 at
  1x4096x14336 (1.073x [1.062, 1.081]), 0.954 at 1x16384x2048 (1.024x) and 0.960 with [8, 1024] at
  1x2048x8192 (1.096x; [8, 512]: 1.087x). Split-K 2-8 was slower at every shape (its zeroing and atomics
  cost more than the programs it adds: 14336 rows are 1792 programs, 2048 rows 256, already 2 an SM)
prediction: on the H100, ~1.04x F.linear at 1x14336x4096 and ~1.07x at 1x4096x14336 (the sweep's
  kernel with a bf16 store instead of float32), ~0.97 of the read floor; against t02 unknown (t02 has no
  H100 record yet). On the H200 unmeasured
outcome: on the H100, 1.032x F.linear [1.023, 1.042] at 1x14336x4096 (51.5 us, 2,283 GB/s) and 1.042x
  [1.039, 1.057] at 1x4096x14336 (51.4 us), as predicted at the first shape and below it at the second; but
  0.853x [0.845, 0.862] and 0.922x Inductor's max-autotune peer, which read the weight at 2,634 and 2,449
  GB/s, faster than the sweep's own "read floor" (records/nvidia-h100-80gb-hbm3/linear.bfloat16.json, run of
  9ef0910). t04 follows what that peer does differently
deterministic: yes, each output element is one program's sum in a fixed order: every step's products
  into the same accumulator slot, then one tl.sum over the 512 slots
"""

# hello-gpu: record linear.bfloat16

from pathlib import Path

import triton
import triton.language as tl

from hello_gpu.ops.linear.launch import checked_output
from hello_gpu.ops.rung import load_module

_streaming = load_module(Path(__file__).resolve().with_name("t02_streaming_gemv.py"), "linear_t02_for_t03")

BLOCK_N = 8         # rows a program: 1792 programs at N = 14336, 256 at the 1B's 2048 (~2 an SM on 132)
BLOCK_K = 512       # columns a step: 1 KiB of each row in bf16, an [8, 512] tile = 32 float32 sums a thread
WARPS = 4
STAGES = 3          # two tiles (16 KiB in bf16) in flight a program while the third is multiplied


@triton.jit
def tiled_gemv_kernel(a_ptr, w_ptr, c_ptr, N, K, stride_wn,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, STAGES: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    live = rows < N
    w_rows = w_ptr + rows[:, None].to(tl.int64) * stride_wn
    columns = tl.arange(0, BLOCK_K)
    products = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=STAGES):
        k = k0 + columns
        if EVEN_K:
            w = tl.load(w_rows + k[None, :], mask=live[:, None], other=0.0)
            x = tl.load(a_ptr + k)
        else:
            w = tl.load(w_rows + k[None, :], mask=live[:, None] & (k < K)[None, :], other=0.0)
            x = tl.load(a_ptr + k, mask=k < K, other=0.0)
        products += w.to(tl.float32) * x.to(tl.float32)[None, :]
    tl.store(c_ptr + rows, tl.sum(products, axis=1).to(c_ptr.dtype.element_ty), mask=live)


def run(a, weight, out=None):
    out = checked_output(a, weight, out)
    m, n = out.shape
    if m != 1:
        return _streaming.run(a, weight, out)
    if out.numel() == 0:
        return out
    k = a.shape[1]
    tiled_gemv_kernel[(triton.cdiv(n, BLOCK_N),)](a, weight, out, n, k, weight.stride(0), BLOCK_N=BLOCK_N,
                                                  BLOCK_K=BLOCK_K, EVEN_K=k % BLOCK_K == 0, STAGES=STAGES,
                                                  num_warps=WARPS)
    return out
