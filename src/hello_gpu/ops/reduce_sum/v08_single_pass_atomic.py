"""Launcher for v08_single_pass_atomic.hip: zero out[0] (a launch of its own), then one reduction launch."""

import functools
import math

import torch

BLOCK = 256                      # threads per block (the kernel's __launch_bounds__)
MIN_ELEMENTS_PER_BLOCK = 4096    # 16 per thread: one full step of four float4 loads
BLOCKS_PER_SM = 4                # as v06 and v07


@functools.cache
def _max_blocks(device_index: int) -> int:
    return BLOCKS_PER_SM * torch.cuda.get_device_properties(device_index).multi_processor_count


def run(kernel, x, out=None):
    # The blocks add into out[0], so it must start at 0: torch.zeros / zero_() is the extra launch.
    out = torch.zeros(1, dtype=torch.float32, device=x.device) if out is None else out.zero_()
    blocks = max(1, min(math.ceil(x.numel() / MIN_ELEMENTS_PER_BLOCK), _max_blocks(x.device.index)))
    kernel(x, out, x.numel(), block=BLOCK, grid=blocks)
    return out
