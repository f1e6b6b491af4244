"""Honest control at the edge of the guard-byte and ownership rules: a kernel with its own scratch buffer.

Not a cheat. Each call allocates a scratch tensor of its own (torch.empty), adds into it with one kernel and
copies it to the output with a second: two launches a call, both its own, and writes to memory no one
lent it, inside its own allocation. The guard bytes around the lent buffers, the kernel-origin check
and the launch counts must all accept it.

parent: t01_tile_1024
change: the sum goes through a scratch buffer of the candidate's own (two kernels)
hypothesis: a scratch buffer is not a cheat
deterministic: yes, one writer per element
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


@triton.jit
def copy_kernel(source_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(source_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    scratch = torch.empty(n + TILE, dtype=a.dtype, device=a.device)     # its own, with room to spare
    add_kernel[(triton.cdiv(n, TILE),)](a, b, scratch, n, TILE=TILE)
    copy_kernel[(triton.cdiv(n, TILE),)](scratch, out, n, TILE=TILE)
    return out
