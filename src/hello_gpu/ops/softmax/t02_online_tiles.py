"""Triton, online softmax over column tiles: any row length, two reads of the row instead of one.

parent: t01_row_per_program
change: the row is walked in tiles of 4096 columns, keeping a running maximum and a running sum
  (rescaled when the maximum grows), then walked again to write exp(x - max) / sum
hypothesis: t01 holds the whole row in registers, which stops working when the row outgrows them
  (32768 float32 columns are 128 KiB: spills). Online softmax reads the row twice (the second read
  mostly from L2 for rows under ~60 MiB / programs in flight), writes it once: 3 passes of bytes at
  worst against t01's 2, but no spills. Expect it to lose to t01 where t01 fits (8192 columns) and
  win at 4096x32768.
prediction: 0.8x t01 at 8192x8192; 1.3x t01 at 4096x32768
outcome: 0.90x t01 [0.898, 0.901] at 8192x8192 float32 (predicted 0.8x), 0.88x at 4096x32768 (predicted 1.3x) (records softmax.float32, run of 2c2a085)
deterministic: yes, the tiles are visited in order and each tile reduces in a fixed tree
"""

# hello-gpu: record softmax.float32
# hello-gpu: record softmax.bfloat16

import torch
import triton
import triton.language as tl

TILE = 4096


@triton.jit
def online_softmax_kernel(x_ptr, out_ptr, columns, row_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * row_stride
    running_max = tl.full([TILE], float("-inf"), tl.float32)
    running_sum = tl.zeros([TILE], tl.float32)
    for start in range(0, columns, TILE):
        offsets = start + tl.arange(0, TILE)
        x = tl.load(x_ptr + base + offsets, mask=offsets < columns, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(running_max, x)
        # Rescale what was summed under the old maximum; a lane still at -inf contributes 0, not NaN.
        scale = tl.where(new_max == float("-inf"), 0.0, tl.exp(running_max - new_max))
        # A NaN entry must make the row NaN, as torch.softmax does: tl.maximum drops NaN (maxnum), so a
        # lane still at -inf would otherwise add 0 for it (x == x is False only for NaN).
        added = tl.where((new_max == float("-inf")) & (x == x), 0.0, tl.exp(x - new_max))
        running_sum = running_sum * scale + added
        running_max = new_max
    row_max = tl.max(running_max, axis=0)
    # Lanes combine at the row maximum; an all -inf row keeps max -inf and sum 0: 0/0 below is NaN.
    lane_scale = tl.where(running_max == float("-inf"), 0.0, tl.exp(running_max - row_max))
    row_sum = tl.sum(running_sum * lane_scale, axis=0)
    for start in range(0, columns, TILE):
        offsets = start + tl.arange(0, TILE)
        mask = offsets < columns
        x = tl.load(x_ptr + base + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        result = tl.exp(x - row_max) / row_sum
        tl.store(out_ptr + base + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)


def run(x, out=None):
    rows, columns = x.shape
    out = torch.empty_like(x) if out is None else out
    online_softmax_kernel[(rows,)](x, out, columns, x.stride(0), TILE=TILE, num_warps=8)
    return out
