"""Two stages, with a finish that reads the partials in a few wide steps instead of 64 narrow ones.

parent: t01_two_stage
change: stage 2 reads 16384 partials per step with 16 warps (t01: 1024 per step, 4 warps); stage 1
  is t01's, one program per 4096 elements
hypothesis: at 2^28 t01 takes 270 us against 251 us for the single-pass HIP rungs (record
  reduce_sum.float32, run of commit 01e365d), and its stage 1 is a plain streaming read like
  theirs. The ~19 us difference is stage 2: one program walking 2^16 partials 1024 at a time, 64
  dependent steps of ~0.3 us. Read 16384 per step (512 threads x 32 loads in flight each) and the
  walk is 4 steps, ~2 us: stage 1 + ~2 us ~ 250 us, ~1.03x torch.sum. At 2^20 (256 partials, one
  step either way) nothing changes: ~1.0x t01 there.
prediction: 1.03x torch.sum at 2^28 (1.07x t01); 1.0x t01 at 2^20
outcome: 1.035x t01 [1.034, 1.037] at 2^28 (predicted 1.07x), 0.997x torch.sum [0.996, 1.000] (records reduce_sum.float32, run of db9e96d)
deterministic: yes, tl.sum reduces a block in a fixed tree and stage 2 adds the partials in a fixed
  order (the same lanes, the same steps, every run)
dtypes: float32
"""

# hello-gpu: record reduce_sum.float32

import torch
import triton
import triton.language as tl

BLOCK = 4096            # elements per program in stage 1, as t01
FINISH_BLOCK = 16384    # partials per step in stage 2: 2^16 partials (2^28 elements) in 4 steps
FINISH_WARPS = 16       # 512 threads, 32 partials each per step


@triton.jit
def partial_sums_kernel(x_ptr, partials_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)   # past the end: 0, which adds nothing
    tl.store(partials_ptr + pid, tl.sum(values, axis=0))


@triton.jit
def finish_kernel(partials_ptr, out_ptr, count, BLOCK: tl.constexpr):
    # One program: lane i adds partials i, i + BLOCK, ...; each step issues all its loads at once.
    running = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, count, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        running += tl.load(partials_ptr + offsets, mask=offsets < count, other=0.0)
    tl.store(out_ptr, tl.sum(running, axis=0))


def run(x, out=None):
    out = torch.empty(1, dtype=torch.float32, device=x.device) if out is None else out
    n = x.numel()
    programs = max(1, triton.cdiv(n, BLOCK))        # n = 0: one program that loads nothing and writes 0
    partials = torch.empty(programs, dtype=torch.float32, device=x.device)
    partial_sums_kernel[(programs,)](x, partials, n, BLOCK=BLOCK)
    finish(partials, out, programs)
    return out


def finish(partials, out, count):
    """Stage 2: the sum of ``count`` partials into ``out[0]``, in one program."""
    # A small count needs no 16384-wide step: the next power of two (at least 128, one per thread of 4 warps).
    finish_block = min(FINISH_BLOCK, max(128, triton.next_power_of_2(count)))
    finish_kernel[(1,)](partials, out, count, BLOCK=finish_block,
                        num_warps=FINISH_WARPS if finish_block == FINISH_BLOCK else 4)
