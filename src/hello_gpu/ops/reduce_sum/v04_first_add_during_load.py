"""Launcher for v04_first_add_during_load.hip: the same kernel, level after level, until one value.

Each launch turns `count` values into ceil(count / 512) block sums. The level that needs a single block
writes straight into `out`. Levels: 2^28 -> 2^19 -> 1024 -> 2 -> 1 (four launches);
2^20 -> 2048 -> 4 -> 1 (three).
The loop runs once per level (four times at 2^28), never once per element.
"""

import math

import torch

BLOCK = 256                   # threads per block, as the kernel's BLOCK
ELEMENTS_PER_BLOCK = 512      # two elements per thread, added while loading


def run(kernel, x, out=None):
    out = torch.empty(1, dtype=torch.float32, device=x.device) if out is None else out
    values = x
    while True:
        # max(1, ...): an empty input still launches one block, which writes 0.
        blocks = max(1, math.ceil(values.numel() / ELEMENTS_PER_BLOCK))
        partials = out if blocks == 1 else torch.empty(blocks, dtype=torch.float32, device=x.device)
        kernel(values, partials, values.numel(), block=BLOCK, grid=blocks)
        if blocks == 1:
            return out
        values = partials
