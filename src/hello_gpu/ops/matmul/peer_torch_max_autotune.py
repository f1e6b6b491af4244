"""The peer: torch.compile(torch.mm) in max-autotune, Inductor timing its Triton GEMM templates against
cuBLAS at each shape and keeping the fastest, its compile time capped.

parent: none
change: torch.mm compiled as ops/matmul/max_autotune.py says (Inductor's max-autotune-no-cudagraphs:
  backends ATEN and TRITON, the DEFAULT search space, each shape's template precompilation stopped
  after 120 s), dynamic=False: one graph and one tuning per shape, done at the shape's first call,
  outside the timing. float32 keeps TF32 off (PyTorch's default, which Inductor's templates follow)
hypothesis: Inductor's mm templates are grouped-order Triton kernels like t02-t04 over a larger set
  of tiles, stages and warps, and its choice includes cuBLAS itself: where no template wins it runs
  cuBLAS, so ~1.0x torch.mm at worst up to the noise of its own timing, more where a template beats
  cuBLAS (shapes whose tile count fits the 132 SMs badly). The time a user pays for that is the
  tuning: seconds to minutes per shape (capped), once. The reference Triton kernel of the anchors
  reached 0.95x / 0.90x cuBLAS bf16 at 4096^3 / 8192^3 with four configurations
prediction: ~1.0x torch.mm bf16 at 4096^3 and 8192^3; 1.0-1.1x on the prefill shapes
deterministic: yes, the choice is made once per shape and kept; each choice sums in a fixed order
package: torch
"""

# hello-gpu: record matmul.float32
# hello-gpu: record matmul.bfloat16

import torch

from hello_gpu.ops.matmul.max_autotune import compiled


def _mm(a, b):
    return torch.mm(a, b)


run = compiled(_mm)
