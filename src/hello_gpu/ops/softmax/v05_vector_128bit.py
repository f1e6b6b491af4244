"""Launcher for v05_vector_128bit.hip: one block per row, sized to hold the row (as v04).

Each thread keeps up to PER_THREAD values, so a row of `columns` needs ceil(columns / PER_THREAD)
threads, rounded up to whole warps (the kernel's shuffles need every lane of a warp to exist):

    columns     8192   32768   1024   4097   781   1
    threads      256    1024     32    160    32  32      (warps of 32)

The fewest threads that hold the row: the register count per thread is fixed at compile time (~60,
so ~1024 threads per SM whatever the block), and smaller blocks mean more rows in flight per SM.
Rows longer than 1024 x 32 = 32768 columns get 1024 threads and the kernel's re-reading fallback.
"""

import math

from hello_gpu.ops.softmax.launch import checked_output, warp_size

PER_THREAD = 32      # kPerThread in the .hip file
MAX_BLOCK = 1024     # kMaxBlock in the .hip file


def block_for(columns: int, warp: int) -> int:
    """Threads for a row of `columns`: enough to hold it in registers, whole warps, at most 1024."""
    threads = math.ceil(math.ceil(columns / PER_THREAD) / warp) * warp
    return min(MAX_BLOCK, max(warp, threads))


def run(kernel, x, out=None):
    out = checked_output(x, out)
    rows, columns = x.shape
    if x.numel() == 0:
        return out
    kernel(x, out, rows, columns, block=block_for(columns, warp_size(x)), grid=rows)
    return out
