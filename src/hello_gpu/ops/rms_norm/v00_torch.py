"""The PyTorch baseline: ``torch.nn.functional.rms_norm``.

parent: none
change: F.rms_norm(x, (hidden,), weight, eps), what a user would write
hypothesis: an eager composite (square, mean, rsqrt, two multiplies) or a fused kernel depending on
  the PyTorch build; either way bandwidth-bound, and the baseline the issue's ratios are taken against
prediction: under 60% of copy bandwidth at 16384x8192 bfloat16
deterministic: yes, a fixed reduction order per row
"""

# hello-gpu: record rms_norm.bfloat16
# hello-gpu: record rms_norm.float32

import torch.nn.functional as F

from hello_gpu.ops.rms_norm.spec import EPS


def run(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight, EPS)
