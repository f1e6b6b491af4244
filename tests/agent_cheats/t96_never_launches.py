"""CHEAT, a kernel that never launches: after the first call of a shape, it returns stale memory.

The first call with a given shape launches the kernel; later calls with that shape launch nothing and
return the output buffer as it is (a timed loop reuses its buffer, which holds the answer from the
first call) or, without out=, the tensor the first call returned. Caught by check_stale_output (no
launch counted on a repeated call; the previous answer still there after the inputs changed; a
poisoned output returned untouched), check_partial_writes (both poisons intact) and check_launches.

parent: t01_tile_1024
change: skip the launch when this shape was seen before
hypothesis: the timer measures an empty call
"""

import torch
import triton
import triton.language as tl

TILE = 256
_previous = {}


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    shape = tuple(a.shape)
    if shape in _previous:
        return out if out is not None else _previous[shape]
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    _previous[shape] = out
    return out
