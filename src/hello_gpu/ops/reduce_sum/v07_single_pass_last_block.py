"""Launcher for v07_single_pass_last_block.hip: one launch, with a counter and a partials buffer.

The counter must be 0 before the first launch; the kernel's last block sets it back to 0, so one
zeroed counter per GPU, made once, serves every call. The partials buffer (one float per block, at most
4 * SMs) is also made once per GPU. Both are shared by every call: two calls running at the same time
on different streams would mix their counts (the ladder runs one stream).
"""

import functools
import math

import torch

BLOCK = 256                      # threads per block (the kernel's __launch_bounds__)
MIN_ELEMENTS_PER_BLOCK = 4096    # 16 per thread: one full step of four float4 loads
BLOCKS_PER_SM = 4                # as v06


@functools.cache
def _max_blocks(device_index: int) -> int:
    return BLOCKS_PER_SM * torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.cache
def _workspace(device_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(partials, blocks_done) for this GPU, allocated once."""
    device = torch.device("cuda", device_index)
    partials = torch.empty(_max_blocks(device_index), dtype=torch.float32, device=device)
    blocks_done = torch.zeros(1, dtype=torch.int32, device=device)
    return partials, blocks_done


def run(kernel, x, out=None):
    out = torch.empty(1, dtype=torch.float32, device=x.device) if out is None else out
    index = x.device.index
    blocks = max(1, min(math.ceil(x.numel() / MIN_ELEMENTS_PER_BLOCK), _max_blocks(index)))
    partials, blocks_done = _workspace(index)
    kernel(x, partials, blocks_done, out, x.numel(), block=BLOCK, grid=blocks)
    return out
