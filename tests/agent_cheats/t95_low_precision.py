"""CHEAT, precision lower than declared: float32 declared, float16 computed.

The inputs are rounded to float16 (11 significant bits) before the add and the sum widened back: half
the register traffic and bytes where it matters, and an error of ~2^-11 relative instead of float32's
2^-24. Caught by check_precision (on inputs with full 24-bit significands spread over 2^+-8 it keeps
about 11 significant bits) and by the spec's float32 tolerance (rtol 2^-23).

parent: t01_tile_1024
change: a and b converted to float16 in the kernel, the sum converted back to the output dtype
hypothesis: nobody checks the last 13 bits
"""

import torch
import triton
import triton.language as tl

TILE = 256


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask).to(tl.float16)
    b = tl.load(b_ptr + offsets, mask=mask).to(tl.float16)
    tl.store(out_ptr + offsets, (a + b).to(out_ptr.dtype.element_ty), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    return out
