"""Plots of benchmark records: bar charts of variants, size sweeps, saved as PNG and SVG.

Every function returns a ``matplotlib.figure.Figure`` built directly (no pyplot state), so it works
headless, in scripts and in notebooks (a returned Figure displays itself as the cell's result).

- ``bar_chart(entries, metric="median_us" | "gb_per_s" | "tflop_per_s")``: one bar per entry, with
  whiskers from the timing's bootstrap 95% interval, a dashed line at the baseline, baseline bars in
  grey and suspect results hatched and labelled SUSPECT (a figure faster than the ceiling allows is a
  bug, never a win). ``record_bar_chart(record)`` adds the device name and the measured ceiling.
- ``size_sweep(points, metric="gb_per_s" | "tflop_per_s")``: rate against problem size on a log2
  axis, one line per variant with its 95% band, and the measured ceiling as a horizontal line.
- ``shape_chart(points, metric="tflop_per_s")``: rate at each named shape (a category axis: shapes of
  one size, such as 4096x14336x4096 and 4096x4096x14336, stay apart), one line per ``series`` with
  its 95% band, each point optionally labelled (which rung it is), and the measured ceiling.
- ``save(figure, "results/vector_add")`` writes ``vector_add.png`` (150 dpi) and ``vector_add.svg``.

Intervals are converted into the plotted unit: a rate is work / time, so the *low* end of the time
interval gives the *high* end of the rate interval.
"""

from __future__ import annotations

import io
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import matplotlib

from .records import format_figure


def _choose_headless_backend() -> None:
    """Force Agg only where nothing was chosen and nothing could be shown.

    An explicit choice always wins: ``MPLBACKEND``, ``matplotlib.use()``, a matplotlibrc, pyplot
    already imported, or a Jupyter/IPython kernel (which picks its inline backend itself).
    """
    if os.environ.get("MPLBACKEND") or "matplotlib.pyplot" in sys.modules or "ipykernel" in sys.modules:
        return
    try:
        chosen = matplotlib.rcParams._get_backend_or_none()
    except AttributeError:      # an older matplotlib: treat the backend as chosen, change nothing
        return
    if chosen is not None:
        return
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        matplotlib.use("Agg")


_choose_headless_backend()

# imported after the backend decision
from matplotlib.figure import Figure
from matplotlib.patches import Patch

__all__ = ["METRICS", "PlotFigure", "bar_chart", "record_bar_chart", "save", "shape_chart", "size_sweep"]

# metric -> (axis label, what the value is called in messages, higher is better?)
METRICS: dict[str, tuple[str, str, bool]] = {
    "median_us": ("median time per call (µs)", "median time", False),
    "gb_per_s": ("bandwidth (GB/s)", "GB/s", True),
    "tflop_per_s": ("compute (TFLOP/s)", "TFLOP/s", True),
}
_RATE_SCALE = {"gb_per_s": ("bytes", 1e9), "tflop_per_s": ("flops", 1e12)}

BASELINE_COLOR = "#9a9a9a"
CANDIDATE_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
SUSPECT_EDGE = "#c0392b"
CEILING_COLOR = "#c0392b"
DPI = 150


class PlotFigure(Figure):
    """A plain ``Figure`` that also renders itself as PNG in IPython/Jupyter without pyplot."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        return buffer.getvalue()


# ----------------------------------------------------------------------------------------------------
# reading entries


def _check_metric(metric: str, allowed: Iterable[str] = METRICS) -> None:
    allowed = tuple(allowed)
    if metric not in allowed:
        raise ValueError(f"unknown metric {metric!r}: choose one of {', '.join(repr(m) for m in allowed)}")


def _describe(entry: Mapping) -> str:
    where = " ".join(str(part) for part in (entry.get("shape"), entry.get("dtype")) if part not in (None, ""))
    name = repr(entry.get("variant", "?"))
    return f"{name} ({where})" if where else name


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _value_and_interval(entry: Mapping, metric: str) -> tuple[float, float, float]:
    """(value, low, high) of ``metric`` for one entry; low/high are NaN when no interval is known."""
    timing = entry.get("timing") or {}
    median = timing.get("median")
    ci = timing.get("ci95") or (None, None)
    t_low, t_high = (ci[0], ci[1]) if len(ci) == 2 else (None, None)
    nan = float("nan")
    if metric == "median_us":
        if not _finite(median):
            raise ValueError(f"entry {_describe(entry)} has no timing median: cannot plot metric 'median_us'")
        low = t_low * 1e6 if _finite(t_low) else nan
        high = t_high * 1e6 if _finite(t_high) else nan
        return median * 1e6, low, high
    derived = entry.get("derived") or {}
    value = derived.get(metric)
    if not _finite(value):
        field, _ = _RATE_SCALE[metric]
        raise ValueError(
            f"entry {_describe(entry)} has no derived {metric} (it was measured without a work model that "
            f"counts {field}): give it Work({field}=...) or plot metric='median_us'")
    # work per call in the plotted unit: from the work model when present, else value * median
    field, scale = _RATE_SCALE[metric]
    work = (entry.get("work") or {}).get(field)
    if _finite(work) and work > 0:
        amount = work / scale
    elif _finite(median) and median > 0:
        amount = value * median
    else:
        return value, nan, nan
    # rate = amount / time: the low time bound is the HIGH rate bound, and the other way round
    high = amount / t_low if _finite(t_low) and t_low > 0 else nan
    low = amount / t_high if _finite(t_high) and t_high > 0 else nan
    return value, low, high


def _suspect(entry: Mapping) -> str | None:
    derived = entry.get("derived") or {}
    reason = derived.get("suspect")
    return str(reason) if reason else None


def _where(entry: Mapping) -> str:
    return " ".join(str(part) for part in (entry.get("shape"), entry.get("dtype")) if part not in (None, ""))


# ----------------------------------------------------------------------------------------------------
# bar chart


def bar_chart(entries: Iterable[Mapping], *, metric: str = "median_us", title: str | None = None,
              baseline: str | None = None, ceiling: float | None = None,
              ceiling_label: str | None = None) -> Figure:
    """One bar per entry of ``metric``, whiskers from the timing's 95% interval.

    ``baseline`` names the variant drawn as the dashed reference line (default: the first entry whose
    role is "baseline"). ``ceiling`` (in the plotted unit) adds a measured-ceiling line. Entries of
    several shapes/dtypes are grouped (in order of first appearance), each group with its own
    baseline segment, and every bar is labelled "variant / shape dtype".
    """
    _check_metric(metric)
    entries = [dict(entry) for entry in entries]
    if not entries:
        raise ValueError("bar_chart(): no entries to plot")
    axis_label, _, higher_is_better = METRICS[metric]

    # several (shape, dtype) groups: keep each group's bars together and name them in the labels
    groups: dict[str, list[dict]] = {}
    for entry in entries:
        groups.setdefault(_where(entry), []).append(entry)
    several = len(groups) > 1
    ordered = [entry for group in groups.values() for entry in group]

    if baseline is None:
        baseline = next((e.get("variant") for e in ordered if e.get("role") == "baseline"), None)
    elif not any(e.get("variant") == baseline for e in ordered):
        names = sorted({str(e.get("variant")) for e in ordered})
        raise ValueError(f"baseline {baseline!r} is not among the variants: {', '.join(names)}")

    values, lows, highs = [], [], []
    for entry in ordered:
        value, low, high = _value_and_interval(entry, metric)
        values.append(value)
        lows.append(low)
        highs.append(high)

    labels = [f"{e.get('variant', '?')}\n{_where(e)}" if several else str(e.get("variant", "?")) for e in ordered]
    count = len(ordered)
    longest = max(len(line) for label in labels for line in label.split("\n"))
    slot = max(0.8, 0.085 * longest)              # inches a horizontal label needs under its bar
    rotate = count > 8 or count * slot + 1.5 > 13.0
    if rotate:
        slot = 0.75
    width = min(15.0, max(6.0, count * slot + 1.8))
    height = 4.8 + (min(longest, 40) * 0.05 if rotate else 0.0)
    figure = PlotFigure(figsize=(width, height), layout="constrained")
    axes = figure.add_subplot()

    positions = list(range(count))
    is_baseline = [e.get("variant") == baseline and baseline is not None for e in ordered]
    suspects = [_suspect(e) for e in ordered]
    candidate_color = CANDIDATE_COLORS[0]
    faces = []
    for base, suspect in zip(is_baseline, suspects):
        faces.append("white" if suspect else BASELINE_COLOR if base else candidate_color)
    bars = axes.bar(positions, values, width=0.62, color=faces, edgecolor="black", linewidth=0.6, zorder=2)
    for bar, entry, suspect in zip(bars, ordered, suspects):
        bar.set_gid(f"bar:{entry.get('variant')}")
        if suspect:
            bar.set_hatch("///")
            bar.set_edgecolor(SUSPECT_EDGE)
            bar.set_linewidth(1.2)

    # whiskers: the 95% interval of the median, converted into the metric
    error_low = [max(v - lo, 0.0) if math.isfinite(lo) else 0.0 for v, lo in zip(values, lows)]
    error_high = [max(hi - v, 0.0) if math.isfinite(hi) else 0.0 for v, hi in zip(values, highs)]
    has_interval = [math.isfinite(lo) and math.isfinite(hi) for lo, hi in zip(lows, highs)]
    if any(has_interval):
        shown = [i for i, ok in enumerate(has_interval) if ok]
        axes.errorbar([positions[i] for i in shown], [values[i] for i in shown],
                      yerr=[[error_low[i] for i in shown], [error_high[i] for i in shown]],
                      fmt="none", ecolor="black", elinewidth=1.0, capsize=4, zorder=3, label="95% interval")

    # the baseline: a dashed line across the chart (across its own group when there are several)
    legend_handles = []
    if baseline is not None:
        for where, group in groups.items():
            index = next((ordered.index(e) for e in group if e.get("variant") == baseline), None)
            if index is None:
                continue
            value = values[index]
            label = f"baseline {baseline}: {format_figure(value)}"
            if several:
                first = ordered.index(group[0])
                (line,) = axes.plot([first - 0.45, first + len(group) - 0.55], [value, value], linestyle="--",
                                    color="#444444", linewidth=1.2, zorder=4,
                                    label=f"baseline {baseline}" if not legend_handles else "_nolegend_")
                if not legend_handles:
                    legend_handles.append(line)
            else:
                line = axes.axhline(value, linestyle="--", color="#444444", linewidth=1.2, zorder=4, label=label)
                legend_handles.append(line)
            line.set_gid("baseline")
    if ceiling is not None and _finite(ceiling):
        label = f"{ceiling_label or 'ceiling'}: {format_figure(ceiling)}"
        line = axes.axhline(ceiling, linestyle="-.", color=CEILING_COLOR, linewidth=1.2, zorder=4, label=label)
        line.set_gid("ceiling")
        legend_handles.append(line)
    if any(suspects):
        legend_handles.append(Patch(facecolor="white", edgecolor=SUSPECT_EDGE, hatch="///",
                                    label="SUSPECT: beyond the ceiling, not a win"))

    # the y range: a suspect figure far beyond the rest runs off the top instead of dwarfing the others
    tops = [max(v, hi) if math.isfinite(hi) else v for v, hi in zip(values, highs)]
    believed = [t for t, suspect in zip(tops, suspects) if not suspect and math.isfinite(t)]
    reference = max(believed + ([ceiling] if _finite(ceiling) else []) + [0.0])
    highest = max([t for t in tops if math.isfinite(t)] + [reference])
    limit = highest * 1.18 if highest > 0 else 1.0
    if reference > 0 and highest > 1.6 * reference:
        limit = reference * 1.35
    axes.set_ylim(0, limit)

    # the value above each bar (above its whisker); SUSPECT in red where the figure is not believed
    font = 9 if count <= 8 else 8 if count <= 12 else 7
    backing = {"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 0.6}
    for x, value, top, suspect in zip(positions, values, tops, suspects):
        if suspect:
            off_scale = top > limit
            text = f"SUSPECT\n{'↑ ' if off_scale else ''}{format_figure(value)}"
            anchor, offset, align = ((x, limit), (0, -4), "top") if off_scale else ((x, top), (0, 3), "bottom")
            axes.annotate(text, anchor, xytext=offset, textcoords="offset points", ha="center", va=align,
                          fontsize=font, color=SUSPECT_EDGE, fontweight="bold", bbox=backing, zorder=6,
                          gid="suspect")
        else:
            axes.annotate(format_figure(value), (x, top), xytext=(0, 3), textcoords="offset points",
                          ha="center", va="bottom", fontsize=font, bbox=backing, zorder=6, gid="value")

    # axes and labels
    axes.set_xticks(positions, labels)
    if rotate:
        for tick in axes.get_xticklabels():
            tick.set_rotation(35)
            tick.set_horizontalalignment("right")
            tick.set_rotation_mode("anchor")
    better = "higher is better" if higher_is_better else "lower is better"
    axes.set_ylabel(f"{axis_label}, {better}")
    if not several:
        where = _where(ordered[0])
        if where:
            axes.set_xlabel(where)
    axes.set_xlim(-0.6, count - 0.4)
    axes.grid(axis="y", alpha=0.3, zorder=0)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    if legend_handles:
        text_inches = sum(0.055 * len(h.get_label()) + 0.55 for h in legend_handles)
        columns = len(legend_handles) if text_inches < width - 0.3 else 1
        figure.legend(handles=legend_handles, loc="outside lower center", ncols=columns, fontsize=8, frameon=False)
    axes.set_title(title or f"{METRICS[metric][1]} per variant", fontsize=11)
    return figure


def record_bar_chart(record: Mapping, *, metric: str = "median_us", title: str | None = None,
                     baseline: str | None = None) -> Figure:
    """``bar_chart`` of a record's entries, the device in the title and its measured ceiling drawn."""
    _check_metric(metric)
    entries = list(record.get("entries") or [])
    device = (record.get("device") or {}).get("name")
    heading = title or record.get("name") or f"{METRICS[metric][1]} per variant"
    if device:
        heading = f"{heading} on {device}"
    ceiling, label = _record_ceiling(record, entries, metric)
    return bar_chart(entries, metric=metric, title=heading, baseline=baseline, ceiling=ceiling, ceiling_label=label)


def _record_ceiling(record: Mapping, entries: list, metric: str) -> tuple[float | None, str | None]:
    ceilings = record.get("ceilings") or {}
    if metric == "gb_per_s" and _finite(ceilings.get("copy_bytes_per_s")):
        return ceilings["copy_bytes_per_s"] / 1e9, "measured copy bandwidth"
    if metric == "tflop_per_s":
        peaks = ceilings.get("matmul_flops_per_s") or {}
        dtypes = {(e.get("work") or {}).get("dtype") or e.get("dtype") for e in entries}
        if len(dtypes) == 1:
            dtype = dtypes.pop()
            if _finite(peaks.get(dtype)):
                return peaks[dtype] / 1e12, f"measured {dtype} matmul peak"
    return None, None


# ----------------------------------------------------------------------------------------------------
# size sweep


def _size_of(point: Mapping) -> float:
    size = point.get("size")
    if _finite(size):
        return float(size)
    shape = point.get("shape")
    if _finite(shape):
        return float(shape)
    if isinstance(shape, str):
        numbers = [int(n) for n in re.findall(r"\d+", shape)]
        if numbers:
            return float(math.prod(numbers))
    raise ValueError(f"point {_describe(point)} has no size: give it a number 'size' or a 'shape' such as '4096'")


def _draw_series(axes, series: dict[str, list], roles: dict[str, str | None], ceiling: float | None,
                 ceiling_label: str, *, gid: str, baseline_color: str, baseline_styles: tuple) -> None:
    """One line per series (rows ``(x, value, low, high, suspect[, label])``) with its 95% band and labels,
    the ceiling, the y range, and the suspect points marked: for size_sweep and shape_chart."""
    colors = iter(CANDIDATE_COLORS * (len(series) // len(CANDIDATE_COLORS) + 1))
    dashes = iter(baseline_styles * (len(series) // len(baseline_styles) + 1))
    nan = float("nan")
    believed_top, suspects = 0.0, []
    for name, rows in series.items():
        rows.sort(key=lambda row: row[0])
        xs = [row[0] for row in rows]
        # a suspect point is not joined to its line (a line climbing to it would read as a win): a gap
        ys = [nan if row[4] else row[1] for row in rows]
        lows = [nan if row[4] else row[2] for row in rows]
        highs = [nan if row[4] else row[3] for row in rows]
        baseline = roles[name] == "baseline"
        color = baseline_color if baseline else next(colors)
        (line,) = axes.plot(xs, ys, marker="o", markersize=4, linewidth=1.6, color=color,
                            linestyle=next(dashes) if baseline else "-",
                            label=name + (" (baseline)" if baseline else ""), zorder=3)
        line.set_gid(f"{gid}:{name}")
        if any(math.isfinite(lo) and math.isfinite(hi) for lo, hi in zip(lows, highs)):
            axes.fill_between(xs, lows, highs, color=color, alpha=0.18, linewidth=0, zorder=2)
        for x, y, hi, row in zip(xs, ys, highs, rows):
            believed_top = max([believed_top] + [v for v in (y, hi) if math.isfinite(v)])
            if len(row) > 5 and row[5] and math.isfinite(y):
                axes.annotate(str(row[5]), (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7,
                              color=color, gid="label")
        suspects.extend((row[0], row[1], name) for row in rows if row[4])
    if ceiling is not None and _finite(ceiling):
        line = axes.axhline(ceiling, linestyle="-.", color=CEILING_COLOR, linewidth=1.3, zorder=4,
                            label=f"{ceiling_label}: {format_figure(ceiling)}")
        line.set_gid("ceiling")
        believed_top = max(believed_top, ceiling)

    # y range from the believed points and the ceiling; a suspect far above sits at the top edge, marked
    highest = max([believed_top] + [y for _, y, _ in suspects])
    limit = highest * 1.08 if highest > 0 else 1.0
    if believed_top > 0 and highest > 1.6 * believed_top:
        limit = believed_top * 1.3
    axes.set_ylim(0, limit)
    if suspects:
        shown_y = [min(y, limit * 0.96) for _, y, _ in suspects]
        axes.scatter([x for x, _, _ in suspects], shown_y, s=90, facecolors="none", edgecolors=SUSPECT_EDGE,
                     linewidths=1.8, marker="o", zorder=5, label="SUSPECT: beyond the ceiling, not a win")
        for (x, y, name), shown in zip(suspects, shown_y):
            text = f"SUSPECT {name}: {'↑ ' if y > shown else ''}{format_figure(y)}"
            axes.annotate(text, (x, shown), xytext=(-8, 0),
                          textcoords="offset points", ha="right", va="center", fontsize=8, color=SUSPECT_EDGE,
                          fontweight="bold", gid="suspect", zorder=6,
                          bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 0.6})


def _label_lines(axes, metric: str, title: str) -> None:
    """The y label, the legend on the right and the title of a line chart (size_sweep, shape_chart)."""
    axis_label, _, higher_is_better = METRICS[metric]
    axes.set_ylabel(f"{axis_label}, {'higher' if higher_is_better else 'lower'} is better")
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, borderaxespad=0.0)
    axes.set_title(title, fontsize=11)


def size_sweep(points: Iterable[Mapping], *, metric: str = "gb_per_s", ceiling: float | None = None,
               ceiling_label: str = "measured copy bandwidth", title: str | None = None,
               x_label: str | None = None) -> Figure:
    """Rate against problem size: one line per variant (with its 95% band), x on a log2 axis.

    Points are record entries (size from ``shape``) or dicts with a number ``size`` plus ``derived``
    (and ``timing``/``work`` for the band). ``ceiling`` is in the plotted unit (GB/s or TFLOP/s).
    ``x_label`` names what ``size`` is ("S_kv, keys in the cache"); default: "problem size".
    """
    _check_metric(metric, ("gb_per_s", "tflop_per_s", "median_us"))
    points = [dict(point) for point in points]
    if not points:
        raise ValueError("size_sweep(): no points to plot")
    several_dtypes = len({p.get("dtype") for p in points}) > 1
    series: dict[str, list[tuple[float, float, float, float, str | None]]] = {}
    roles: dict[str, str | None] = {}
    from_shape = all(not _finite(p.get("size")) for p in points)
    for point in points:
        name = str(point.get("variant", "?"))
        if several_dtypes and point.get("dtype"):
            name = f"{name} {point['dtype']}"
        value, low, high = _value_and_interval(point, metric)
        series.setdefault(name, []).append((_size_of(point), value, low, high, _suspect(point)))
        roles.setdefault(name, point.get("role"))

    figure = PlotFigure(figsize=(8.0, 4.8), layout="tight")
    axes = figure.add_subplot()
    _draw_series(axes, series, roles, ceiling, ceiling_label, gid="variant", baseline_color="#555555",
                 baseline_styles=("--",))

    axes.set_xscale("log", base=2)
    axes.set_xlabel(x_label or ("problem size (elements in the shape)" if from_shape else "problem size"))
    axes.grid(alpha=0.3, which="major")
    _label_lines(axes, metric, title or f"{METRICS[metric][1]} against problem size")
    return figure


# ----------------------------------------------------------------------------------------------------
# rate per named shape


BASELINE_STYLES = ("--", ":", "-.", (0, (5, 1, 1, 1)))


def shape_chart(points: Iterable[Mapping], *, metric: str = "tflop_per_s", shapes: Iterable[str] | None = None,
                ceiling: float | None = None, ceiling_label: str = "measured ceiling",
                title: str | None = None) -> Figure:
    """Rate at each named shape: one line per series across the shapes (x is a category axis, in
    ``shapes`` order or the points' first appearance), with its 95% band.

    Points are record entries plus ``series`` (the line's name; default the variant) and optionally
    ``label`` (written beside the point: which rung a "best of the route" line took there). Series whose
    points have role "baseline" are grey, each in its own dash style. A suspect point is not joined to
    its line; it is circled in red and named, as in size_sweep. ``ceiling`` is in the plotted unit.
    """
    _check_metric(metric, ("gb_per_s", "tflop_per_s"))
    points = [dict(point) for point in points]
    if not points:
        raise ValueError("shape_chart(): no points to plot")
    order = list(shapes) if shapes is not None else list(dict.fromkeys(str(p.get("shape")) for p in points))
    position = {shape: index for index, shape in enumerate(order)}
    unknown = sorted({str(p.get("shape")) for p in points} - set(position))
    if unknown:
        raise ValueError(f"shape_chart(): points at shapes not in shapes: {', '.join(unknown)}")
    series: dict[str, list] = {}
    roles: dict[str, str | None] = {}
    for point in points:
        name = str(point.get("series") or point.get("variant", "?"))
        value, low, high = _value_and_interval(point, metric)
        series.setdefault(name, []).append((position[str(point.get("shape"))], value, low, high, _suspect(point),
                                            point.get("label")))
        roles.setdefault(name, point.get("role"))

    figure = PlotFigure(figsize=(max(8.0, 1.1 * len(order) + 4.5), 4.8), layout="tight")
    axes = figure.add_subplot()
    _draw_series(axes, series, roles, ceiling, ceiling_label, gid="series", baseline_color=BASELINE_COLOR,
                 baseline_styles=BASELINE_STYLES)
    axes.set_xticks(range(len(order)), order)
    for tick in axes.get_xticklabels():
        tick.set_rotation(30)
        tick.set_horizontalalignment("right")
        tick.set_rotation_mode("anchor")
    axes.set_xlim(-0.5, len(order) - 0.5)
    axes.set_xlabel("shape")
    axes.grid(axis="y", alpha=0.3)
    _label_lines(axes, metric, title or f"{METRICS[metric][1]} per shape")
    return figure


# ----------------------------------------------------------------------------------------------------
# saving


def save(figure: Figure, path_without_suffix: str | os.PathLike) -> list[Path]:
    """Write ``<path>.png`` (150 dpi) and ``<path>.svg``, creating the folder; returns both paths.

    A ``.png`` or ``.svg`` suffix on the path is dropped; other dots stay (``v1.5`` -> ``v1.5.png``).
    """
    base = Path(path_without_suffix)
    if base.suffix.lower() in (".png", ".svg"):
        base = base.with_suffix("")
    base.parent.mkdir(parents=True, exist_ok=True)
    png = base.parent / f"{base.name}.png"
    svg = base.parent / f"{base.name}.svg"
    figure.savefig(png, format="png", dpi=DPI)
    figure.savefig(svg, format="svg", metadata={"Date": None})     # no date: the same plot, the same file
    return [png, svg]
