"""Triton, t02's grouped kernel with tiles, warps and pipeline depth chosen per dtype: 128x256x64 tiles,
8 warps and 3 stages in bfloat16 / float16; 128x128x32, 8 warps, 3 stages in float32.

parent: t02_grouped_order
change: the same kernel (t02's grouped_kernel, loaded as the registry loads rungs) launched with
  num_stages = 3 (Triton keeps 3 K steps of tiles in flight: cp.async / TMA loads of step k + 2
  while step k multiplies) and, in 16-bit, a 128x256 tile with BLOCK_K = 64
hypothesis: at t02's 128x128x32 with Triton's default stages, each K step's loads (16 KiB in bf16)
  are waited for before its wgmma; deeper pipelining hides the load latency, and a 128x256 tile
  raises the FLOPs per byte of shared memory read by 1.33x (2 x 128 x 256 / (128 + 256) against
  2 x 128 x 128 / 256). Shared memory: 3 x (128 x 64 + 64 x 256) x 2 B = 144 KiB of the H200's 227.
  This is the configuration a plain grouped kernel reached 0.95x cuBLAS bf16 with at 4096^3 (one of
  the four of shared/anchors-h200.md). float32 (FMA, no tensor cores) gains little: ~1.05x t02
prediction: ~1.15x t02 bf16 at 4096^3 (~0.9x torch.mm); ~1.05x t02 float32
outcome: 1.264x t02 [1.259, 1.268] at 4096^3 bfloat16 (predicted ~1.15x), 0.785x torch.mm [0.784, 0.791]
  (predicted ~0.9x), 609 TFLOP/s; 1.252x t02, 0.752x torch.mm at 8192^3; 1.000x t02 (predicted ~1.05x), 0.822x
  torch.mm in float32 (records matmul.bfloat16 and matmul.float32, run of 8b07192)
deterministic: yes, each tile of C is one program's sum over K in order
"""

# hello-gpu: record matmul.float32
# hello-gpu: record matmul.bfloat16

from pathlib import Path

import torch

from hello_gpu.ops.rung import load_module

_grouped = load_module(Path(__file__).resolve().with_name("t02_grouped_order.py"), "matmul_t02_for_t03")

# dtype -> (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages)
SIZES = {torch.bfloat16: (128, 256, 64, 8, 8, 3), torch.float16: (128, 256, 64, 8, 8, 3),
         torch.float32: (128, 128, 32, 8, 8, 3)}


def run(a, b, out=None):
    block_m, block_n, block_k, group_m, warps, stages = SIZES.get(a.dtype, SIZES[torch.float32])
    return _grouped.launch(a, b, out, block_m=block_m, block_n=block_n, block_k=block_k, group_m=group_m,
                           warps=warps, stages=stages)
