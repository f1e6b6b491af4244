"""Launcher for v08_packed_registers.hip: one block per row, sized to hold the row (as v05).

On the 16-byte path (columns a multiple of the values per pack, aligned tensors) a thread keeps
PACKS_PER_THREAD packs: a row needs ceil(packs / 8) threads. Otherwise a thread keeps PER_THREAD
values, as v05. Rounded up to whole warps (the kernel's shuffles need every lane of a warp):

    columns              8192   32768   1024   4097   781   1
    threads, float32      256    1024     32    160    32  32
    threads, bfloat16     128     512     32    160    32  32      (warps of 32)

The fewest threads that hold the row: the register count per thread is fixed at compile time (~60,
so ~1024 threads per SM whatever the block), and smaller blocks mean more rows in flight per SM.
Rows longer than 1024 x 32 = 32768 columns get 1024 threads and the kernel's re-reading fallback.
"""

import math

from hello_gpu.ops.softmax.launch import checked_output, warp_size

PER_THREAD = 32      # kPerThread in the .hip file
PACKS_PER_THREAD = 8  # kPacksPerThread in the .hip file
MAX_BLOCK = 1024     # kMaxBlock in the .hip file


def block_for(columns: int, warp: int, itemsize: int, packed: bool) -> int:
    """Threads for a row of `columns` of `itemsize`-byte values: enough to hold it in registers,
    whole warps, at most 1024. `packed` says whether the kernel takes the 16-byte path."""
    held = PACKS_PER_THREAD * (16 // itemsize) if packed else PER_THREAD
    threads = math.ceil(math.ceil(columns / held) / warp) * warp
    return min(MAX_BLOCK, max(warp, threads))


def run(kernel, x, out=None, block_for=block_for):
    """Launch one block a row; `block_for` sizes it (v09 holds fewer values a thread in bfloat16)."""
    out = checked_output(x, out)
    rows, columns = x.shape
    if x.numel() == 0:
        return out
    lanes = 16 // x.element_size()
    # The kernel's own test for the 16-byte path, so the block is sized for the path it will take.
    packed = columns % lanes == 0 and (x.data_ptr() | out.data_ptr()) % 16 == 0
    kernel(x, out, rows, columns, block=block_for(columns, warp_size(x), x.element_size(), packed), grid=rows)
    return out
