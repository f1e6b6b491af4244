"""The work model: how many bytes a call must move and how many FLOPs it must do.

Time alone says little; time against the work says how close a kernel is to what the chip can do.
``Work(bytes=2 * 4 * n + 4 * n)`` for a float32 vector add (two reads, one write), and the derived
figures follow: GB/s, TFLOP/s, arithmetic intensity, % of the measured ceiling. A figure faster than
the ceiling allows is **suspect**: a missing cache flush, a kernel that skipped work, or a wrong work
model, never a win.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

# Above these fractions of a measured ceiling a result is not believed. Cold-cache traffic cannot beat
# copy bandwidth by more than measurement noise (5%); a matmul cannot beat the vendor BLAS peak by 10%.
SUSPECT_BANDWIDTH_FRACTION = 1.05
SUSPECT_COMPUTE_FRACTION = 1.10


class WorkModelError(ValueError):
    """A work model that cannot be right (negative, zero, not a number)."""


@dataclass(frozen=True)
class Work:
    """Bytes moved through device memory and floating-point operations, for one call."""

    bytes: float = 0.0
    flops: float = 0.0
    dtype: str | None = None     # the dtype whose compute ceiling applies ("float32", "bfloat16", ...)

    def __post_init__(self):
        for name in ("bytes", "flops"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
                raise WorkModelError(f"Work.{name} must be a finite number, got {value!r}")
            if value < 0:
                raise WorkModelError(f"Work.{name} must not be negative, got {value}")
        if self.bytes == 0 and self.flops == 0:
            raise WorkModelError("Work needs bytes or flops (both are 0): nothing to turn time into a rate")

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte; None when no bytes are counted."""
        return self.flops / self.bytes if self.bytes else None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Rates:
    """What a time means under a work model, against the ceilings that apply."""

    seconds: float
    gb_per_s: float | None
    tflop_per_s: float | None
    arithmetic_intensity: float | None
    bandwidth_fraction: float | None     # of the measured copy bandwidth
    compute_fraction: float | None       # of the measured matmul peak for the dtype
    suspect: str | None                  # why the figure cannot be believed, or None

    def to_dict(self) -> dict:
        return asdict(self)


def rates(work: Work, seconds: float, *, bandwidth_ceiling: float | None = None,
          compute_ceiling: float | None = None, cold: bool = True) -> Rates:
    """Turn ``seconds`` into rates. Ceilings are in bytes/s and FLOP/s (measured ones, ideally).

    Only a cold-cache time is held against the DRAM bandwidth ceiling: a warm run may legitimately be
    served from L2 and beat it.
    """
    if not seconds > 0:
        raise WorkModelError(f"time must be positive, got {seconds}")
    bandwidth = work.bytes / seconds if work.bytes else None
    compute = work.flops / seconds if work.flops else None
    bandwidth_fraction = bandwidth / bandwidth_ceiling if bandwidth and bandwidth_ceiling else None
    compute_fraction = compute / compute_ceiling if compute and compute_ceiling else None
    suspect = None
    if cold and bandwidth_fraction is not None and bandwidth_fraction > SUSPECT_BANDWIDTH_FRACTION:
        suspect = (f"{bandwidth / 1e9:.0f} GB/s is {bandwidth_fraction:.2f}x the measured copy bandwidth "
                   f"{bandwidth_ceiling / 1e9:.0f} GB/s with a cold cache: bytes not really moved, or the work model is wrong")
    elif compute_fraction is not None and compute_fraction > SUSPECT_COMPUTE_FRACTION:
        suspect = (f"{compute / 1e12:.1f} TFLOP/s is {compute_fraction:.2f}x the measured peak "
                   f"{compute_ceiling / 1e12:.1f} TFLOP/s: work skipped, or the work model is wrong")
    return Rates(seconds, bandwidth / 1e9 if bandwidth else None, compute / 1e12 if compute else None,
                 work.arithmetic_intensity, bandwidth_fraction, compute_fraction, suspect)
