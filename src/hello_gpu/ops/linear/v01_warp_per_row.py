"""Launcher for v01_warp_per_row.hip: 8 warps a block, one per output column; grid y over tiles of 16
rows of A (one at decode, M <= 16). On AMD CDNA a warp is 64 lanes: the block is 8 warps either way."""

import math

from hello_gpu.ops.linear.launch import checked_output

WARPS_PER_BLOCK = 8        # kWarpsPerBlock in the .hip file
ROWS = 16                  # kRows


def run(kernel, a, weight, out=None):
    out = checked_output(a, weight, out)
    m, n = out.shape
    if out.numel() == 0:
        return out
    from hello_gpu.runtime.device import device_info
    threads = WARPS_PER_BLOCK * device_info(a.device.index).warp_size
    kernel(a, weight, out, m, n, a.shape[1], block=threads, grid=(math.ceil(n / WARPS_PER_BLOCK), math.ceil(m / ROWS)))
    return out
