"""The tile configurations the autotuned attention rungs (t03 on) choose from (not a rung).

Triton's autotuner times every configuration on the first call of each key (sequence lengths, head
size, causal; Triton adds the tensors' dtypes) and keeps the fastest. Eight points around what
FlashAttention-2 and Triton's fused-attention tutorial use on Hopper: 128-row query tiles with 8
warps, 64-row ones with 4, key tiles of 32 to 128, 2 to 4 pipeline stages. Shared memory bounds the
largest: 128-key tiles of K and V at D = 128 in bfloat16 are 64 KiB a stage, 3 stages 192 KiB of the
H200's 227 KiB.

Only problems large enough for the tiles to matter are tuned: below TUNED_SCORES (query, key) pairs a head, the
first configuration runs untimed. Tuning costs ~8 compiles and ~1 s of timing per key (S_q, S_kv, D, causal,
dtype), each of the ladder's ten edge shapes a key of its own, where a 1000 x 1000 head runs in microseconds
whichever tiles it has (issue 22); the benchmark prefill shapes (4096 x 4096: 16.8 M pairs) are tuned, decode
(1 x 32768) runs the first point, whose 64-row tile is the smallest here.

The Triton interpreter cannot time anything (no GPU): there ``interpreted_config`` gives the first
configuration, and tests/test_attention.py checks every configuration in the interpreter by name.
"""

from __future__ import annotations

import triton

from hello_gpu.ops.rung import triton_interpreter_on

# (BLOCK_M, BLOCK_N, warps, stages)
POINTS = ((64, 64, 4, 3), (128, 64, 8, 3), (128, 64, 4, 3), (128, 128, 8, 3),
          (128, 32, 4, 4), (64, 64, 4, 4), (64, 32, 4, 4), (128, 128, 8, 2))
KEY = ["q_len", "kv_len", "HEAD_DIM", "CAUSAL"]
TUNED_SCORES = 2**22          # (query, key) pairs a head from which the configurations are timed


def configs() -> list:
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in POINTS]


def worth_tuning(configurations: list, named_args: dict, **kwargs) -> list:
    """Every configuration for a problem of TUNED_SCORES pairs a head or more, else the first alone (untimed)."""
    if named_args["q_len"] * named_args["kv_len"] >= TUNED_SCORES:
        return configurations
    return configurations[:1]


def autotuned(kernel):
    """``kernel`` behind triton.autotune over POINTS, keyed on KEY, small problems on the first point."""
    return triton.autotune(configs=configs(), key=KEY, prune_configs_by={"early_config_prune": worth_tuning})(kernel)


def interpreted() -> bool:
    return triton_interpreter_on()


def first_point() -> dict:
    """The launch options of the first configuration, for the interpreter."""
    m, n, w, s = POINTS[0]
    return {"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s}
