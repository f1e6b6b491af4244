"""Tables made from records, and the generated regions of Markdown files.

In Markdown, the region between ``<!-- hello-gpu:KIND ARGUMENT... -->`` and ``<!-- /hello-gpu:KIND -->``
is generated: :func:`update_tables` replaces it with ``renderers[KIND](arguments, root, where)``. The
kind ``table`` is built in (``<!-- hello-gpu:table records/nvidia-h200/NAME.json [columns=...]
[shapes=...] [pending=ladder] -->``, :func:`render_table`); others are handed in (``rungs``: the rung tables
of hello_gpu.ops). Markers inside fenced code blocks are examples, not regions, and are left alone.

A table's record that does not exist is an error (a typo must not pass), except where the marker says
``pending=ladder``: a page written before its operator was measured then shows, instead of figures, a
box naming the record and the command that writes it (:func:`render_missing_record`); the first
``hello-gpu records tables`` after the record lands fills the table in.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from .schema import SCHEMA, RecordError, validate_record
from .staleness import say
from .store import _write_atomically, load_json, relative_name

DEFAULT_COLUMNS = ("variant", "shape", "dtype", "correct", "median_us", "gb_per_s", "tflop_per_s", "ceiling",
                   "speedup")
HEADERS = {"variant": "variant", "role": "role", "shape": "shape", "dtype": "dtype", "correct": "correct",
           "median_us": "median µs (95% CI)", "gb_per_s": "GB/s", "tflop_per_s": "TFLOP/s",
           "ceiling": "% of ceiling", "count": "samples", "cache": "cache", "clock": "clock", "speedup": None,
           "vs_parent": "vs parent (95% CI)", "call_us": "call µs (95% CI)"}
EMPTY = "—"


def format_figure(value: float) -> str:
    """About three significant figures, with thousands separators for the big ones."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _suspect(entry: dict) -> str | None:
    return (entry.get("derived") or {}).get("suspect")


def _incorrect(entry: dict) -> bool:
    return (entry.get("correctness") or {}).get("passed") is False


def _median_cell(entry: dict, timing: dict | None = None) -> str:
    timing = timing or entry["timing"]
    low, high = timing["ci95"]
    return f"{format_figure(timing['median'] * 1e6)} ({format_figure(low * 1e6)}–{format_figure(high * 1e6)})"


def _rate_cell(entry: dict, key: str) -> str:
    value = (entry.get("derived") or {}).get(key)
    if value is None:
        return EMPTY
    # A rate the ceilings say is impossible is a bug in the measurement, so it is not printed as a figure.
    return "SUSPECT" if _suspect(entry) else format_figure(value)


def _ceiling_cell(entry: dict) -> str:
    derived = entry.get("derived") or {}
    parts = []
    if derived.get("bandwidth_fraction") is not None:
        parts.append(f"{derived['bandwidth_fraction'] * 100:.0f}% of copy")
    if derived.get("compute_fraction") is not None:
        parts.append(f"{derived['compute_fraction'] * 100:.0f}% of matmul peak")
    if not parts:
        return EMPTY
    return "SUSPECT" if _suspect(entry) else ", ".join(parts)


def _speedup_cell(entry: dict, baseline: str) -> str:
    speedup = (entry.get("speedups") or {}).get(baseline)
    if speedup is None:
        return EMPTY
    # Neither a wrong result nor an impossible rate is a win, however fast it ran.
    if _incorrect(entry):
        return "INCORRECT"
    if _suspect(entry):
        return "SUSPECT"
    low, high = speedup["ci95"]
    return f"{speedup['value']:.2f}× ({low:.2f}–{high:.2f}) {speedup['verdict']}"


def _parent_cell(entry: dict) -> str:
    """A ladder entry's paired speedup over its parent rung (kept in ``extra``: the parent is no baseline)."""
    speedup = (entry.get("extra") or {}).get("speedup_vs_parent")
    if speedup is None:
        return EMPTY
    if _incorrect(entry) or _suspect(entry):
        return "INCORRECT" if _incorrect(entry) else "SUSPECT"
    low, high = speedup["ci95"]
    return f"{speedup['value']:.2f}× ({low:.2f}–{high:.2f}) vs {speedup['parent']}, {speedup['verdict']}"


def _correct_cell(entry: dict) -> str:
    correctness = entry.get("correctness")
    if correctness is None:
        return EMPTY
    return "pass" if correctness["passed"] else "FAIL"


def _cell(entry: dict, column: str) -> str:
    if column in ("variant", "role", "shape", "dtype"):
        return str(entry[column])
    if column in ("count", "cache", "clock"):
        return str(entry["timing"][column])
    if column == "correct":
        return _correct_cell(entry)
    if column == "median_us":
        return _median_cell(entry)
    if column == "call_us":
        # What a Python caller pays (ladders time it for the baselines and each route's contenders):
        # the device time above hides the host, this one includes its launch path.
        call = (entry.get("extra") or {}).get("call_timing")
        return _median_cell(entry, call) if call else EMPTY
    if column in ("gb_per_s", "tflop_per_s"):
        return _rate_cell(entry, column)
    if column == "ceiling":
        return _ceiling_cell(entry)
    if column == "vs_parent":
        return _parent_cell(entry)
    return _speedup_cell(entry, column.split(":", 1)[1])


def _baselines(entries: list[dict]) -> list[str]:
    """Baseline variants that some entry has a speedup against, in order of first appearance."""
    names: list[str] = []
    for entry in entries:
        names += [name for name in entry.get("speedups") or {} if name not in names]
    return names


def _expand_columns(entries: list[dict], columns) -> list[str]:
    """Check the column names and turn "speedup" into one "speedup:<baseline>" column per baseline that
    the shown entries have a speedup against (a table of one shape shows that shape's baselines only)."""
    expanded = []
    for column in columns:
        if column not in HEADERS:
            raise RecordError(f"unknown table column {column!r}; known: {', '.join(HEADERS)}")
        expanded += [f"speedup:{name}" for name in _baselines(entries)] if column == "speedup" else [column]
    return expanded


def _header(column: str) -> str:
    if column.startswith("speedup:"):
        return f"speedup vs {column.split(':', 1)[1]} (95% CI)"
    return HEADERS[column]


def _escape(text: str) -> str:
    """A cell's text as Markdown: ``|`` would end the cell, and ``](`` would make a link of a name like
    ``kernel[grid](...)`` (a dead link, which fails the site's build)."""
    return text.replace("|", "\\|").replace("](", "\\](")


def _notes(record: dict) -> list[str]:
    """Why each SUSPECT is suspect, and where the numbers come from."""
    notes = [f"SUSPECT: {e['variant']} ({e['shape']}, {e['dtype']}): {_suspect(e)}"
             for e in record["entries"] if _suspect(e)]
    git = record["environment"]["git"]
    dirty = " (uncommitted changes)" if git.get("dirty") else ""
    timing = {(e["timing"]["cache"], e["timing"]["clock"]) for e in record["entries"]}
    how = "; ".join(f"{cache} cache, {clock}" for cache, clock in sorted(timing))
    notes.append(f"Record `{record['name']}` ({record['kind']}), {record['device']['name']} {record['device']['arch']}, "
                 f"commit `{str(git['commit'])[:12]}`{dirty}, {record['created']}"
                 + (f"; {how}" if how else "") + ". Generated by `hello-gpu records tables`; do not edit by hand.")
    return [_escape(note) for note in notes]


def render_table(record: dict, columns=None, *, shapes=None) -> str:
    """A GitHub Markdown table of the record's entries, then notes (suspect reasons, provenance).

    With ``columns=None`` the default columns are used and those empty in every row are dropped; named
    columns are always shown. "speedup" becomes one column per baseline. ``shapes`` keeps only the
    entries of those shapes (as the record writes them: "268435456", "8192x8192").
    """
    problems = validate_record(record)
    if problems:
        raise RecordError("cannot make a table from an invalid record:\n  " + "\n  ".join(problems))
    entries = record["entries"]
    if shapes is not None:
        unknown = sorted(set(shapes) - {entry["shape"] for entry in entries})
        if unknown:
            raise RecordError(f"{record['name']} has no entries of shape {', '.join(unknown)}; its shapes: "
                              f"{', '.join(sorted({entry['shape'] for entry in entries}))}")
        entries = [entry for entry in entries if entry["shape"] in shapes]
    expanded = _expand_columns(entries, columns or DEFAULT_COLUMNS)
    rows = [[_escape(_cell(entry, column)) for column in expanded] for entry in entries]
    if columns is None:
        keep = [i for i in range(len(expanded)) if any(row[i] != EMPTY for row in rows)]
        expanded, rows = [expanded[i] for i in keep], [[row[i] for i in keep] for row in rows]
    if not rows:
        table = ["_This record has no entries._"]
    else:
        numeric = {"median_us", "gb_per_s", "tflop_per_s", "ceiling", "count"}
        table = ["| " + " | ".join(_escape(_header(c)) for c in expanded) + " |",
                 "|" + "|".join("---:" if c in numeric or c.startswith("speedup:") else "---" for c in expanded) + "|"]
        table += ["| " + " | ".join(row) + " |" for row in rows]
    # Each note its own paragraph: consecutive Markdown lines would run together into one.
    return "\n".join(table) + "\n\n" + "\n\n".join(_notes(record))


def default_table_files(repo_root: Path) -> list[Path]:
    """README.md, README.zh-CN.md and docs/**/*.md, those that exist."""
    root = Path(repo_root)
    files = [root / name for name in ("README.md", "README.zh-CN.md") if (root / name).is_file()]
    if (root / "docs").is_dir():
        files += sorted((root / "docs").rglob("*.md"))
    return files


# --------------------------------------------------------------------------------- generated regions

Renderer = Callable[[list[str], Path, str], str]

REGION_BEGIN = re.compile(r"^<!--\s*hello-gpu:(?P<kind>[a-z][a-z0-9_-]*)(?P<arguments>(?:\s+(?!-->)\S+)*)\s*-->\s*$")
REGION_END = re.compile(r"^<!--\s*/hello-gpu:(?P<kind>[a-z][a-z0-9_-]*)\s*-->\s*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
TABLE_OPTIONS = ("columns", "shapes", "pending")
# pending=KIND: what writes the record a table waits for; only ladder records (NAME = OP[.ROUTE].DTYPE) so far.
PENDING_KINDS = ("ladder",)


def _table_options(arguments: list[str], where: str) -> dict[str, list[str]]:
    """``["columns=a,b", "shapes=4096"]`` -> ``{"columns": ["a", "b"], "shapes": ["4096"]}``."""
    options = {}
    for token in arguments:
        key, _, value = token.partition("=")
        if key not in TABLE_OPTIONS or not value:
            raise RecordError(f"{where}: unknown table option {key!r}; known: {', '.join(TABLE_OPTIONS)} "
                              f"(written key=value,value)")
        options[key] = value.split(",")
    return options


def _load_record_for_table(record_file: str, root: Path, where: str) -> dict:
    path = root / record_file
    if not path.is_file():
        raise RecordError(f"{where}: table from {record_file}, which does not exist")
    data, error = load_json(path, root)
    if error:
        raise RecordError(f"{where}: {error}")
    problems = validate_record(data, where=record_file) if isinstance(data, dict) and "schema" in data else \
        [f"{record_file}: has no 'schema' key; tables are made only from {SCHEMA} records"]
    if problems:
        raise RecordError(f"{where}: cannot make a table:\n  " + "\n  ".join(problems))
    return data


def not_measured_box(record_file: str, device_label: str, command: str, stage: str | None = None) -> str:
    """The one box every generated region shows while its record does not exist (ladder tables here, the
    course's model tables too): the record's path and the command that writes it, never a number. A GitHub
    alert, which VitePress renders the same way."""
    lines = ["> [!WARNING]",
             f"> **还没有在 {device_label} 上测量（not yet measured）。** 这里的表来自 `{record_file}`，这份记录还不存在：",
             "> GPU 还没有运行它，所以这里没有数字（数字只从记录生成，从不手写）。在 GPU 上运行", ">",
             f"> `{command}`", ">"]
    then = "提交它写下的文件，再运行 `hello-gpu records tables`：这里就换成实测的表。"
    lines.append(f"> （或 `bash scripts/gpu_session.sh {stage}`），{then}" if stage else f"> {then}")
    return "\n".join(lines)


def render_missing_record(record_file: str, shapes: list[str] | None, where: str) -> str:
    """What a ``pending=ladder`` table shows while its record does not exist: :func:`not_measured_box` with
    the ladder command that writes it (the record's name ``OP[.ROUTE].DTYPE`` is how ``hello-gpu ladder``
    names it)."""
    path = Path(record_file)
    parts = path.stem.split(".")
    if path.suffix != ".json" or len(path.parts) < 3 or path.parts[0] != "records" or len(parts) not in (2, 3):
        raise RecordError(f"{where}: pending=ladder needs a ladder record's path, "
                          f"records/DEVICE/OP[.ROUTE].DTYPE.json; got {record_file}")
    device = path.parts[1]
    op, dtype = parts[0], parts[-1]
    route = f" --route {parts[1]}" if len(parts) == 3 else ""
    shape_words = f" --shapes {' '.join(shapes)}" if shapes else ""
    command = f"hello-gpu ladder {op}{route} --dtype {dtype}{shape_words} --record"
    return (not_measured_box(record_file, device, command) + "\n\n"
            "Generated by `hello-gpu records tables`; do not edit by hand.")


def render_table_region(arguments: list[str], root: Path, where: str) -> str:
    """The ``table`` kind: ``records/<device>/NAME.json [columns=a,b] [shapes=s,t] [pending=ladder]`` ->
    :func:`render_table`, or :func:`render_missing_record` while a pending record does not exist."""
    if not arguments:
        raise RecordError(f"{where}: a table marker names its record: <!-- hello-gpu:table records/DEVICE/NAME.json -->")
    options = _table_options(arguments[1:], where)
    pending = options.get("pending")
    if pending is not None and (len(pending) != 1 or pending[0] not in PENDING_KINDS):
        raise RecordError(f"{where}: pending={','.join(pending)} is not one of {', '.join(PENDING_KINDS)}")
    if pending and not (root / arguments[0]).is_file():
        return render_missing_record(arguments[0], options.get("shapes"), where)
    record = _load_record_for_table(arguments[0], root, where)
    try:
        return render_table(record, options.get("columns"), shapes=options.get("shapes"))
    except RecordError as error:
        raise RecordError(f"{where}: {error}") from None


BUILT_IN_RENDERERS: dict[str, Renderer] = {"table": render_table_region}


def _regions(lines: list[str], name: str, kinds) -> list[tuple[int, int, str, list[str]]]:
    """(begin line, end line, kind, arguments) for each marker pair outside fenced code blocks."""
    regions, fenced, begin = [], False, None
    for index, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        opened, closed = REGION_BEGIN.match(line), REGION_END.match(line)
        where = f"{name}:{index + 1}"
        kind = (opened or closed).group("kind") if opened or closed else None
        if kind is not None and kind not in kinds:
            raise RecordError(f"{where}: unknown marker kind {kind!r}; known: {', '.join(sorted(kinds))}")
        if opened and begin is not None:
            raise RecordError(f"{where}: a marker inside the {begin[1]} region that begins at line {begin[0] + 1}")
        if opened:
            begin = (index, kind, opened.group("arguments").split())
        elif closed and (begin is None or begin[1] != kind):
            raise RecordError(f"{where}: <!-- /hello-gpu:{kind} --> without a beginning marker")
        elif closed:
            regions.append((begin[0], index, kind, begin[2]))
            begin = None
    if begin is not None:
        raise RecordError(f"{name}:{begin[0] + 1}: {begin[1]} marker without <!-- /hello-gpu:{begin[1]} -->")
    return regions


def regenerate(text: str, root: Path, name: str, renderers: dict[str, Renderer] | None = None) -> str:
    """``text`` with every marked region replaced by what its kind's renderer makes of its arguments."""
    renderers = {**BUILT_IN_RENDERERS, **(renderers or {})}
    lines = text.split("\n")
    for begin, end, kind, arguments in reversed(_regions(lines, name, renderers)):
        generated = renderers[kind](arguments, root, f"{name}:{begin + 1}")
        # Blank lines around it, so Markdown sees a table and not a continuation of the comment.
        lines[begin + 1:end] = [""] + generated.split("\n") + [""]
    return "\n".join(lines)


def update_tables(paths: list[Path], repo_root: Path, check: bool = False,
                  renderers: dict[str, Renderer] | None = None) -> list[Path]:
    """Regenerate the marked regions in ``paths``; return the files that changed (with ``check``: that would).

    ``renderers`` maps a marker kind to ``render(arguments, root, where) -> str``, besides the built-in
    ``table``."""
    root = Path(repo_root).resolve()
    changed = []
    for path in paths:
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        updated = regenerate(text, root, relative_name(path.resolve(), root), renderers)
        if updated != text:
            changed.append(path)
            if not check:
                _write_atomically(path, updated)
    return changed


def render_tables(changed: list[Path], file_count: int, check: bool, console) -> None:
    if check and changed:
        for path in changed:
            say(console, f"out of date: {path}", "bold red")
        say(console, "records tables: FAIL: run `hello-gpu records tables` to regenerate them", "bold red")
    elif check:
        say(console, f"records tables: OK: every table in {file_count} file(s) is up to date", "green")
    else:
        for path in changed:
            say(console, f"updated: {path}")
        say(console, f"records tables: {len(changed)} of {file_count} file(s) changed")
