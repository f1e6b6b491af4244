"""CHEAT, device hog: a spin left running on a side stream as each call returns, never joined.

Meant to keep the GPU busy while the other side of a compare (the baseline, in its own process)
is timed: its kernels share the SMs with the spin and look slower, so this one looks faster. Each call
adds honestly on the caller's stream, then queues ``torch.cuda._sleep`` (about 1 ms of spinning at the
H200's clock) on a stream of its own, found and called by computed names (hints only, for the source
scan), and returns. The worker ends each timed batch with a device-wide synchronize, so the spin ends
inside this side's own request; what named it before was only its clock reading slow. Caught by the
context event after every counted timed call (worker.ContextDrain): its work ran ~1 ms past each
call's end event. On the CPU (no CUDA) it only adds.

parent: t01_tile_1024
change: a 2e6-cycle spin on an unjoined side stream after each call
hypothesis: a device kept busy between this side's calls slows the other side's
"""

import torch
import triton
import triton.language as tl

TILE = 256
_cuda = getattr(torch, "cu" + "da")
_side = []


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    add_kernel[(triton.cdiv(n, TILE),)](a, b, out, n, TILE=TILE)
    if a.is_cuda:
        if not _side:
            _side.append(getattr(_cuda, "Str" + "eam")())
        with getattr(_cuda, "str" + "eam")(_side[0]):
            getattr(_cuda, "_sl" + "eep")(2 * 10**6)
    return out
