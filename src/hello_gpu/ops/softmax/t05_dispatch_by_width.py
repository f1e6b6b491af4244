"""Triton, the row length picks the kernel: several rows per program, one row in registers, or online tiles.

parent: t04_rows_per_program
change: up to 2048 columns run t04 (several rows per program); up to 16384, t03 (one row per
  program in registers, 16 warps from 8192); longer rows, t02 (online softmax over column tiles).
  The three kernels are the earlier rungs' own files, loaded as the registry loads them
hypothesis: each earlier rung wins on one kind of row and none on all: t04 on short rows, t03
  where a row fits in registers, t02 where it does not. Picking by width takes the best of them
  at every shape: 1.0x the best of t02, t03 and t04 at each benchmark shape, and the rung that
  hello_gpu.ops.softmax() calls
prediction: 1.0x the fastest of t02/t03/t04 at each shape; >= 2.0x torch.softmax at 8192x8192 float32
outcome: 2.09x torch.softmax [2.08, 2.10] at 8192x8192 float32 (predicted >= 2.0x), but 0.84x t04 at 4096x32768 (records softmax.float32, run of 2c2a085)
deterministic: yes, each of the three kernels reduces a row in a fixed order
"""

# hello-gpu: record softmax.float32
# hello-gpu: record softmax.bfloat16

from pathlib import Path

import triton

from hello_gpu.ops.rung import load_module

SHORT_ROW = 2048            # t04's limit: several rows per program up to here
REGISTER_ROW = 16384        # t03 holds up to 16384 float32 columns in 512 threads (32 values each)

_HERE = Path(__file__).resolve().parent
# Loaded fresh, as the registry loads rungs, so the Triton interpreter setting of this process applies.
_rows_per_program = load_module(_HERE / "t04_rows_per_program.py", "softmax_t04_for_t05")
_row_in_registers = load_module(_HERE / "t03_sixteen_warps.py", "softmax_t03_for_t05")
_online_tiles = load_module(_HERE / "t02_online_tiles.py", "softmax_t02_for_t05")


def run(x, out=None):
    block = triton.next_power_of_2(x.shape[1])
    if block <= SHORT_ROW:
        return _rows_per_program.run(x, out)
    if block <= REGISTER_ROW:
        return _row_in_registers.run(x, out)
    return _online_tiles.run(x, out)
