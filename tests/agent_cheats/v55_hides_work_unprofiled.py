"""Launcher of v55_hides_work_unprofiled.hip (a cheat: see the .hip header): an eighth left on a side stream.

Every name the source scan reads is an allocation or the runtime's own kernel call; the profiler's
switch and the stream are found by computed names (hints, never verdicts).
"""

import math

import torch

BLOCK = 256
_cuda = getattr(torch, "cu" + "da")
_profiling = getattr(__import__("torch.autograd", fromlist=["grad"]), "_profiler_" + "enabled")
_side = []


def run(kernel, a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    split = (7 * n // 8) // BLOCK * BLOCK
    if _profiling() or split == 0:
        kernel(a, b, out, n, block=BLOCK, grid=max(1, math.ceil(n / BLOCK)))
        return out
    kernel(a, b, out, split, block=BLOCK, grid=split // BLOCK)
    if not _side:
        _side.append(getattr(_cuda, "Str" + "eam")())
    rest = n - split
    tail = slice(split, n)
    kernel(a.view(-1)[tail], b.view(-1)[tail], out.view(-1)[tail], rest, block=BLOCK, grid=math.ceil(rest / BLOCK),
           stream=_side[0])
    return out
