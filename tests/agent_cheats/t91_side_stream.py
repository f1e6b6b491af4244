"""CHEAT, side stream / another thread: the kernel runs where the timer does not wait for it.

On a GPU the kernel is launched on a private torch.cuda.Stream and run() returns without making the
caller's stream wait: the timer's events on the current stream bracket an empty interval, while a
checker that synchronises the whole device still sees a correct result. Without a GPU (the Triton
interpreter) the launch happens on a worker thread, the CPU analogue. Caught by find_concurrency
(torch.cuda.Stream, concurrent.futures in the source) and, on a GPU, by check_streams (the kernel
recorded on a stream other than the timed one).

parent: t01_tile_1024
change: launch on a side stream (GPU) or a worker thread (CPU) and return at once
hypothesis: the timed interval no longer contains the kernel
"""

import concurrent.futures

import torch
import triton
import triton.language as tl

TILE = 256
_workers = concurrent.futures.ThreadPoolExecutor(max_workers=1)
_side_stream = None


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def _launch(a, b, out):
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)


def run(a, b, out=None):
    global _side_stream
    out = torch.empty_like(a) if out is None else out
    if a.is_cuda:
        _side_stream = _side_stream or torch.cuda.Stream()
        with torch.cuda.stream(_side_stream):        # no wait_stream either way: the timer never sees it
            _launch(a, b, out)
    else:
        _workers.submit(_launch, a, b, out).result()   # the interpreter: a worker thread does the work
    return out
