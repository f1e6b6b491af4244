"""Two stages, with stage-1 tiles four times wider: 16384 elements and 16 warps a program.

parent: t04_wide_finish
change: stage 1 gives each program 16384 elements with 16 warps (t04: 4096 with 4 warps); stage 2
  is t04's wide finish, which now walks 4x fewer partials
hypothesis: t04's stage 1 streams at ~4.15 TB/s against the single-pass HIP rungs' 4.27 (record
  reduce_sum.float32, run of commit db9e96d). A sweep of stage-1 designs at 2^28, each paired with
  torch.sum in one run (records/nvidia-h200/reduce_sum-sweep.json, run of commit 5cf0ef3), located it
  in the program size, not the mask or the cache policy: 4096 x 4 warps 0.996x torch.sum, 8192 x 8
  warps 1.022x, 16384 x 16 warps 1.032x [1.030, 1.034]; an unmasked load changed nothing (0.995x)
  and evict-first lost (0.978x). Each thread still loads 32 values (eight 16-byte loads in flight),
  but a program covers 64 KiB: 4x fewer programs to start and retire (16384 instead of 65536 at
  2^28), and one block-wide tl.sum per 64 KiB instead of per 16 KiB. At 2^20 there are only 64
  programs for 132 SMs, half the machine idle for the one wave: slower than t04 there.
prediction: 1.03x torch.sum at 2^28 (1.035x t04); ~0.9x t04 at 2^20
outcome: 1.036x t04 [1.033, 1.039] at 2^28 (predicted 1.035x), 1.036x torch.sum [1.031, 1.038] (records reduce_sum.float32, run of d7c22f5)
deterministic: yes, as t04: fixed trees and a fixed order of partials
dtypes: float32
"""

# hello-gpu: record reduce_sum.float32

from pathlib import Path

import torch
import triton

from hello_gpu.ops.rung import load_module

_t04 = load_module(Path(__file__).resolve().parent / "t04_wide_finish.py", "reduce_sum_t04_for_t05")

BLOCK = 16384           # elements per program in stage 1 (t04: 4096)
NUM_WARPS = 16          # 512 threads: 32 elements, eight 16-byte loads, a thread, as in t04


def run(x, out=None):
    out = torch.empty(1, dtype=torch.float32, device=x.device) if out is None else out
    n = x.numel()
    programs = max(1, triton.cdiv(n, BLOCK))        # n = 0: one program that loads nothing and writes 0
    partials = torch.empty(programs, dtype=torch.float32, device=x.device)
    _t04.partial_sums_kernel[(programs,)](x, partials, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    _t04.finish(partials, out, programs)
    return out
