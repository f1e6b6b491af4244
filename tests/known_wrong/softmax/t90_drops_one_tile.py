"""Known wrong: t02's online softmax in tiles of 256 columns, the middle tile left out of the max and the sum.

parent: t02_online_tiles
change: the first pass skips tile (tiles // 2) of each row (with one tile, the only one); the second
  pass still writes every column
hypothesis: none; this rung exists so that a test proves the checker rejects a dropped block at every
  checked shape (issue 19, part 5)
deterministic: yes, fixed order and trees
"""

import torch
import triton
import triton.language as tl

TILE = 256


@triton.jit
def online_softmax_kernel(x_ptr, out_ptr, columns, row_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * row_stride
    skipped = (tl.cdiv(columns, TILE) // 2) * TILE
    running_max = tl.full([TILE], float("-inf"), tl.float32)
    running_sum = tl.zeros([TILE], tl.float32)
    for start in range(0, columns, TILE):
        offsets = start + tl.arange(0, TILE)
        mask = (offsets < columns) & (start != skipped)
        x = tl.load(x_ptr + base + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(running_max, x)
        scale = tl.where(new_max == float("-inf"), 0.0, tl.exp(running_max - new_max))
        added = tl.where(new_max == float("-inf"), 0.0, tl.exp(x - new_max))
        running_sum = running_sum * scale + added
        running_max = new_max
    row_max = tl.max(running_max, axis=0)
    lane_scale = tl.where(running_max == float("-inf"), 0.0, tl.exp(running_max - row_max))
    row_sum = tl.sum(running_sum * lane_scale, axis=0)
    for start in range(0, columns, TILE):
        offsets = start + tl.arange(0, TILE)
        mask = offsets < columns
        x = tl.load(x_ptr + base + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(out_ptr + base + offsets, (tl.exp(x - row_max) / row_sum).to(out_ptr.dtype.element_ty), mask=mask)


def run(x, out=None):
    rows, columns = x.shape
    out = torch.empty_like(x) if out is None else out
    online_softmax_kernel[(rows,)](x, out, columns, x.stride(0), TILE=TILE)
    return out
