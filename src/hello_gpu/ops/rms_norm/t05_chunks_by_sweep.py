"""Triton, t04's two passes with the chunk and warps its sweep measured fastest: 4096 columns, 16 warps.

parent: t04_two_passes_l2
change: chunks of up to 4096 columns (t04: 2048) and 16 warps (t04: 8); the kernel is t04's
hypothesis: t04, with the 2048 x 8 configuration assumed to be Inductor's, ran 0.955x
  torch.compile at 16384x8192 bfloat16. Its sweep in the same run (benchmarks/rms_norm_sweep.py,
  records/nvidia-h200/rms_norm-sweep.json, run of commit abc4538) timed 9 configurations against
  torch.compile (1024: 0.82x, 0.94x, 0.74x at 4, 8, 16 warps; 2048: 0.82x, 0.96x, 0.95x; 4096:
  0.89x, 0.92x, 0.99x), and 4096 x 16 was the best, 0.990x [0.988, 0.997]; at 8192x4096
  float32 it was 1.37x F.rms_norm [1.36, 1.38] (2048 x 16: 1.38x). Still 8 values a thread a chunk
  in bfloat16 (4 in float32), so the registers stay low, and twice t04's warps a program: 16 warps
  x 4 programs an SM at full occupancy, each with a 4096-column chunk of loads in flight
prediction: ~1.03x t04 at 16384x8192 bfloat16 (~0.99x torch.compile: the 1.0x target still
  missed by ~1%); ~1.03x t04 at 8192x4096 float32 (~1.37x F.rms_norm); ~1.0x at 8192x4096 bfloat16
outcome: 1.039x t04 [1.034, 1.042] at 16384x8192 bfloat16 (predicted ~1.03x); 0.781x t04 [0.776, 0.784] at 8192x4096 bfloat16 (predicted ~1.0x) (records rms_norm.bfloat16, run of ea33b2d)
deterministic: yes, as t04
"""

# hello-gpu: record rms_norm.bfloat16
# hello-gpu: record rms_norm.float32

from pathlib import Path

import torch
import triton

from hello_gpu.ops.rms_norm.spec import EPS
from hello_gpu.ops.rung import load_module

MAX_CHUNK = 4096
WARPS = 16

_t04 = load_module(Path(__file__).resolve().parent / "t04_two_passes_l2.py", "rms_norm_t04_for_t05")


def run(x, weight, out=None, eps=EPS):
    out = torch.empty_like(x) if out is None else out
    chunk = min(MAX_CHUNK, triton.next_power_of_2(x.shape[1]))
    # Short rows take one small chunk, with at most a warp for every 256 columns (as t04).
    _t04.launch(x, weight, out, eps, chunk, min(WARPS, max(1, chunk // 256)))
    return out
