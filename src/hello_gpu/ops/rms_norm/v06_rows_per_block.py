"""Launcher for v06_rows_per_block.hip: a 2-D block of (threads per row, rows per block).

Threads per row: as v05 (the fewest that hold the row: 4 packs or 16 elements a thread), then a
power of two when under a warp (a row's lanes must be an aligned group inside one warp for the
XOR shuffles), else whole warps, at most 1024. Rows per block: 256 / threads per row, at least 1,
so short rows share 256-thread blocks and long ones get a block each; the block is always a whole
number of warps. The input checks are v01's (``checked_output``).

    bfloat16 16384x8192: (256, 1) x 16384 blocks   bfloat16 8192x4096: (128, 2) x 4096 blocks
    float32 8192x4096:   (256, 1) x 8192 blocks    bfloat16 262144x64: (2, 128) x 2048 blocks
    bfloat16 1823x781 (odd): (64, 4) x 456 blocks
"""

import math

from hello_gpu.ops.rms_norm.spec import EPS
from hello_gpu.ops.rms_norm.launch import checked_output
from hello_gpu.ops.rms_norm.v05_threads_match_row import (
    MAX_BLOCK,
    needed_threads,
    warp_size,
)

# Threads per block when rows are short: the same 256 as v04. At the kernel's 44-48 registers a
# thread an SM holds 5 such blocks (65536 / (48 x 256)), 1280 threads.
TARGET_BLOCK = 256


def block_for(x, weight, out) -> tuple[int, int]:
    """(threads per row, rows per block)."""
    warp = warp_size(x.device.index or 0)
    needed = needed_threads(x, weight, out)
    if needed <= warp:
        threads_per_row = 1 << (needed - 1).bit_length()        # 1, 2, 4, ..., warp
    else:
        threads_per_row = min(MAX_BLOCK, math.ceil(needed / warp) * warp)
    return threads_per_row, max(1, TARGET_BLOCK // threads_per_row)


def run(kernel, x, weight, out=None):
    out = checked_output(x, weight, out)
    rows, columns = x.shape
    if x.numel() == 0:
        return out
    threads_per_row, rows_per_block = block_for(x, weight, out)
    kernel(x, weight, out, rows, columns, EPS, block=(threads_per_row, rows_per_block),
           grid=math.ceil(rows / rows_per_block))
    return out
