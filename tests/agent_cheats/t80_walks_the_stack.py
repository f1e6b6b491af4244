"""CHEAT, frame inspection: skips work when a timer is its caller, found by walking the stack.

When any frame above run() belongs to a function whose name says it times (time, batch, measure, bench),
it launches over 7 of every 8 tiles only; otherwise it computes everything, so a checker that calls it
directly sees a correct kernel. Caught by the child's audit hook (sys._getframe from the candidate's
own code, reported as tamper evidence, frame inspection) and, wherever the skip happens, by the parent's
check of the timed calls' outputs. Since issue 17 every call of the candidate, checked, profiled or timed, is
made from the same lines of the worker (Worker._calls), so no timer is ever its caller and it never skips:
t101 skips where it is timed by the rhythm of calls instead.

parent: t01_tile_1024
change: inspect.currentframe() and f_back up the stack; fewer programs when timed
hypothesis: the checker and the timer call it from different places
"""

import inspect

import torch
import triton
import triton.language as tl

TILE = 256
TIMERS = ("time", "batch", "measure", "bench", "timed")


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def _timed() -> bool:
    frame = inspect.currentframe().f_back          # from run(): this function's own name says "timed"
    while frame is not None:
        if any(word in frame.f_code.co_name for word in TIMERS):
            return True
        frame = frame.f_back
    return False


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    programs = triton.cdiv(n, TILE)
    if _timed():
        programs -= programs // 8
    add_kernel[(programs,)](a, b, out, n, TILE=TILE)
    return out
