"""Triton decode GEMV at M = 1 with the weight loaded straight into registers and marked evict-first: t03's
product tile without its shared-memory pipeline, in [2, 2048] tiles.

parent: t03_tiled_gemv
change: two things, both from benchmarks/gemv_sweep.py --loads (records/nvidia-h100-80gb-hbm3/
  gemv-sweep.loads.json, run of 91a281a). (1) No cp.async pipeline: the loop is an ordinary one
  (num_stages=1), each step's loads go from global memory to registers, 16 bytes a lane. (2) The weight's
  loads carry eviction_policy="evict_first": each weight line is read once, so it is the first the L2 gives
  up, before the lines other kernels left there. The tile becomes [2, 2048]: a program owns 2 weight rows
  (7168 programs at N = 14336, 1024 at the 1B's 2048 rows) and reads 4 KiB of each row a step. M > 1 runs
  t02's kernel, as t03 does
hypothesis: t03 read a 14336x4096 bf16 weight at 2,283 GB/s on the H100 (1.032x F.linear [1.023, 1.042],
  records/nvidia-h100-80gb-hbm3/linear.bfloat16.json, run of 9ef0910), while Inductor's max-autotune
  kernel, a plain reduction over K (XBLOCK 4, R0_BLOCK 256, 4 warps, one stage, the weight read
  evict_first), read it at 2,634 GB/s. The sweep separated the two changes: at 1x16384x2048, [8, 512] tiles
  took 34.8 us with the pipeline (either eviction policy), 34.6 us without it and the default policy, and
  29.4 us without it and evict_first. So the gain needs both, and evict_first is the larger part. Why: the
  cold-cache protocol (hello_gpu.bench.timing, "Dirty lines") leaves the L2 full of modified lines, and a
  default-policy read evicts those first, writing each back to DRAM inside the timed call; an evict-first
  line replaces the weight's own earlier lines instead. cp.async does not carry the hint, which is why the
  pipelined tiles gained nothing from it. In a model's decode step the L2 holds the previous kernels'
  outputs (KB to MB, some of them modified) and the previous projection's clean weight lines, so the gain
  there should be smaller; the model run will say
prediction: on the H100, cold, ~1.12x F.linear at 1x14336x4096 and ~1.15x at 1x4096x14336 (the sweep's
  [2, 2048] one-stage evict-first tile: 1.117x [1.101, 1.122] and 1.148x [1.135, 1.154]; this kernel stores
  bf16 instead of float32), ~1.08x t03, ~0.82 of copy (2,470 GB/s of 3,008); still ~0.96x Inductor's peer
  at 1x4096x14336 (its 16 warps on one row at a time read 2,567 GB/s)
outcome: as predicted, on the H100, cold: 1.121x F.linear [1.112, 1.133] at 1x14336x4096 (47.2 us, 2,488 GB/s)
  and 1.151x [1.139, 1.161] at 1x4096x14336 (47.7 us, 2,462 GB/s); 0.952x [0.937, 0.956] and 1.031x
  [1.023, 1.043] the max-autotune peer (records/nvidia-h100-80gb-hbm3/linear.bfloat16.json, run of
  88cfe11). 0.83 and 0.82 of the 3,008 GB/s copy this session's model runs measured: short of issue 21's
  0.85. What a user pays per call: 67.6 and 72.8 us against the peer's 123.2 and 127.3 us (its compiled
  call's host side). In the 1B's decode step (warm, in step order, each projection on its own weight) the
  backend timed the linear replacement at 1.08x eager [1.08, 1.09]
  (models/run.1b.b1.p512.n256.cut-short, a run cut short before its compile backend)
deterministic: yes, each output element is one program's sum in a fixed order: every step's products
  into the same accumulator slot, then one tl.sum over the 2048 slots
"""

# hello-gpu: record linear.bfloat16

from pathlib import Path

import triton
import triton.language as tl

from hello_gpu.ops.linear.launch import checked_output
from hello_gpu.ops.rung import load_module

_streaming = load_module(Path(__file__).resolve().with_name("t02_streaming_gemv.py"), "linear_t02_for_t04")

BLOCK_N = 2         # rows a program: 7168 programs at N = 14336, 1024 at the 1B's 2048 (~8 an SM on 132)
BLOCK_K = 2048      # columns a step: 4 KiB of each row in bf16, a [2, 2048] tile = 32 float32 sums a thread
WARPS = 4


@triton.jit
def evict_first_gemv_kernel(a_ptr, w_ptr, c_ptr, N, K, stride_wn,
                            BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    live = rows < N
    w_rows = w_ptr + rows[:, None].to(tl.int64) * stride_wn
    columns = tl.arange(0, BLOCK_K)
    products = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=1):           # no pipeline: loads straight to registers
        k = k0 + columns
        if EVEN_K:
            w = tl.load(w_rows + k[None, :], mask=live[:, None], other=0.0, eviction_policy="evict_first")
            x = tl.load(a_ptr + k)
        else:
            w = tl.load(w_rows + k[None, :], mask=live[:, None] & (k < K)[None, :], other=0.0,
                        eviction_policy="evict_first")
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
    evict_first_gemv_kernel[(triton.cdiv(n, BLOCK_N),)](a, weight, out, n, k, weight.stride(0), BLOCK_N=BLOCK_N,
                                                        BLOCK_K=BLOCK_K, EVEN_K=k % BLOCK_K == 0,
                                                        num_warps=WARPS, num_stages=1)
    return out
