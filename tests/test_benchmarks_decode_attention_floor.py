"""benchmarks/decode_attention_floor.py on a machine without a GPU: its shapes are issue 22's decode shapes as the
attention spec benchmarks them, and its floor buffer holds exactly the K and V bytes a call reads."""

import pytest
import torch

from benchmark_scripts import load

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the benchmark checks its reads on the GPU")


@pytest.fixture(scope="module")
def floor():
    for sibling in ("decode_floor", "softmax_sweep", "gemv_sweep"):     # what it imports from benchmarks/
        load(sibling)
    return load("decode_attention_floor")


def test_the_shapes_are_the_specs_decode_benchmarks(floor):
    from hello_gpu.ops.registry import load_op
    spec = load_op("attention").spec
    assert set(floor.SHAPES) <= set(spec.BENCH_SHAPES)
    assert {(shape[0], shape[4]) for shape in floor.SHAPES} == {(1, 4096), (1, 32768), (16, 4096), (16, 32768)}
    assert all(shape[3] == 1 and shape[1:3] == (32, 8) and shape[5] == 128 for shape in floor.SHAPES)


@pytest.mark.parametrize("shape", [(1, 8, 4096, 128), (16, 8, 32768, 128), (1, 1, 3, 64)])
def test_the_floor_reads_the_kv_bytes_in_whole_rows(floor, shape):
    k = torch.empty(shape, dtype=torch.bfloat16)
    if (2 * k.numel()) % floor.ROW:                                 # 384 elements: a row's fraction
        with pytest.raises(ValueError, match="not whole rows"):
            floor.floor_rows(k)
        return
    assert floor.floor_rows(k) * floor.ROW == 2 * k.numel()        # K and V, every element once


def test_a_small_shape_runs_end_to_end_in_the_interpreter(floor):
    """The plumbing on the CPU (float16: the interpreter's bfloat16 dot is not exact): every SDPA backend timed or
    refused by name, the best one the baseline, the rung checked against it, both floors reading every row."""
    result = floor.floors((1, 4, 1, 1, 64, 64), copy=1e11, device="cpu", dtype="float16")
    assert result["kv_bytes"] == 2 * 64 * 64 * 2 and result["best_backend"] in floor.BACKENDS
    assert set(result["backends_us"]) == set(floor.BACKENDS)
    assert set(result["results"]) == {"one read", "one read + a merge launch", floor.RUNG}
    for row in result["results"].values():
        assert row["median_us"] > 0 and row["of_copy"] > 0 and len(row["ci95"]) == 2
