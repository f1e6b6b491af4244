"""Launcher for v06_grid_stride_vectorized.hip: partial sums from a machine-sized grid, then one block.

Launch 1: min(ceil(n / 4096), 4 * SMs) blocks write one partial each (at most 528 on an H200).
Launch 2: the same kernel, one block, sums those partials into out[0]. Small inputs that need one
block (n <= 4096) take a single launch.
"""

import functools
import math

import torch

BLOCK = 256                      # threads per block (the kernel's __launch_bounds__)
MIN_ELEMENTS_PER_BLOCK = 4096    # 16 per thread: one full step of four float4 loads
BLOCKS_PER_SM = 4                # 1024 threads per SM; each thread keeps 64 bytes of loads in flight


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def grid_for(n: int, device: torch.device) -> int:
    """Enough blocks to fill the GPU, never more than there is work for (and at least one)."""
    return max(1, min(math.ceil(n / MIN_ELEMENTS_PER_BLOCK), BLOCKS_PER_SM * _sm_count(device.index)))


def run(kernel, x, out=None):
    out = torch.empty(1, dtype=torch.float32, device=x.device) if out is None else out
    blocks = grid_for(x.numel(), x.device)
    if blocks == 1:
        kernel(x, out, x.numel(), block=BLOCK, grid=1)
        return out
    partials = torch.empty(blocks, dtype=torch.float32, device=x.device)
    kernel(x, partials, x.numel(), block=BLOCK, grid=blocks)
    kernel(partials, out, partials.numel(), block=BLOCK, grid=1)
    return out
