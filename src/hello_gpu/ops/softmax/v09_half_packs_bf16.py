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

from hello_gpu.ops.softmax import v08_packed_registers as v08

MAX_BLOCK = v08.MAX_BLOCK     # kMaxBlock in the .hip file


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
    return v08.run(kernel, x, out, block_for=block_for)
