"""The PyTorch baseline: torch.sum, the library's own reduction kernel.

parent: none
change: torch.sum over the flattened tensor, accumulated in float32
hypothesis: PyTorch's reduction reads each element once with vector loads across the whole GPU, so
  at 2^28 (1 GiB) it should stream near the 4.2 TB/s read ceiling: ~256 us. At 2^20 (4 MiB, ~1 us of
  reading) it is latency-bound: one launch plus a device-wide combine of the blocks' partial sums,
  so expect several us, far from the bandwidth line. The line every other rung is measured against.
prediction: ~90% of read bandwidth at 2^28; under 20% at 2^20
outcome: 4213 GB/s at 2^28 (100% of the read ceiling); 387 GB/s at 2^20, about 11 us, as predicted (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, PyTorch combines the partial sums in a fixed order (a tree, no atomics)
dtypes: float32
"""

# hello-gpu: record reduce_sum.float32

import torch


def run(x):
    # sum over dim 0 of the flat view with keepdim gives the 1-element shape directly: one kernel,
    # no reshape copy. (No out= parameter: the derived torch.compile rung calls this same run().)
    return torch.sum(x.reshape(-1), dim=0, keepdim=True, dtype=torch.float32)
