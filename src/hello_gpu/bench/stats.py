"""Statistics for timings: medians with bootstrap confidence intervals, and paired ratios.

Kernel timings are skewed (a long right tail from clocks, interrupts, other work), so the median is
the summary and a percentile bootstrap gives its 95% interval without assuming a distribution.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

DEFAULT_RESAMPLES = 2000


@dataclass(frozen=True)
class Summary:
    """A sample of times (seconds) in a few numbers."""

    count: int
    median: float
    p20: float
    p80: float
    minimum: float
    maximum: float
    ci95: tuple[float, float]              # bootstrap interval of the median
    relative_standard_error: float         # bootstrap standard error of the median / median

    def to_dict(self) -> dict:
        data = asdict(self)
        data["ci95"] = list(self.ci95)
        return data


def bootstrap_medians(samples, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    values = np.asarray(samples, dtype=float)
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, len(values), size=(resamples, len(values)))
    return np.median(values[indices], axis=1)


def summarize(samples, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Summary:
    values = np.asarray(samples, dtype=float)
    if values.size == 0:
        raise ValueError("no samples to summarise")
    median = float(np.median(values))
    if values.size == 1:
        return Summary(1, median, median, median, median, median, (median, median), float("inf"))
    medians = bootstrap_medians(values, resamples, seed)
    low, high = np.percentile(medians, [2.5, 97.5])
    error = float(np.std(medians) / median) if median else float("inf")
    return Summary(int(values.size), median, float(np.percentile(values, 20)), float(np.percentile(values, 80)),
                   float(values.min()), float(values.max()), (float(low), float(high)), error)


def relative_standard_error(samples, resamples: int = 500, seed: int = 0) -> float:
    """Bootstrap standard error of the median over the median: the stopping rule for repeats."""
    values = np.asarray(samples, dtype=float)
    if values.size < 5:
        return float("inf")
    medians = bootstrap_medians(values, resamples, seed)
    median = float(np.median(values))
    return float(np.std(medians) / median) if median else float("inf")


@dataclass(frozen=True)
class Ratio:
    """A paired ratio (baseline time / candidate time = speedup) and its 95% interval."""

    value: float
    ci95: tuple[float, float]
    pairs: int

    def to_dict(self) -> dict:
        return {"value": self.value, "ci95": list(self.ci95), "pairs": self.pairs}


def paired_ratio(numerator, denominator, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Ratio:
    """Median of per-pair ratios numerator[i] / denominator[i], with a bootstrap interval over pairs.

    Pairs are measured back to back (ABBA), so slow drifts of the clock hit both sides of a pair.
    """
    top = np.asarray(numerator, dtype=float)
    bottom = np.asarray(denominator, dtype=float)
    if top.shape != bottom.shape or top.size == 0:
        raise ValueError(f"paired samples must have the same non-zero length, got {top.size} and {bottom.size}")
    ratios = top / bottom
    medians = bootstrap_medians(ratios, resamples, seed)
    low, high = np.percentile(medians, [2.5, 97.5])
    return Ratio(float(np.median(ratios)), (float(low), float(high)), int(ratios.size))


def unpaired_ratio(baseline, candidate, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Ratio:
    """median(baseline) / median(candidate) (a speedup of the candidate), with a bootstrap interval that
    resamples each side on its own: for two samples not taken in pairs (two backends of a model run, one
    after the other). The interval covers the noise inside each sample, not a drift between them."""
    first, second = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    if first.size == 0 or second.size == 0:
        raise ValueError(f"both samples need values, got {first.size} and {second.size}")
    ratios = bootstrap_medians(first, resamples, seed) / bootstrap_medians(second, resamples, seed + 1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return Ratio(float(np.median(first) / np.median(second)), (float(low), float(high)),
                 int(min(first.size, second.size)))


def verdict(speedup: Ratio, margin: float) -> str:
    """"faster" when the whole interval is above 1 + margin, "slower" when below 1 - margin."""
    low, high = speedup.ci95
    if low > 1 + margin:
        return "faster"
    if high < 1 - margin:
        return "slower"
    return "within noise"
