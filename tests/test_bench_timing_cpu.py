"""measure() and compare() without a GPU: wall clock, said so; bad input refused."""

import time

import pytest

from hello_gpu.bench import Work, compare, measure


def busy(seconds):
    def spin():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
    return spin


def test_measure_on_cpu_uses_the_wall_clock_and_says_so():
    result = measure(busy(200e-6), work=Work(bytes=1e6), device="cpu", max_seconds=0.5)
    assert result.clock == "wall" and "wall clock" in result.notes[0]
    assert 150e-6 < result.median < 2e-3
    assert len(result.samples) == result.summary.count >= 10
    assert result.rates.gb_per_s == pytest.approx(1e6 / result.median / 1e9)
    assert "median" in str(result)


def test_measure_rotates_inputs():
    seen = []
    measure(lambda x: seen.append(x), inputs=[(1,), (2,), (3,)], device="cpu", max_seconds=0.1)
    assert set(seen) == {1, 2, 3}


def test_measure_refuses_bad_input():
    with pytest.raises(TypeError, match="needs a callable"):
        measure(42)
    with pytest.raises(ValueError, match="cache must be 'cold' or 'warm'"):
        measure(lambda: None, cache="lukewarm")
    with pytest.raises(TypeError, match="hello_gpu.bench.Work"):
        measure(lambda: None, work={"bytes": 1})
    with pytest.raises(ValueError, match="non-empty list of argument tuples"):
        measure(lambda x: None, inputs=[1, 2])


def test_an_error_in_the_function_propagates_and_nothing_is_measured():
    def broken():
        raise RuntimeError("kernel exploded")
    with pytest.raises(RuntimeError, match="kernel exploded"):
        measure(broken, device="cpu")


def test_compare_on_cpu_finds_the_faster_one():
    result = compare(busy(400e-6), busy(200e-6), max_seconds=1.0, min_rounds=10)
    assert result.verdict == "faster" and 1.5 < result.speedup.value < 2.5
    assert result.rounds >= 10 and "ABBA" in str(result)
    same = compare(busy(200e-6), busy(200e-6), max_seconds=1.0, margin=0.1)
    assert same.verdict == "within noise"
    with pytest.raises(TypeError, match="candidate must be callable"):
        compare(busy(1e-6), None)
