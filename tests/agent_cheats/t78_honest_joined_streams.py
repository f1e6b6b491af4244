"""Honest control at the edge of the stream rule: two halves on two streams, joined before return.

Not a cheat, where the task allows side streams (``Task(side_streams=True)``, ``hello-gpu agent
--side-streams``). Each call adds the first half of the elements on the caller's stream and the second
half on a stream of its own; the side stream first waits for the caller's (the inputs are ready),
and the caller's stream waits for the side stream before ``run`` returns, so an event recorded after
the call (the timer's end) follows both halves. The device trace must show the side kernel ending
before the harness's after-call marker starts. On a task without side streams it is refused
statically (it names ``torch.cuda.Stream``); without a GPU both halves run in order.

parent: t01_tile_1024
change: the second half of the elements on a side stream, joined to the caller's stream before return
hypothesis: two streams joined before return are timed whole
deterministic: yes, one writer per element
"""

import torch
import triton
import triton.language as tl

TILE = 256
_side = {}        # one side stream per device, made on first use


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, start, stop, TILE: tl.constexpr):
    offsets = start + tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < stop
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def _add(a, b, out, start, stop):
    if stop > start:
        add_kernel[(triton.cdiv(stop - start, TILE),)](a, b, out, start, stop, TILE=TILE)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    half = n // 2
    if not a.is_cuda:
        _add(a, b, out, 0, half)
        _add(a, b, out, half, n)
        return out
    caller = torch.cuda.current_stream(a.device)
    side = _side.setdefault(a.device, torch.cuda.Stream(a.device))
    side.wait_stream(caller)                  # the inputs and out were made on the caller's stream
    _add(a, b, out, 0, half)
    with torch.cuda.stream(side):
        _add(a, b, out, half, n)
    caller.wait_stream(side)                  # the join: whatever the caller queues next waits for both halves
    return out
