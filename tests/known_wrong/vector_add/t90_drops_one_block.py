"""Known wrong: the add of t01, in tiles of 256, with the middle tile never written.

parent: t01_tile_1024
change: program (programs // 2) stores nothing: one dropped block of work (with one tile, the only one)
hypothesis: none; this rung exists so that a test proves the checker rejects a dropped block at every
  checked shape (issue 19, part 5)
deterministic: yes, one writer per element
"""

import torch
import triton
import triton.language as tl

TILE = 256


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * TILE + tl.arange(0, TILE)
    keep = pid != tl.num_programs(0) // 2
    mask = (offsets < n) & keep
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    total = a.to(tl.float32) + b.to(tl.float32)
    tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    return out
