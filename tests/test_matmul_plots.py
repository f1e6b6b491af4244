"""benchmarks/plot_matmul.py: the matmul and linear figures drawn from records (CPU tier).

No matmul or linear record exists yet, so the generator is checked on records this test builds the way
hello_gpu.ops.ladder.ladder_record writes them (real rung ids and sources, Work and rates from the spec),
which the record schema accepts; and on an empty records folder, where it must say that it drew nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from hello_gpu.bench import Ratio, summarize
from hello_gpu.bench.records import new_record, timing_from_summary, validate_record, write_record
from hello_gpu.bench.work import rates
from hello_gpu.ops import load_op
from hello_gpu.ops.shapes import shape_label
from hello_gpu.ops.sources import record_rules, rung_source_fields

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
try:
    import plot_matmul
finally:
    sys.path.pop(0)

COPY, PEAK = 4.3e12, 7.2e14                  # the record's measured ceilings (bytes/s, bf16 FLOP/s): made up here
SHAPES = ((4096, 4096, 4096), (4096, 14336, 4096), (4096, 4096, 14336), (1, 14336, 4096), (16, 4096, 14336))


def entry(op, variant: str, shape, seconds: float, *, passed: bool = True) -> dict:
    """One ladder entry as ladder_record writes it (timing from a summary, rates from the spec's work)."""
    rung = op.rung(variant)
    work = op.spec.work(shape, "bfloat16")
    summary = summarize([seconds * (1 + 0.002 * k) for k in range(-5, 6)])
    made = {"variant": variant, "role": "baseline" if rung.is_baseline else "candidate",
            **(rung_source_fields(rung, REPO) if not rung.id.startswith("v00_torch") else
               {"source": None}),
            "shape": shape_label(shape), "dtype": "bfloat16",
            "correctness": {"passed": passed, "seeds": [1, 2, 3]},
            "timing": timing_from_summary(summary, cache="cold", graph=False, clock="device-events"),
            "work": work.to_dict(),
            "derived": rates(work, seconds, bandwidth_ceiling=COPY, compute_ceiling=PEAK).to_dict(),
            "extra": {"route": rung.route}}
    if not rung.is_baseline:
        made["speedups"] = {"v00_torch": {**Ratio(1.0, (0.99, 1.01), 30).to_dict(), "verdict": "within noise"}}
    return made


def record(op_name: str, times: dict[str, list[float]], *, failing: str | None = None) -> dict:
    """``times``: rung id -> seconds at each of SHAPES (None: not timed there)."""
    op = load_op(op_name)
    entries = [entry(op, variant, shape, seconds, passed=variant != failing)
               for variant, per_shape in times.items() for shape, seconds in zip(SHAPES, per_shape) if seconds]
    made = new_record(f"{op_name}.bfloat16", "ladder",
                      device={"slug": "nvidia-h200", "name": "NVIDIA H200", "arch": "sm_90"},
                      environment={"git": {"commit": "0123456789abcdef", "dirty": False}},
                      ceilings={"copy_bytes_per_s": COPY, "matmul_flops_per_s": {"bfloat16": PEAK}},
                      entries=entries, created="2026-12-05T00:00:00Z",
                      extra={"op": op_name, "route": None, "not_timed": [],
                             "shapes": [shape_label(s) for s in SHAPES]})
    assert validate_record(made) == []
    return made


MATMUL_TIMES = {   # seconds at 4096^3, 4096x14336x4096, 4096x4096x14336, 1x14336x4096, 16x4096x14336
    "v00_torch": [191e-6, 670e-6, 680e-6, 41e-6, 42e-6],
    "v00_torch_compile": [195e-6, 675e-6, 690e-6, 42e-6, 43e-6],
    "peer_torch_max_autotune": [188e-6, 660e-6, 700e-6, 40e-6, 44e-6],
    "v09_mma_sync": [690e-6, 2.4e-3, 2.4e-3, 90e-6, 95e-6],
    "v11_large_warp_tiles": [310e-6, 1.1e-3, 1.1e-3, 80e-6, 85e-6],
    "v12_wgmma_tma": [260e-6, 900e-6, 910e-6, 70e-6, 75e-6],
    "v14_persistent_grouped": [196e-6, 690e-6, 30e-6, 60e-6, 65e-6],   # 30 us at 4096x4096x14336: beyond the peak
    "t02_grouped_order": [240e-6, 830e-6, 840e-6, 50e-6, 52e-6],
    "t04_autotuned": [200e-6, 700e-6, 705e-6, 45e-6, 47e-6],
    "t03_stages_and_warps": [150e-6, None, None, None, None],          # failed its check: never the best
}


def lines_of(figure) -> dict[str, object]:
    (axes, *_) = figure.axes
    return {line.get_gid().removeprefix("series:"): line for line in axes.get_lines()
            if (line.get_gid() or "").startswith("series:")}


def test_the_tflops_figure_has_the_best_rung_of_each_route_and_every_baseline():
    made = record("matmul", MATMUL_TIMES, failing="t03_stages_and_warps")
    figures = plot_matmul.figures(made)
    assert set(figures) == {"tflops", "decode"}
    lines = lines_of(figures["tflops"])
    assert set(lines) == {"cuBLAS (torch.mm)", "torch.compile", "torch.compile max-autotune",
                          "mma.sync (CUDA): best rung", "Hopper wgmma (CUDA): best rung", "Triton: best rung"}
    work = [load_op("matmul").spec.work(shape, "bfloat16").flops for shape in SHAPES[:3]]
    tflops = lambda seconds: [w / s / 1e12 for w, s in zip(work, seconds)]          # noqa: E731
    assert list(lines["cuBLAS (torch.mm)"].get_ydata()) == pytest.approx(tflops([191e-6, 670e-6, 680e-6]))
    assert list(lines["mma.sync (CUDA): best rung"].get_ydata()) == pytest.approx(tflops([310e-6, 1.1e-3, 1.1e-3]))
    # t03 was faster at 4096^3 but failed its check; t04 is Triton's best there
    assert list(lines["Triton: best rung"].get_ydata()) == pytest.approx(tflops([200e-6, 700e-6, 705e-6]))
    # v14 at 4096x4096x14336 is beyond the measured peak: suspect, never the route's best; v12 is
    hopper = list(lines["Hopper wgmma (CUDA): best rung"].get_ydata())
    assert hopper == pytest.approx(tflops([196e-6, 690e-6, 910e-6]))
    (footnote,) = [t for t in figures["tflops"].texts if t.get_gid() == "left-out"]
    assert "SUSPECT" in footnote.get_text() and "v14_persistent_grouped at 4096x4096x14336" in footnote.get_text()
    (axes, *_) = figures["tflops"].axes
    assert [t.get_text() for t in axes.get_xticklabels()] == ["4096x4096x4096", "4096x14336x4096", "4096x4096x14336"]
    labels = [t.get_text() for t in axes.texts if t.get_gid() == "label"]
    assert {"v14", "v12", "v11", "t04"} <= set(labels) and "t03" not in labels
    (ceiling,) = [line for line in axes.get_lines() if line.get_gid() == "ceiling"]
    assert list(ceiling.get_ydata()) == pytest.approx([PEAK / 1e12] * 2)


def test_the_decode_figure_is_gb_per_s_against_the_copy_ceiling():
    made = record("linear", {"v00_torch": [None, None, None, 41e-6, 42e-6],
                             "peer_torch_max_autotune": [None, None, None, 40e-6, 44e-6],
                             "v01_warp_per_row": [None, None, None, 33e-6, 34e-6],
                             "t01_row_block": [None, None, None, 35e-6, 36e-6]})
    made["extra"]["shapes"] = [shape_label(s) for s in SHAPES[3:]]
    figures = plot_matmul.figures(made)
    assert set(figures) == {"decode"}
    lines = lines_of(figures["decode"])
    assert set(lines) == {"cuBLAS (F.linear)", "torch.compile max-autotune", "SIMT / GEMV (HIP): best rung",
                          "Triton: best rung"}
    spec = load_op("linear").spec
    gbs = [spec.work(shape, "bfloat16").bytes / seconds / 1e9 for shape, seconds in zip(SHAPES[3:], (33e-6, 34e-6))]
    assert list(lines["SIMT / GEMV (HIP): best rung"].get_ydata()) == pytest.approx(gbs)
    (axes, *_) = figures["decode"].axes
    (ceiling,) = [line for line in axes.get_lines() if line.get_gid() == "ceiling"]
    assert list(ceiling.get_ydata()) == pytest.approx([COPY / 1e9] * 2)
    assert "measured copy bandwidth" in ceiling.get_label()


def test_the_amd_rung_is_a_route_of_its_own():
    op = load_op("matmul")
    made = entry(op, "v15_rdna4_wmma", (4096, 4096, 4096), 1e-3)
    assert plot_matmul.route_of("matmul", made) == "amd"
    assert plot_matmul.route_of("matmul", entry(op, "v08_tuned_tiles", (64, 64, 64), 1e-3)) == "hip"
    assert plot_matmul.route_of("matmul", {**made, "variant": "v99_renamed"}) == "hip"      # as recorded


def test_without_records_it_says_so_and_draws_nothing(tmp_path, capsys):
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "matmul.bfloat16.profile.json").write_text('{"kind": "profile"}')
    assert plot_matmul.main(["--records", str(tmp_path / "records"), "--out", str(tmp_path / "figures")]) == 1
    message = capsys.readouterr().err
    assert "no matmul or linear ladder record under" in message and "nothing drawn" in message
    assert "hello-gpu ladder matmul" in message
    assert not (tmp_path / "figures").exists()


def test_with_a_record_it_writes_each_figure_as_png_and_svg(tmp_path, capsys):
    made = record("matmul", MATMUL_TIMES)
    path = write_record(made, tmp_path / "records", repo_root=REPO, rules=record_rules(load_op("matmul").path.parent))
    assert plot_matmul.main(["--records", str(path.parent), "--out", str(tmp_path / "figures")]) == 0
    written = sorted(p.name for p in (tmp_path / "figures").iterdir())
    assert written == ["nvidia-h200-matmul.bfloat16-decode.png", "nvidia-h200-matmul.bfloat16-decode.svg",
                       "nvidia-h200-matmul.bfloat16-tflops.png", "nvidia-h200-matmul.bfloat16-tflops.svg"]
    assert all((tmp_path / "figures" / name).stat().st_size > 1000 for name in written)
