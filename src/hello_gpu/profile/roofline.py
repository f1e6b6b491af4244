"""The roofline: each rung as a point under the roofs, and what bounds it (memory, compute or latency).

A kernel doing ``F`` FLOPs while moving ``B`` bytes has an arithmetic intensity ``I = F / B`` (FLOP per
byte). With a memory roof ``BW`` (bytes/s) and a compute roof ``P`` (FLOP/s) it can reach at most
``min(P, I * BW)``: left of the ridge point ``P / BW`` memory is the limit, right of it compute.

- Roofs: the **measured** ceilings (``hello-gpu ceilings``: copy bandwidth, vendor matmul per dtype,
  launch overhead), from the ladder record, else the ``ceilings.json`` record beside it, else this
  machine's cache; and the **datasheet** peaks (``bench/specs.json``) drawn beside them.
  The compute roof of a dtype is its vendor matmul: tensor cores for float16/bfloat16. An elementwise
  kernel never uses them, so its own compute limit is lower; for such kernels (``I`` ~ 0.1) the
  verdict is "memory" either way, far left of any ridge.
- Points: ``I`` from the work model (counted bytes), and, where a profile record has ncu's DRAM bytes,
  a second point from the measured bytes. The difference is the lesson: re-reads and over-fetch.

Classification of a point (thresholds with the reason for each number):

- **latency-bound** when its time is within :data:`LATENCY_DEVICE_CALLS` = 10 device call costs. The
  device cost of a call is ``graph_call_s`` of the ceilings: a 1-element kernel replayed in a CUDA
  graph, 1.18 us on the H200, the fixed cost of a kernel with no host in the way. Within 10 of those
  (~12 us) a call is mostly fixed cost (the ramp-up of the first wave, the tail of the last, a few
  DRAM round trips of ~0.7 us), so its distance from the roofs says little: the 2^20 adds (8-9 us).
  The uncoalesced vector_add rung at 2^20 (17.9 us) stays memory-bound, as the lesson needs.
  The threshold used to be 2 host launch overheads; that figure is host time and moved between two
  runs from 6.6 to 9.0 us, which put the strided rung on either side of the line. Without a graph
  figure the host launch overhead x :data:`LATENCY_LAUNCHES` = 2 is the fallback. Or when it reaches less
  than :data:`FAR_BELOW_FRACTION` = 10% of the attainable bound with a working set that fits in the
  L2 (60 MB on the H200): a tiny problem far below both roofs is not limited by either.
- otherwise **memory-bound** left of the ridge, **compute-bound** right of it, with the % of the
  attainable bound (``min(P, I * BW)``) the point reaches.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..bench.ceilings import cached_ceilings
from ..bench.records import RecordError, device_slug, format_figure
from ..bench.specs import spec_for_device
from ..bench.work import SUSPECT_BANDWIDTH_FRACTION
from ..runtime.device import device_info, gpu_vendor

LATENCY_LAUNCHES = 2
LATENCY_DEVICE_CALLS = 10
FAR_BELOW_FRACTION = 0.10
# Host time per kernel launch when no ceilings were measured: PyTorch launches a CUDA kernel in ~4-7 us
# (the H200 here: 6.6 us, records/nvidia-h200/ceilings.json); 5 us is the middle of that.
DEFAULT_LAUNCH_OVERHEAD_S = 5e-6
CEILINGS_RECORD = "ceilings.json"
PROFILE_SUFFIX = "profile"               # the profile record of OP.DTYPE is OP.DTYPE.profile.json


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


# ------------------------------------------------------------------------------------------ roofs


@dataclass(frozen=True)
class Roofs:
    """The roofs for one device and dtype: measured and datasheet, and where each number came from."""

    device: str
    dtype: str
    bandwidth: float | None = None               # measured copy bandwidth, bytes/s
    compute: float | None = None                 # measured vendor matmul, FLOP/s
    datasheet_bandwidth: float | None = None
    datasheet_compute: float | None = None
    launch_overhead_s: float | None = None       # measured host time per launch
    graph_call_s: float | None = None            # measured device time of a 1-element call in a graph
    l2_bytes: int | None = None
    sources: tuple[str, ...] = ()

    @property
    def memory_roof(self) -> float | None:
        """The bandwidth a point is held against: measured, else datasheet."""
        return self.bandwidth or self.datasheet_bandwidth

    @property
    def compute_roof(self) -> float | None:
        return self.compute or self.datasheet_compute

    @property
    def ridge(self) -> float | None:
        """FLOP per byte where the memory roof meets the compute roof."""
        if self.memory_roof and self.compute_roof:
            return self.compute_roof / self.memory_roof
        return None

    def attainable(self, intensity: float) -> float | None:
        """FLOP/s the roofs allow at ``intensity`` FLOP/byte."""
        limits = [roof for roof in (self.compute_roof, intensity * self.memory_roof if self.memory_roof else None)
                  if roof is not None]
        return min(limits) if limits else None


def _first(*values):
    return next((v for v in values if _positive(v)), None)


def roofs_from(device: dict, dtype: str, ceilings: list[tuple[str, dict]], *, environment: dict | None = None) -> Roofs:
    """Roofs from ceiling dicts in order of preference (``(where, ceilings)``; the first with a figure
    wins, figure by figure) and the datasheet entry of the device."""
    spec = spec_for_device(device.get("name", ""), device.get("arch", ""))
    bandwidth = _first(*(c.get("copy_bytes_per_s") for _, c in ceilings))
    compute = _first(*((c.get("matmul_flops_per_s") or {}).get(dtype) for _, c in ceilings))
    overhead = _first(*(c.get("launch_overhead_s") for _, c in ceilings))
    graph_call = _first(*(c.get("graph_call_s") for _, c in ceilings))
    used = [where for where, c in ceilings
            if any(_positive(v) for v in (c.get("copy_bytes_per_s"), c.get("launch_overhead_s"),
                                          (c.get("matmul_flops_per_s") or {}).get(dtype)))]
    sources = [f"measured: {where}" for where in used] or ["measured: none (run `hello-gpu ceilings`)"]
    if spec is not None:
        sources.append(f"datasheet: {spec.name} in bench/specs.json")
    l2 = (environment or {}).get("l2_bytes") or (spec.l2_bytes if spec else None)
    return Roofs(device.get("name", "?"), dtype, bandwidth, compute,
                 spec.bandwidth_bytes_per_s if spec else None, (spec.peak_flops.get(dtype) if spec else None),
                 overhead, graph_call, int(l2) if _positive(l2) else None, tuple(sources))


# ------------------------------------------------------------------------------------------ points


@dataclass(frozen=True)
class RooflinePoint:
    """One rung at one shape: its time and work, and the DRAM bytes ncu measured where known."""

    variant: str
    shape: str
    dtype: str
    route: str | None
    role: str
    seconds: float
    bytes: float
    flops: float
    measured_dram_bytes: float | None = None
    suspect: str | None = None

    @property
    def counted_intensity(self) -> float | None:
        return self.flops / self.bytes if self.flops and self.bytes else None

    @property
    def measured_intensity(self) -> float | None:
        return self.flops / self.measured_dram_bytes if self.flops and self.measured_dram_bytes else None

    @property
    def flop_rate(self) -> float:
        return self.flops / self.seconds

    @property
    def byte_rate(self) -> float:
        return self.bytes / self.seconds

    @property
    def measured_over_counted(self) -> float | None:
        return self.measured_dram_bytes / self.bytes if self.measured_dram_bytes and self.bytes else None


def measured_bytes_by_rung(profile: dict | None) -> dict[tuple[str, str], float]:
    """``{(variant, shape): DRAM bytes per call}`` from a profile record (kind "profile")."""
    found = {}
    for entry in (profile or {}).get("entries", []):
        measured = ((entry.get("extra") or {}).get("bytes") or {}).get("measured_dram_bytes")
        if _positive(measured):
            found[(entry["variant"], entry["shape"])] = float(measured)
    return found


def points_from_record(record: dict, *, profile: dict | None = None, route: str | None = None,
                       dtype: str | None = None) -> list[RooflinePoint]:
    """A point per entry with a timing and a work model (of ``dtype``, when given); ``route`` keeps that
    route's rungs and the torch baselines (as ``hello-gpu ladder --route`` does)."""
    measured = measured_bytes_by_rung(profile)
    points = []
    for entry in record.get("entries", []):
        if dtype is not None and entry.get("dtype") != dtype:
            continue
        work, timing = entry.get("work"), entry.get("timing") or {}
        entry_route = (entry.get("extra") or {}).get("route")
        if route is not None and entry_route not in (route, "torch") and entry.get("role") != "baseline":
            continue
        if not work or not _positive(timing.get("median")) or not _positive(work.get("bytes")):
            continue
        points.append(RooflinePoint(entry["variant"], entry["shape"], entry["dtype"], entry_route, entry.get("role", ""),
                                    float(timing["median"]), float(work["bytes"]), float(work.get("flops") or 0.0),
                                    measured.get((entry["variant"], entry["shape"])),
                                    (entry.get("derived") or {}).get("suspect")))
    return points


# ------------------------------------------------------------------------------------------ verdicts


@dataclass(frozen=True)
class Verdict:
    """What bounds a point, how close it gets to that bound, and why, in one line."""

    point: RooflinePoint
    bound: str                       # "memory", "compute" or "latency"
    side: str | None                 # the roof the point sits under: "memory" or "compute"
    fraction: float | None           # of the attainable bound
    reason: str

    @property
    def text(self) -> str:
        point = self.point
        head = f"{point.variant} {point.shape}: {self.bound}-bound"
        if self.fraction is not None:
            head += f", {self.fraction:.0%} of the attainable {self.side} roof"
        return f"{head} ({self.reason})"

    def to_dict(self) -> dict:
        point = self.point
        return {"variant": point.variant, "shape": point.shape, "dtype": point.dtype, "route": point.route,
                "bound": self.bound, "side": self.side, "fraction_of_attainable": self.fraction, "reason": self.reason,
                "seconds": point.seconds, "counted_intensity": point.counted_intensity,
                "measured_intensity": point.measured_intensity, "measured_over_counted": point.measured_over_counted}


def _microseconds(seconds: float) -> str:
    return f"{format_figure(seconds * 1e6)} us"


def classify(point: RooflinePoint, roofs: Roofs) -> Verdict:
    """Memory-, compute- or latency-bound, with the % of the attainable roof (see the module's thresholds)."""
    ridge, intensity = roofs.ridge, point.counted_intensity
    if roofs.memory_roof and (intensity is None or ridge is None or intensity < ridge):
        side, fraction = "memory", point.byte_rate / roofs.memory_roof
        detail = (f"{format_figure(point.byte_rate / 1e9)} of {format_figure(roofs.memory_roof / 1e9)} GB/s"
                  + (f"; I = {intensity:.3g} FLOP/B, ridge {ridge:.3g}" if intensity and ridge else ""))
    elif roofs.compute_roof and point.flops:
        side, fraction = "compute", point.flop_rate / roofs.compute_roof
        detail = (f"{format_figure(point.flop_rate / 1e12)} of {format_figure(roofs.compute_roof / 1e12)} TFLOP/s"
                  + (f"; I = {intensity:.3g} FLOP/B, ridge {ridge:.3g}" if intensity and ridge else ""))
    else:
        side, fraction, detail = None, None, "no roofs known for this device and dtype"
    if point.measured_over_counted is not None:
        detail += f"; DRAM bytes {point.measured_over_counted:.2f}x counted"
    if point.suspect or (fraction is not None and fraction > SUSPECT_BANDWIDTH_FRACTION):
        detail += "; SUSPECT: above the measured roof" + (f" ({point.suspect})" if point.suspect else "")
    if roofs.graph_call_s:
        limit, what = LATENCY_DEVICE_CALLS * roofs.graph_call_s, (
            f"{LATENCY_DEVICE_CALLS} device call costs of {_microseconds(roofs.graph_call_s)}")
    else:
        overhead = roofs.launch_overhead_s or DEFAULT_LAUNCH_OVERHEAD_S
        limit, what = LATENCY_LAUNCHES * overhead, f"{LATENCY_LAUNCHES} launch overheads of {_microseconds(overhead)}"
    if point.seconds <= limit:
        reason = f"{_microseconds(point.seconds)} is within {what}: fixed costs dominate; {detail}"
        return Verdict(point, "latency", side, fraction, reason)
    if fraction is not None and fraction < FAR_BELOW_FRACTION and roofs.l2_bytes and point.bytes <= roofs.l2_bytes:
        reason = (f"under {FAR_BELOW_FRACTION:.0%} of the roof with {format_figure(point.bytes / 1e6)} MB, which fits in "
                  f"the {format_figure(roofs.l2_bytes / 1e6)} MB L2; {detail}")
        return Verdict(point, "latency", side, fraction, reason)
    return Verdict(point, side or "unknown", side, fraction, detail)


# ------------------------------------------------------------------------------------------ loading


@dataclass
class Roofline:
    """Everything a roofline plot and its verdicts need, loaded from records."""

    op: str
    dtype: str
    route: str | None
    record: dict
    record_path: Path | None
    roofs: Roofs
    points: list[RooflinePoint]
    profile_path: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def verdicts(self) -> list[Verdict]:
        return [classify(point, self.roofs) for point in self.points]

    @property
    def name(self) -> str:
        return ".".join(part for part in (self.op, self.route, self.dtype) if part)

    def to_dict(self) -> dict:
        roofs = self.roofs
        return {"op": self.op, "dtype": self.dtype, "route": self.route, "device": roofs.device,
                "roofs": {"bandwidth": roofs.bandwidth, "compute": roofs.compute, "datasheet_bandwidth":
                          roofs.datasheet_bandwidth, "datasheet_compute": roofs.datasheet_compute,
                          "ridge": roofs.ridge, "launch_overhead_s": roofs.launch_overhead_s,
                          "l2_bytes": roofs.l2_bytes, "sources": list(roofs.sources)},
                "verdicts": [verdict.to_dict() for verdict in self.verdicts], "notes": list(self.notes)}


def _read(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RecordError(f"{path}: cannot be read as JSON: {error}") from None
    if not isinstance(data, dict) or "entries" not in data:
        raise RecordError(f"{path}: not a hello-gpu record (no 'entries')")
    return data


def _candidate_names(op: str, dtype: str, route: str | None) -> list[str]:
    """Ladder record names to look for: OP.ROUTE.DTYPE (a --route run), then OP.DTYPE (filtered by route)."""
    names = [f"{op}.{route}.{dtype}"] if route else []
    return names + [f"{op}.{dtype}"]


def find_ladder_record(op: str, dtype: str, route: str | None, records_dir: Path, device: str | None = None) -> Path:
    """The ladder record of ``op`` under ``records_dir/<device>/``; with no ``device``, the one device
    folder that has it (several: the caller must choose)."""
    records_dir = Path(records_dir)
    folders = [records_dir / device] if device else sorted(p for p in records_dir.glob("*") if p.is_dir())
    for name in _candidate_names(op, dtype, route):
        found = [folder / f"{name}.json" for folder in folders if (folder / f"{name}.json").is_file()]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            choices = ", ".join(path.parent.name for path in found)
            raise RecordError(f"{name}.json exists for several devices ({choices}): choose one with --device")
    where = f"{records_dir}/{device or '*'}/"
    raise RecordError(f"no ladder record {' or '.join(n + '.json' for n in _candidate_names(op, dtype, route))} under "
                      f"{where}: run `hello-gpu ladder {op} --dtype {dtype} --record` on the GPU first")


def _current_device_ceilings(slug: str) -> dict | None:
    """This machine's cached ceilings, when this machine's GPU is the record's device."""
    if gpu_vendor() is None:
        return None
    cached = cached_ceilings()
    if cached is None or device_slug(device_info().name) != slug:
        return None
    return cached.to_dict()


def load_roofline(op: str, *, dtype: str | None = None, route: str | None = None, record_file: Path | None = None,
                  records_dir: Path = Path("records"), device: str | None = None,
                  use_cache: bool = True) -> Roofline:
    """Read a ladder record (``record_file``, or found under ``records_dir``), the profile record and
    ceilings record beside it, and the datasheet: the roofs and a point per rung and shape.

    ``dtype`` defaults to float32, or to the dtype of the entries of an explicit ``record_file``.
    """
    if record_file is None:
        dtype = dtype or "float32"
        path = find_ladder_record(op, dtype, route, records_dir, device)
    else:
        path = Path(record_file)
    record = _read(path)
    if dtype is None:
        dtypes = sorted({entry.get("dtype") for entry in record["entries"] if entry.get("dtype")})
        dtype = dtypes[0] if dtypes else "float32"
    ceilings: list[tuple[str, dict]] = []
    if isinstance(record.get("ceilings"), dict):
        ceilings.append((f"{path.name} (the record's own)", record["ceilings"]))
    notes = []
    sibling = path.parent / CEILINGS_RECORD
    if sibling.is_file() and sibling != path:
        try:
            data = _read(sibling)
        except RecordError as error:
            data = {}
            notes.append(f"ceilings record ignored: {error}")
        if isinstance(data.get("ceilings"), dict):
            ceilings.append((f"{sibling.parent.name}/{sibling.name}", data["ceilings"]))
    slug = (record.get("device") or {}).get("slug", "")
    cached = _current_device_ceilings(slug) if use_cache else None
    if cached is not None:
        ceilings.append(("this machine's ceilings cache", cached))
    roofs = roofs_from(record.get("device") or {}, dtype, ceilings, environment=record.get("environment"))
    profile_path = path.parent / f"{op}.{dtype}.{PROFILE_SUFFIX}.json"
    profile = _read(profile_path) if profile_path.is_file() else None
    points = points_from_record(record, profile=profile, route=route, dtype=dtype)
    if not points:
        notes.append(f"{path.name} has no entry with a timing and a work model" + (f" for route {route}" if route else ""))
    if profile is None:
        notes.append(f"no profile record {profile_path.name}: points use counted bytes only "
                     f"(`hello-gpu profile {op} RUNG --record` adds ncu's DRAM bytes)")
    if any(point.flops == 0 for point in points):
        notes.append("entries with no FLOPs in their work model have no arithmetic intensity: verdicts only, not plotted")
    return Roofline(op, dtype, route, record, path, roofs, points, profile_path if profile else None, notes)
