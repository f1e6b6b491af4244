"""The peer: torch.compile(F.linear) in max-autotune, Inductor timing its Triton templates against cuBLAS
at each shape (decode steps included) and keeping the fastest, its compile time capped.

parent: none
change: F.linear without a bias compiled as ops/matmul/max_autotune.py says (Inductor's
  max-autotune-no-cudagraphs: backends ATEN and TRITON, the DEFAULT search space, each shape's
  template precompilation stopped after 120 s), dynamic=False: one graph and one tuning per shape,
  done at the shape's first call, outside the timing
hypothesis: at M = 1 and 16 the work is reading the weight once; cuBLAS through F.linear reads a
  14336x4096 bf16 weight at 0.67 of copy bandwidth (shared/anchors-h200.md). Inductor's mm templates
  are tiled for M >= 16, and its choice includes cuBLAS itself, so ~1.0x F.linear at decode (a
  template with BLOCK_M = 16 and many programs may reach more), ~1.0x at prefill
prediction: ~1.0x F.linear bf16 at 1x14336x4096 and 16x14336x4096
deterministic: yes, the choice is made once per shape and kept; each choice sums in a fixed order
package: torch
"""

# hello-gpu: record linear.float32
# hello-gpu: record linear.bfloat16

import torch.nn.functional as F

from hello_gpu.ops.matmul.max_autotune import compiled


def _linear(a, weight):
    return F.linear(a, weight)


run = compiled(_linear)
