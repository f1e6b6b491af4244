"""Triton, t08 with the short rows' loads marked evict-first in L2: each input line is read once.

parent: t08_static_width
change: rows of up to 1024 columns load with eviction_policy="evict_first" (PTX
  ld.global.L1::evict_first.L2::cache_hint under a createpolicy L2::evict_first of fraction 1.0;
  t08's kernel takes the policy as LOAD_EVICTION); nothing else; longer rows go through t07 unchanged
hypothesis: at 4096x1024 float32 t07 takes 12.45 us (records softmax.float32, H200, run of commit
  abc4538), ~1.35 TB/s for its 33.6 MB: far under the ~4 TB/s a long-row softmax reaches, so the
  short-row gap looked like latency. But the cold flush zeroes a 4x-L2 buffer, which leaves the
  60 MiB L2 full of modified lines, and each line this kernel allocates -- 16.8 MB of input read, 16.8
  MB of output written -- first writes one of them back: ~50 MB of DRAM traffic, 12.5 us at ~4 TB/s,
  which is the time measured. Loads marked evict-first make each set's next victim a line of input
  already consumed (clean, free to drop) instead of a modified one, for the later input and for the
  output: the flush's write-back should fall from ~33 MB to a few MB. torch.compile pays all of it
  (benchmarks/softmax_dirty_l2.py reads its Triton source and times both with the usual flush and
  with a clean one, cache="cold-clean", where the hint should change nothing)
prediction: ~1.3x t08 at 4096x1024 float32 (~17-20 MB of DRAM traffic instead of ~50, but latency
  still around: not the 2.5x the bytes alone give), so ~1.25x torch.compile and ~1.35x Liger; 1.0x
  t08 under a clean flush; ~1.0x elsewhere (8192x8192 and 4096x32768 go through t07, as t08)
outcome: 0.996x torch.compile [0.991, 1.005] at 4096x1024 float32 (t08: 0.974x): ~1.02x t08, not the 1.3x predicted (records softmax.float32, run of d982f25)
deterministic: yes, each row reduces in a fixed tree within its program
"""

# hello-gpu: record softmax.float32
# hello-gpu: record softmax.bfloat16

from pathlib import Path

from hello_gpu.ops.rung import load_module

_HERE = Path(__file__).resolve().parent
_t07 = load_module(_HERE / "t07_short_rows_tuned.py", "softmax_t07_for_t09")
_t08 = load_module(_HERE / "t08_static_width.py", "softmax_t08_for_t09")


def run(x, out=None):
    # t08's kernel and launch; the one change: its loads ask the L2 to drop these lines first.
    return _t08.launch(x, out, _t07.ROWS_PER_PROGRAM, _t07.WARPS, load_eviction="evict_first")
