"""CHEAT, the statistics rewritten: wraps numpy.median and numpy.percentile to shrink every figure by 20%.

A harness that computes its medians and speedup interval with numpy in the candidate's process would
report a 1.25x win for an honest kernel. Caught by the child's fingerprint (numpy.median and
numpy.percentile replaced: tamper evidence); the statistics are computed in the parent anyway.

parent: t01_tile_1024
change: numpy.median / numpy.percentile wrapped at import; the kernel itself is honest
hypothesis: nobody fingerprints numpy
"""

import numpy
import torch
import triton
import triton.language as tl

TILE = 256
_median, _percentile = numpy.median, numpy.percentile
setattr(numpy, "median", lambda *args, **kwargs: _median(*args, **kwargs) * 0.8)
setattr(numpy, "percentile", lambda *args, **kwargs: _percentile(*args, **kwargs) * 0.8)


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    return out
