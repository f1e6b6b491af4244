"""Triton, t07 with the row width compiled in for short rows: masks gone, as in Inductor's kernel.

parent: t07_short_rows_tuned
change: for rows of up to 1024 columns, the kernel takes the width as a compile-time constant
  (COLUMNS: tl.constexpr) and whether the rows divide evenly into programs (EVEN_ROWS), so
  Triton builds one kernel per width and drops the masks it can prove true; launch as t07 (2 rows
  a program, 4 warps); longer rows go through t07 unchanged
hypothesis: at 4096x1024 float32 t07 is 0.974x torch.compile [0.968, 0.983] and 1.03x Liger
  (records softmax.float32, H200, run of commit abc4538): a latency-bound shape (~17 MB of DRAM a
  call, 12.5 us) where each program's instruction path is its critical path. On rms_norm, the
  same launch and bytes as torch.compile left t05 at 64.6% SM throughput against Inductor's 44.8%
  (rms_norm.bfloat16.profile.json, run of ea33b2d), and compiling the row width in (rms_norm
  t07) took it from 0.99x to 1.00x torch.compile. Inductor's softmax kernel has its widths as
  literals too. Offline, for sm_90 (2 rows x 1024 columns, 4 warps, float32, with the
  divisibility-by-16 facts Triton specializes at run time): t07's kernel is 320 SASS instructions
  with 4 compares, this one 296 with none; both load and store with LDG.128/STG.128. A smaller
  cut than rms_norm t07's (which also removed two run-time loops): 0.93x the instructions
prediction: ~1.01-1.02x t07 at 4096x1024 float32, likely within noise (~0.99x torch.compile, ~1.04x
  Liger: the 1.1x Liger target stays out of reach); 1.0x t07 at 8192x8192 and 4096x32768 (the
  same code)
outcome: 1.164x torch.softmax [1.158, 1.171] at 4096x1024 float32 against t07's 1.153x: 1.02x t07, as predicted (records softmax.float32, run of d982f25)
deterministic: yes, each row reduces in a fixed tree within its program
"""

# hello-gpu: record softmax.float32
# hello-gpu: record softmax.bfloat16

from pathlib import Path

import torch
import triton
import triton.language as tl

from hello_gpu.ops.rung import load_module

_t07 = load_module(Path(__file__).resolve().parent / "t07_short_rows_tuned.py", "softmax_t07_for_t08")


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, rows, row_stride, ROWS: tl.constexpr, BLOCK: tl.constexpr,
                        COLUMNS: tl.constexpr, EVEN_ROWS: tl.constexpr, LOAD_EVICTION: tl.constexpr = ""):
    row_ids = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    column_ids = tl.arange(0, BLOCK)
    pointers = row_ids[:, None] * row_stride + column_ids[None, :]
    # Every mask here is a compile-time fact when COLUMNS == BLOCK and EVEN_ROWS: Triton folds it away.
    if EVEN_ROWS:
        mask = column_ids[None, :] < COLUMNS
    else:
        mask = (row_ids[:, None] < rows) & (column_ids[None, :] < COLUMNS)
    # LOAD_EVICTION: "" here (the L2's normal policy); t09 and t10 mark the loads "evict_first".
    x = tl.load(x_ptr + pointers, mask=mask, other=float("-inf"), eviction_policy=LOAD_EVICTION).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=1)[:, None])
    result = numerator / tl.sum(numerator, axis=1)[:, None]
    tl.store(out_ptr + pointers, result.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, out, rows_per_program: int, warps: int, load_eviction: str = ""):
    """Rows of up to t07's SHORT_ROW columns through this kernel, longer ones through t07."""
    rows, columns = x.shape
    block = triton.next_power_of_2(columns)
    if block > _t07.SHORT_ROW:
        return _t07.run(x, out)
    out = torch.empty_like(x) if out is None else out
    grid = (triton.cdiv(rows, rows_per_program),)
    softmax_rows_kernel[grid](x, out, rows, x.stride(0), ROWS=rows_per_program, BLOCK=block, COLUMNS=columns,
                              EVEN_ROWS=rows % rows_per_program == 0, LOAD_EVICTION=load_eviction, num_warps=warps)
    return out


def run(x, out=None):
    return launch(x, out, _t07.ROWS_PER_PROGRAM, _t07.WARPS)      # t07's launch: 2 rows, 4 warps
