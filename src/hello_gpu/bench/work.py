"""The work model: how many bytes a call must move and how many FLOPs it must do.

Time alone says little; time against the work says how close a kernel is to what the chip can do.
``Work(bytes=2 * 4 * n + 4 * n)`` for a float32 vector add (two reads, one write), and the derived
figures follow: GB/s, TFLOP/s, arithmetic intensity, % of the measured ceiling. A figure faster than
the ceiling allows is **suspect**: a missing cache flush, a kernel that skipped work, or a wrong work
model, never a win.

Reads and writes are not the same traffic: a reduction that reads n values and writes one runs faster
than a copy (no write turnaround on the memory bus), so a work model may say how its bytes split
(``Work(read_bytes=4 * n, written_bytes=4)``), and the bound it is held against is the one for that
mix (:mod:`hello_gpu.bench.roof`). A work model that gives only ``bytes`` is held against the most
lenient mix, so no honest kernel is flagged for a split it never stated.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

# Above these fractions of a measured ceiling a result is not believed. The measured bandwidths are
# what one library kernel reached, not what the memory can do: an honest two-stage reduce_sum read
# 4.28 TB/s on the H200 where torch.sum (the read ceiling) read 4.15 TB/s (3% more), and a quick
# 128 MiB copy measured 3.95 TB/s against 4.25 TB/s for the full 1 GiB (7% less; issue 17). 10% covers
# both; the datasheet peak still caps the bound (bench.roof). A matmul cannot beat the vendor BLAS
# peak by 10%.
SUSPECT_BANDWIDTH_FRACTION = 1.10
SUSPECT_COMPUTE_FRACTION = 1.10


class WorkModelError(ValueError):
    """A work model that cannot be right (negative, zero, not a number)."""


@dataclass(frozen=True)
class Work:
    """Bytes moved through device memory and floating-point operations, for one call."""

    bytes: float = 0.0
    flops: float = 0.0
    dtype: str | None = None     # the dtype whose compute ceiling applies ("float32", "bfloat16", ...)
    # How ``bytes`` splits into reads and writes; None: not stated. Give one or both: ``bytes`` may then
    # be left out (it becomes their sum), and when all three are given they must agree.
    read_bytes: float | None = None
    written_bytes: float | None = None

    def __post_init__(self):
        for name in ("bytes", "flops", "read_bytes", "written_bytes"):
            value = getattr(self, name)
            if value is None and name in ("read_bytes", "written_bytes"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
                raise WorkModelError(f"Work.{name} must be a finite number, got {value!r}")
            if value < 0:
                raise WorkModelError(f"Work.{name} must not be negative, got {value}")
        self._complete_split()
        if self.bytes == 0 and self.flops == 0:
            raise WorkModelError("Work needs bytes or flops (both are 0): nothing to turn time into a rate")

    def _complete_split(self) -> None:
        read, written = self.read_bytes, self.written_bytes
        if read is None and written is None:
            return
        if read is not None and written is not None:
            if self.bytes == 0:
                object.__setattr__(self, "bytes", read + written)      # frozen: set once, here
            elif not math.isclose(read + written, self.bytes, rel_tol=1e-9):
                raise WorkModelError(f"Work.read_bytes + written_bytes = {read + written:g} but bytes = "
                                     f"{self.bytes:g}: the split must add up to the total")
            return
        given = read if read is not None else written
        if given > self.bytes:
            raise WorkModelError(f"Work.{'read' if read is not None else 'written'}_bytes = {given:g} is more than "
                                 f"bytes = {self.bytes:g}; give bytes too, or both halves of the split")
        object.__setattr__(self, "read_bytes" if read is None else "written_bytes", self.bytes - given)

    @property
    def written_fraction(self) -> float | None:
        """Of the bytes moved, the share written (0 for a pure read); None when the split is not stated."""
        if self.written_bytes is None or not self.bytes:
            return None
        return self.written_bytes / self.bytes

    def with_written(self, written_bytes: float) -> "Work":
        """This work with its split stated: ``written_bytes`` of ``bytes`` are writes, the rest reads.

        For a caller that knows the outputs when the work model does not say (the written bytes are the
        outputs' sizes), so the right bound applies without changing the work model's file."""
        return Work(bytes=self.bytes, flops=self.flops, dtype=self.dtype, written_bytes=min(written_bytes, self.bytes))

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte; None when no bytes are counted."""
        return self.flops / self.bytes if self.bytes else None

    def to_dict(self) -> dict:
        """The fields, the split only where stated (so a record of a model without one reads as before)."""
        return {key: value for key, value in asdict(self).items()
                if value is not None or key not in ("read_bytes", "written_bytes")}


@dataclass(frozen=True)
class Roof:
    """The most a call can honestly reach, margins included, and where each figure comes from.

    ``bench.roof.roof_for`` makes one from the measured ceilings and the datasheet; ``rates`` holds a
    time against it. ``copy_bandwidth`` and ``compute_ceiling`` are the measured figures the fractions
    of :class:`Rates` divide by (None where nothing was measured)."""

    bandwidth: float | None = None          # bytes/s: a cold-cache figure above it is suspect
    compute: float | None = None            # FLOP/s: a figure above it is suspect
    bandwidth_source: str = ""
    compute_source: str = ""
    copy_bandwidth: float | None = None
    compute_ceiling: float | None = None

    @staticmethod
    def from_measured(copy_bandwidth: float | None = None, compute_ceiling: float | None = None) -> "Roof":
        """A roof from a measured copy bandwidth and matmul peak alone (what ``rates`` was always given)."""
        return Roof(copy_bandwidth * SUSPECT_BANDWIDTH_FRACTION if copy_bandwidth else None,
                    compute_ceiling * SUSPECT_COMPUTE_FRACTION if compute_ceiling else None,
                    f"the measured copy bandwidth {copy_bandwidth / 1e9:.0f} GB/s x {SUSPECT_BANDWIDTH_FRACTION:.2f}"
                    if copy_bandwidth else "",
                    f"the measured peak {compute_ceiling / 1e12:.1f} TFLOP/s x {SUSPECT_COMPUTE_FRACTION:.2f}"
                    if compute_ceiling else "", copy_bandwidth, compute_ceiling)

    def describe(self) -> str | None:
        parts = [f"bandwidth bound {self.bandwidth / 1e9:.0f} GB/s ({self.bandwidth_source})" if self.bandwidth else "",
                 f"compute bound {self.compute / 1e12:.1f} TFLOP/s ({self.compute_source})" if self.compute else ""]
        return "; ".join(part for part in parts if part) or None


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
    bound: str | None = None             # what the figures were held against (Roof.describe), or None

    def to_dict(self) -> dict:
        return asdict(self)


def rates(work: Work, seconds: float, *, bandwidth_ceiling: float | None = None,
          compute_ceiling: float | None = None, cold: bool = True, roof: Roof | None = None) -> Rates:
    """Turn ``seconds`` into rates and hold them against a roof.

    ``roof`` (from :func:`hello_gpu.bench.roof.roof_for`: measured ceilings for this work's read/write
    mix, capped by the datasheet) is the bound; without one, ``bandwidth_ceiling`` (a measured copy
    bandwidth, bytes/s) and ``compute_ceiling`` (FLOP/s) make one with the usual margins.
    Only a cold-cache time is held against the DRAM bandwidth bound: a warm run may legitimately be
    served from L2 and beat it.
    """
    if not seconds > 0:
        raise WorkModelError(f"time must be positive, got {seconds}")
    if roof is not None and (bandwidth_ceiling or compute_ceiling):
        raise ValueError("give rates() a roof or the ceilings it is made from, not both")
    roof = roof or Roof.from_measured(bandwidth_ceiling, compute_ceiling)
    bandwidth = work.bytes / seconds if work.bytes else None
    compute = work.flops / seconds if work.flops else None
    bandwidth_fraction = bandwidth / roof.copy_bandwidth if bandwidth and roof.copy_bandwidth else None
    compute_fraction = compute / roof.compute_ceiling if compute and roof.compute_ceiling else None
    suspect = None
    if cold and bandwidth and roof.bandwidth and bandwidth > roof.bandwidth:
        suspect = (f"{bandwidth / 1e9:.0f} GB/s with a cold cache is above {roof.bandwidth / 1e9:.0f} GB/s, the most "
                   f"this work's reads and writes can move ({roof.bandwidth_source}): bytes not really moved, "
                   f"or the work model is wrong")
    elif compute and roof.compute and compute > roof.compute:
        suspect = (f"{compute / 1e12:.1f} TFLOP/s is above {roof.compute / 1e12:.1f} TFLOP/s ({roof.compute_source}): "
                   f"work skipped, or the work model is wrong")
    return Rates(seconds, bandwidth / 1e9 if bandwidth else None, compute / 1e12 if compute else None,
                 work.arithmetic_intensity, bandwidth_fraction, compute_fraction, suspect, roof.describe())
