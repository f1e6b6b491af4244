"""Launcher for v09_half_packs_bf16.hip: one block per row, sized to hold the row (as v08).

A thread keeps as many values as the kernel holds for the dtype: 8 packs (32 values) or 32 float slots
in float32, as v08; 4 packs (32 values) or 16 float slots in bfloat16 and float16, half of v08's. On the
16-byte path (columns a multiple of the values per pack, aligned tensors) a row needs ceil(packs /
packs per thread) threads, otherwise ceil(columns / slots). Rounded up to whole warps (the kernel's
shuffles need every lane of a warp):

    columns              8192   32768   1024   4097   781   1
    threads, float32      256    1024     32    160    32  32      (as v08)
    threads, bfloat16     256    1024     32    288    64  32      (warps of 32; v08: 128, 512)

Rows longer than the block can hold (1024 threads) take the kernel's re-reading fallback.
"""

import math

from hello_gpu.ops.softmax.v01_thread_per_row import checked_output, warp_size

MAX_BLOCK = 1024     # kMaxBlock in the .hip file


def held(itemsize: int) -> tuple[int, int]:
    """(packs, float slots) a thread keeps: Held<T> in the .hip file."""
    return (8, 32) if itemsize == 4 else (4, 16)


def block_for(columns: int, warp: int, itemsize: int, packed: bool) -> int:
    """Threads for a row of `columns` of `itemsize`-byte values: enough to hold it in registers, whole
    warps, at most 1024. `packed` says whether the kernel takes the 16-byte path."""
    packs, slots = held(itemsize)
    per_thread = packs * (16 // itemsize) if packed else slots
    threads = math.ceil(math.ceil(columns / per_thread) / warp) * warp
    return min(MAX_BLOCK, max(warp, threads))


def run(kernel, x, out=None):
    out = checked_output(x, out)
    rows, columns = x.shape
    if x.numel() == 0:
        return out
    lanes = 16 // x.element_size()
    # The kernel's own test for the 16-byte path, so the block is sized for the path it will take.
    packed = columns % lanes == 0 and (x.data_ptr() | out.data_ptr()) % 16 == 0
    kernel(x, out, rows, columns, block=block_for(columns, warp_size(x), x.element_size(), packed), grid=rows)
    return out
