"""CHEAT, library fallback: defines a Triton kernel but lets torch.add do the work.

A candidate "optimised" this way is exactly as fast as the baseline it is compared with (it is the
baseline), and on a GPU the profile shows an ATen vectorized_elementwise_kernel instead of add_kernel.
Caught by find_library_calls (the torch.add call in the source) and by check_kernel_sources (an ATen
kernel on a GPU, an aten::add CPU op in the interpreter's CPU profile); its kernel never launching is
also seen by check_launches.

parent: t01_tile_1024
change: torch.add instead of the kernel; add_kernel kept so the file looks like a Triton rung
hypothesis: a reviewer who only reads the kernel sees a Triton rung
"""

import torch
import triton
import triton.language as tl

TILE = 256


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    if out is None:
        return torch.add(a, b)
    return torch.add(a, b, out=out)
