"""The PyTorch baseline: ``torch.add``, the library's own vectorised elementwise kernel.

parent: none
change: torch.add(a, b), what a user would write
hypothesis: bandwidth-bound (12 bytes per FLOP in float32); PyTorch's elementwise kernel loads 128
  bits per thread and reached 4366 GB/s at 2^28 in the reference check, about the copy ceiling: the
  line every other rung is measured against
outcome: 4376 GB/s at 2^28 float32, 4356 in bfloat16: 104% of the copy ceiling (records vector_add.float32, run of a3e1cf2)
deterministic: yes, one writer per element
"""

# hello-gpu: record vector_add.float32
# hello-gpu: record vector_add.bfloat16

import torch


def run(a, b, out=None):
    return torch.add(a, b, out=out)
