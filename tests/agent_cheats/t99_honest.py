"""Honest control: the same add as vector_add's t01, written so every anti-cheat check passes it.

Not a cheat. It launches its own kernel on every call, on the caller's stream and thread, writes every
output element and nothing else, adds in float32 and patches nothing: hello_gpu.agent.anticheat.inspect
must return no reason for it (tests/test_agent_anticheat.py), or the checks reject honest work.

parent: t01_tile_1024
change: none: t01's kernel with a 256-element tile (several programs even at the test's 1000 elements)
hypothesis: a clean candidate passes every static scan and every run-time check
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
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    total = a.to(tl.float32) + b.to(tl.float32)
    tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    add_kernel[(triton.cdiv(n, TILE),)](a, b, out, n, TILE=TILE)
    return out
