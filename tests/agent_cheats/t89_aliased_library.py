"""CHEAT, library fallback behind an alias: ``T = torch`` (an assignment, not an import) and T.add.

The static scan once followed only import statements, so ``T.add(a, b)`` was not a torch call to it.
Caught by the scan following assignments (library fallback, torch.add), and by the evidence of the
call itself, the computing aten::add op in the CPU profile (a CUDA runtime-API launch of an ATen kernel
on a GPU), and a kernel that never launches.

parent: t01_tile_1024
change: torch reached through an assigned name
hypothesis: the scan only reads imports
"""

import torch
import triton
import triton.language as tl

TILE = 256
T = torch


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    result = T.add(a, b)
    if out is None:
        return result
    out.copy_(result)
    return out
