"""The roof a timed call is held against: always armed, and comparing like with like.

A figure above the roof is **suspect** (:func:`hello_gpu.bench.work.rates`): bytes not moved, work
skipped. Two rules make that flag both always there and never wrong about an honest kernel:

- **Never nothing.** The measured ceilings (``hello-gpu ceilings``, cached per device and driver)
  are used when cached, the datasheet peaks of the spec table (``specs.json``) otherwise. Where both
  are known the lower bound counts: the datasheet peak is what the memory interface can do at all,
  so no honest cold-cache figure is above it.
- **Like with like.** Reads run faster than a copy (no write turnaround on the bus): an honest
  reduce_sum read 4.28 TB/s on the H200 against a 3.95 TB/s quick copy ceiling (issue 17). So the
  measured bound is the one for the work's own read/write mix: a read-only mix is held against the
  read ceiling, a half-and-half mix against the copy ceiling, a mix in between against the time both
  take (below). A work model that does not state its split is held against the faster of the two.

The mix: a byte read takes ``1 / read`` seconds per byte; the copy ceiling moves half its bytes as
writes, so ``0.5 / read + 0.5 / write = 1 / copy`` gives the write rate, and a mix with a share ``w``
written runs at most at ``1 / ((1 - w) / read + w / write)``.
"""

from __future__ import annotations

from ..runtime.device import device_info, gpu_vendor
from .ceilings import Ceilings, cached_ceilings
from .specs import DeviceSpec, lookup
from .work import SUSPECT_BANDWIDTH_FRACTION, SUSPECT_COMPUTE_FRACTION, Roof, Work

# The datasheet peak is a physical limit, but a rounded one ("4.8 TB/s"): 2% covers the rounding.
DATASHEET_MARGIN = 1.02
# Ceilings measured with --quick (a 128 MiB copy) read low: 3.95 TB/s against 4.25 TB/s for the 1 GiB
# copy on the H200 (issue 17), a shortfall of 8% that the margin of a quick set is widened by.
QUICK_SHORTFALL = 1.08


def mixed_bandwidth(read: float, copy: float, written_fraction: float | None) -> float:
    """Bytes/s a mix with ``written_fraction`` of its bytes written can move, from the read and copy
    ceilings (see the module's notes); the faster of the two when the split is not known.

    Reads never run slower than a copy, so a read ceiling under the copy one is taken as the copy's: the
    read ceiling is one library kernel's figure (torch.sum read 4.15 TB/s on the H200 where the copy
    moved 4.25 TB/s and an honest two-stage reduce_sum read 4.28 TB/s)."""
    read = max(read, copy)
    if written_fraction is None:
        return read
    inverse_write = 2 / copy - 1 / read            # seconds per written byte: 0.5/read + 0.5/write = 1/copy
    if inverse_write <= 0:                         # a read ceiling over twice the copy: no write rate fits
        return max(read, copy)
    return 1 / ((1 - written_fraction) / read + written_fraction * inverse_write)


def _mix_name(work: Work) -> str:
    fraction = work.written_fraction
    if fraction is None:
        return "read/write split not stated: the faster of read and copy"
    if fraction < 0.01:
        return "a read-only mix"
    return f"{fraction:.0%} of the bytes written"


def _measured_bandwidth(work: Work, ceilings: Ceilings | None) -> tuple[float, str] | None:
    if ceilings is None or not ceilings.copy_bytes_per_s:
        return None
    copy, read = ceilings.copy_bytes_per_s, ceilings.read_bytes_per_s
    margin = SUSPECT_BANDWIDTH_FRACTION * (QUICK_SHORTFALL if ceilings.quick else 1.0)
    quick = " (quick)" if ceilings.quick else ""
    if not read:
        # Without a read ceiling only a mix writing at least half its bytes is bounded by the copy.
        if work.written_fraction is None or work.written_fraction < 0.5:
            return None
        return copy * margin, f"measured{quick} copy bandwidth {copy / 1e9:.0f} GB/s x {margin:.2f}"
    bound = mixed_bandwidth(read, copy, work.written_fraction)
    return bound * margin, (f"measured{quick} read {read / 1e9:.0f} GB/s and copy bandwidth {copy / 1e9:.0f} GB/s, "
                            f"{_mix_name(work)}: {bound / 1e9:.0f} GB/s x {margin:.2f}")


def _lowest(*bounds: tuple[float, str] | None) -> tuple[float | None, str]:
    known = [bound for bound in bounds if bound is not None]
    if not known:
        return None, ""
    value = min(value for value, _ in known)
    return value, "; ".join(text + (" (the bound)" if len(known) > 1 and figure == value else "")
                            for figure, text in known)


def roof_for(work: Work, ceilings: Ceilings | None = None, datasheet: DeviceSpec | None = None) -> Roof:
    """The roof for ``work``: the measured ceilings (``ceilings``) for its read/write mix and dtype,
    each with its margin, and the datasheet peaks of ``datasheet``; the lower of the two where both
    are known. A roof with neither figure is returned only when neither source knows anything."""
    bandwidth = _lowest(
        _measured_bandwidth(work, ceilings),
        (datasheet.bandwidth_bytes_per_s * DATASHEET_MARGIN,
         f"datasheet {datasheet.bandwidth_bytes_per_s / 1e9:.0f} GB/s of {datasheet.name} x {DATASHEET_MARGIN:.2f}")
        if datasheet else None)
    measured_flops = ceilings.matmul_flops_per_s.get(work.dtype) if ceilings and work.dtype else None
    peak_flops = datasheet.peak_flops.get(work.dtype) if datasheet and work.dtype else None
    compute = _lowest(
        (measured_flops * SUSPECT_COMPUTE_FRACTION,
         f"measured {work.dtype} matmul peak {measured_flops / 1e12:.1f} TFLOP/s x {SUSPECT_COMPUTE_FRACTION:.2f}")
        if measured_flops else None,
        (peak_flops * DATASHEET_MARGIN,
         f"datasheet {work.dtype} peak {peak_flops / 1e12:.1f} TFLOP/s of {datasheet.name} x {DATASHEET_MARGIN:.2f}")
        if peak_flops else None)
    return Roof(bandwidth[0], compute[0], bandwidth[1], compute[1],
                ceilings.copy_bytes_per_s if ceilings else None, measured_flops)


def datasheet_for(name: str, arch: str) -> DeviceSpec | None:
    """The spec-table entry for a device, by name and then by arch (without the warning
    :func:`hello_gpu.bench.specs.spec_for_device` gives: the roof's source text names the entry used)."""
    return (lookup(name) if name else None) or (lookup(arch) if arch else None)


def current_roof(work: Work, ceilings: Ceilings | None = None) -> Roof:
    """The roof on this machine's GPU: ``ceilings`` if given, else the cached measured ones (a partial
    set counts: each figure is used once it was measured), and the datasheet entry of the device.
    On a machine without a GPU there is nothing to hold a figure against: an empty roof."""
    if gpu_vendor() is None:
        return Roof()
    info = device_info()
    return roof_for(work, ceilings if ceilings is not None else cached_ceilings(allow_partial=True),
                    datasheet_for(info.name, info.arch))
