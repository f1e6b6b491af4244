"""Triton, t09 launched as Inductor launches it: one row a program, on one warp.

parent: t09_evict_first
change: rows of up to 1024 columns run t09's kernel and hint with 1 row a program and 1 warp (t09:
  2 rows and 4 warps); longer rows go through t07 unchanged
hypothesis: the kernel torch.compile runs at 4096x1024 float32 is one row a program on one warp,
  with no hints (softmax-dirty-l2.json, run of commit d982f25): each row reduces within a warp by
  shuffles, with no shared memory and no barrier, and 4096 one-warp programs all fit on the 132 SMs
  at once (32 a SM). benchmarks/eviction_sweep.py (run of c01ccac) ran t09's kernel at 1-2 rows and
  1-4 warps with and without hints, each paired with torch.compile: 1 row x 1 warp with evict-first
  loads was among the fastest, 1.027x [1.019, 1.037]; t09's own launch there 1.001x
prediction: ~1.025x t09 at 4096x1024 float32, so ~1.02-1.03x torch.compile and ~1.08-1.10x Liger
  (the 1.1x Liger target is at the edge); 1.0x t09 at 8192x8192 and 4096x32768 (the same code)
outcome: 1.025x torch.compile [1.016, 1.034], 1.089x Liger [1.078, 1.099] at 4096x1024 float32 (records softmax.float32, run of 0abc2b8)
deterministic: yes, each row reduces in a fixed tree within its warp
"""

# hello-gpu: record softmax.float32
# hello-gpu: record softmax.bfloat16

from pathlib import Path

from hello_gpu.ops.rung import load_module

_t08 = load_module(Path(__file__).resolve().parent / "t08_static_width.py", "softmax_t08_for_t10")


def run(x, out=None):
    # t09 (t08's kernel, evict-first loads) on Inductor's launch: one row a program, one warp.
    return _t08.launch(x, out, rows_per_program=1, warps=1, load_eviction="evict_first")
