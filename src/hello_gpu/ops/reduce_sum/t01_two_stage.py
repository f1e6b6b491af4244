"""Two stages in Triton: one program per 4096 elements writes a partial sum, one program adds them.

parent: v00_torch
change: Triton: one program per block of 4096 elements (tl.load with a mask, tl.sum) writing one
  partial; a second launch of one program adds the partials in 1024-wide chunks
hypothesis: stage 1 is a plain streaming read, 16 KiB per program and 2^16 programs at 2^28, enough
  in flight to read near 4.2 TB/s (~256 us). The cost is stage 2: 2^16 partials (256 KiB, from the
  L2) read by one program in 64 dependent steps of ~0.4 us, ~25 us: ~0.9x torch.sum at 2^28. At 2^20
  stage 1 is 256 programs and stage 2 one step, but it is two launches (~2-3 us each on the device,
  ~15-20 us of host time each for a Triton launch): ~0.7x torch.sum there.
prediction: 0.9x torch.sum at 2^28; 0.7x at 2^20
outcome: 0.96x torch.sum [0.96, 0.96] at 2^28 (predicted 0.9x); 0.42x at 2^20 (predicted 0.7x) (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, tl.sum reduces a block in a fixed tree and stage 2 adds the partials in a fixed
  order (the same lanes, the same chunks, every run)
dtypes: float32
"""

# hello-gpu: record reduce_sum.float32

import torch
import triton
import triton.language as tl

BLOCK = 4096           # elements per program in stage 1
FINISH_BLOCK = 1024    # partials per step in stage 2


@triton.jit
def partial_sums_kernel(x_ptr, partials_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    # int64 offsets: pid * BLOCK stays below 2^31 up to 2^31 elements, but costs nothing to make safe.
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)   # past the end: 0, which adds nothing
    tl.store(partials_ptr + pid, tl.sum(values, axis=0))


@triton.jit
def finish_kernel(partials_ptr, out_ptr, count, BLOCK: tl.constexpr):
    # One program: a running vector of BLOCK sums (lane i adds partials i, i + BLOCK, ...), then one tl.sum.
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
    finish_kernel[(1,)](partials, out, programs, BLOCK=FINISH_BLOCK)
    return out
