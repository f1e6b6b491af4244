"""Known wrong: an RMSNorm over chunks of 256 columns whose sum of squares leaves out the middle chunk.

parent: t01_row_per_program
change: the sum of squares skips chunk (chunks // 2) of each row (with one chunk, the only one); every
  column is still scaled and written
hypothesis: none; this rung exists so that a test proves the checker rejects a dropped block at every
  checked shape (issue 19, part 5)
deterministic: yes, fixed order and trees
"""

import torch
import triton
import triton.language as tl

CHUNK = 256
EPS = 1e-6


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, CHUNK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * hidden
    skipped = (tl.cdiv(hidden, CHUNK) // 2) * CHUNK
    squares = tl.zeros([CHUNK], tl.float32)
    for start in range(0, hidden, CHUNK):
        offsets = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + base + offsets, mask=(offsets < hidden) & (start != skipped), other=0.0).to(tl.float32)
        squares += x * x
    scale = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / hidden + eps)
    for start in range(0, hidden, CHUNK):
        offsets = start + tl.arange(0, CHUNK)
        mask = offsets < hidden
        x = tl.load(x_ptr + base + offsets, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + offsets, (x * scale * w).to(out_ptr.dtype.element_ty), mask=mask)


def run(x, weight, out=None):
    rows, hidden = x.shape
    out = torch.empty_like(x) if out is None else out
    rms_norm_kernel[(rows,)](x, weight, out, hidden, EPS, CHUNK=CHUNK)
    return out
