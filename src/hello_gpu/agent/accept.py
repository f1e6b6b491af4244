"""The accept rule: correct, not suspect, and the paired speedup's lower 95% bound above 1 + margin.

``margin = max(DEFAULT_MARGIN, NOISE_MULTIPLE * noise)``: 2% by default, never below three times the
measured noise, the relative standard error of the baseline's own median in the same paired run
(the baseline timed again and again next to the candidate). A 1% noise floor thus asks for a lower
bound above 1.03; a quiet GPU (0.3%) for 1.02. A candidate faster than the roofline allows
(``suspect``) is never accepted, however good its interval looks: bytes not moved are no win.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

DEFAULT_MARGIN = 0.02
NOISE_MULTIPLE = 3.0


@dataclass(frozen=True)
class Decision:
    """The verdict of :func:`decide`, with the numbers that made it."""

    accepted: bool
    reason: str
    margin: float
    lower_bound: float | None
    speedup: float | None
    noise: float | None

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict) -> "Decision":
        return Decision(**{k: data.get(k) for k in Decision.__dataclass_fields__})


def margin_for(noise: float | None, default: float = DEFAULT_MARGIN) -> float:
    """The margin the lower bound must clear: ``max(default, 3 x noise)``; unknown noise -> the default."""
    if noise is None or not isinstance(noise, (int, float)) or not math.isfinite(noise) or noise < 0:
        return default
    return max(default, NOISE_MULTIPLE * float(noise))


def _field(comparison, name: str):
    if isinstance(comparison, dict):
        return comparison.get(name)
    return getattr(comparison, name, None)


def decide(comparison, noise: float | None = None, *, correct: bool = True, suspect: str | None = None,
           default_margin: float = DEFAULT_MARGIN) -> Decision:
    """Accept or not. ``comparison``: a compare result (dict or object) with ``speedup`` and ``ci95``
    (lower, upper) of baseline time / candidate time; ``noise`` defaults to the comparison's own."""
    if noise is None:
        noise = _field(comparison, "noise")
    margin = margin_for(noise, default_margin)
    speedup = _field(comparison, "speedup")
    interval = _field(comparison, "ci95")
    lower = float(interval[0]) if interval else None
    if not correct:
        return Decision(False, "not correct: only a correct candidate is timed for acceptance", margin, lower,
                        speedup, noise)
    if suspect is None:
        suspect = _field(comparison, "suspect")
    if suspect:
        return Decision(False, f"suspect, never accepted: {suspect}", margin, lower, speedup, noise)
    if lower is None or speedup is None or not math.isfinite(lower):
        return Decision(False, "no paired speedup interval to judge", margin, lower, speedup, noise)
    threshold = 1 + margin
    if lower > threshold:
        return Decision(True, f"speedup {speedup:.3f}x, lower 95% bound {lower:.3f} > {threshold:.3f} "
                              f"(margin {margin:.1%}{_noise_text(noise)})", margin, lower, speedup, noise)
    upper = float(interval[1]) if len(interval) > 1 else None
    verdict = "slower (the whole interval is below 1)" if upper is not None and upper < 1 else "not faster beyond noise"
    return Decision(False, f"speedup {speedup:.3f}x, lower 95% bound {lower:.3f} <= {threshold:.3f} "
                           f"(margin {margin:.1%}{_noise_text(noise)}): {verdict}",
                    margin, lower, speedup, noise)


def _noise_text(noise) -> str:
    if noise is None:
        return ", noise unknown"
    return f", 3 x noise = {NOISE_MULTIPLE * noise:.1%}"
