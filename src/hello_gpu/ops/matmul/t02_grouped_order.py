"""Triton, tiles of C visited in groups of 8 tile rows, so the programs running together share tiles of
A and B in L2; larger tiles (128x128x32, 8 warps).

parent: t01_block_tile
change: program p computes tile (pid_m, pid_n) in "grouped" order: groups of GROUP_M = 8 tile rows,
  column by column inside a group, instead of row by row; tiles grow to 128x128 with BLOCK_K = 32
  and 8 warps. The tile loop is t01's (tile_product); grouped_kernel is what t03 and t04 launch
  with other sizes
hypothesis: the 132 SMs run ~132-264 programs at once. In row-major order at 4096^3 (32x32 tiles of
  128) those are ~4-8 whole tile rows: 8 row slabs of A (1 MiB each in bf16) and all 32 column
  slabs of B (the whole 32 MiB of B), re-read from DRAM as L2 (60 MiB) cycles. Grouped, the same
  programs cover an 8x16..8x32 block: 8 slabs of A and 16-32 of B, the same B slabs reused by 8 tile
  rows while in L2. DRAM traffic falls ~2-4x; at 4096^3 (compute-bound) that matters less than the
  larger tiles (2x the reuse of t01's 64x64): ~0.8x cuBLAS bf16. Grouping pays most where B is large
  (the 128256x4096 head)
prediction: ~1.7x t01 bf16 at 4096^3 (~0.8x torch.mm)
outcome: 1.609x t01 [1.604, 1.610] at 4096^3 bfloat16 (predicted ~1.7x), 0.625x torch.mm [0.622, 0.629]
  (predicted ~0.8x), 483 TFLOP/s; 1.580x t01, 0.606x torch.mm at 8192^3; 0.969x t01, 0.822x torch.mm in
  float32 (records matmul.bfloat16 and matmul.float32, run of 8b07192)
deterministic: yes, each tile of C is one program's sum over K in order
"""

# hello-gpu: record matmul.float32
# hello-gpu: record matmul.bfloat16

from pathlib import Path

import torch
import triton
import triton.language as tl

from hello_gpu.ops.matmul.launch import checked_output
from hello_gpu.ops.rung import load_module

# t01's tile loop and store, loaded fresh as the registry loads rungs (so this process's Triton
# interpreter setting applies); module-level names, so the @triton.jit kernel below can call them.
_block_tile = load_module(Path(__file__).resolve().with_name("t01_block_tile.py"), "matmul_t01_for_t02")
tile_product, store_tile = _block_tile.tile_product, _block_tile.store_tile

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, WARPS = 128, 128, 32, 8, 8
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@triton.jit
def grouped_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                   IEEE: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n                        # programs in one group of GROUP_M tile rows
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)   # the last group may be shorter
    within = pid % per_group
    pid_m = first_m + within % rows_in_group             # down the group's tile rows first,
    pid_n = within // rows_in_group                      # then the next column of tiles
    acc = tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K, IEEE)
    store_tile(c_ptr, acc, M, N, stride_cm, pid_m, pid_n, BLOCK_M, BLOCK_N)


def launch(a, b, out, *, block_m, block_n, block_k, group_m, warps, stages=None):
    """Check, then run grouped_kernel with these sizes (t03 and t04 call it with theirs)."""
    out = checked_output(a, b, out, DTYPES)
    (m, k), n = a.shape, b.shape[1]
    if out.numel():
        grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
        extra = {} if stages is None else {"num_stages": stages}
        grouped_kernel[grid](a, b, out, m, n, k, a.stride(0), b.stride(0), out.stride(0), BLOCK_M=block_m,
                             BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, IEEE=a.dtype == torch.float32,
                             num_warps=warps, **extra)
    return out


def run(a, b, out=None):
    return launch(a, b, out, block_m=BLOCK_M, block_n=BLOCK_N, block_k=BLOCK_K, group_m=GROUP_M, warps=WARPS)
