"""Known wrong: matmul's known-wrong kernel (32x32 tiles, the last tile row of C leaves out its last K
step) reading the weight as nn.Linear stores it, (N, K).

parent: v00_torch
change: programs of the last tile row of C stop one BLOCK_K step early (with one K step, the only
  one: those tiles come out 0); every element is written
hypothesis: none; this rung exists so that a test proves the checker rejects one skipped tile row's
  work at every checked shape (issue 21)
deterministic: yes, fixed order
"""

from pathlib import Path

import torch

from hello_gpu.ops.rung import load_module

_matmul = load_module(Path(__file__).resolve().parents[1] / "matmul" / "t90_skips_one_k_tile.py", "known_wrong_matmul")


def run(a, weight, out=None):
    m, k = a.shape
    n = weight.shape[0]
    out = torch.empty((m, n), dtype=a.dtype, device=a.device) if out is None else out
    return _matmul.launch(a, weight, out, 1, k)        # weight[n, k] is B's element (k, n)
