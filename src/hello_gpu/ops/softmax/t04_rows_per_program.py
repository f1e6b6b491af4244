"""Triton, several short rows per program: a 2-D tile of rows x columns, reduced along the columns.

parent: t01_row_per_program
change: rows of up to 2048 columns are packed into a program, 4096 elements per program (4 rows of
  1024 columns), 8 warps; longer rows keep one row per program as t01
hypothesis: at 4096x1024 float32 (16 MiB in, 16 MiB out: ~8 us at 4 TB/s) t01 launches 4096
  programs of 4 warps that each move 4 KiB and finish in a few hundred cycles, and the launch and
  the tail of scheduling them cost as much as the transfer (a reference run before this ladder: torch.compile 2485 GB/s, a
  plain one-row Triton kernel 2180-2480 GB/s). Four rows per program: a quarter of the programs,
  16 KiB in flight each, one wave on 132 SMs. Expect ~1.1x t01 at 4096x1024, ~1.0x torch.compile;
  nothing changes for 8192 and 32768 columns.
prediction: 1.1x t01 at 4096x1024; 1.0x t01 at 8192x8192 and 4096x32768
outcome: 0.97x t01 [0.96, 0.98] at 4096x1024 float32 (predicted 1.1x) (records softmax.float32, run of 2c2a085)
deterministic: yes, each row reduces in a fixed tree within its program
"""

# hello-gpu: record softmax.float32
# hello-gpu: record softmax.bfloat16

import torch
import triton
import triton.language as tl

ELEMENTS_PER_PROGRAM = 4096
SHORT_ROW = 2048             # up to this many columns, several rows share a program


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, rows, columns, row_stride, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    row_ids = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    column_ids = tl.arange(0, BLOCK)
    mask = (row_ids[:, None] < rows) & (column_ids[None, :] < columns)
    pointers = row_ids[:, None] * row_stride + column_ids[None, :]
    x = tl.load(x_ptr + pointers, mask=mask, other=float("-inf")).to(tl.float32)
    # Rows past the end are all -inf and come out NaN, but the masked store never writes them.
    numerator = tl.exp(x - tl.max(x, axis=1)[:, None])
    result = numerator / tl.sum(numerator, axis=1)[:, None]
    tl.store(out_ptr + pointers, result.to(out_ptr.dtype.element_ty), mask=mask)


def run(x, out=None):
    rows, columns = x.shape
    out = torch.empty_like(x) if out is None else out
    block = triton.next_power_of_2(columns)
    rows_per_program = max(1, ELEMENTS_PER_PROGRAM // block) if block <= SHORT_ROW else 1
    num_warps = 8 if rows_per_program > 1 or block >= 2048 else 4
    grid = (triton.cdiv(rows, rows_per_program),)
    softmax_rows_kernel[grid](x, out, rows, columns, x.stride(0), ROWS=rows_per_program, BLOCK=block,
                              num_warps=num_warps)
    return out
