"""Triton decode GEMV for 9 to 16 rows in 16 bits: t01's tl.dot tile, the weight's loads evict-first, no pipeline
where the programs are many, and a row block sized by the weight's rows.

parent: t05_row_per_program
change: for 9 <= M <= 16 in bfloat16 / float16 (where t05, through t04 and t02, ran t01's kernel: [16, 32]
  outputs a program, 256-column steps, 3 stages, the default policy), one kernel: program p owns weight rows
  [p BLOCK_N, (p + 1) BLOCK_N) and x's 16 rows (masked past M), walks K in BLOCK_K steps, and adds tl.dot of x's
  [16, BLOCK_K] step and the weight's [BLOCK_N, BLOCK_K] step, transposed, into a float32 [16, BLOCK_N] tile.
  Three differences from t01: the weight's loads carry evict_first; the loop has one stage (loads straight to
  registers, the hint kept) where there are at least 1.5 programs an SM, and 3 (cp.async) below that, where each
  of a few programs must keep more bytes in flight; BLOCK_N = 64 and BLOCK_K = 256 from 8192 weight rows, 32 and
  512 below (the 8B's 14336 rows: 224 programs; its 4096: 128, 3 stages). M = 1 runs t05, every other case t05's
  path (float32 up to 16 rows: t02; more than 16 rows: t01)
hypothesis: the 16-row sweep with these loads (benchmarks/gemv_sweep.py --rows 16 --loads,
  records/nvidia-h100-80gb-hbm3/gemv-sweep.m16.loads.json, run of d3d3573, one split, cold): [64, 256] at one
  stage, evict-first read 16x14336x4096 in 49.9 us, 1.067x F.linear [1.058, 1.077], where the 3-stage tiles with
  the default policy took 53.0 us and more (t01's [32, 256] 3-stage tile: 0.966x F.linear in the sweep before,
  gemv-sweep.m16.json); at 16x4096x14336 (64 row blocks of 64, 128 of 32) one stage starved: [32, 512] at 3
  stages, evict-first was the best of one split, 53.4 us, 1.017x [1.012, 1.029]. The hint, as at one row, is the
  part that needs plain loads
prediction: on the H100, cold: ~50 us at 16x14336x4096 (~1.07x F.linear, ~1.10x t05 there, ~0.78 of copy) and
  ~53 us at 16x4096x14336 (~1.02x F.linear, ~t05). Issue 21's 0.85 of copy at M = 16 stays out of reach: the read
  floor of the sweep itself read these weights at 0.78
outcome: not measured yet (written in session 27 after its GPU time was spent)
deterministic: yes, each [16, BLOCK_N] block of C is one program's tl.dot sums over K in order
"""

# hello-gpu: record linear.bfloat16

from pathlib import Path

import torch
import triton
import triton.language as tl

from hello_gpu.ops.linear.launch import checked_output
from hello_gpu.ops.rung import load_module

_t05 = load_module(Path(__file__).resolve().with_name("t05_row_per_program.py"), "linear_t05_for_t06")

ROWS = 16                 # rows of x a program holds: tl.dot's smallest M
FEWEST_ROWS = 9           # from here t05's path ran t01's tl.dot kernel (t02 streams up to 8 rows in 16 bits)
WIDE_WEIGHT = 8192        # weight rows from which a program owns 64 of them
WARPS = 4
PROGRAMS_AN_SM = 1.5      # programs an SM from which the loop has no pipeline


@triton.jit
def evict_first_dot_kernel(a_ptr, w_ptr, c_ptr, M, N, K, stride_am, stride_wn, stride_cm, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr, STAGES: tl.constexpr):
    rows = tl.arange(0, 16)
    columns = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + rows[:, None].to(tl.int64) * stride_am
    w_rows = w_ptr + columns[:, None].to(tl.int64) * stride_wn      # weight row n gives column n of C
    acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=STAGES):
        k = k0 + ks
        a = tl.load(a_rows + k[None, :], mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        w = tl.load(w_rows + k[None, :], mask=(columns[:, None] < N) & (k[None, :] < K), other=0.0,
                    eviction_policy="evict_first")
        acc = tl.dot(a, tl.trans(w), acc)
    c = c_ptr + rows[:, None].to(tl.int64) * stride_cm + columns[None, :]
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (columns[None, :] < N))


def tile_for(n: int, sms: int) -> tuple[int, int, int]:
    """(BLOCK_N, BLOCK_K, stages) for a weight of ``n`` rows on a GPU of ``sms`` SMs."""
    block_n, block_k = (64, 256) if n >= WIDE_WEIGHT else (32, 512)
    return block_n, block_k, 1 if triton.cdiv(n, block_n) >= PROGRAMS_AN_SM * sms else 3


def _sms(device: torch.device) -> int:
    """The device's SMs; the H100's and H200's 132 where there is none (the Triton interpreter)."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 132


def run(a, weight, out=None):
    out = checked_output(a, weight, out)
    m, n = out.shape
    if not FEWEST_ROWS <= m <= ROWS or a.dtype == torch.float32:
        return _t05.run(a, weight, out)
    if out.numel() == 0:
        return out
    block_n, block_k, stages = tile_for(n, _sms(a.device))
    evict_first_dot_kernel[(triton.cdiv(n, block_n),)](a, weight, out, m, n, a.shape[1], a.stride(0), weight.stride(0),
                                                       out.stride(0), BLOCK_N=block_n, BLOCK_K=block_k,
                                                       STAGES=stages, num_warps=WARPS, num_stages=stages)
    return out
