"""The attention ladder's figures, drawn from its records (issue 22, "Records, tables and plots"); not a rung.

- **prefill** (S_q = S_kv = S): TFLOP/s against S, one line per rung and baseline; one figure for full
  attention, one for causal, per dtype (``attention.prefill.<dtype>``, ``attention.prefill-causal.<dtype>``);
- **decode** (at most DECODE_MAX_QUERIES query rows against a longer KV cache): GB/s against S_kv, one line per
  rung and baseline, a figure per batch size (the issue's targets are per batch: B = 1 and 16), with the
  measured copy bandwidth as the ceiling (``attention.decode-B<batch>.<dtype>``).

The points are the entries of every record in one device's folder whose name starts with ``attention.`` or
``attention-`` (the ladder's ``attention.<dtype>.json``, a sweep's), valid under the record schema. An entry
whose correctness failed is left out (a fast wrong answer is no data point), as are shapes that are neither
prefill nor decode (S_q != S_kv with many queries); the notes say so. Where two records hold the same line at
the same x, the newer record's point is drawn. A line's label carries only the dimensions that differ between
the figure's lines (B, the heads, D, S_q), so a figure of one configuration reads "t05_gqa_shared_kv_tiles".
The copy ceiling is the record's own (``ceilings.copy_bytes_per_s``, bytes read + written a second), else the
device's ``ceilings.json`` beside the records; decode's GB/s count the same bytes (the KV cache read, q read,
the output written: spec.work).

With no attention record in the folder nothing is drawn: :class:`MissingRecords` says where it looked and
what makes the records (``hello-gpu ladder attention --record`` on the GPU).

    python -m hello_gpu.ops.attention.plots records/nvidia-h200 [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hello_gpu.bench.records import validate_record
from hello_gpu.ops.attention.spec import Dims, dims
from hello_gpu.ops.shapes import parse_shape

DECODE_MAX_QUERIES = 16        # "a few query tokens": the decode figure's S_q at most (flash-decoding's cases)
PREFIXES = ("attention.", "attention-")


class MissingRecords(FileNotFoundError):
    """No attention record where the figures were asked for: the message says where and how to make them."""


@dataclass
class Point:
    """One entry of a record, placed: which figure, which line, which x."""

    figure: str              # "prefill", "prefill-causal" or "decode-B<batch>"
    dtype: str
    variant: str
    role: str
    dims: Dims
    entry: dict
    created: str             # the record's creation time: the newer record wins a tie


@dataclass
class Plots:
    """What :func:`write_plots` drew: the files (PNG and SVG of each figure) and why anything was left out."""

    paths: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def attention_records(directory: Path) -> list[tuple[Path, dict]]:
    """(path, record) of every attention record in ``directory``; a file that is not a valid record is an
    error naming it and its first problem (a record must never be half read)."""
    found = []
    for path in sorted(Path(directory).glob("*.json")):
        if not path.stem.startswith(PREFIXES):
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        problems = validate_record(record, path.name)
        if problems:
            raise ValueError(f"{path}: not a valid record: {problems[0]}")
        found.append((path, record))
    return found


def classify(shape_text: str) -> tuple[str, Dims] | None:
    """("prefill" | "prefill-causal" | "decode-B<batch>", its dimensions) of an entry's shape, or None for the
    shapes of neither kind of figure."""
    shape = parse_shape(shape_text)
    d = dims(tuple(shape) if isinstance(shape, tuple) else (shape,))
    if d.q_len == d.kv_len:
        return ("prefill-causal" if d.causal else "prefill"), d
    if d.q_len <= DECODE_MAX_QUERIES and d.q_len < d.kv_len:
        return f"decode-B{d.batch}", d
    return None


def points_of(records: list[tuple[Path, dict]], notes: list[str]) -> list[Point]:
    """Every drawable entry of ``records``; what is left out goes to ``notes``."""
    points = []
    for path, record in records:
        for entry in record["entries"]:
            where = f"{path.name}: {entry['variant']} at {entry['shape']} {entry['dtype']}"
            if (entry.get("correctness") or {}).get("passed") is False:
                notes.append(f"{where}: left out, its correctness check failed")
                continue
            placed = classify(entry["shape"])
            if placed is None:
                notes.append(f"{where}: left out, neither prefill (S_q = S_kv) nor decode "
                             f"(S_q <= {DECODE_MAX_QUERIES} < S_kv)")
                continue
            figure, d = placed
            points.append(Point(figure, entry["dtype"], entry["variant"], entry["role"], d, entry, record["created"]))
    return points


def _label(point: Point, varying: set[str]) -> str:
    """The variant, then the dimensions that differ between the figure's lines."""
    d = point.dims
    parts = [point.variant]
    if "batch" in varying:
        parts.append(f"B={d.batch}")
    if "heads" in varying:
        parts.append(f"H={d.heads}/{d.kv_heads}")
    if "head_dim" in varying:
        parts.append(f"D={d.head_dim}")
    if "q_len" in varying:
        parts.append(f"S_q={d.q_len}")
    return " ".join(parts)


def series(points: list[Point]) -> list[dict]:
    """size_sweep's points for one figure: each entry with its line's label and its x (S, or S_kv for decode),
    one point per (line, x), the newest record's."""
    varying = {name for name, values in (("batch", {p.dims.batch for p in points}),
                                         ("heads", {(p.dims.heads, p.dims.kv_heads) for p in points}),
                                         ("head_dim", {p.dims.head_dim for p in points}),
                                         ("q_len", {p.dims.q_len for p in points if kind_of(p.figure) == "decode"}))
               if len(values) > 1}
    chosen: dict[tuple[str, int], Point] = {}
    for point in sorted(points, key=lambda p: p.created):
        chosen[(_label(point, varying), point.dims.kv_len)] = point
    return [{**point.entry, "variant": label, "size": size} for (label, size), point in sorted(chosen.items())]


TITLES = {"prefill": "attention prefill, TFLOP/s against S", "prefill-causal": "causal attention prefill, "
          "TFLOP/s against S", "decode": "attention decode, GB/s against S_kv"}
X_LABELS = {"prefill": "S = S_q = S_kv", "prefill-causal": "S = S_q = S_kv",
            "decode": "S_kv, keys in the cache (a few query rows)"}


def kind_of(figure: str) -> str:
    """"decode-B16" -> "decode"; the prefill figures are their own kind."""
    return "decode" if figure.startswith("decode") else figure


def copy_gb_per_s(records: list[tuple[Path, dict]], directory: Path) -> tuple[float | None, str]:
    """The measured copy bandwidth in GB/s and where it came from: the newest record's, else ceilings.json."""
    for path, record in sorted(records, key=lambda item: item[1]["created"], reverse=True):
        copy = (record.get("ceilings") or {}).get("copy_bytes_per_s")
        if copy:
            return copy / 1e9, f"measured copy bandwidth ({path.name})"
    ceilings = Path(directory) / "ceilings.json"
    if ceilings.is_file():
        copy = (json.loads(ceilings.read_text(encoding="utf-8")).get("ceilings") or {}).get("copy_bytes_per_s")
        if copy:
            return copy / 1e9, f"measured copy bandwidth ({ceilings.name})"
    return None, ""


def write_plots(directory: Path, out: Path | None = None) -> Plots:
    """Draw every figure the attention records of ``directory`` (one device's records folder) allow, into
    ``out`` (default: the same folder) as PNG and SVG. Raises :class:`MissingRecords` when there are none."""
    from hello_gpu.bench.plots import save, size_sweep
    directory = Path(directory)
    records = attention_records(directory) if directory.is_dir() else []
    if not records:
        raise MissingRecords(f"no attention records in {directory} (files attention.*.json or attention-*.json): "
                             f"nothing to draw. They are made on the GPU: hello-gpu ladder attention --dtype bfloat16 "
                             f"--record (and a sweep over S and S_kv for more than one point a line)")
    result = Plots()
    points = points_of(records, result.notes)
    ceiling, ceiling_label = copy_gb_per_s(records, directory)
    if ceiling is None:
        result.notes.append(f"no measured copy bandwidth in the records or {directory / 'ceilings.json'}: "
                            f"the decode figures have no ceiling line (hello-gpu ceilings measures it)")
    groups: dict[tuple[str, str], list[Point]] = {}
    for point in points:
        groups.setdefault((point.figure, point.dtype), []).append(point)
    for kind in TITLES:
        if not any(kind_of(name) == kind for name, _ in groups):
            result.notes.append(f"no {kind} entries in the records: no {kind} figure")
    for (name, dtype), group in sorted(groups.items()):
        kind = kind_of(name)
        decode = kind == "decode"
        title = f"{TITLES[kind]}, {dtype}" + (f", B={group[0].dims.batch}" if decode else "")
        figure = size_sweep(series(group), metric="gb_per_s" if decode else "tflop_per_s",
                            ceiling=ceiling if decode else None, ceiling_label=ceiling_label, title=title,
                            x_label=X_LABELS[kind])
        result.paths += save(figure, (out or directory) / f"attention.{name}.{dtype}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hello_gpu.ops.attention.plots", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", type=Path, help="one device's records folder, e.g. records/nvidia-h200")
    parser.add_argument("--out", type=Path, help="where the PNG and SVG files go (default: the records folder)")
    arguments = parser.parse_args(argv)
    try:
        result = write_plots(arguments.records, arguments.out)
    except MissingRecords as missing:
        print(f"attention plots: {missing}", file=sys.stderr)
        return 1
    for note in result.notes:
        print(f"note: {note}")
    for path in result.paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
