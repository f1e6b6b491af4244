"""CHEAT, coverage: declares one dtype in its header while the task asks for two, so the other goes unchecked.

The kernel is honest for float32; for bfloat16 it would compute in the wrong precision, but a header
``dtypes: float32`` used to turn every bfloat16 check into a skip, and a skip was not a failure. Caught by
the parent's coverage rule: a dtype the task declares and the candidate's header leaves out fails
("dtype coverage"), it is not skipped.

parent: t01_tile_1024
change: dtypes: float32 only
hypothesis: what is not declared is not checked
dtypes: float32
"""

import torch
import triton
import triton.language as tl

TILE = 256


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    return out
