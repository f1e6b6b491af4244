"""The PyTorch baseline: ``F.linear(a, weight)``, cuBLAS with the weight transposed in place.

parent: none
change: F.linear without a bias, what nn.Linear runs; float32 with TF32 off (PyTorch's default)
hypothesis: reference runs on the H200 (shared/anchors-h200.md, bf16): decode M = 1 reads a
  14336x4096 weight in 41.4 us, 0.67 of copy bandwidth (M = 16: the same), 4096x14336 at 0.64,
  4096x4096 at 0.41 (19.2 us: too few bytes to fill the GPU) and the 128256x4096 head at 0.95. The
  issue's decode target is >= 0.85 of copy and >= 1.0x F.linear
deterministic: yes, cuBLAS picks one algorithm per shape and repeats it
"""

# hello-gpu: record linear.float32
# hello-gpu: record linear.bfloat16

import torch.nn.functional as F


def run(a, weight):
    return F.linear(a, weight)
