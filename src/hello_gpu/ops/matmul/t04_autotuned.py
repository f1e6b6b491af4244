"""Triton, t02's grouped kernel under triton.autotune over six configurations, three per dtype class:
the first call of each (M, N, K, dtype) times them all and keeps the fastest.

parent: t03_stages_and_warps
change: the tile sizes, warps and stages of t03 become one candidate of three per dtype class
  (CONFIGS); Triton's autotuner times each on the first call of a shape and dtype and reuses the
  winner (winners() names it, per shape, for the record); in Triton's CPU interpreter, which cannot
  time anything, the first candidate of the dtype runs (the same kernel, so the interpreter checks
  its correctness all the same)
hypothesis: no one configuration is best at every shape: 128x256 tiles leave SMs idle on the prefill
  shapes whose tile count is not a multiple of 132 (4096x4096: 16 x 32 = 512 tiles of 128x256, 3.9
  waves), and decode shapes (M = 1, 16) waste 127/128 of a 128-row tile. Picking per shape: ~1.0x
  t03 at 4096^3, 1.05-1.1x on the prefill shapes; the issue's targets are >= 1.0x cuBLAS bf16 at
  4096^3, >= 0.95x at 8192^3 and >= 0.9x on the prefill shapes
prediction: ~1.0x t03 bf16 at 4096^3 (~0.9x torch.mm), ~1.07x t03 on the prefill shapes
outcome: 1.003x t03 [1.002, 1.006] at 4096^3 bfloat16 (predicted ~1.0x), 0.786x torch.mm [0.784, 0.792]
  (predicted ~0.9x), 609 TFLOP/s; 1.001x t03, 0.772x torch.mm at 8192^3; 1.019x t03, 0.839x torch.mm in
  float32 (records matmul.bfloat16 and matmul.float32, run of 8b07192)
deterministic: yes, the autotuner's choice is made once per shape and dtype, then each tile of C is
  one program's sum over K in order
"""

# hello-gpu: record matmul.float32
# hello-gpu: record matmul.bfloat16

import os
from pathlib import Path

import torch
import triton

from hello_gpu.ops.matmul.launch import checked_output
from hello_gpu.ops.rung import load_module

_grouped = load_module(Path(__file__).resolve().with_name("t02_grouped_order.py"), "matmul_t02_for_t04")
DTYPES = _grouped.DTYPES
GROUP_M = 8


def _config(block_m, block_n, block_k, warps, stages):
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": GROUP_M},
                         num_warps=warps, num_stages=stages)


# bfloat16 / float16: shared memory per stage 48, 48 and 32 KiB (t03's first). float32 (FMA, smaller
# K steps): 32, 24 and 24 KiB per stage (t03's first).
CONFIGS = {"16-bit": [_config(128, 256, 64, 8, 3), _config(256, 128, 64, 8, 3), _config(128, 128, 64, 4, 4)],
           "float32": [_config(128, 128, 32, 8, 3), _config(128, 64, 32, 4, 4), _config(64, 128, 32, 4, 4)]}

# The Triton interpreter (TRITON_INTERPRET=1, read when this module is loaded) has no clock to tune
# with: there the first candidate of the dtype class runs, through t02's launcher.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
# One autotuner per dtype class over t02's kernel: each times its own three candidates on the first
# call of an (M, N, K) and keeps the fastest in its cache.
TUNERS = {} if INTERPRETED else {name: triton.autotune(configs=configs, key=["M", "N", "K"])(_grouped.grouped_kernel)
                                 for name, configs in CONFIGS.items()}


def _dtype_class(dtype: torch.dtype) -> str:
    return "float32" if dtype == torch.float32 else "16-bit"


def winners() -> dict[str, str]:
    """The configuration each autotuner chose, per key it has seen: {"16-bit (4096, 4096, 4096, ...)":
    "BLOCK_M: 128, BLOCK_N: 256, ..."}. Empty before the first call (and in the interpreter)."""
    return {f"{name} {key}": str(config) for name, tuner in TUNERS.items() for key, config in tuner.cache.items()}


def run(a, b, out=None):
    if INTERPRETED:
        first = CONFIGS[_dtype_class(a.dtype)][0]
        return _grouped.launch(a, b, out, block_m=first.kwargs["BLOCK_M"], block_n=first.kwargs["BLOCK_N"],
                               block_k=first.kwargs["BLOCK_K"], group_m=GROUP_M, warps=first.num_warps,
                               stages=first.num_stages)
    out = checked_output(a, b, out, DTYPES)
    (m, k), n = a.shape, b.shape[1]
    if out.numel():
        def grid(meta):
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
        TUNERS[_dtype_class(a.dtype)][grid](a, b, out, m, n, k, a.stride(0), b.stride(0), out.stride(0),
                                            IEEE=a.dtype == torch.float32)
    return out
