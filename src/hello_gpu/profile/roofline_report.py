"""``hello-gpu roofline OP``: the verdict per rung as a table, the plot saved as PNG and SVG."""

from __future__ import annotations

import json
from pathlib import Path

from ..bench.records import RecordError, format_figure
from .roofline import Roofline, load_roofline

BOUND_STYLES = {"memory": "cyan", "compute": "green", "latency": "yellow"}


def verdict_table(roofline: Roofline):
    """One row per rung and shape: time, intensity, measured/counted bytes, bound, % of the attainable roof."""
    from rich.table import Table

    table = Table(title=f"{roofline.name}: what bounds each rung on {roofline.roofs.device}")
    for column in ("rung", "shape", "median µs", "FLOP/B", "DRAM/counted", "bound", "% of roof"):
        table.add_column(column, justify="left" if column in ("rung", "shape", "bound") else "right")
    for verdict in roofline.verdicts:
        point = verdict.point
        style = BOUND_STYLES.get(verdict.bound)
        table.add_row(point.variant, point.shape, format_figure(point.seconds * 1e6),
                      f"{point.counted_intensity:.3g}" if point.counted_intensity else "-",
                      f"{point.measured_over_counted:.2f}x" if point.measured_over_counted else "-",
                      f"[{style}]{verdict.bound}[/]" if style else verdict.bound,
                      f"{verdict.fraction:.0%}" if verdict.fraction is not None else "-")
    table.caption = "\n".join(["roofs: " + "; ".join(roofline.roofs.sources), *roofline.notes])
    table.caption_justify = "left"
    return table


def default_plot_path(roofline: Roofline) -> Path:
    """``<user data dir>/hello-gpu/roofline/<device>/<op>[.<route>].<dtype>.roofline`` (PNG and SVG): never
    beside the ladder record, whose records/ folder is tracked by git (``--out`` puts it anywhere)."""
    import platformdirs
    folder = Path(platformdirs.user_data_dir("hello-gpu")) / "roofline" / roofline.record_path.parent.name
    return folder / f"{roofline.name}.roofline"


def run_roofline(op: str, *, dtype: str | None, route: str | None, record_file: Path | None, records_dir: Path,
                 device: str | None, out: Path | None, as_json: bool, console) -> int:
    """Load, classify, print, plot. Exit status 0, or 2 when no record can be found or read."""
    from ..bench.plots import save
    from .roofline_plot import roofline_figure
    try:
        roofline = load_roofline(op, dtype=dtype, route=route, record_file=record_file, records_dir=records_dir,
                                 device=device)
    except RecordError as error:
        console.print(f"roofline: {error}", markup=False, highlight=False, soft_wrap=True, style="bold red")
        return 2
    paths = []
    if roofline.points:
        paths = save(roofline_figure(roofline), out or default_plot_path(roofline))
    if as_json:
        print(json.dumps({**roofline.to_dict(), "plots": [str(p) for p in paths]}, indent=2))
        return 0
    console.print(verdict_table(roofline))
    for verdict in roofline.verdicts:
        console.print(verdict.text, markup=False, highlight=False, soft_wrap=True)
    if paths:
        console.print(f"wrote {', '.join(str(p) for p in paths)}", markup=False, highlight=False, soft_wrap=True)
    return 0
