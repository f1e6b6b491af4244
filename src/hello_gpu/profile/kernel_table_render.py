"""The kernel table as a ``rich`` table: one row per kernel, counter columns when counters exist."""

from __future__ import annotations

from ..bench.records import format_figure
from .kernel_names import LIBRARY, display_name
from .kernel_table import SOURCE_STYLES, KernelRow, KernelTable

EMPTY = "-"


def _dims(dims) -> str:
    if dims is None:
        return EMPTY
    return str(dims[0]) if dims[1:] == (1, 1) else "x".join(str(d) for d in dims)


def _number(value, scale: float = 1.0, suffix: str = "") -> str:
    return EMPTY if value is None else format_figure(value * scale) + suffix


def _count(value) -> str:
    """Whole numbers as they are (28 registers, 1 launch per call), others to three figures."""
    if value is None:
        return EMPTY
    return str(int(value)) if float(value).is_integer() else format_figure(value)


def _source(row: KernelRow) -> str:
    label = f"{row.source}: {row.library}" if row.source == LIBRARY and row.library else row.source
    style = SOURCE_STYLES.get(row.source)
    return f"[{style}]{label}[/]" if style else label


def _counter_cells(row: KernelRow, calls: int) -> list[str]:
    counters = row.counters
    if counters is None:
        return [EMPTY] * 7
    dram = counters.dram_bytes
    stalls = ", ".join(f"{reason} {value:.1f}" for reason, value in counters.top_stalls())
    return [_number(dram / calls if dram is not None else None, 1e-6), _number(counters.sectors_per_request),
            _number(counters.achieved_occupancy_pct, suffix="%"), _number(counters.sm_throughput_pct, suffix="%"),
            _number(counters.memory_throughput_pct, suffix="%"), _number(counters.l2_hit_rate_pct, suffix="%"),
            stalls or EMPTY]


def bytes_line(comparison: dict | None) -> str | None:
    """"bytes per call: counted 201 MB (work model), measured DRAM 203 MB (read 134, write 67): 1.01x"."""
    if not comparison:
        return None
    parts = []
    if comparison["counted_bytes"] is not None:
        parts.append(f"counted {format_figure(comparison['counted_bytes'] / 1e6)} MB (work model)")
    if comparison["measured_dram_bytes"] is not None:
        parts.append(f"measured DRAM {format_figure(comparison['measured_dram_bytes'] / 1e6)} MB (read "
                     f"{format_figure(comparison['dram_read_bytes'] / 1e6)}, write "
                     f"{format_figure(comparison['dram_write_bytes'] / 1e6)})")
    text = "bytes per call: " + ", ".join(parts)
    if comparison["measured_over_counted"] is not None:
        text += f": {comparison['measured_over_counted']:.2f}x the counted bytes"
    return text


def render_table(table: KernelTable):
    """Kernel, source, launches per call, times, share, launch shape, resources (and counters)."""
    from rich.table import Table
    from rich.text import Text

    with_counters = table.counters is not None and table.counters.available
    result = Table(title=f"{table.title} ({table.calls} calls profiled)")
    columns = ["kernel", "source", "per call", "total µs", "mean µs", "share", "grid", "block", "regs", "smem B"]
    if with_counters:
        columns += ["DRAM MB/call", "sect/req", "occupancy", "SM", "memory", "L2 hit", "top stalls (cycles/inst)"]
    for column in columns:
        left = column in ("kernel", "source", "top stalls (cycles/inst)")
        result.add_column(column, justify="left" if left else "right", overflow="fold")
    for row in table.rows:
        cells = [Text(display_name(row.name)), _source(row), _count(row.launches / table.calls),
                 format_figure(row.total_seconds * 1e6), format_figure(row.mean_seconds * 1e6),
                 f"{table.share(row):.0%}", _dims(row.grid), _dims(row.block),
                 _count(row.registers_per_thread), _count(row.shared_memory_bytes)]
        if with_counters:
            cells += _counter_cells(row, table.counters.calls)
        result.add_row(*cells)
    lines = [line for line in (table.fallback_warning(), bytes_line(table.bytes_comparison())) if line]
    lines += table.notes
    if lines:
        result.caption = "\n".join(lines)
        result.caption_justify = "left"
    return result
