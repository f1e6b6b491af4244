"""Hardware counters on AMD: ``rocprofv3`` on a child process, its CSV files parsed into the same shape.

One run traces kernels (``--kernel-trace``) and the marker ranges (``--marker-trace``); one run per
counter group collects PMC counters (``--pmc``: a group must fit in one hardware pass, or rocprofv3
refuses the whole job). All write CSV (``--output-format csv``) under a temporary folder:

- ``*_kernel_trace.csv``: one row per dispatch. ``Kernel_Name``, ``Start_Timestamp``/``End_Timestamp``
  (ns), ``Workgroup_Size_X/Y/Z`` and ``Grid_Size_X/Y/Z`` in *work-items* (a grid of 1024 x 1024 with
  workgroups of 64 is 16384 workgroups), ``LDS_Block_Size`` and ``Scratch_Size`` in bytes (older
  releases: ``Group_Segment_Size``, ``Private_Segment_Size``), ``VGPR_Count``, ``SGPR_Count``.
- ``*_counter_collection.csv``: one row per dispatch *and counter*: ``Dispatch_Id``, ``Kernel_Name``,
  ``Grid_Size`` and ``Workgroup_Size`` (totals), ``Counter_Name``, ``Counter_Value``, timestamps.
- ``*_marker_api_trace.csv``: ``Function`` is the message of a roctx range (``Domain`` is
  ``MARKER_CORE_API`` up to ROCm 6.4, ``MARKER_CORE_RANGE_API`` from ROCm 7; it is not read); its
  timestamps bound the profiled calls (``torch.cuda.nvtx`` is roctx on ROCm), so the inputs' kernels
  are left out.

The headers are those of ``source/lib/output/generateCSV.cpp`` in ROCm/rocprofiler-sdk and
ROCm/rocm-systems (projects/rocprofiler-sdk). ``rocprofv3 -d DIR -o NAME`` writes ``DIR/NAME_*.csv``
(without ``-o``: ``DIR/<hostname>/<pid>_*.csv``); the files are searched for under a run's folder.

ROCm 7 writes a ``rocpd`` SQLite database by default (``DIR/NAME_results.db``; ``--output-format rocpd``).
:func:`read_rocpd` reads it through the database's own data views (schema 3.0.x, rocprofiler-sdk-rocpd/
data_views.sql): ``kernels`` (``grid_x`` in work-items, ``lds_size``, ``vgpr_count``), ``pmc_events``
(``dispatch_id``, ``counter_name``, ``counter_value``) and ``regions``, where a roctx range is a region of
category ``MARKER_CORE_RANGE_API`` whose message is the JSON ``extdata``'s ``message``. The views of the
``tracks``-based schema (``kernel_pmc_events`` with ``pmc_name``/``pmc_value``, ``markers``,
``arch_vgpr_count``, ``lds_block_size``) are read too. Either way the rows become the same dicts as the
CSV parsers', so a folder of either kind folds into the same table. ``rocpd convert`` CSVs (a ``Guid``
column first, ``Lds_Block_Size``/``Vgpr_Count`` spellings) parse like the others.

Counters asked for: ``FETCH_SIZE``/``WRITE_SIZE`` (kilobytes, 1024 bytes, to and from device memory),
``TCC_HIT_sum``/``TCC_MISS_sum`` (L2 hits and misses), ``OccupancyPercent``. Names differ between
GPU generations; a group a GPU lacks costs that group, with a note. The formats are documented in
ROCm/rocprofiler-sdk (source/docs/how-to/using-rocprofv3.rst, source/docs/data/*.csv); see
tests/fixtures/profile/README.md.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from ._target import NVTX_RANGE, child_environment, target_arguments
from .counters import SUMMED, WEIGHTED, CounterResult, KernelCounters, aggregate_launches, unavailable
from .ncu import parse_value

PMC_GROUPS = (("FETCH_SIZE", "WRITE_SIZE"), ("TCC_HIT_sum", "TCC_MISS_sum"), ("OccupancyPercent",))
READ_COUNTERS = ("FETCH_SIZE", "WRITE_SIZE", "TCC_HIT_sum", "TCC_MISS_sum", "OccupancyPercent")
KILOBYTE = 1024          # FETCH_SIZE and WRITE_SIZE are sums of 32/64-byte requests divided by 1024
DEFAULT_TIMEOUT_S = 600


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def _number(row: dict, *columns: str) -> float | None:
    """The first of ``columns`` the row has, as a number (None when absent or not a number)."""
    for column in columns:
        if column in row:
            return parse_value(row[column])
    return None


def _blocks(grid: float | None, workgroup: float | None) -> int | None:
    """Work-items and workgroup size -> workgroups, the number CUDA calls the grid."""
    if grid is None or not workgroup:
        return None
    return math.ceil(grid / workgroup)


def parse_kernel_trace(text: str) -> list[dict]:
    """One dict per dispatch of a ``kernel_trace.csv``: name, start/end (ns), grid (in workgroups) and
    block as (x, y, z), LDS and scratch bytes, VGPR/SGPR counts, dispatch id."""
    dispatches = []
    for row in _rows(text):
        block = tuple(int(_number(row, f"Workgroup_Size_{axis}") or 1) for axis in "XYZ")
        items = [_number(row, f"Grid_Size_{axis}") for axis in "XYZ"]
        grid = tuple(_blocks(n, b) or 1 for n, b in zip(items, block))
        dispatches.append({
            "name": row.get("Kernel_Name", ""), "dispatch_id": _number(row, "Dispatch_Id"),
            "start_ns": _number(row, "Start_Timestamp"), "end_ns": _number(row, "End_Timestamp"),
            "grid": grid, "block": block,
            "lds_bytes": _number(row, "LDS_Block_Size", "Lds_Block_Size", "Group_Segment_Size"),
            "scratch_bytes": _number(row, "Scratch_Size", "Private_Segment_Size"),
            "vgpr": _number(row, "VGPR_Count", "Vgpr_Count"), "accum_vgpr": _number(row, "Accum_VGPR_Count", "Accum_Vgpr_Count"),
            "sgpr": _number(row, "SGPR_Count", "Sgpr_Count")})
    return dispatches


def parse_counter_collection(text: str) -> list[dict]:
    """One dict per dispatch of a ``counter_collection.csv`` (its rows are per dispatch *and* counter):
    name, dispatch id, start/end (ns), grid in workgroups, and ``counters`` {name: value}."""
    dispatches: dict = {}
    for row in _rows(text):
        key = (row.get("Dispatch_Id"), row.get("Correlation_Id"), row.get("Kernel_Name"))
        if key not in dispatches:
            workgroup = _number(row, "Workgroup_Size")
            dispatches[key] = {"name": row.get("Kernel_Name", ""), "dispatch_id": _number(row, "Dispatch_Id"),
                               "start_ns": _number(row, "Start_Timestamp"), "end_ns": _number(row, "End_Timestamp"),
                               "grid": _blocks(_number(row, "Grid_Size"), workgroup), "block": workgroup,
                               "counters": {}}
        value = parse_value(row.get("Counter_Value"))
        if row.get("Counter_Name") and value is not None:
            counters = dispatches[key]["counters"]
            counters[row["Counter_Name"]] = counters.get(row["Counter_Name"], 0.0) + value
    return list(dispatches.values())


def marker_window(text: str, name: str = NVTX_RANGE) -> tuple[float, float] | None:
    """(start, end) in ns of the roctx range ``name`` in a ``marker_api_trace.csv``, or None."""
    for row in _rows(text):
        if row.get("Function") == name:
            start, end = _number(row, "Start_Timestamp"), _number(row, "End_Timestamp")
            if start is not None and end is not None:
                return start, end
    return None


def _query(database: sqlite3.Connection, sql: str, *parameters) -> list[sqlite3.Row] | None:
    """Rows of ``sql``, or None when the database lacks the view or a column it reads (another rocpd version)."""
    try:
        return database.execute(sql, parameters).fetchall()
    except sqlite3.OperationalError:
        return None


def _column(row: sqlite3.Row, *columns: str):
    """The first of ``columns`` the row has (view columns were renamed between rocpd schemas), else None."""
    keys = row.keys()
    return next((row[column] for column in columns if column in keys), None)


def _marker_message(extdata) -> str | None:
    """The roctx message of a marker region's ``extdata`` (JSON ``{"message": ...}``), or None."""
    try:
        message = json.loads(extdata).get("message") if extdata else None
    except (ValueError, AttributeError):
        return None
    return message if isinstance(message, str) else None


def _marker_ranges(database: sqlite3.Connection, name: str) -> list[tuple]:
    """(start, end) of each roctx range ``name``: schema 3.0.x keeps them in ``regions`` (category
    ``MARKER_CORE_RANGE_API``, name ``roctxThreadRangeA``, the message in ``extdata``); the ``tracks``-based
    schema has a ``markers`` view whose ``name`` is the message."""
    regions = _query(database, "SELECT name, start, end, extdata FROM regions "
                               "WHERE category LIKE '%MARKER%' AND end > start")
    if regions is not None:
        return [(r["start"], r["end"]) for r in regions if (_marker_message(r["extdata"]) or r["name"]) == name]
    markers = _query(database, "SELECT start, end FROM markers WHERE name = ? AND end > start", name) or []
    return [(r["start"], r["end"]) for r in markers]


def read_rocpd(path: Path, name: str = NVTX_RANGE) -> dict:
    """One rocpd database -> ``{"trace": [...], "counted": [...], "window": (start, end) | None}``: the
    dispatches as :func:`parse_kernel_trace` and :func:`parse_counter_collection` give them (``counted``
    holds only dispatches that have counters) and the roctx range ``name``. Raises ``ValueError`` naming
    the file when it is not a rocpd database."""
    try:
        database = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise ValueError(f"{path}: cannot open as a rocpd database ({error})") from None
    database.row_factory = sqlite3.Row
    try:
        kernels = _query(database, "SELECT * FROM kernels ORDER BY start")
        if kernels is None:
            raise ValueError(f"{path}: not a rocpd database (it has no 'kernels' view)")
        events = (_query(database, "SELECT dispatch_id, counter_name, counter_value FROM pmc_events")
                  or _query(database, "SELECT dispatch_id, pmc_name AS counter_name, pmc_value AS counter_value "
                                      "FROM kernel_pmc_events") or [])
        markers = _marker_ranges(database, name)
    except sqlite3.DatabaseError as error:
        raise ValueError(f"{path}: not a rocpd database ({error})") from None
    finally:
        database.close()
    counters: dict = {}
    for event in events:
        values = counters.setdefault(event["dispatch_id"], {})
        if event["counter_value"] is not None:
            values[event["counter_name"]] = values.get(event["counter_name"], 0.0) + float(event["counter_value"])
    trace, counted = [], []
    for row in kernels:
        # grid_x..z are work-items, as in the CSV (the tracks-based schema's grid_size_x..z are workgroups)
        block = tuple(int(row[f"workgroup_{axis}"] or 1) for axis in "xyz")
        grid = tuple(_blocks(row[f"grid_{axis}"], b) or 1 for axis, b in zip("xyz", block))
        dispatch = {"name": row["name"] or "", "dispatch_id": row["dispatch_id"], "start_ns": row["start"],
                    "end_ns": row["end"], "grid": grid, "block": block,
                    "lds_bytes": _column(row, "lds_size", "lds_block_size"),
                    "scratch_bytes": _column(row, "scratch_size"),
                    "vgpr": _column(row, "vgpr_count", "arch_vgpr_count"),
                    "accum_vgpr": _column(row, "accum_vgpr_count"), "sgpr": _column(row, "sgpr_count")}
        trace.append(dispatch)
        if row["dispatch_id"] in counters:
            counted.append({**dispatch, "grid": math.prod(grid), "block": math.prod(block),
                            "counters": counters[row["dispatch_id"]]})
    window = markers[0] if len(markers) == 1 else None
    return {"trace": trace if not counters else [], "counted": counted, "window": window}


def within(dispatches: list[dict], window: tuple[float, float] | None) -> list[dict]:
    """The dispatches that ran inside ``window``; all of them when there is no window."""
    if window is None:
        return dispatches
    start, end = window
    return [d for d in dispatches if d["start_ns"] is not None and d["end_ns"] is not None
            and start <= d["start_ns"] and d["end_ns"] <= end]


def _counted_launch(dispatch: dict) -> dict:
    """Canonical fields (see :mod:`.counters`) from one PMC dispatch's counters."""
    counters = dispatch["counters"]
    launch = {"name": dispatch["name"]}
    if "FETCH_SIZE" in counters:
        launch["dram_read_bytes"] = counters["FETCH_SIZE"] * KILOBYTE
    if "WRITE_SIZE" in counters:
        launch["dram_write_bytes"] = counters["WRITE_SIZE"] * KILOBYTE
    hits, misses = counters.get("TCC_HIT_sum"), counters.get("TCC_MISS_sum")
    if hits is not None and misses is not None and hits + misses > 0:
        launch["l2_hit_rate_pct"] = 100.0 * hits / (hits + misses)
    if "OccupancyPercent" in counters:
        launch["achieved_occupancy_pct"] = counters["OccupancyPercent"]
    launch.update({name: value for name, value in counters.items() if name not in READ_COUNTERS})
    return launch


def kernel_counters(trace: list[dict], counted_runs: list[list[dict]]) -> list[KernelCounters]:
    """Per-kernel counters: launches and durations from the kernel trace (the counter runs time kernels
    under instrumentation), counters from each PMC run's dispatches of the same kernel name. Each run
    is folded on its own: a run holds one counter group, and folding them together would count the
    other groups' dispatches as launches without a value."""
    timed = aggregate_launches([{"name": d["name"], "duration_seconds": (d["end_ns"] - d["start_ns"]) * 1e-9
                                 if d["start_ns"] is not None and d["end_ns"] is not None else None} for d in trace])
    by_name = {kernel.name: kernel for kernel in timed}
    for run in counted_runs:
        for other in aggregate_launches([_counted_launch(d) for d in run]):
            kernel = by_name.setdefault(other.name, other)
            if kernel is other:
                continue
            for name in SUMMED + WEIGHTED:
                if getattr(kernel, name) is None:
                    setattr(kernel, name, getattr(other, name))
            kernel.extra.update(other.extra)
    return list(by_name.values())


def counters_from_files(folder: Path, *, calls: int) -> CounterResult:
    """Parse every rocprofv3 output under ``folder``: each run's folder (kernel trace, or a counter group)
    with that run's own marker trace, whose range bounds the profiled calls of that run. A run folder
    holds CSV files or a rocpd database (``*.db``); where it has both, the CSV files are read."""
    def read(directory: Path, pattern: str) -> list[str]:
        return [path.read_text(encoding="utf-8", errors="replace") for path in sorted(directory.glob(pattern))]

    runs = sorted({path.parent for pattern in ("*kernel_trace.csv", "*counter_collection.csv", "*.db")
                   for path in Path(folder).rglob(pattern)})
    trace, counted_runs, unbounded, unreadable = [], [], [], []
    for run in runs:
        if any(run.glob("*kernel_trace.csv")) or any(run.glob("*counter_collection.csv")):
            windows = [w for text in read(run, "*marker_api_trace.csv") if (w := marker_window(text)) is not None]
            run_trace = [d for text in read(run, "*kernel_trace.csv") for d in parse_kernel_trace(text)]
            run_counted = [d for text in read(run, "*counter_collection.csv") for d in parse_counter_collection(text)]
        else:
            databases = []
            for path in sorted(run.glob("*.db")):
                try:
                    databases.append(read_rocpd(path))
                except ValueError as error:
                    unreadable.append(str(error))
            if not databases:
                continue
            windows = [d["window"] for d in databases if d["window"] is not None]
            run_trace = [dispatch for d in databases for dispatch in d["trace"]]
            run_counted = [dispatch for d in databases for dispatch in d["counted"]]
        window = windows[0] if len(windows) == 1 else None
        if window is None:
            unbounded.append(run.name)
        trace += within(run_trace, window)
        counted_runs.append(within(run_counted, window))
    kernels = kernel_counters(trace, counted_runs)
    if not kernels:
        return unavailable("; ".join(["rocprofv3 wrote no kernel trace or counters", *unreadable]),
                           tool="rocprofv3", calls=calls)
    notes = [f"no roctx range {NVTX_RANGE!r} in {', '.join(unbounded)}: every kernel of that run is counted"
             if unbounded else None, *unreadable]
    return CounterResult("rocprofv3", kernels, calls, "; ".join(filter(None, notes)) or None)


def collect(op: str, rung: str, shape, dtype: str, *, calls: int = 3, warmup: int = 3, root=None,
            timeout: float = DEFAULT_TIMEOUT_S) -> CounterResult:
    """Kernel trace and PMC counter groups of one rung under rocprofv3, each in a child process."""
    rocprofv3 = shutil.which("rocprofv3") or ("/opt/rocm/bin/rocprofv3" if Path("/opt/rocm/bin/rocprofv3").is_file() else None)
    if rocprofv3 is None:
        return unavailable("rocprofv3 not found (not on PATH nor in /opt/rocm/bin)", tool="rocprofv3", calls=calls)
    target = [sys.executable, *target_arguments(op, rung, shape, dtype, calls=calls, warmup=warmup, root=root)]
    failures = []
    with tempfile.TemporaryDirectory(prefix="hello-gpu-rocprof-") as folder:
        jobs = [("trace", ["--kernel-trace"])] + [(f"pmc{i}", ["--pmc", *group]) for i, group in enumerate(PMC_GROUPS)]
        for name, options in jobs:
            command = [rocprofv3, *options, "--marker-trace", "--output-format", "csv", "-d", str(Path(folder) / name),
                       "-o", name, "--", *target]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=child_environment())
                if done.returncode != 0:
                    failures.append(f"{name}: status {done.returncode}")
            except (OSError, subprocess.TimeoutExpired) as error:
                failures.append(f"{name}: {type(error).__name__}")
        result = counters_from_files(Path(folder), calls=calls)
    if failures:
        result.note = "; ".join(filter(None, [result.note, "rocprofv3 failed for " + ", ".join(failures)]))
    return result
