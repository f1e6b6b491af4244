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

import torch

PER_THREAD = 32      # kPerThread in the .hip file
PACKS_PER_THREAD = 8  # kPacksPerThread in the .hip file
MAX_BLOCK = 1024     # kMaxBlock in the .hip file


def _warp_size(x) -> int:
    # 32 on NVIDIA, 32 or 64 on AMD: the kernel's shuffles assume whole warps.
    from hello_gpu.runtime.device import device_info
    return device_info(x.device.index).warp_size


def block_for(columns: int, warp: int, lanes: int, packed: bool) -> int:
    """Threads for a row of `columns`: enough to hold it in registers, whole warps, at most 1024.
    `lanes` values make a 16-byte pack; `packed` says whether the kernel takes the 16-byte path."""
    held = PACKS_PER_THREAD * lanes if packed else PER_THREAD
    threads = math.ceil(math.ceil(columns / held) / warp) * warp
    return min(MAX_BLOCK, max(warp, threads))


def run(kernel, x, out=None):
    if x.dim() != 2:
        raise ValueError(f"softmax rungs take a 2-D (rows, columns) tensor; got shape {tuple(x.shape)}")
    if not x.is_contiguous():
        # Row r is read at r * columns: refuse a strided view rather than copy it silently.
        raise ValueError(f"softmax rungs need a contiguous input (row stride = columns); got strides "
                         f"{tuple(x.stride())}: pass x.contiguous()")
    rows, columns = x.shape
    if columns >= 2**30 or rows >= 2**31:
        # The kernel indexes columns with an int and steps past the end by up to a few thousand before
        # its loop test: 2^30 keeps that far from overflow. Rows index blocks, also as int.
        raise ValueError(f"softmax rungs take fewer than 2^30 columns and 2^31 rows; got {tuple(x.shape)}")
    out = torch.empty_like(x) if out is None else out
    if out.shape != x.shape or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {tuple(x.shape)} {x.dtype} tensor; got "
                         f"{tuple(out.shape)} {out.dtype}")
    if x.numel() == 0:
        return out
    lanes = 16 // x.element_size()
    # The kernel's own test for the 16-byte path, so the block is sized for the path it will take.
    packed = columns % lanes == 0 and (x.data_ptr() | out.data_ptr()) % 16 == 0
    kernel(x, out, rows, columns, block=block_for(columns, _warp_size(x), lanes, packed), grid=rows)
    return out
