"""The profile record: one ``hello-gpu/record/1`` file per operator and dtype, kind "profile".

``records/<device>/<op>.<dtype>.profile.json`` holds one entry per profiled rung and shape. The schema
fits without change:

- ``timing``: the per-call device time from torch.profiler (the sum of the call's kernel durations,
  device timestamps, so ``clock`` is "device-events"; the L2 is not flushed between profiled calls,
  so ``cache`` is "warm"). ``correctness`` is null: profiling checks nothing.
- ``work`` and ``derived``: the spec's work model and its rates, as in a ladder record.
- ``extra``: ``kernels`` (the kernel table, with each kernel's counters), ``bytes`` (counted vs
  measured DRAM bytes per call and their ratio), ``counters`` (tool, note, per-call summary),
  ``route``, ``fallback_warning``, and when and at which commit this entry was measured (entries of
  earlier runs are kept when their source is unchanged, so the record-level environment is the
  latest run's only).

A new profile of a rung replaces its entry of the same shape and dtype; entries any of whose files
(``sources``: the rung and everything it runs) changed since they were measured are dropped rather
than written stale.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..bench.ceilings import cached_ceilings
from ..bench.records import (
    RecordError,
    device_from_manifest,
    new_record,
    record_path,
    repository_root,
    source_changes,
    timing_from_summary,
    utc_now,
    write_record,
)
from ..bench.stats import summarize
from ..bench.work import rates
from ..ops.shapes import shape_label
from ..ops.sources import record_rules, rung_source_fields
from ..runtime import manifest
from .roofline import PROFILE_SUFFIX

TIMING_SOURCE = ("torch.profiler: per call, the sum of its kernels' device durations; L2 not flushed between calls")


def profile_record_name(op: str, dtype: str) -> str:
    return f"{op}.{dtype}.{PROFILE_SUFFIX}"


def profile_entry(profile, *, environment: dict, ceilings=None, created: str | None = None) -> dict:
    """The record entry of one :class:`~hello_gpu.profile.rung_profile.RungProfile`."""
    table, rung = profile.table, profile.rung
    if not table.per_call_seconds:
        raise RecordError(f"{rung.id}: no device time was recorded for any call (no kernels?): nothing to record")
    summary = summarize(table.per_call_seconds)
    measured = rates(profile.work, summary.median, cold=False,
                     bandwidth_ceiling=getattr(ceilings, "copy_bytes_per_s", None),
                     compute_ceiling=(getattr(ceilings, "matmul_flops_per_s", None) or {}).get(profile.work.dtype))
    counters = table.counters
    table_data = table.to_dict()
    extra = {"route": rung.route, "timing_source": TIMING_SOURCE, "kernels": table_data["kernels"],
             "bytes": table.bytes_comparison(), "fallback_warning": table.fallback_warning(),
             "counters": None if counters is None else {key: value for key, value in counters.to_dict().items()
                                                        if key != "kernels"},
             "measured": {"created": created or utc_now(), "commit": (environment.get("git") or {}).get("commit")}}
    return {"variant": rung.id, "role": "baseline" if rung.is_baseline else "candidate",
            **rung_source_fields(rung, repository_root(profile.op.path)), "shape": shape_label(profile.shape),
            "dtype": profile.dtype, "correctness": None,
            "timing": timing_from_summary(summary, cache="warm", graph=False, clock="device-events"),
            "work": profile.work.to_dict(), "derived": measured.to_dict(), "extra": extra}


def merge_entries(old: list[dict], new: list[dict], repo_root: Path, hasher) -> list[dict]:
    """``new`` plus the ``old`` entries it does not replace (same variant, shape, dtype) whose files
    (``sources``, hashed by ``hasher``) are unchanged and listed, in ladder order of first appearance."""
    replaced = {(e["variant"], e["shape"], e["dtype"]) for e in new}
    kept = [e for e in old if (e["variant"], e["shape"], e["dtype"]) not in replaced
            and (e.get("source") is None or "sources" in e) and not source_changes(e, repo_root, hasher)]
    return kept + new


def profile_record(profiles: list, *, existing: dict | None = None, environment: dict | None = None) -> dict:
    """The profile record of ``profiles`` (one operator and dtype), merged into ``existing``."""
    if not profiles:
        raise RecordError("no profiles to record")
    op, dtype = profiles[0].op, profiles[0].dtype
    if any(p.op.name != op.name or p.dtype != dtype for p in profiles):
        raise RecordError("a profile record holds one operator and one dtype")
    if environment is None:
        environment = manifest.environment_manifest()
        environment["clocks_end"] = manifest.read_clocks()
    ceilings = cached_ceilings()
    created = utc_now()
    entries = [profile_entry(p, environment=environment, ceilings=ceilings, created=created) for p in profiles]
    entries = merge_entries((existing or {}).get("entries", []), entries, repository_root(op.path),
                            record_rules(op.path.parent).hasher)
    tools = sorted({p.table.counters.tool for p in profiles if p.table.counters and p.table.counters.tool})
    return new_record(profile_record_name(op.name, dtype), "profile", device=device_from_manifest(environment),
                      environment=environment, entries=entries,
                      ceilings=None if ceilings is None else {"copy_bytes_per_s": ceilings.copy_bytes_per_s,
                                                              "matmul_flops_per_s": ceilings.matmul_flops_per_s},
                      extra={"op": op.name, "dtype": dtype, "counter_tools": tools, "timing_source": TIMING_SOURCE},
                      created=created)


def write_profile_record(profiles: list, record_dir: Path) -> Path:
    """Write (or update) ``<record_dir>/<device>/<op>.<dtype>.profile.json``; a relative ``record_dir``
    is taken from the repository root, as ``ladder --record`` does."""
    root = repository_root(profiles[0].op.path)
    directory = Path(record_dir) if Path(record_dir).is_absolute() else root / record_dir
    environment = manifest.environment_manifest()
    environment["clocks_end"] = manifest.read_clocks()
    name = profile_record_name(profiles[0].op.name, profiles[0].dtype)
    path = record_path({"name": name, "device": device_from_manifest(environment)}, directory)
    existing = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    record = profile_record(profiles, existing=existing, environment=environment)
    return write_record(record, directory, repo_root=root, rules=record_rules(profiles[0].op.path.parent))
