"""Statistics and the work model, on synthetic samples (no GPU)."""

import math

import numpy as np
import pytest

from hello_gpu.bench import Work, WorkModelError, rates, summarize
from hello_gpu.bench.compare import round_order
from hello_gpu.bench.stats import paired_ratio, relative_standard_error, unpaired_ratio, verdict


def test_bootstrap_interval_covers_the_true_median_about_95_percent_of_the_time():
    # Skewed, like kernel timings: a lognormal around 100 us. The true median is exp(mu).
    rng = np.random.default_rng(1234)
    true_median = 100e-6
    covered = 0
    trials = 200
    for trial in range(trials):
        samples = true_median * np.exp(rng.normal(0.0, 0.2, size=60))
        low, high = summarize(samples, resamples=400, seed=trial).ci95
        covered += low <= true_median <= high
    assert 0.88 <= covered / trials <= 0.995


def test_summary_fields_are_ordered():
    rng = np.random.default_rng(7)
    summary = summarize(rng.gamma(5.0, 1e-5, size=100))
    assert summary.minimum <= summary.p20 <= summary.median <= summary.p80 <= summary.maximum
    assert summary.ci95[0] <= summary.median <= summary.ci95[1]
    assert summary.count == 100 and 0 < summary.relative_standard_error < 0.1


def test_relative_standard_error_shrinks_with_more_samples():
    rng = np.random.default_rng(3)
    small = relative_standard_error(rng.normal(1.0, 0.1, 20))
    large = relative_standard_error(rng.normal(1.0, 0.1, 2000))
    assert large < small / 4
    assert math.isinf(relative_standard_error([1.0, 2.0]))


def test_paired_ratio_and_verdicts():
    rng = np.random.default_rng(11)
    baseline = 2.0 + rng.normal(0, 0.02, 50)
    candidate = 1.0 + rng.normal(0, 0.01, 50)
    speedup = paired_ratio(baseline, candidate)
    assert speedup.ci95[0] < 2.0 < speedup.ci95[1] or abs(speedup.value - 2.0) < 0.02
    assert verdict(speedup, 0.02) == "faster"
    same = paired_ratio(baseline, baseline * (1 + rng.normal(0, 0.01, 50)))
    assert verdict(same, 0.02) == "within noise"
    assert verdict(paired_ratio(candidate, baseline), 0.02) == "slower"
    with pytest.raises(ValueError, match="same non-zero length"):
        paired_ratio([1.0, 2.0], [1.0])


def test_unpaired_ratio_covers_the_true_ratio_about_95_percent_of_the_time():
    """Two lognormal samples of different sizes (two backends' decode steps), medians 6 ms and 5 ms: the
    interval of the ratio of medians covers 1.2 about as often as it says; a ratio with no noise is exact."""
    rng = np.random.default_rng(21)
    covered, trials = 0, 200
    for trial in range(trials):
        slow, fast = 6e-3 * np.exp(rng.normal(0, 0.05, 255)), 5e-3 * np.exp(rng.normal(0, 0.05, 200))
        ratio = unpaired_ratio(slow, fast, resamples=400, seed=trial)
        covered += ratio.ci95[0] <= 1.2 <= ratio.ci95[1]
        assert ratio.pairs == 200
    assert 0.88 <= covered / trials <= 0.995
    exact = unpaired_ratio([2.0] * 10, [1.0] * 7)
    assert exact.value == 2.0 and exact.ci95 == (2.0, 2.0)
    with pytest.raises(ValueError, match="both samples need values"):
        unpaired_ratio([], [1.0])


def test_abba_order_alternates():
    assert "".join(round_order(i) for i in range(4)) == "ABBABAABABBABAAB"
    sequence = "".join(round_order(i) for i in range(10))
    assert sequence.count("A") == sequence.count("B")
    firsts = [round_order(i)[0] for i in range(10)]
    assert firsts.count("A") == firsts.count("B")           # neither side always goes first


def test_work_rates():
    n = 2**28
    work = Work(bytes=3 * 4 * n, flops=n, dtype="float32")
    result = rates(work, 742e-6, bandwidth_ceiling=4.3e12, compute_ceiling=51e12)
    assert result.gb_per_s == pytest.approx(3 * 4 * n / 742e-6 / 1e9)
    assert result.arithmetic_intensity == pytest.approx(1 / 12)
    assert result.bandwidth_fraction == pytest.approx(3 * 4 * n / 742e-6 / 4.3e12)
    assert result.suspect is None


def test_faster_than_the_ceiling_is_suspect_only_when_cold():
    work = Work(bytes=1e9)
    cold = rates(work, 1e9 / 5.0e12, bandwidth_ceiling=4.3e12, cold=True)   # 5 TB/s > 1.05 x 4.3
    warm = rates(work, 1e9 / 5.0e12, bandwidth_ceiling=4.3e12, cold=False)  # served from L2: allowed
    assert cold.suspect and "copy bandwidth" in cold.suspect and warm.suspect is None
    matmul = rates(Work(flops=1e15, dtype="bfloat16"), 1.0, compute_ceiling=7.9e14)
    assert matmul.suspect and "peak" in matmul.suspect


@pytest.mark.parametrize("arguments, message", [
    (dict(bytes=-1), "must not be negative"),
    (dict(bytes=0, flops=0), "needs bytes or flops"),
    (dict(bytes=float("nan")), "finite number"),
    (dict(flops="many"), "finite number"),
])
def test_bad_work_models(arguments, message):
    with pytest.raises(WorkModelError, match=message):
        Work(**arguments)
