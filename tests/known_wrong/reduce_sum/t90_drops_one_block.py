"""Known wrong: t01's two stages with blocks of 256, the middle block's partial sum left out.

parent: t01_two_stage
change: program (programs // 2) writes 0 as its partial: one dropped block of work (with one block, the only one)
hypothesis: none; this rung exists so that a test proves the checker rejects a dropped block at every
  checked shape (issue 19, part 5: the old tolerance passed a dropped block at 1823x781)
deterministic: yes, fixed trees and a fixed order
"""

import torch
import triton
import triton.language as tl

from hello_gpu.ops.registry import ops_root
from hello_gpu.ops.rung import load_module

# The shipped rung's second stage, unchanged: only the first stage is made wrong here.
_t01 = load_module(ops_root() / "reduce_sum" / "t01_two_stage.py", "known_wrong_reduce_sum_t01")
BLOCK = 256


@triton.jit
def partial_sums_kernel(x_ptr, partials_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    total = tl.sum(values, axis=0)
    tl.store(partials_ptr + pid, tl.where(pid == tl.num_programs(0) // 2, 0.0, total))


def run(x, out=None):
    out = torch.empty(1, dtype=torch.float32, device=x.device) if out is None else out
    programs = max(1, triton.cdiv(x.numel(), BLOCK))
    partials = torch.empty(programs, dtype=torch.float32, device=x.device)
    partial_sums_kernel[(programs,)](x, partials, x.numel(), BLOCK=BLOCK)
    _t01.finish_kernel[(1,)](partials, out, programs, BLOCK=_t01.FINISH_BLOCK)
    return out
