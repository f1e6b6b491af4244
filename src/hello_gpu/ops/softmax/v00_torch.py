"""The PyTorch baseline: ``torch.softmax(x, dim=-1)``.

parent: none
change: torch.softmax over the last dimension, what a user would write
hypothesis: eager softmax on the H200 reaches under half of copy bandwidth in float32 and about a
  quarter in bfloat16 (the reference check measured 1917 GB/s at
  8192x8192 float32, 45% of copy): the weakest baseline of the course, so the ladder should beat it
prediction: ~45% of copy bandwidth at 8192x8192 float32
deterministic: yes, one row per block in a fixed order
"""

# hello-gpu: record softmax.float32
# hello-gpu: record softmax.bfloat16

import torch


def run(x):
    return torch.softmax(x, dim=-1)
