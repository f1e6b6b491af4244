"""Triton decode GEMV with split-K in one launch: few long rows (4096x14336, the 1B's 2048x8192) spread over
every SM, the splits' partial sums added by the last program of each row block, in split order.

parent: t02_streaming_gemv
change: at M = 1, when the weight has fewer row blocks of BLOCK_N = 16 rows than 2 x SMs (4096 rows: 256
  blocks; 2048: 128 for 132 SMs), K is cut into SPLITS = min(8, ceil(2 x SMs / blocks)) whole-tile shares
  (at least BLOCK_K = 512 columns each). Program (block, split) walks its share in [16, 512] tiles (2-D loads:
  16 rows of 512 contiguous elements, tl.range with 3 stages), FMAs into a float32 tile and writes its 16
  partial sums to a float32 workspace (SPLITS, N). It then adds 1 to its row block's counter (atomic,
  acquire-release at GPU scope, after a barrier so the whole program's stores come first); the program that
  sees SPLITS - 1 is the last: it reads the SPLITS partials through L2 (.cg: another SM wrote them), adds
  them in split order, rounds once, stores the 16 outputs and sets the counter back to 0 for the next call.
  Counters are kept per (device, stream), zero from their allocation on. M > 1, or enough row blocks
  already, run t02's kernel
hypothesis: t02 reads a 4096x14336 bf16 weight at 0.69 of copy (40.3 us, 2,918 GB/s) with 256 programs of 16
  rows, one warp a row: two programs an SM at most and a 28 KiB row each, so the SMs that finish early idle
  while the rest stream. Inductor's max-autotune kernel reads the same weight at 3,486 GB/s (1.207x F.linear
  [1.20, 1.21], records linear.bfloat16 on the H200). With 4 splits, 1024 programs of 16 rows x 3584 columns
  keep every SM streaming to the end; the fix-up reads 4 x 16 floats a block (256 KiB in all, from L2)
  (small against the 117 MB of weight)
prediction: ~0.82 of copy at 1x4096x14336 bf16, ~1.2x F.linear and ~1.2x t02 (33-34 us); the 1B's 1x2048x8192
  (33.5 MB, 128 blocks): ~1.3x t02; 1x14336x4096 runs t02's kernel (~1.0x t02). benchmarks/gemv_sweep.py
  (stage gemv-sweep, not run yet) tests the premise first: whether split-K pays at these shapes
outcome: not measured yet
deterministic: yes, each output is one program's sum of the splits' partials in split order, each partial a
  fixed order over its share of K; which program is last does not change the order
"""

# hello-gpu: record linear.float32
# hello-gpu: record linear.bfloat16

from pathlib import Path

import torch
import triton
import triton.language as tl

from hello_gpu.ops.linear.launch import checked_output
from hello_gpu.ops.rung import load_module

_streaming = load_module(Path(__file__).resolve().with_name("t02_streaming_gemv.py"), "linear_t02_for_t03")

BLOCK_N = 16            # rows a program: 16 x 512 bf16 = 16 KiB a tile
BLOCK_K = 512           # contiguous columns a tile row (1 KiB in bf16)
WARPS = 8               # a [16, 512] float32 tile is 32 sums a thread over 8 warps
STAGES = 3
MAX_SPLITS = 8
BLOCKS_PER_SM = 2       # fewer row blocks than this many a SM: split K
INTERPRETER_SMS = 4     # no GPU to count SMs on: few, so small test shapes split too


@triton.jit
def split_k_gemv_kernel(a_ptr, w_ptr, c_ptr, partials_ptr, counters_ptr, N, K, stride_w, share,
                        SPLITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        STAGES: tl.constexpr):
    block = tl.program_id(0)
    split = tl.program_id(1)
    rows = block * BLOCK_N + tl.arange(0, BLOCK_N)
    live = rows < N
    first = split * share
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in tl.range(first, first + share, BLOCK_K, num_stages=STAGES):
        columns = k0 + tl.arange(0, BLOCK_K)
        inside = columns < K
        w = tl.load(w_ptr + rows[:, None].to(tl.int64) * stride_w + columns[None, :],
                    mask=live[:, None] & inside[None, :], other=0.0)
        a = tl.load(a_ptr + columns, mask=inside, other=0.0)
        acc += w.to(tl.float32) * a.to(tl.float32)[None, :]
    tl.store(partials_ptr + split * N + rows, tl.sum(acc, axis=1), mask=live)
    tl.debug_barrier()                        # every thread's partials stored before the one atomic below
    arrived = tl.atomic_add(counters_ptr + block, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLITS - 1:                 # the last of the row block's programs: add the splits in order
        total = tl.zeros([BLOCK_N], dtype=tl.float32)
        for s in tl.static_range(SPLITS):
            total += tl.load(partials_ptr + s * N + rows, mask=live, other=0.0, cache_modifier=".cg")
        tl.store(c_ptr + rows, total.to(c_ptr.dtype.element_ty), mask=live)
        tl.atomic_xchg(counters_ptr + block, 0, sem="relaxed", scope="gpu")


_COUNTERS: dict = {}        # (device, stream) -> int32 counters, zero between calls (the last program resets)


def _counters(device: torch.device, blocks: int) -> torch.Tensor:
    """Zeroed counters for ``blocks`` row blocks on this device's current stream: calls on one stream run in
    order, so they never see each other's counts. Made outside a CUDA-graph capture (the first call of a
    shape, a warm-up, comes before it): one made during capture would be the graph's memory."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device, stream)
    counters = _COUNTERS.get(key)
    if counters is None or counters.numel() < blocks:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"linear t03_split_k: no counters for {blocks} row blocks on this stream yet, and a "
                               f"CUDA graph is being captured; call it once at this shape before the capture")
        counters = torch.zeros(max(blocks, 1024), device=device, dtype=torch.int32)
        _COUNTERS[key] = counters
    return counters


def multiprocessors(device: torch.device) -> int:
    if device.type != "cuda":
        return INTERPRETER_SMS
    from hello_gpu.runtime.device import device_info
    return device_info(device.index).multiprocessors


def splits_for(n: int, k: int, sms: int) -> int:
    """How many shares of K: enough programs for BLOCKS_PER_SM a SM, at most MAX_SPLITS, each share at least
    one BLOCK_K tile; 1 where the row blocks alone fill the SMs."""
    blocks = triton.cdiv(n, BLOCK_N)
    wanted = min(MAX_SPLITS, triton.cdiv(BLOCKS_PER_SM * sms, blocks), max(1, k // BLOCK_K))
    return max(1, wanted)


def run(a, weight, out=None):
    out = checked_output(a, weight, out)
    m, n = out.shape
    k = a.shape[1]
    splits = splits_for(n, k, multiprocessors(a.device)) if m == 1 else 1
    if splits == 1 or out.numel() == 0:
        return _streaming.run(a, weight, out)
    share = triton.cdiv(triton.cdiv(k, splits), BLOCK_K) * BLOCK_K      # whole tiles a split
    splits = triton.cdiv(k, share)                                       # rounding may leave fewer
    blocks = triton.cdiv(n, BLOCK_N)
    partials = torch.empty((splits, n), device=a.device, dtype=torch.float32)
    split_k_gemv_kernel[(blocks, splits)](
        a, weight, out, partials, _counters(a.device, blocks), n, k, weight.stride(0), share,
        SPLITS=splits, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, STAGES=STAGES, num_warps=WARPS)
    return out
