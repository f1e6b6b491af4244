"""Triton, one row per program in chunks: the row read twice, the second time from L2, as Inductor does.

parent: t02_warps_by_width
change: instead of holding the whole row in registers, a program walks it in chunks of up to 2048
  columns twice: the first loop adds the squares (loads marked evict_last, so the row stays in L2),
  the second re-reads each chunk (evict_first: this is its last use) with the weight (evict_last:
  every row reads it), scales and stores; 8 warps, 8 values a thread per chunk
hypothesis: at 16384x8192 bfloat16 every rung holding the row in registers (t01-t03, v04-v06) sits
  at 3.97-4.02 TB/s while torch.compile reaches 4.19 (128.2 us against 133.6, records
  rms_norm.bfloat16, run of commit 152c451). The sweep of t02's design (benchmarks/rms_norm_sweep.py,
  records/nvidia-h200/rms_norm-sweep.json, run of commit e61260e) closed no part of the gap: 4 to 16
  warps all 0.96-0.98x torch.compile, 32 warps 0.76x, and Inductor's eviction hints alone made it
  slower (0.94x at 4 and 8 warps). The kernel Inductor writes for F.rms_norm, kept by that sweep, is
  not t02 with hints: it is a loop over 2048-column chunks, run twice. A program then holds 8 values
  a thread, not 16-32 plus the weight, so registers stop bounding how many rows an SM has in
  flight, and the first loop is a pure streaming read. The second read of x comes from L2: 132 SMs
  x 8 resident programs of 8 warps x 16 KiB = 17 MiB of rows in flight, within the 60 MiB L2; the hints
  keep x there until its last use. DRAM still sees x once in and once out. Expect torch.compile's
  figure: ~1.04x t02 at 16384x8192 bfloat16 (1.0x torch.compile, ~1.6x F.rms_norm) and ~1.05x t02 at
  8192x4096 float32 (~1.37x F.rms_norm, over the 1.3x target)
prediction: 1.04x t02 at 16384x8192 bfloat16 (1.0x torch.compile); 1.05x t02 at 8192x4096 float32
  (~1.37x F.rms_norm); ~1.0x t02 at 8192x4096 bfloat16
outcome: 0.988x t02 [0.985, 0.989] at 16384x8192 bfloat16 (predicted 1.04x: wrong), 0.955x torch.compile (records rms_norm.bfloat16, run of abc4538)
deterministic: yes, each program adds its chunks in order and tl.sum reduces in a fixed tree
"""

# hello-gpu: record rms_norm.bfloat16
# hello-gpu: record rms_norm.float32

import torch
import triton
import triton.language as tl

from hello_gpu.ops.rms_norm.spec import EPS

MAX_CHUNK = 2048        # columns a program loads at once (Inductor's R0_BLOCK at these widths)
WARPS = 8               # 2048 columns / (32 lanes x 8 warps) = 8 values a thread per chunk


@triton.jit
def rms_norm_kernel(x_ptr, weight_ptr, out_ptr, hidden, row_stride, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * row_stride
    out_row = out_ptr + row * row_stride
    offsets = tl.arange(0, CHUNK)
    # Pass 1: squares in float32 (float16 squares of |x| > 256 would overflow), the row kept in L2.
    squares = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, hidden, CHUNK):
        columns = start + offsets
        mask = columns < hidden
        x = tl.load(x_row + columns, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        squares += x * x
    scale = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / hidden + eps)
    # Pass 2: x again (from L2, its last use) and the weight (read by every row: keep it).
    for start in tl.range(0, hidden, CHUNK):
        columns = start + offsets
        mask = columns < hidden
        x = tl.load(x_row + columns, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        weight = tl.load(weight_ptr + columns, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(out_row + columns, (x * scale * weight).to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, weight, out, eps, chunk: int, warps: int):
    """One program per row, ``chunk`` columns a step (a power of two), ``warps`` warps."""
    rows, hidden = x.shape
    rms_norm_kernel[(rows,)](x, weight, out, hidden, x.stride(0), eps, CHUNK=chunk, num_warps=warps)


def run(x, weight, out=None, eps=EPS):
    out = torch.empty_like(x) if out is None else out
    chunk = min(MAX_CHUNK, triton.next_power_of_2(x.shape[1]))
    # Short rows (hidden 1 or 127) take one small chunk: fewer warps than lanes would sit idle.
    launch(x, weight, out, eps, chunk, min(WARPS, max(1, chunk // 256)))
    return out
