"""Launcher for v06_rows_per_block.hip: a warp per short row, a block per long row.

Short rows (columns <= warp x PER_THREAD: 1024 on NVIDIA) are one warp's work: blocks of ROWS_BLOCK
threads, ROWS_BLOCK / warp rows each. 256 threads: the kernel may use up to 64 registers a thread (its
__launch_bounds__(1024) budget; it compiles to 53-64), so 4 such blocks (32 warps, 32 rows) share an
SM's 65536 registers, and 4096 rows of 1024 are 512 blocks: one wave on 132 SMs (528 places).
Longer rows: one block per row, as v05 (the fewest whole warps that hold the row in registers):

    columns     8192   32768   4097   1025
    threads      256    1024    160     64      (warps of 32)
"""

import math

from hello_gpu.ops.softmax.launch import checked_output, warp_size

PER_THREAD = 32      # kPerThread in the .hip file
MAX_BLOCK = 1024     # kMaxBlock in the .hip file
ROWS_BLOCK = 256     # threads per block for warp-per-row: 8 rows of 32 lanes


def block_for(columns: int, warp: int) -> int:
    """Threads for a row of `columns`: enough to hold it in registers, whole warps, at most 1024."""
    threads = math.ceil(math.ceil(columns / PER_THREAD) / warp) * warp
    return min(MAX_BLOCK, max(warp, threads))


def launch_shape(rows: int, columns: int, warp: int) -> tuple[int, int]:
    """(block, grid): the kernel takes the warp-per-row path exactly when columns <= warp x PER_THREAD."""
    if columns <= warp * PER_THREAD:
        return ROWS_BLOCK, math.ceil(rows / (ROWS_BLOCK // warp))
    return block_for(columns, warp), rows


def run(kernel, x, out=None):
    out = checked_output(x, out)
    rows, columns = x.shape
    if x.numel() == 0:
        return out
    block, grid = launch_shape(rows, columns, warp_size(x))
    kernel(x, out, rows, columns, block=block, grid=grid)
    return out
