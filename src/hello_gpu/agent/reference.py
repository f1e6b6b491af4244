"""The hand-written rung an agent run is measured against: the route's best in the committed ladder record.

The agent's target is a fraction of the best hand-written rung's speed (>= 90% within 16 candidates),
so a run names that rung and the final re-measurement times it against the agent's best, paired, in
the same fresh process. "Best" is read from the ladder record of this GPU (records/<device>/OP.DTYPE.json)
at the run's bench shape: the route's rung with the highest paired speedup over torch, as the ladder
itself chooses. Without a record (another GPU, a new operator) it is the route's last rung in ladder
order, the newest design, and the run says which rule chose it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..bench.records import default_records_dir

TORCH_BASELINE = "v00_torch"


def best_in_record(record: dict, rung_ids: set[str], shape: str) -> str | None:
    """Of ``rung_ids``, the one with the highest paired speedup over torch at ``shape`` in a ladder record."""
    speeds = {}
    for entry in record.get("entries", []):
        if entry.get("variant") in rung_ids and entry.get("shape") == shape:
            paired = (entry.get("speedups") or {}).get(TORCH_BASELINE) or {}
            if paired.get("value") is not None:
                speeds[entry["variant"]] = paired["value"]
    return max(speeds, key=speeds.get) if speeds else None


def hand_written_best(op, route: str, dtype: str, shape: str, device_slug: str | None,
                      records: Path | None = None) -> tuple[str, str]:
    """(rung id, why it was chosen) for ``op``'s ``route`` at ``shape`` and ``dtype``."""
    rungs = [rung for rung in op.rungs if rung.route == route and not rung.is_baseline]
    if not rungs:
        raise ValueError(f"{op.name} has no hand-written {route} rung to measure the agent against")
    path = (records or default_records_dir()) / (device_slug or "?") / f"{op.name}.{dtype}.json"
    if device_slug and path.is_file():
        best = best_in_record(json.loads(path.read_text(encoding="utf-8")), {rung.id for rung in rungs}, shape)
        if best is not None:
            return best, f"the {route} rung fastest against torch at {shape} in {path.name}"
    return rungs[-1].id, f"the last {route} rung of the ladder (no {device_slug or 'device'} record at {shape})"
