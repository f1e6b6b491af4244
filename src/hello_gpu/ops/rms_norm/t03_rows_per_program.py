"""Triton, several short rows per program: a 2-D tile of rows x hidden, the weight loaded once per program.

parent: t02_warps_by_width
change: rows of up to 1024 columns are packed into a program, 4096 elements per program (4 rows of
  1024, 32 rows of 127), 4 warps; longer rows keep t02's one row per program
hypothesis: a short row gives a program little to do (1 KiB of bfloat16 at hidden 512) and four
  warps of which most lanes are masked off at hidden 127; packing rows fills the lanes and loads
  the weight once for all of them. The benchmark shapes (hidden 4096 and 8192) are long rows and
  take t02's path: 1.0x t02 there; the change shows on short rows only (edge shapes 127 and 781)
prediction: 1.0x t02 at 16384x8192 and 8192x4096 (long rows: same path)
outcome: 0.996x t02 [0.994, 0.997] at 16384x8192 bfloat16, 1.002x at 8192x4096 bfloat16, as predicted (records rms_norm.bfloat16, run of 152c451)
deterministic: yes, each row reduces in a fixed tree within its program
"""

# hello-gpu: record rms_norm.bfloat16
# hello-gpu: record rms_norm.float32

import torch
import triton
import triton.language as tl

from hello_gpu.ops.rms_norm.spec import EPS

ELEMENTS_PER_PROGRAM = 4096
SHORT_ROW = 1024             # up to this many columns, several rows share a program
VALUES_PER_THREAD = 16       # as t02: the warp count follows the row length on long rows


@triton.jit
def rms_norm_rows_kernel(x_ptr, weight_ptr, out_ptr, rows, hidden, row_stride, eps, ROWS: tl.constexpr,
                         BLOCK: tl.constexpr):
    row_ids = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    column_ids = tl.arange(0, BLOCK)
    column_mask = column_ids < hidden
    mask = (row_ids[:, None] < rows) & column_mask[None, :]
    pointers = row_ids[:, None] * row_stride + column_ids[None, :]
    x = tl.load(x_ptr + pointers, mask=mask, other=0.0).to(tl.float32)
    weight = tl.load(weight_ptr + column_ids, mask=column_mask, other=0.0).to(tl.float32)   # once per program
    scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / hidden + eps)
    tl.store(out_ptr + pointers, (x * scale[:, None] * weight[None, :]).to(out_ptr.dtype.element_ty), mask=mask)


def run(x, weight, out=None, eps=EPS):
    rows, hidden = x.shape
    out = torch.empty_like(x) if out is None else out
    block = triton.next_power_of_2(hidden)
    rows_per_program = max(1, ELEMENTS_PER_PROGRAM // block) if block <= SHORT_ROW else 1
    num_warps = 4 if rows_per_program > 1 else min(16, max(4, block // (32 * VALUES_PER_THREAD)))
    grid = (triton.cdiv(rows, rows_per_program),)
    rms_norm_rows_kernel[grid](x, weight, out, rows, hidden, x.stride(0), eps, ROWS=rows_per_program, BLOCK=block,
                               num_warps=num_warps)
    return out
