"""The PyTorch baseline: ``torch.mm(a, b)``, cuBLAS (hipBLASLt on AMD) in the inputs' dtype.

parent: none
change: torch.mm, what a user would write; float32 with TF32 off, PyTorch's default
  (torch.backends.cuda.matmul.allow_tf32 = False): a TF32 result fails the float32 Frobenius bound
hypothesis: cuBLAS is the yardstick of the issue's targets. Reference runs on the H200
  (shared/anchors-h200.md): bf16 719 TFLOP/s at 4096^3 and 672 at 8192^3 (~70% of the ~990 dense
  peak); float32 with TF32 off 51.0 TFLOP/s at 4096^3 (~75% of 67); decode (F.linear, M = 1 and 16)
  reads a 14336x4096 weight at 0.67 of copy bandwidth, the 128256x4096 head at 0.95
deterministic: yes, cuBLAS picks one algorithm per shape and repeats it
"""

# hello-gpu: record matmul.float32
# hello-gpu: record matmul.bfloat16

import torch


def run(a, b, out=None):
    return torch.mm(a, b, out=out)
