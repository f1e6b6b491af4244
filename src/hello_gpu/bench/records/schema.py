"""The record schema: ``record.schema.json`` (JSON Schema, checked by the jsonschema library), plus the
few rules JSON Schema cannot state, as small functions.

Every problem is one line, ``<field path>: <what is wrong>`` (``entries[3].timing.median: must be a
positive number of seconds, got -1``): a schema node's ``message`` says what the field must be, and
the value found follows.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import jsonschema

SCHEMA = "hello-gpu/record/1"
SCHEMA_FILE = Path(__file__).with_name("record.schema.json")

ROLES = ("candidate", "baseline")
CACHES = ("cold", "cold-clean", "warm")   # bench.timing: the flush before each timed call
CLOCKS = ("device-events", "wall")
VERDICTS = ("faster", "slower", "within noise")
TIMING_ORDER = ("minimum", "p20", "median", "p80", "maximum")


class RecordError(ValueError):
    """A record that does not follow the schema, or a table that cannot be made from one."""


@functools.lru_cache(maxsize=1)
def record_schema() -> dict:
    """The JSON Schema of ``hello-gpu/record/1`` (a dict; the file is record.schema.json)."""
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    schema = record_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# ------------------------------------------------------------------------------------ field paths


def _join(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def field_path(parts) -> str:
    """``["entries", 1, "speedups", "torch.add", "value"]`` -> ``entries[1].speedups['torch.add'].value``:
    a speedup is keyed by a variant name, which may hold dots, so it is written as a key."""
    path, previous = "", None
    for part in parts:
        path = f"{path}[{part!r}]" if previous == "speedups" and isinstance(part, str) else _join(path, part)
        previous = part
    return path


def _message_of(schema: dict) -> str | None:
    """A node's message, looked up through a ``$ref`` when the node has none of its own."""
    if "message" in schema:
        return schema["message"]
    reference = schema.get("$ref", "")
    if reference.startswith("#/$defs/"):
        return record_schema()["$defs"][reference.rsplit("/", 1)[1]].get("message")
    return None


def _messages(error: jsonschema.ValidationError) -> list[str]:
    path = field_path(error.absolute_path)
    if error.validator == "required":
        properties = error.schema.get("properties", {})
        return [f"{_join(path, key)}: missing" + (f"; {_message_of(properties[key])}" if key in properties
                                                   and _message_of(properties[key]) else "")
                for key in error.schema["required"] if key not in error.instance]
    if error.validator == "additionalProperties" and error.schema.get("additionalProperties") is False:
        allowed = sorted(error.schema.get("properties", {}))
        hint = " (free-form data goes in 'extra')" if "extra" in allowed else ""
        return [f"{_join(path, key)}: unknown field{hint}; allowed: {', '.join(allowed)}"
                for key in sorted(set(error.instance) - set(allowed), key=str)]
    message = _message_of(error.schema)
    if message is None:
        return [f"{path or 'record'}: {error.message}"]
    return [f"{path or 'record'}: {message}, got {error.instance!r}"]


# ------------------------------------------------------------------- rules JSON Schema cannot say


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _interval_problems(interval, centre, path: str, centre_name: str) -> list[str]:
    """An interval that is in order and contains its centre (its shape is the schema's business)."""
    if not (isinstance(interval, list) and len(interval) == 2 and all(_is_number(v) for v in interval)):
        return []
    if not interval[0] <= interval[1]:
        return [f"{path}: low {interval[0]!r} is above high {interval[1]!r}"]
    if _is_number(centre) and not interval[0] <= centre <= interval[1]:
        return [f"{path}: [{interval[0]!r}, {interval[1]!r}] does not contain the {centre_name} {centre!r}"]
    return []


def _timing_problems(timing, path: str) -> list[str]:
    if not isinstance(timing, dict):
        return []
    values = [timing.get(key) for key in TIMING_ORDER]
    problems = []
    if all(_is_number(v) for v in values) and values != sorted(values):
        problems.append(f"{path}: must have minimum <= p20 <= median <= p80 <= maximum, got "
                        + ", ".join(f"{key}={timing[key]!r}" for key in TIMING_ORDER))
    return problems + _interval_problems(timing.get("ci95"), timing.get("median"), f"{path}.ci95", "median")


def _speedup_problems(entry: dict, baselines: set, path: str) -> list[str]:
    """Each speedup names a baseline of this record at the same shape, and its verdict agrees with its
    interval: a "faster" whose interval reaches 1 or below is a claim the data do not make."""
    speedups = entry.get("speedups")
    if not isinstance(speedups, dict):
        return []
    problems = []
    for baseline, speedup in speedups.items():
        where = f"{path}[{baseline!r}]"
        # A speedup is only meaningful against a baseline measured on the same shape, in this record.
        if (baseline, entry.get("shape")) not in baselines:
            problems.append(f"{where}: no entry in this record with role 'baseline', variant {baseline!r} "
                            f"and shape {entry.get('shape')!r}")
        if not isinstance(speedup, dict):
            continue
        problems += _interval_problems(speedup.get("ci95"), speedup.get("value"), f"{where}.ci95", "value")
        interval, verdict = speedup.get("ci95"), speedup.get("verdict")
        if isinstance(interval, list) and len(interval) == 2 and all(_is_number(v) for v in interval) and (
                (verdict == "faster" and interval[0] <= 1) or (verdict == "slower" and interval[1] >= 1)):
            problems.append(f"{where}.verdict: {verdict!r} but the 95% interval [{interval[0]!r}, "
                            f"{interval[1]!r}] includes 1")
    return problems


def _sources_problems(entry: dict, path: str) -> list[str]:
    """``sources`` starts with the entry's own source and names each file once."""
    sources = entry.get("sources")
    if not isinstance(sources, list) or not sources:
        return []
    if entry.get("source") is None:
        return [f"{path}.sources: an entry without a source (a library baseline) runs no file of the repository"]
    problems = []
    if sources[0] != entry["source"]:
        problems.append(f"{path}.sources[0]: must be the entry's source {entry['source']!r}, got {sources[0]!r}")
    paths = [s.get("path") for s in sources if isinstance(s, dict)]
    twice = sorted({p for p in paths if paths.count(p) > 1}, key=str)
    if twice:
        problems.append(f"{path}.sources: lists {', '.join(map(str, twice))} more than once")
    return problems


def _entry_rule_problems(entries) -> list[str]:
    if not isinstance(entries, list):
        return []
    problems = []
    baselines = {(e.get("variant"), e.get("shape")) for e in entries if isinstance(e, dict) and e.get("role") == "baseline"}
    seen: dict[tuple, int] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        path = f"entries[{index}]"
        problems += _timing_problems(entry.get("timing"), f"{path}.timing")
        problems += _speedup_problems(entry, baselines, f"{path}.speedups")
        problems += _sources_problems(entry, path)
        # Two entries for one (variant, shape, dtype) would make every table built from them ambiguous.
        key = (entry.get("variant"), entry.get("shape"), entry.get("dtype"))
        if key in seen:
            problems.append(f"{path}: same variant, shape and dtype as entries[{seen[key]}] {key!r}")
        seen.setdefault(key, index)
    return problems


def _non_finite(value, path: str):
    """Paths of NaN and infinite floats anywhere in ``value``: they would not survive strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite(item, _join(path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{path}[{index}]")


def validate_record(data: dict, where: str = "") -> list[str]:
    """Everything wrong with ``data`` as a ``hello-gpu/record/1`` record; empty when it is valid.

    Each message starts with the field path (``entries[2].timing.median: ...``), after ``where``
    (a file name, say) when given.
    """
    if not isinstance(data, dict):
        problems = [f"record: must be a JSON object, got {type(data).__name__}"]
    elif data.get("schema") != SCHEMA:
        problems = [f"schema: must be {SCHEMA!r}, got {data.get('schema')!r}"]
    else:
        problems = []
        for error in _validator().iter_errors(data):
            problems += [message for message in _messages(error) if message not in problems]
        problems += _entry_rule_problems(data.get("entries"))
        # JSON Schema takes NaN for a number (every comparison with it is false), so it is looked for here.
        for path in _non_finite(data, ""):
            if not any(problem.startswith(path + ":") for problem in problems):
                problems.append(f"{path}: NaN or infinity cannot be written as strict JSON (use null)")
    prefix = f"{where}: " if where else ""
    return [prefix + problem for problem in problems]
