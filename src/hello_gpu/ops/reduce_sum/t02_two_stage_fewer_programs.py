"""Two stages, fewer programs: a few programs per SM, each looping over many blocks of 4096 elements,
so stage 1 leaves at most a few hundred partials and stage 2 is a single step.

parent: t01_two_stage
change: the number of programs is capped at 4 per SM (528 on an H200); each program walks the array
  with a stride of programs * 4096, adding every block into a running vector, and writes one partial
hypothesis: t01 at 2^28 leaves 2^16 partials and a ~25 us single-program stage 2. With 528
  programs stage 2 reads 528 floats in one step (~1 us), and stage 1 still keeps 16 KiB per program
  in flight, 64 KiB per SM, more than the ~24 KiB per SM that 4.2 TB/s x ~0.7 us latency needs.
  Expect ~1.0x torch.sum at 2^28 (~1.1x t01). At 2^20 it is 256 programs either way: the same as t01.
prediction: 1.0x torch.sum at 2^28 (1.1x t01_two_stage); 1.0x t01 at 2^20
outcome: 0.98x t01 [0.98, 0.99] at 2^28 (predicted 1.1x); 1.03x t01 at 2^20 (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, the program count depends only on n and the GPU, and every sum is in a fixed order
dtypes: float32
"""

# hello-gpu: record reduce_sum.float32

import functools

import torch
import triton
import triton.language as tl

BLOCK = 4096            # elements per program per loop step
FINISH_BLOCK = 1024     # partials per step in stage 2: one step for up to 1024 programs
PROGRAMS_PER_SM = 4
INTERPRETER_SMS = 8     # the Triton interpreter (CPU tensors) has no SMs: a small fixed count


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def program_count(x) -> int:
    sms = _sm_count(x.device.index) if x.is_cuda else INTERPRETER_SMS
    return max(1, min(triton.cdiv(x.numel(), BLOCK), PROGRAMS_PER_SM * sms))


@triton.jit
def partial_sums_kernel(x_ptr, partials_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    stride = tl.num_programs(0).to(tl.int64) * BLOCK
    running = tl.zeros([BLOCK], dtype=tl.float32)
    # Program p adds blocks p, p + programs, p + 2 * programs, ...: at each step the programs together
    # read one contiguous stretch of programs * BLOCK elements.
    for start in range(pid.to(tl.int64) * BLOCK, n, stride):
        offsets = start + tl.arange(0, BLOCK)
        running += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(partials_ptr + pid, tl.sum(running, axis=0))


@triton.jit
def finish_kernel(partials_ptr, out_ptr, count, BLOCK: tl.constexpr):
    running = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, count, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        running += tl.load(partials_ptr + offsets, mask=offsets < count, other=0.0)
    tl.store(out_ptr, tl.sum(running, axis=0))


def run(x, out=None):
    out = torch.empty(1, dtype=torch.float32, device=x.device) if out is None else out
    programs = program_count(x)
    partials = torch.empty(programs, dtype=torch.float32, device=x.device)
    partial_sums_kernel[(programs,)](x, partials, x.numel(), BLOCK=BLOCK)
    finish_kernel[(1,)](partials, out, programs, BLOCK=FINISH_BLOCK)
    return out
