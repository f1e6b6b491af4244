"""Launcher for v05_threads_match_row.hip: one block per row, its size chosen from the row.

A thread holds up to 4 packs of 16 bytes (PACKS_PER_THREAD) where the row is whole aligned packs,
else up to 16 elements (HELD_PER_THREAD). The block is the fewest whole warps that hold the row,
at most 1024 threads; a longer row gets 1024 threads and the kernel's two-pass path. The kernel
checks the same conditions itself (alignment, width), so this choice can only make it slower,
never wrong. The input checks are v01's (``checked_output``).

    bfloat16 16384x8192: 1024 packs -> 256 threads     float32 8192x4096: 1024 packs -> 256
    bfloat16 8192x4096:   512 packs -> 128 threads     bfloat16 3x4097 (odd): 257 -> 288 threads
"""

import functools
import math

import torch

from hello_gpu.ops.rms_norm.spec import EPS
from hello_gpu.ops.rms_norm.launch import checked_output

PACK_BYTES = 16
PACKS_PER_THREAD = 4             # kPacksPerThread in the .hip file
HELD_PER_THREAD = 16             # kHeldPerThread in the .hip file
MAX_BLOCK = 1024                 # kMaxBlock


@functools.cache
def warp_size(device_index: int) -> int:
    """32 on NVIDIA (and RDNA); 64 on CDNA. The kernel's HG_WARP_SIZE is the same number."""
    return getattr(torch.cuda.get_device_properties(device_index), "warp_size", 32)


def is_packed(x, weight, out) -> bool:
    """The kernel's condition for 16-byte packs: whole packs per row and 16-byte aligned bases."""
    lanes = PACK_BYTES // x.element_size()
    return x.shape[1] % lanes == 0 and all(t.data_ptr() % PACK_BYTES == 0 for t in (x, weight, out))


def needed_threads(x, weight, out) -> int:
    """How many threads hold one row: 4 packs a thread, or 16 elements where packs do not apply."""
    columns = x.shape[1]
    if is_packed(x, weight, out):
        return math.ceil(columns * x.element_size() / PACK_BYTES / PACKS_PER_THREAD)
    return math.ceil(columns / HELD_PER_THREAD)


def threads_for(x, weight, out) -> int:
    """The fewest whole warps that hold one row, at most MAX_BLOCK (a longer row streams)."""
    warp = warp_size(x.device.index or 0)
    return min(MAX_BLOCK, max(warp, math.ceil(needed_threads(x, weight, out) / warp) * warp))


def run(kernel, x, weight, out=None):
    out = checked_output(x, weight, out)
    rows, columns = x.shape
    if x.numel() == 0:
        return out
    kernel(x, weight, out, rows, columns, EPS, block=threads_for(x, weight, out), grid=rows)
    return out
