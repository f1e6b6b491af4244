"""Hardware counters on NVIDIA: Nsight Compute (``ncu``) on a child process, its CSV parsed per kernel.

The command (see :func:`ncu_command`)::

    ncu --clock-control none --nvtx --nvtx-include hello_gpu_profile/ --metrics <list> \\
        --csv --page raw --print-units base  python -m hello_gpu.profile._target OP RUNG --shape ...

- ``--clock-control none``: ncu otherwise locks the clocks to base, and the H200 of this project then
  runs well below the boost clock every other measurement here ran at.
- ``--nvtx-include hello_gpu_profile/``: only the kernels the marked calls launch (the trailing "/"
  selects a push/pop range), so the inputs' random-number kernels are not profiled, and a library
  kernel a rung falls back to is.
- ``--page raw --csv``: one header row of column names, one row of units, then one row per kernel
  launch; values carry thousands separators ("134,217,728") and ``n/a`` where a metric does not apply.
  ``--print-units base`` keeps bytes in bytes (the default scales to Mbyte, Gbyte per row). Besides
  the metrics asked for, the raw page prints ~300 columns of its own (seen with the ncu of CUDA 13 on
  the H200): device attributes (``device__attribute_*``), launch statistics (``launch__*``), replay
  bookkeeping (``profiler__*``, ``nvlink__*``, ...) and the ``.avg``/``.min``/``.max`` siblings of
  each ``.sum`` asked for. Only the metrics asked for are read.

Each metric is turned into a canonical field of :class:`~hello_gpu.profile.counters.KernelCounters`.
A metric this ncu does not know is dropped (or renamed: Blackwell's DRAM byte counters) and the run
repeated without it; what cannot be read becomes a one-line note (no permission: ERR_NVGPUCTRPERM; no ncu; a failed run), never an exception.
"""

from __future__ import annotations

import csv
import glob
import math
import os
import re
import shutil
import subprocess
import sys

from ._target import NVTX_RANGE, child_environment, target_arguments
from .counters import STALL_PREFIX, CounterResult, aggregate_launches, unavailable

# metric -> canonical field. Names as Nsight Compute 2023-2025 spells them (the SpeedOfLight,
# Occupancy, MemoryWorkloadAnalysis and WarpStateStats sections use these); the ncu of CUDA 13 on the
# H200 gave a value for every one of them.
CORE_METRICS = {
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "gpu__time_duration.sum": "duration_seconds",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_throughput_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "global_load_sectors",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "global_load_requests",
}
# Warp stall reasons: average cycles a warp spends stalled for that reason per issued instruction
# (what the WarpStateStats section plots). "selected" is issuing, not a stall, so it is not asked for.
STALL_REASONS = ("long_scoreboard", "short_scoreboard", "mio_throttle", "lg_throttle", "wait", "barrier", "membar",
                 "math_pipe_throttle", "tex_throttle", "not_selected", "no_instruction", "branch_resolving",
                 "dispatch_stall", "drain", "imc_miss", "sleeping", "misc")
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
STALL_METRICS = {STALL_METRIC.format(reason): STALL_PREFIX + reason for reason in STALL_REASONS}
# Blackwell's ncu names DRAM bytes dram__bytes_op_read/write; Ampere and Hopper dram__bytes_read/write.
# A rejected name is replaced by its alternative and the run repeated.
ALTERNATIVES = {"dram__bytes_read.sum": "dram__bytes_op_read.sum", "dram__bytes_write.sum": "dram__bytes_op_write.sum"}
METRICS = {**CORE_METRICS, **STALL_METRICS, **{new: CORE_METRICS[old] for old, new in ALTERNATIVES.items()}}

# Columns of --page raw before the metrics (ncu 2023-2025, and CUDA 13's): "(256, 1, 1)" for grid and block.
NAME_COLUMN, GRID_COLUMN, BLOCK_COLUMN = "Kernel Name", "Grid Size", "Block Size"
MISSING_VALUES = {"", "n/a", "N/A", "nan", "NaN", "-"}
UNIT_PREFIXES = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}     # ncu scales by 1000, not 1024
COUNT_UNITS = {"byte", "sector", "request", "inst", "warp", "cycle", "thread"}
TIME_UNITS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3,
              "s": 1.0}
DEFAULT_TIMEOUT_S = 600
PERMISSION_CODE = "ERR_NVGPUCTRPERM"


# ---------------------------------------------------------------------------------------- parsing


def parse_value(text: str | None) -> float | None:
    """``"134,217,728"`` -> 134217728.0; ``"n/a"``, empty and non-finite -> None."""
    if text is None:
        return None
    text = text.strip()
    if text in MISSING_VALUES:
        return None
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def to_base_unit(value: float | None, unit: str) -> float | None:
    """A value in ncu's unit -> bytes, counts or seconds (``"Mbyte"`` x1e6, ``"usecond"`` x1e-6);
    percentages and ratios are left as they are."""
    if value is None:
        return None
    unit = unit.strip()
    if unit in TIME_UNITS:
        return value * TIME_UNITS[unit]
    if len(unit) > 1 and unit[0] in UNIT_PREFIXES and unit[1:] in COUNT_UNITS:
        return value * UNIT_PREFIXES[unit[0]]
    return value


def _csv_rows(text: str) -> list[list[str]]:
    """The CSV part of ncu's output: from the header row on, without ==PROF==/==WARNING== lines."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') and NAME_COLUMN in line), None)
    if start is None:
        return []
    return list(csv.reader(line for line in lines[start:] if line.strip() and not line.startswith("==")))


def parse_ncu_csv(text: str, metrics=()) -> list[dict]:
    """One dict per kernel launch from ``ncu --csv --page raw`` output: ``name``, ``grid``, ``block`` and
    the canonical fields of the metrics present (bytes in bytes, time in seconds, None where n/a).

    The columns read are those of :data:`METRICS` and of ``metrics`` (what the command asked for); one
    of ``metrics`` outside :data:`METRICS` is kept under its own name. Every other column ncu prints
    (device attributes, launch statistics, rollup siblings) is left out: it is not a counter of the
    kernel, and the 276 of them per kernel made up 55 of the 78 KB of the first H200 profile record.
    Returns [] when there is no CSV.
    """
    rows = _csv_rows(text)
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    units = [""] * len(header)
    if body and body[0] and body[0][0] == "":        # the units row: no launch ID
        units, body = body[0] + [""] * (len(header) - len(body[0])), body[1:]
    index = {name: i for i, name in enumerate(header)}
    wanted = set(METRICS) | set(metrics)
    metric_columns = [i for i, name in enumerate(header) if name in wanted]
    launches = []
    for row in body:
        if len(row) != len(header) or not row[0].strip():
            continue
        launch = {"name": row[index[NAME_COLUMN]], "grid": row[index[GRID_COLUMN]] if GRID_COLUMN in index else None,
                  "block": row[index[BLOCK_COLUMN]] if BLOCK_COLUMN in index else None}
        for i in metric_columns:
            launch[METRICS.get(header[i], header[i])] = to_base_unit(parse_value(row[i]), units[i])
        launches.append(launch)
    return launches


def missing_metrics(launches: list[dict], requested) -> list[str]:
    """Requested metrics that no launch has a value for (absent columns, or n/a everywhere)."""
    return [metric for metric in requested
            if not any(launch.get(METRICS.get(metric, metric)) is not None for launch in launches)]


# ---------------------------------------------------------------------------------------- failures


def _error_lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.startswith("==ERROR==")]


def rejected_metrics(output: str, requested) -> list[str]:
    """Requested metrics an ``==ERROR==`` line names: this ncu (or this GPU) does not know them.

    ncu names them as given or as a regex of the base name (``Failed to find metric
    regex:^flop_count_sp\\.(sum|min|max|avg|pct|ratio|max_rate)$``), so the base name is looked for.
    """
    errors = "\n".join(_error_lines(output)).replace("\\", "")
    return [metric for metric in requested
            if re.search(rf"(?<![A-Za-z0-9_]){re.escape(metric.split('.')[0])}(?![A-Za-z0-9_])", errors)]


def explain_failure(output: str, returncode: int | None) -> str:
    """One line on why ncu gave no counters, from its own output."""
    if PERMISSION_CODE in output:
        return (f"ncu may not read the GPU performance counters here ({PERMISSION_CODE}): run as root, or have an "
                f"administrator load the driver with NVreg_RestrictProfilingToAdminUsers=0 "
                f"(https://developer.nvidia.com/{PERMISSION_CODE})")
    errors = _error_lines(output)
    if errors:
        return f"ncu failed: {errors[-1].removeprefix('==ERROR==').strip()}"
    if "No kernels were profiled" in output:
        return (f"ncu profiled no kernels: nothing ran inside the NVTX range {NVTX_RANGE!r} (the rung launched no "
                f"kernel, or NVTX is off in this build)")
    if returncode:
        last = next((line for line in reversed(output.splitlines()) if line.strip()), "no output")
        return f"ncu exited with status {returncode}: {last.strip()[:200]}"
    return "ncu printed no CSV (nothing to parse)"


# ---------------------------------------------------------------------------------------- running


def ncu_executable() -> str | None:
    """``HG_NCU`` if set, else ``ncu`` on PATH, else the usual CUDA and Nsight Compute install folders."""
    if os.environ.get("HG_NCU"):
        return os.environ["HG_NCU"]
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"):
        matches = sorted(glob.glob(pattern))
        if matches:
            return matches[-1]
    return None


def ncu_command(ncu: str, metrics, target: list[str], *, kernel_regex: str | None = None) -> list[str]:
    """The ncu command line profiling ``target`` (a full command: Python executable and arguments)."""
    command = [ncu, "--clock-control", "none", "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/",
               "--metrics", ",".join(metrics), "--csv", "--page", "raw", "--print-units", "base"]
    if kernel_regex:
        command += ["--kernel-name", f"regex:{kernel_regex}"]
    return command + list(target)


def _run(command: list[str], timeout: float) -> tuple[str, int | None]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=child_environment())
    except subprocess.TimeoutExpired as error:
        partial = error.stdout if isinstance(error.stdout, str) else ""
        return partial + f"\n==ERROR== ncu did not finish within {timeout:.0f} s\n", None
    except OSError as error:
        return f"==ERROR== cannot start {command[0]}: {error}\n", None
    # stderr first: the CSV is the end of stdout, and a warning after its last row would read as one.
    return done.stderr + "\n" + done.stdout, done.returncode


def counters_from_output(output: str, returncode: int | None, *, calls: int, metrics, command=()) -> CounterResult:
    """A :class:`CounterResult` from ncu's output: counters per kernel, or the reason there are none."""
    launches = parse_ncu_csv(output, metrics)
    if not launches:
        return unavailable(explain_failure(output, returncode), tool="ncu", calls=calls, command=command,
                           raw_output=output)
    missing = missing_metrics(launches, metrics)
    note = f"ncu gave no value for {len(missing)} of {len(metrics)} metrics" if missing else None
    return CounterResult("ncu", aggregate_launches(launches), calls, note, list(command), missing, output)


def collect(op: str, rung: str, shape, dtype: str, *, calls: int = 3, warmup: int = 3, root=None,
            timeout: float = DEFAULT_TIMEOUT_S, kernel_regex: str | None = None, stalls: bool = True) -> CounterResult:
    """Profile ``calls`` calls of one rung under ncu in a child process and parse its counters.

    Never raises for a tool problem: no ncu, no permission, an unknown metric (dropped, then one more
    try), a crash or a timeout all end in a result with ``note`` set.
    """
    ncu = ncu_executable()
    if ncu is None:
        return unavailable("ncu not found: not on PATH nor under /usr/local/cuda*/bin (set HG_NCU=/path/to/ncu)",
                           tool="ncu", calls=calls)
    metrics = list(CORE_METRICS) + (list(STALL_METRICS) if stalls else [])
    target = [sys.executable, *target_arguments(op, rung, shape, dtype, calls=calls, warmup=warmup, root=root)]
    dropped: list[str] = []
    for _ in range(3):       # each run drops (or renames) what the run before it had rejected
        command = ncu_command(ncu, metrics, target, kernel_regex=kernel_regex)
        output, returncode = _run(command, timeout)
        rejected = [] if PERMISSION_CODE in output else rejected_metrics(output, metrics)
        if not rejected:
            break
        dropped += [m for m in rejected if m not in ALTERNATIVES]
        metrics = [ALTERNATIVES.get(m, m) if m in rejected else m for m in metrics]
        metrics = [m for m in metrics if m not in rejected] or list(CORE_METRICS)
    result = counters_from_output(output, returncode, calls=calls, metrics=metrics, command=command)
    if dropped and result.available:
        result.missing_metrics = sorted(set(result.missing_metrics) | set(dropped))
        result.note = f"this ncu rejected {len(dropped)} metric(s): {', '.join(sorted(dropped))[:200]}"
    return result

