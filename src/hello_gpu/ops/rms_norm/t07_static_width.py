"""Triton, t06 with the row width compiled in, as Inductor compiles it: loops unrolled, masks gone.

parent: t06_chunks_by_row_bytes
change: the kernel takes the row width as a compile-time constant (HIDDEN: tl.constexpr; t04-t06
  pass it at run time), so Triton builds one kernel per width; launch as t06 (by row bytes)
hypothesis: ncu at 16384x8192 bfloat16 (rms_norm.bfloat16.profile.json, run of commit ea33b2d) puts
  t05 and torch.compile's kernel on the same launch (512 threads, 16384 programs, 32 registers,
  92-94% achieved occupancy) and the same DRAM bytes (512 against 510 MB a call), yet t05's SM
  throughput is 64.6% against 44.8%: it issues ~1.4x the instructions for the same work, 124.9 us
  against 122.5 under ncu. The kernel Inductor writes (rms_norm-sweep.json) has the width as a
  literal (r0_numel = 8192), so its loops have a known trip count and every mask is known true.
  t04's kernel, compiled offline for sm_90 (chunk 4096, 16 warps), is 328 SASS instructions with
  two run-time loops and a compare per load; with the width a constant it is 280 straight-line
  instructions for 8192 columns and 200 for 4096, and num_stages 1 or 3 changes nothing. Expect
  torch.compile's figure where the launch is t05's: ~1.02x t06 at 16384x8192 bfloat16 (~1.01x
  torch.compile), ~1.0-1.02x elsewhere
prediction: 1.02x t06 at 16384x8192 bfloat16 (~1.01x torch.compile, over the 1.0x target);
  1.0-1.02x t06 at 8192x4096 bfloat16 and float32
outcome: 1.005x t06 [1.003, 1.011] at 16384x8192 bfloat16 (predicted 1.02x), 1.000x torch.compile [0.995, 1.003] (records rms_norm.bfloat16, run of 35e06ab)
deterministic: yes, each program adds its chunks in order and tl.sum reduces in a fixed tree
"""

# hello-gpu: record rms_norm.bfloat16
# hello-gpu: record rms_norm.float32

from pathlib import Path

import torch
import triton
import triton.language as tl

from hello_gpu.ops.rms_norm.spec import EPS
from hello_gpu.ops.rung import load_module

_t06 = load_module(Path(__file__).resolve().parent / "t06_chunks_by_row_bytes.py", "rms_norm_t06_for_t07")


@triton.jit
def rms_norm_kernel(x_ptr, weight_ptr, out_ptr, row_stride, eps, HIDDEN: tl.constexpr, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * row_stride
    out_row = out_ptr + row * row_stride
    offsets = tl.arange(0, CHUNK)
    # Pass 1: squares in float32, the row kept in L2 (t04). HIDDEN is a constant: the trip count is
    # known and, where CHUNK divides HIDDEN, every mask folds away.
    squares = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, HIDDEN, CHUNK):
        columns = start + offsets
        mask = columns < HIDDEN
        x = tl.load(x_row + columns, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        squares += x * x
    scale = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / HIDDEN + eps)
    # Pass 2: x again from L2 (its last use) and the weight every row reads.
    for start in tl.range(0, HIDDEN, CHUNK):
        columns = start + offsets
        mask = columns < HIDDEN
        x = tl.load(x_row + columns, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        weight = tl.load(weight_ptr + columns, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(out_row + columns, (x * scale * weight).to(out_ptr.dtype.element_ty), mask=mask)


def run(x, weight, out=None, eps=EPS):
    out = torch.empty_like(x) if out is None else out
    rows, hidden = x.shape
    chunk, warps = _t06.launch_for(hidden, x.element_size())     # t06's launch, by row bytes
    rms_norm_kernel[(rows,)](x, weight, out, x.stride(0), eps, HIDDEN=hidden, CHUNK=chunk, num_warps=warps)
    return out
