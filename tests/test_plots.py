"""Plots of benchmark records, on synthetic entries (no GPU, no display)."""

import math
import os
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib")

from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure

from hello_gpu.bench import plots


def make_entry(variant, seconds, *, role="candidate", shape="268435456", dtype="float32", nbytes=None,
               flops=None, ci=None, suspect=None, derived=True):
    """A record entry as the harness writes it, the derived rates computed from the work model."""
    nbytes = 12 * int(shape) if nbytes is None and shape.isdigit() else nbytes
    ci = ci or (seconds * 0.97, seconds * 1.04)
    entry = {"variant": variant, "role": role, "shape": shape, "dtype": dtype,
             "timing": {"median": seconds, "p20": seconds * 0.98, "p80": seconds * 1.03, "ci95": list(ci),
                        "count": 40, "cache": "cold"},
             "work": {"bytes": nbytes, "flops": flops, "dtype": dtype} if (nbytes or flops) else None,
             "derived": None}
    if derived:
        entry["derived"] = {"gb_per_s": nbytes / seconds / 1e9 if nbytes else None,
                            "tflop_per_s": flops / seconds / 1e12 if flops else None,
                            "bandwidth_fraction": None, "compute_fraction": None, "suspect": suspect}
    return entry


@pytest.fixture
def entries():
    return [
        make_entry("torch", 7.6e-4, role="baseline", ci=(7.4e-4, 7.9e-4)),
        make_entry("v01_naive", 9.1e-4, ci=(8.8e-4, 9.6e-4)),
        make_entry("v02_vectorized", 7.2e-4, ci=(7.0e-4, 7.5e-4)),
        make_entry("v03_too_good", 1.5e-4, ci=(1.4e-4, 1.6e-4),
                   suspect="21474 GB/s is 4.99x the measured copy bandwidth 4300 GB/s with a cold cache"),
    ]


def bars_of(figure):
    (axes,) = figure.axes
    return axes, list(axes.patches)


def whiskers_of(axes):
    (container,) = [c for c in axes.containers if isinstance(c, ErrorbarContainer)]
    _, _, (collection,) = container.lines
    return sorted((seg[0][0], min(seg[0][1], seg[1][1]), max(seg[0][1], seg[1][1]))
                  for seg in collection.get_segments())


def texts_at(axes, x):
    return [t.get_text() for t in axes.texts if abs(t.xy[0] - x) < 1e-9]


def baseline_lines(axes):
    return [line for line in axes.get_lines() if line.get_gid() == "baseline"]


# ---- bar_chart ----------------------------------------------------------------------------------------


def test_bar_chart_has_one_bar_per_entry_and_a_baseline_line(entries):
    figure = plots.bar_chart(entries, metric="median_us")
    assert isinstance(figure, Figure)
    axes, bars = bars_of(figure)
    assert len(bars) == len(entries)
    heights = [bar.get_height() for bar in bars]
    assert heights == pytest.approx([e["timing"]["median"] * 1e6 for e in entries])
    (line,) = baseline_lines(axes)
    assert list(line.get_ydata()) == pytest.approx([760.0, 760.0])
    assert "µs" in axes.get_ylabel()
    assert [t.get_text() for t in axes.get_xticklabels()] == [e["variant"] for e in entries]


def test_baseline_bars_are_grey_and_candidates_are_not(entries):
    _, bars = bars_of(plots.bar_chart(entries))
    grey = bars[0].get_facecolor()
    assert grey[0] == pytest.approx(grey[1]) == pytest.approx(grey[2])        # torch: grey
    candidate = bars[1].get_facecolor()
    assert candidate[0] != pytest.approx(candidate[2])                        # v01: coloured


def test_baseline_can_be_named_and_must_exist(entries):
    axes, _ = bars_of(plots.bar_chart(entries, baseline="v01_naive"))
    (line,) = baseline_lines(axes)
    assert list(line.get_ydata()) == pytest.approx([910.0, 910.0])
    with pytest.raises(ValueError, match="v99_missing"):
        plots.bar_chart(entries, baseline="v99_missing")


def test_no_baseline_role_means_no_baseline_line(entries):
    for entry in entries:
        entry["role"] = "candidate"
    axes, _ = bars_of(plots.bar_chart(entries))
    assert baseline_lines(axes) == []


def test_time_whiskers_are_the_timing_interval_in_microseconds(entries):
    axes, _ = bars_of(plots.bar_chart(entries, metric="median_us"))
    got = whiskers_of(axes)
    want = [(i, e["timing"]["ci95"][0] * 1e6, e["timing"]["ci95"][1] * 1e6) for i, e in enumerate(entries)]
    for (x, low, high), (wx, wlow, whigh) in zip(got, want):
        assert x == wx and low == pytest.approx(wlow) and high == pytest.approx(whigh)


def test_bandwidth_whiskers_invert_the_time_interval():
    # 1.2 GB moved in a median 1.0 ms, interval [0.8 ms, 1.5 ms]: 1200 GB/s in [800, 1500] GB/s.
    # The LOW time bound gives the HIGH bandwidth bound; an uninverted conversion would not bracket 1200.
    entry = make_entry("v02_vectorized", 1.0e-3, nbytes=1.2e9, ci=(0.8e-3, 1.5e-3))
    axes, bars = bars_of(plots.bar_chart([entry], metric="gb_per_s"))
    assert bars[0].get_height() == pytest.approx(1200.0)
    ((_, low, high),) = whiskers_of(axes)
    assert low == pytest.approx(800.0)
    assert high == pytest.approx(1500.0)
    assert "GB/s" in axes.get_ylabel()


def test_compute_whiskers_invert_the_time_interval():
    # 2e12 FLOPs in a median 10 ms, interval [8 ms, 16 ms]: 200 TFLOP/s in [125, 250].
    entry = make_entry("v07_mma", 10e-3, shape="8192x8192x8192", dtype="bfloat16", nbytes=None, flops=2e12,
                       ci=(8e-3, 16e-3))
    axes, bars = bars_of(plots.bar_chart([entry], metric="tflop_per_s"))
    assert bars[0].get_height() == pytest.approx(200.0)
    ((_, low, high),) = whiskers_of(axes)
    assert (low, high) == (pytest.approx(125.0), pytest.approx(250.0))


def test_rate_whiskers_without_a_work_model_scale_the_derived_rate():
    entry = make_entry("v02_vectorized", 2.0e-3, nbytes=4e9, ci=(1.6e-3, 2.5e-3))
    entry["work"] = None                                   # derived 2000 GB/s kept, bytes unknown
    axes, _ = bars_of(plots.bar_chart([entry], metric="gb_per_s"))
    ((_, low, high),) = whiskers_of(axes)
    assert (low, high) == (pytest.approx(1600.0), pytest.approx(2500.0))


def test_suspect_bars_are_hatched_and_labelled_suspect(entries):
    axes, bars = bars_of(plots.bar_chart(entries, metric="gb_per_s"))
    suspect = bars[3]
    assert suspect.get_hatch()
    assert suspect.get_facecolor()[:3] == pytest.approx((1.0, 1.0, 1.0))     # not a filled, winning bar
    assert any("SUSPECT" in text for text in texts_at(axes, 3))
    for x in range(3):
        assert not bars[x].get_hatch()
        assert not any("SUSPECT" in text for text in texts_at(axes, x))


def test_a_suspect_far_beyond_the_rest_does_not_set_the_scale(entries):
    axes, bars = bars_of(plots.bar_chart(entries, metric="gb_per_s"))
    believed = max(bar.get_height() for bar in bars[:3])
    assert axes.get_ylim()[1] < bars[3].get_height()
    assert axes.get_ylim()[1] > believed * 1.05


def test_every_bar_has_its_value_printed(entries):
    axes, bars = bars_of(plots.bar_chart(entries, metric="median_us"))
    for x, bar in enumerate(bars):
        (text,) = texts_at(axes, x)
        assert f"{bar.get_height():.0f}" in text.replace(",", "")


def test_several_shapes_name_shape_and_dtype_under_each_bar():
    entries = [make_entry("torch", 1e-4, role="baseline", shape="1048576"),
               make_entry("v02", 0.9e-4, shape="1048576"),
               make_entry("torch", 7.6e-4, role="baseline", shape="268435456"),
               make_entry("v02", 7.4e-4, shape="268435456")]
    axes, bars = bars_of(plots.bar_chart(entries))
    assert len(bars) == 4
    labels = [t.get_text() for t in axes.get_xticklabels()]
    assert labels[0] == "torch\n1048576 float32" and labels[3] == "v02\n268435456 float32"
    levels = sorted(line.get_ydata()[0] for line in baseline_lines(axes))
    assert levels == [pytest.approx(100.0), pytest.approx(760.0)]    # one baseline per shape


def test_record_bar_chart_titles_the_device_and_draws_the_ceiling(entries):
    record = {"name": "vector add", "device": {"name": "NVIDIA H200"},
              "ceilings": {"copy_bytes_per_s": 4.3e12, "matmul_flops_per_s": {"bfloat16": 7.9e14}},
              "entries": entries}
    figure = plots.record_bar_chart(record, metric="gb_per_s")
    axes, bars = bars_of(figure)
    assert len(bars) == len(entries)
    assert "NVIDIA H200" in axes.get_title() and "vector add" in axes.get_title()
    (ceiling,) = [line for line in axes.get_lines() if line.get_gid() == "ceiling"]
    assert ceiling.get_ydata()[0] == pytest.approx(4300.0)
    # a record without ceilings still plots
    del record["ceilings"]
    axes, _ = bars_of(plots.record_bar_chart(record, metric="median_us", title="my run"))
    assert axes.get_title() == "my run on NVIDIA H200"


def test_unknown_metric_is_named(entries):
    with pytest.raises(ValueError, match="gflops"):
        plots.bar_chart(entries, metric="gflops")
    with pytest.raises(ValueError, match="median_ms"):
        plots.size_sweep(entries, metric="median_ms")


def test_missing_derived_bandwidth_names_the_variant():
    entries = [make_entry("torch", 1e-3, role="baseline"), make_entry("v05_no_work_model", 1e-3, derived=False)]
    with pytest.raises(ValueError, match="v05_no_work_model.*gb_per_s"):
        plots.bar_chart(entries, metric="gb_per_s")
    entries[1]["derived"] = {"gb_per_s": None, "tflop_per_s": None, "suspect": None}
    with pytest.raises(ValueError, match="v05_no_work_model"):
        plots.bar_chart(entries, metric="gb_per_s")
    plots.bar_chart(entries, metric="median_us")              # time needs no work model


def test_no_entries_is_an_error():
    with pytest.raises(ValueError, match="no entries"):
        plots.bar_chart([])


def _overlaps(boxes):
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]


@pytest.mark.parametrize("count", [3, 8, 12])
def test_labels_and_values_do_not_overlap(count):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    names = ["torch", "v01_naive", "v02_vectorized", "v03_grid_stride_loop", "v04_unrolled_by_four", "v05_float4",
             "v06_ldg_readonly", "v07_persistent_blocks", "v08_async_copy", "v09_tma_bulk", "v10_cluster", "v11_x"]
    entries = [make_entry(names[i], 1e-3 * (1 + 0.1 * ((i * 7) % 5)), role="baseline" if i == 0 else "candidate")
               for i in range(count)]
    figure = plots.bar_chart(entries, metric="gb_per_s")
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    (axes,) = figure.axes
    labels = axes.get_xticklabels()
    ticks = [t.get_window_extent(renderer) for t in labels]
    values = [t.get_window_extent(renderer) for t in axes.texts]
    assert len(values) == count
    assert _overlaps(values) == []
    angle = labels[0].get_rotation()
    if angle == 0:
        assert _overlaps(ticks) == []
    else:
        # rotated labels are parallel strips: apart when the pitch across them exceeds a line of text
        pitch = axes.transData.transform((1, 0))[0] - axes.transData.transform((0, 0))[0]
        line = labels[0].get_fontsize() * figure.dpi / 72 * 1.2
        assert pitch * math.sin(math.radians(angle)) > line
    width, height = figure.bbox.width, figure.bbox.height
    for box in ticks + values:                                # nothing cut off at the figure's edge
        assert box.x0 >= 0 and box.x1 <= width and box.y0 >= 0 and box.y1 <= height


# ---- size_sweep ---------------------------------------------------------------------------------------


def sweep_points():
    points = []
    for variant, role, efficiency in (("torch", "baseline", 0.92), ("v01_naive", "candidate", 0.70),
                                      ("v02_vectorized", "candidate", 0.95)):
        for power in range(12, 29, 2):
            n = 2**power
            bandwidth = 4.3e12 * efficiency * n / (n + 2**20)
            points.append(make_entry(variant, 12 * n / bandwidth, role=role, shape=str(n)))
    return points


def test_size_sweep_draws_one_line_per_variant_plus_the_ceiling():
    figure = plots.size_sweep(sweep_points(), metric="gb_per_s", ceiling=4300.0)
    assert isinstance(figure, Figure)
    (axes,) = figure.axes
    lines = axes.get_lines()
    variants = [line for line in lines if (line.get_gid() or "").startswith("variant:")]
    ceilings = [line for line in lines if line.get_gid() == "ceiling"]
    assert len(lines) == 4 and len(variants) == 3 and len(ceilings) == 1
    assert ceilings[0].get_ydata()[0] == pytest.approx(4300.0)
    assert "measured copy bandwidth" in ceilings[0].get_label()
    assert axes.get_xscale() == "log" and axes.xaxis.get_transform().base == 2
    for line in variants:                                             # sorted by size, 2^12 .. 2^28
        assert list(line.get_xdata()) == [2.0**p for p in range(12, 29, 2)]
    assert len(axes.collections) == 3                                  # one CI band per variant


def test_size_sweep_bands_bracket_the_line_with_inverted_bounds():
    points = [{"variant": "v1", "size": 1024, "timing": {"median": 1e-3, "ci95": [0.8e-3, 1.5e-3]},
               "work": {"bytes": 1.2e9}, "derived": {"gb_per_s": 1200.0}},
              {"variant": "v1", "size": 4096, "timing": {"median": 2e-3, "ci95": [1.6e-3, 3.0e-3]},
               "work": {"bytes": 4.8e9}, "derived": {"gb_per_s": 2400.0}}]
    (axes,) = plots.size_sweep(points).axes
    (band,) = axes.collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert min(ys) == pytest.approx(800.0)
    assert max(ys) == pytest.approx(3000.0)
    assert axes.get_lines()[0].get_label() == "v1"                     # no ceiling given: no ceiling line
    assert len(axes.get_lines()) == 1


def test_size_sweep_never_joins_a_suspect_point_to_its_line():
    points = sweep_points()
    points[-1]["derived"]["gb_per_s"] *= 3                            # v02 at 2^28: 3x the ceiling
    points[-1]["derived"]["suspect"] = "12000 GB/s is 2.8x the measured copy bandwidth"
    (axes,) = plots.size_sweep(points, ceiling=4300.0).axes
    (line,) = [line for line in axes.get_lines() if line.get_gid() == "variant:v02_vectorized"]
    assert math.isnan(line.get_ydata()[-1]) and not math.isnan(line.get_ydata()[-2])
    assert any(t.get_text().startswith("SUSPECT v02_vectorized") for t in axes.texts)
    assert axes.get_ylim()[1] < points[-1]["derived"]["gb_per_s"]     # it does not set the scale


def test_size_sweep_without_derived_rates_names_the_variant():
    points = sweep_points()
    points[5]["derived"] = None
    with pytest.raises(ValueError, match="torch"):
        plots.size_sweep(points, metric="gb_per_s")
    with pytest.raises(ValueError, match="tflop_per_s"):
        plots.size_sweep(sweep_points(), metric="tflop_per_s")        # no FLOPs counted anywhere


# ---- save and environment -----------------------------------------------------------------------------


def test_save_writes_png_and_svg(tmp_path, entries):
    figure = plots.bar_chart(entries, metric="median_us", title="vector add")
    paths = plots.save(figure, tmp_path / "results" / "nested" / "vector_add")
    assert [p.name for p in paths] == ["vector_add.png", "vector_add.svg"]
    png, svg = paths
    assert png.read_bytes().startswith(b"\x89PNG")
    assert "<svg" in svg.read_text()
    assert png.stat().st_size > 1000 and svg.stat().st_size > 1000
    # a .png suffix is not doubled; other dots in the name are kept
    assert [p.name for p in plots.save(figure, tmp_path / "chart.png")] == ["chart.png", "chart.svg"]
    assert [p.name for p in plots.save(figure, tmp_path / "v1.5")] == ["v1.5.png", "v1.5.svg"]


def test_figure_renders_itself_for_notebooks(entries):
    png = plots.bar_chart(entries)._repr_png_()
    assert png.startswith(b"\x89PNG")


def _import_in_fresh_process(env_changes):
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "DISPLAY", "WAYLAND_DISPLAY")}
    env.update(env_changes)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "src"),
                                         env.get("PYTHONPATH", "")])
    code = ("import sys, matplotlib; import hello_gpu.bench.plots; "
            "print(matplotlib.get_backend().lower(), 'matplotlib.pyplot' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="headless detection is for Linux")
def test_headless_import_picks_agg_without_pyplot():
    assert _import_in_fresh_process({}) == ["agg", "False"]


def test_an_explicit_backend_choice_is_left_alone():
    backend, pyplot = _import_in_fresh_process({"MPLBACKEND": "svg"})
    assert backend == "svg" and pyplot == "False"


# ---- shape_chart ---------------------------------------------------------------------------------------


def test_shape_chart_keeps_shapes_of_one_size_apart_and_draws_the_ceiling():
    """4096x14336x4096 and 4096x4096x14336 have one element count: a size axis would put them on one x."""
    shapes = ["4096x4096x4096", "4096x14336x4096", "4096x4096x14336"]
    flops = [2 * 4096**3, 2 * 4096 * 14336 * 4096, 2 * 4096 * 4096 * 14336]
    points = [{**make_entry("v00_torch", s, role="baseline", shape=shape, flops=f), "series": "cuBLAS"}
              for shape, f, s in zip(shapes, flops, (1.9e-4, 6.7e-4, 6.8e-4))]
    points += [{**make_entry("v14", s, shape=shape, flops=f), "series": "Hopper: best rung", "label": "v14"}
               for shape, f, s in zip(shapes, flops, (2.0e-4, 6.9e-4, 7.0e-4))]
    figure = plots.shape_chart(points, metric="tflop_per_s", shapes=shapes, ceiling=720.0, ceiling_label="peak")
    (axes,) = figure.axes
    lines = {line.get_gid(): line for line in axes.get_lines()}
    assert list(lines["series:Hopper: best rung"].get_xdata()) == [0, 1, 2]
    assert list(lines["series:Hopper: best rung"].get_ydata()) == pytest.approx(
        [f / s / 1e12 for f, s in zip(flops, (2.0e-4, 6.9e-4, 7.0e-4))])
    assert lines["series:cuBLAS"].get_linestyle() == "--" and lines["series:Hopper: best rung"].get_linestyle() == "-"
    assert list(lines["ceiling"].get_ydata()) == [720.0, 720.0]
    assert [t.get_text() for t in axes.get_xticklabels()] == shapes
    assert [t.get_text() for t in axes.texts if t.get_gid() == "label"] == ["v14"] * 3


def test_shape_chart_never_joins_a_suspect_point_and_names_unknown_shapes():
    points = [make_entry("fast", 1e-3, shape="1x8", flops=1e9), make_entry("fast", 1e-3, shape="2x8", flops=1e9,
                                                                           suspect="beyond the ceiling")]
    figure = plots.shape_chart(points, metric="tflop_per_s")
    (axes,) = figure.axes
    (line,) = [line for line in axes.get_lines() if line.get_gid() == "series:fast"]
    assert math.isnan(list(line.get_ydata())[1])
    assert any(t.get_gid() == "suspect" for t in axes.texts)
    with pytest.raises(ValueError, match=r"points at shapes not in shapes: 2x8"):
        plots.shape_chart(points, metric="tflop_per_s", shapes=["1x8"])
    with pytest.raises(ValueError, match="unknown metric 'median_us'"):
        plots.shape_chart(points, metric="median_us")
