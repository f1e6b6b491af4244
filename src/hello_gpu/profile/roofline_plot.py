"""The roofline drawn: log-log, the measured roofs solid, the datasheet roofs dashed, a point per rung.

Colour says which rung, the marker which shape; a filled marker sits at the counted arithmetic
intensity (work model), a hollow one of the same colour at the intensity from ncu's measured DRAM
bytes, joined by a dotted line: the horizontal distance between them is traffic the work model
did not count. Built on :class:`~hello_gpu.bench.plots.PlotFigure` and saved with
:func:`~hello_gpu.bench.plots.save` (PNG and SVG), like the ladder's bar charts.
"""

from __future__ import annotations

import numpy as np

from ..bench.plots import BASELINE_COLOR, CANDIDATE_COLORS, CEILING_COLOR, PlotFigure
from ..bench.records import format_figure
from .roofline import Roofline, Roofs

SHAPE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DATASHEET_COLOR = "#7f7f7f"
BASELINE_GREYS = (BASELINE_COLOR, "#4d4d4d", "#c8c8c8")     # v00_torch, v00_torch_compile, ...


def _roof_line(axes, roofs_bandwidth, roofs_compute, xs, **style):
    ys = np.minimum(roofs_compute, xs * roofs_bandwidth) if roofs_compute else xs * roofs_bandwidth
    (line,) = axes.plot(xs, ys / 1e12, **style)
    return line


def _roof_label(kind: str, bandwidth: float | None, compute: float | None, dtype: str) -> str:
    parts = [f"{format_figure(bandwidth / 1e9)} GB/s" if bandwidth else None,
             f"{format_figure(compute / 1e12)} TFLOP/s {dtype}" if compute else None]
    return f"{kind}: " + ", ".join(p for p in parts if p)


def _x_range(roofline: Roofline) -> tuple[float, float]:
    intensities = [i for p in roofline.points for i in (p.counted_intensity, p.measured_intensity) if i]
    ridge = roofline.roofs.ridge
    low = min(intensities + ([ridge] if ridge else []) or [0.01]) / 8
    high = max(intensities + ([ridge] if ridge else []) or [100.0]) * 8
    return low, high


def roofline_figure(roofline: Roofline, *, title: str | None = None):
    """The roofline of a :class:`~hello_gpu.profile.roofline.Roofline` as a matplotlib Figure."""
    roofs: Roofs = roofline.roofs
    figure = PlotFigure(figsize=(9.5, 5.8), layout="constrained")
    axes = figure.add_subplot()
    axes.set_xscale("log")
    axes.set_yscale("log")
    low, high = _x_range(roofline)
    xs = np.geomspace(low, high, 256)
    if roofs.datasheet_bandwidth:
        line = _roof_line(axes, roofs.datasheet_bandwidth, roofs.datasheet_compute, xs, color=DATASHEET_COLOR,
                          linestyle="--", linewidth=1.2,
                          label=_roof_label("datasheet", roofs.datasheet_bandwidth, roofs.datasheet_compute,
                                            roofline.dtype))
        line.set_gid("roof:datasheet")
    if roofs.bandwidth:
        line = _roof_line(axes, roofs.bandwidth, roofs.compute or roofs.datasheet_compute, xs, color=CEILING_COLOR,
                          linewidth=2.0, label=_roof_label("measured", roofs.bandwidth, roofs.compute, roofline.dtype))
        line.set_gid("roof:measured")
    if roofs.ridge:
        axes.axvline(roofs.ridge, color=CEILING_COLOR, linestyle=":", linewidth=0.8, alpha=0.6,
                     label=f"ridge: {roofs.ridge:.3g} FLOP/byte").set_gid("ridge")

    variants = list(dict.fromkeys(p.variant for p in roofline.points))
    shapes = list(dict.fromkeys(p.shape for p in roofline.points))
    palette = iter(CANDIDATE_COLORS * (len(variants) // len(CANDIDATE_COLORS) + 1))
    greys = iter(BASELINE_GREYS * len(variants))
    colors = {v: next(greys) if any(p.variant == v and p.role == "baseline" for p in roofline.points) else next(palette)
              for v in variants}
    markers = {shape: SHAPE_MARKERS[i % len(SHAPE_MARKERS)] for i, shape in enumerate(shapes)}
    for point in roofline.points:
        if not point.counted_intensity:
            continue
        color, marker = colors[point.variant], markers[point.shape]
        rate = point.flop_rate / 1e12
        (dot,) = axes.plot([point.counted_intensity], [rate], marker=marker, color=color, markeredgecolor="black",
                           markeredgewidth=0.5, markersize=7, linestyle="none", zorder=4)
        dot.set_gid(f"point:{point.variant}:{point.shape}")
        if point.measured_intensity:
            axes.plot([point.counted_intensity, point.measured_intensity], [rate, rate], color=color, linestyle=":",
                      linewidth=1.0, zorder=3)
            (hollow,) = axes.plot([point.measured_intensity], [rate], marker=marker, markerfacecolor="white",
                                  markeredgecolor=color, markeredgewidth=1.5, markersize=7, linestyle="none", zorder=4)
            hollow.set_gid(f"measured:{point.variant}:{point.shape}")

    # Legend: roofs, then one entry per rung (colour) and per shape (marker), not per point.
    handles, labels = axes.get_legend_handles_labels()
    for variant in variants:
        handles.append(axes.plot([], [], marker="o", color=colors[variant], linestyle="none")[0])
        labels.append(variant)
    for shape in shapes:
        handles.append(axes.plot([], [], marker=markers[shape], color="#444444", linestyle="none")[0])
        labels.append(f"shape {shape}")
    if any(p.measured_intensity for p in roofline.points):
        handles.append(axes.plot([], [], marker="o", markerfacecolor="white", markeredgecolor="#444444",
                                 linestyle="none")[0])
        labels.append("measured DRAM bytes (ncu)")
    axes.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    axes.set_xlim(low, high)
    axes.set_xlabel("arithmetic intensity (FLOP per byte of DRAM traffic)")
    axes.set_ylabel("performance (TFLOP/s)")
    axes.grid(alpha=0.3, which="both")
    axes.set_axisbelow(True)
    where = ", ".join(part for part in (roofline.route, roofline.dtype) if part)
    axes.set_title(title or f"{roofline.op} roofline ({where}) on {roofs.device}", fontsize=11)
    return figure
