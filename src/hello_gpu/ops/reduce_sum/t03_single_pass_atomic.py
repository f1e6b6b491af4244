"""Single pass with an atomic: t02's programs each add their partial straight into out[0].

parent: t02_two_stage_fewer_programs
change: stage 2 is gone: each program does tl.atomic_add(out, its partial) into an out zeroed first
  (out.zero_(), a small launch of its own)
hypothesis: the 528 atomics on one address take well under 1 us, and the stage-2 launch is replaced
  by a zeroing launch that runs before stage 1, so the launch count stays two. Expect the same
  time as t02 at both sizes (1.0x); what changes is that the result is no longer repeatable.
prediction: 1.0x t02_two_stage_fewer_programs at 2^28 and at 2^20
outcome: 1.00x t02 at 2^28, as predicted; 1.52x t02 [1.42, 1.62] at 2^20 (predicted 1.0x) (records reduce_sum.float32, run of a3e1cf2)
deterministic: no, the programs' partials reach out[0] in whatever order the atomics arrive
dtypes: float32
"""

# hello-gpu: record reduce_sum.float32

import functools

import torch
import triton
import triton.language as tl

BLOCK = 4096
PROGRAMS_PER_SM = 4
INTERPRETER_SMS = 8     # the Triton interpreter (CPU tensors) has no SMs: a small fixed count


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def program_count(x) -> int:
    sms = _sm_count(x.device.index) if x.is_cuda else INTERPRETER_SMS
    return max(1, min(triton.cdiv(x.numel(), BLOCK), PROGRAMS_PER_SM * sms))


@triton.jit
def sum_into_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    stride = tl.num_programs(0).to(tl.int64) * BLOCK
    running = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(pid.to(tl.int64) * BLOCK, n, stride):
        offsets = start + tl.arange(0, BLOCK)
        running += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(running, axis=0))


def run(x, out=None):
    # The programs add into out[0], so it must start at 0: torch.zeros / zero_() is a launch of its own.
    out = torch.zeros(1, dtype=torch.float32, device=x.device) if out is None else out.zero_()
    programs = program_count(x)
    sum_into_kernel[(programs,)](x, out, x.numel(), BLOCK=BLOCK)
    return out
