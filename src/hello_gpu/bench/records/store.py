"""Naming, hashing, building, writing and reading records."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from .schema import SCHEMA, RecordError, validate_record

# ------------------------------------------------------------------------------------------ names


def repository_root(path: Path) -> Path:
    """The nearest folder above ``path`` with pyproject.toml or .git: records name files relative to it."""
    for folder in Path(path).resolve().parents:
        if (folder / "pyproject.toml").is_file() or (folder / ".git").exists():
            return folder
    raise RecordError(f"{path} is in no repository (no pyproject.toml or .git above it): records need one")


def default_records_dir() -> Path:
    """./records where it exists, else the records/ of the repository this package lives in."""
    if Path("records").is_dir():
        return Path("records")
    try:
        return repository_root(Path(__file__)) / "records"
    except RecordError:
        return Path("records")


def device_slug(name: str) -> str:
    """``"NVIDIA H200"`` -> ``"nvidia-h200"``: lowercase, every run of non-alphanumerics one '-'."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise RecordError(f"device name {name!r} has no letters or digits to make a slug from")
    return slug


def utc_now() -> str:
    """The current time as the ``created`` field wants it: ISO-8601, UTC, whole seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def record_path(record: dict, directory: Path = Path("records")) -> Path:
    """Where a record lives: ``<directory>/<device slug>/<name>.json``."""
    return Path(directory) / record["device"]["slug"] / f"{record['name']}.json"


# ------------------------------------------------------------------------------------------ sources


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes: bench's own hasher, for files it knows no format of."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class SourceRules:
    """How records see the files they measured. bench knows no rung-file format, so whoever does
    (hello_gpu.ops.sources.record_rules) hands these in; the defaults know nothing of any format.

    - ``hasher(path) -> str``: the sha256 a record keeps for a file (default: of all its bytes);
    - ``sources_of(path) -> [path, ...]``: every file a source runs, itself first (default: itself);
    - ``claims_in(text) -> [(line, record name), ...]``: the records a file claims (default: none).
    """

    hasher: Callable[[Path], str] = file_sha256
    sources_of: Callable[[Path], list[Path]] | None = None
    claims_in: Callable[[str], list[tuple[int, str]]] | None = None


PLAIN = SourceRules()


def source_entry(path: Path, repo_root: Path, hasher: Callable[[Path], str] = file_sha256) -> dict:
    """``{"path", "sha256"}`` for a source file; a relative ``path`` is taken from ``repo_root``."""
    root = Path(repo_root).resolve()
    absolute = (root / path).resolve()
    try:
        relative = absolute.relative_to(root)
    except ValueError:
        raise RecordError(f"source {path} is outside the repository {root}: records name repo-relative files") from None
    return {"path": relative.as_posix(), "sha256": hasher(absolute)}


def source_entries(path: Path, repo_root: Path, rules: SourceRules = PLAIN) -> list[dict]:
    """``{"path", "sha256"}`` of the source and of every file it runs (``rules.sources_of``), itself first."""
    absolute = (Path(repo_root) / path).resolve()
    files = rules.sources_of(absolute) if rules.sources_of else [absolute]
    return [source_entry(file, repo_root, rules.hasher) for file in files]


def entry_sources(entry: dict) -> list[dict]:
    """The files an entry was measured with: its ``sources``, else its ``source`` alone, else none."""
    if entry.get("sources"):
        return entry["sources"]
    return [entry["source"]] if entry.get("source") else []


def source_changes(entry: dict, repo_root: Path, hasher: Callable[[Path], str] = file_sha256) -> list[tuple[dict, str | None]]:
    """(recorded source, its sha256 now, or None when the file is gone) for each file of the entry that
    is not as it was measured; empty when every one is."""
    changes = []
    for source in entry_sources(entry):
        file = Path(repo_root) / source["path"]
        now = hasher(file) if file.is_file() else None
        if now != source["sha256"]:
            changes.append((source, now))
    return changes


# ------------------------------------------------------------------------------------- building


def device_from_manifest(manifest: dict) -> dict:
    """The record's ``device`` from an environment manifest (``gpu`` and ``arch`` keys)."""
    if not manifest.get("gpu"):
        raise RecordError("the environment manifest names no GPU (no 'gpu' key): measure on a GPU machine")
    return {"slug": device_slug(manifest["gpu"]), "name": manifest["gpu"], "arch": manifest.get("arch") or ""}


def timing_from_summary(summary, *, cache: str, graph: bool, clock: str) -> dict:
    """A record's ``timing`` from a :class:`~hello_gpu.bench.stats.Summary` and how it was measured."""
    timing = summary.to_dict()
    # A single sample has an infinite standard error; strict JSON has no Infinity, so it is "unknown".
    if not math.isfinite(timing["relative_standard_error"]):
        timing["relative_standard_error"] = None
    timing.update(cache=cache, graph=graph, clock=clock)
    return timing


def new_record(name: str, kind: str, *, device: dict, environment: dict, entries: list[dict],
               ceilings: dict | None = None, extra: dict | None = None, created: str | None = None) -> dict:
    """A record dict with the schema and creation time filled in; optional parts left out when None."""
    record = {"schema": SCHEMA, "name": name, "kind": kind, "created": created or utc_now(), "device": device,
              "environment": environment, "entries": entries}
    if ceilings is not None:
        record["ceilings"] = ceilings
    if extra is not None:
        record["extra"] = extra
    return record


# ---------------------------------------------------------------------------------------- writing


def _write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory and os.replace, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)   # mkstemp makes the file private; records are for everyone to read
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def record_text(record: dict) -> str:
    """The canonical file text: pretty, sorted keys (stable diffs), strict JSON, trailing newline."""
    return json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def _stale_at_birth(record: dict, repo_root: Path, hasher: Callable[[Path], str]) -> list[str]:
    """Sources that are missing or differ from their recorded sha256 now: such a record is stale at birth."""
    problems = []
    for index, entry in enumerate(record["entries"]):
        for source, now in source_changes(entry, repo_root, hasher):
            field = f"entries[{index}].{'source' if source == entry.get('source') else 'sources'}"
            problems.append(f"{field}.path: {source['path']} does not exist under {repo_root}" if now is None else
                            f"{field}.sha256: does not match {source['path']} as it is now")
    return problems


def write_record(record: dict, directory: Path = Path("records"), *, repo_root: Path | None = None,
                 rules: SourceRules = PLAIN) -> Path:
    """Validate ``record`` and write it to ``<directory>/<slug>/<name>.json``; return that path.

    With ``repo_root``, a relative ``directory`` is taken from it and every file an entry was measured
    with must exist there with the recorded sha256 (``rules.hasher``). Nothing is written when anything
    is wrong: RecordError lists it all.
    """
    problems = validate_record(record)
    if not problems and repo_root is not None:
        problems = _stale_at_birth(record, Path(repo_root), rules.hasher)
    if problems:
        name = record.get("name") if isinstance(record, dict) else None
        raise RecordError(f"record {name!r} not written:\n  " + "\n  ".join(problems))
    if repo_root is not None and not Path(directory).is_absolute():
        directory = Path(repo_root) / directory
    path = record_path(record, directory)
    _write_atomically(path, record_text(record))
    return path


# ---------------------------------------------------------------------------------------- reading


def relative_name(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` in posix form, or as it is when outside."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def load_json(path: Path, root: Path) -> tuple[object, str | None]:
    """(data, None), or (None, an error naming the file and where the JSON breaks)."""
    name = relative_name(path, root)
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except json.JSONDecodeError as error:
        return None, f"{name}: not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
    except (OSError, UnicodeDecodeError) as error:
        return None, f"{name}: cannot be read: {error}"
