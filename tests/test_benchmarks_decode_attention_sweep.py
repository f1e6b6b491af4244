"""benchmarks/decode_attention_sweep.py on a machine without a GPU: its configurations cover the sweep's grid once
each, and a small shape runs end to end in the interpreter, every configuration checked before it is timed."""

import pytest
import torch

from benchmark_scripts import load

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the benchmark sweeps on the GPU")


@pytest.fixture(scope="module")
def sweep():
    for sibling in ("decode_floor", "softmax_sweep", "gemv_sweep", "decode_attention_floor"):
        load(sibling)
    return load("decode_attention_sweep")


def test_the_configurations_are_the_grid_once_each(sweep):
    configs = sweep.configurations()
    keys = {tuple(c.values()) for c in configs}
    assert len(keys) == len(configs) == (len(sweep.PROGRAMS_PER_SM) * len(sweep.BLOCK_NS) * len(sweep.WARPS)
                                         * len(sweep.STAGES))


def test_a_small_shape_runs_end_to_end_in_the_interpreter(sweep):
    configs = [{"programs_per_sm": 1, "block_n": 64, "warps": 4, "stages": 2},
               {"programs_per_sm": 8, "block_n": 64, "warps": 4, "stages": 3}]
    result = sweep.sweep_shape((1, 4, 1, 1, 200, 64), copy=1e11, device="cpu", dtype="float16", configs=configs)
    assert result["kv_bytes"] == 2 * 200 * 64 * 2
    assert [r["chunks"] for r in result["configurations"]] == [2, 4]       # 4 tiles: 2 programs, then 1 tile each
    for row in (*result["configurations"], result["t07_parallel_merge"]):
        assert row["median_us"] > 0 and row["of_copy"] > 0 and len(row["ci95"]) == 2
    assert result["fastest"][0]["median_us"] == min(r["median_us"] for r in result["configurations"])
