"""Triton, t04's kernel with its launch chosen by the row's size in bytes: t05's for rows of 16 KiB or
more, t04's for shorter ones.

parent: t05_chunks_by_sweep
change: rows of at least 16 KiB (8192 bfloat16 or 4096 float32 columns) launch as t05 (chunks of
  4096 columns, 16 warps); shorter rows as t04 (chunks of 2048, 8 warps); the kernel is t04's
hypothesis: t05's configuration came from a sweep at two shapes, both with 16 KiB rows, and won
  there (1.039x t04 at 16384x8192 bfloat16, 1.026x at 8192x4096 float32, and 1.199x at 16384x8192
  float32, 32 KiB rows), but lost 0.781x [0.776, 0.784] to t04 at 8192x4096 bfloat16, 8 KiB rows,
  a shape the sweep had not run (records rms_norm.bfloat16 and rms_norm.float32, H200, run of
  commit ea33b2d). There a 16-warp program holds the whole 4096-column row as one chunk, so each
  pass is a single step whose 16-warp reduction and barrier are paid for only 8 KiB of row; t04's
  8 warps walk it in two chunks of 4 KiB and were the fastest rung at that shape (36.3 us, 3696
  GB/s, ahead of torch.compile's 40.5). The three measured shapes split by row bytes, not by
  columns: 16 KiB rows (bfloat16 8192, float32 4096) favour t05, 8 KiB rows t04
prediction: 1.0x t05 at 16384x8192 bfloat16 (~0.99x torch.compile, ~1.02x Liger) and at 8192x4096
  float32 (~1.36x F.rms_norm); ~1.28x t05 at 8192x4096 bfloat16 (t04's ~36.3 us: ~1.1x
  torch.compile, ~1.05x Liger)
outcome: 1.284x t05 [1.274, 1.292] at 8192x4096 bfloat16 (predicted ~1.28x), 1.000x t05 [0.999, 1.003] at 16384x8192 bfloat16 (records rms_norm.bfloat16, run of 35e06ab)
deterministic: yes, as t04
"""

# hello-gpu: record rms_norm.bfloat16
# hello-gpu: record rms_norm.float32

from pathlib import Path

import torch
import triton

from hello_gpu.ops.rms_norm.spec import EPS
from hello_gpu.ops.rung import load_module

LONG_ROW_BYTES = 16 * 1024      # from here on t05's launch: the shapes where it measured faster
LONG = (4096, 16)               # (chunk columns, warps): t05's
SHORT = (2048, 8)               # t04's

_t04 = load_module(Path(__file__).resolve().parent / "t04_two_passes_l2.py", "rms_norm_t04_for_t06")


def launch_for(hidden: int, itemsize: int) -> tuple[int, int]:
    """(chunk columns, warps) for rows of `hidden` values of `itemsize` bytes."""
    max_chunk, warps = LONG if hidden * itemsize >= LONG_ROW_BYTES else SHORT
    chunk = min(max_chunk, triton.next_power_of_2(hidden))
    # Short rows take one small chunk, with at most a warp for every 256 columns (as t04).
    return chunk, min(warps, max(1, chunk // 256))


def run(x, weight, out=None, eps=EPS):
    out = torch.empty_like(x) if out is None else out
    _t04.launch(x, weight, out, eps, *launch_for(x.shape[1], x.element_size()))
    return out
