"""The attention figures (hello_gpu.ops.attention.plots) on the CPU: with no attention record the generator says so
and draws nothing; on a record built here from the schema (valid under it: the validator is asked first), each
figure has the lines, points and ceiling the record implies, and what must be left out is, with a note.

The timings below are made up for the test (a chosen "achieved rate" per line turned into seconds through the
spec's own work model); they are not measurements and never leave the temporary folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from hello_gpu.bench import rates, summarize
from hello_gpu.bench.records import new_record, timing_from_summary, validate_record
from hello_gpu.ops import load_op
from hello_gpu.ops.attention import plots
from hello_gpu.ops.shapes import shape_label

spec = load_op("attention").spec
REPO = Path(__file__).resolve().parents[1]
COPY_BYTES_PER_S = 4.0e12       # the made-up record's copy ceiling: 4000 GB/s


def entry(variant: str, shape: tuple, rate: float, *, role: str = "candidate", metric: str = "flops",
          passed: bool = True, dtype: str = "bfloat16") -> dict:
    """A record entry whose time gives ``rate`` FLOP/s (metric "flops") or bytes/s ("bytes") under spec.work."""
    work = spec.work(shape, dtype)
    seconds = (work.flops if metric == "flops" else work.bytes) / rate
    summary = summarize([seconds * factor for factor in (0.98, 0.99, 1.0, 1.0, 1.01, 1.02)])
    return {"variant": variant, "role": role, "source": None, "shape": shape_label(shape), "dtype": dtype,
            "correctness": {"passed": passed}, "timing": timing_from_summary(summary, cache="cold", graph=False,
                                                                             clock="device-events"),
            "work": work.to_dict(), "derived": rates(work, summary.median).to_dict()}


def made_up_record(name: str = "attention.bfloat16", created: str = "2026-12-05T00:00:00Z", scale: float = 1.0) -> dict:
    entries = []
    for size in (1024, 2048, 4096):
        for causal in ((), (1,)):
            shape = (4, 32, 8, size, size, 128, *causal)
            entries.append(entry("v00_torch", shape, 100e12 * scale, role="baseline"))
            entries.append(entry("t05_gqa_shared_kv_tiles", shape, 300e12 * scale))
    for batch in (1, 16):
        for kv_len in (4096, 32768):
            shape = (batch, 32, 8, 1, kv_len, 128)
            entries.append(entry("peer_sdpa_cudnn", shape, 2.0e12 * scale, role="baseline", metric="bytes"))
            entries.append(entry("t06_flash_decoding", shape, 3.0e12 * scale, metric="bytes"))
    entries.append(entry("v05_flash_decoding", (1, 32, 8, 1, 4096, 128), 1e12, metric="bytes", passed=False))
    entries.append(entry("t05_gqa_shared_kv_tiles", (1, 4, 2, 100, 300, 64, 1), 50e12))     # neither figure
    return new_record(name, "ladder", device={"slug": "nvidia-h200", "name": "NVIDIA H200", "arch": "sm_90"},
                      environment={"git": {"commit": "0" * 40}}, entries=entries,
                      ceilings={"copy_bytes_per_s": COPY_BYTES_PER_S}, created=created)


def write(folder: Path, record: dict) -> None:
    assert validate_record(record) == [], validate_record(record)
    (folder / f"{record['name']}.json").write_text(json.dumps(record), encoding="utf-8")


def lines_of(svg_path: Path) -> set[str]:
    """The line labels a figure's SVG carries (size_sweep gives each line the gid variant:<label>)."""
    text = svg_path.read_text(encoding="utf-8")
    return {part.split('"')[0] for part in text.split('id="variant:')[1:]}


def test_without_attention_records_it_says_so_and_draws_nothing(tmp_path, capsys):
    with pytest.raises(plots.MissingRecords, match="no attention records in .* hello-gpu ladder attention"):
        plots.write_plots(tmp_path)
    (tmp_path / "softmax.float32.json").write_text("{}", encoding="utf-8")     # another op's file: not looked at
    assert plots.main([str(tmp_path)]) == 1
    assert "no attention records" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["softmax.float32.json"]


def test_the_committed_attention_records_have_their_figures_beside_them(tmp_path):
    """Every figure the committed H200 records give is committed next to them (drawn again here into tmp_path:
    the names, not the bytes, since matplotlib's output may differ between versions)."""
    records = REPO / "records" / "nvidia-h200"
    if not list(records.glob("attention*.json")):
        pytest.skip("no attention record is committed (records/nvidia-h200/attention.<dtype>.json)")
    drawn = plots.write_plots(records, tmp_path)
    assert drawn.paths, "the committed attention records give no figure"
    missing = sorted(path.name for path in drawn.paths if not (records / path.name).is_file())
    assert not missing, (f"figures not committed: {missing}; draw them with "
                         f"python -m hello_gpu.ops.attention.plots records/nvidia-h200")


def test_a_record_built_from_the_schema_gives_its_figures_with_their_lines(tmp_path):
    """Prefill full and causal, decode at B = 1 and at B = 16: PNG and SVG each."""
    import matplotlib.image
    write(tmp_path, made_up_record())
    out = tmp_path / "figures"
    result = plots.write_plots(tmp_path, out)
    assert sorted(path.name for path in result.paths) == sorted(
        f"attention.{name}.bfloat16.{suffix}" for name in ("prefill", "prefill-causal", "decode-B1", "decode-B16")
        for suffix in ("png", "svg"))
    for path in result.paths:
        if path.suffix == ".png":
            assert matplotlib.image.imread(path).shape[0] > 100
    assert lines_of(out / "attention.prefill.bfloat16.svg") == {"v00_torch", "t05_gqa_shared_kv_tiles"}
    assert lines_of(out / "attention.prefill-causal.bfloat16.svg") == {"v00_torch", "t05_gqa_shared_kv_tiles"}
    for batch in (1, 16):
        assert lines_of(out / f"attention.decode-B{batch}.bfloat16.svg") == {"peer_sdpa_cudnn", "t06_flash_decoding"}
    assert "v05_flash_decoding" not in (out / "attention.decode-B1.bfloat16.svg").read_text(encoding="utf-8")
    assert any("v05_flash_decoding" in note and "correctness check failed" in note for note in result.notes)
    assert any("1x4x2x100x300x64x1" in note and "neither prefill" in note for note in result.notes)


def test_the_figures_hold_the_records_rates_and_the_copy_ceiling(tmp_path):
    """Drawn through size_sweep: each line's y values are the entries' derived rates at x = S (S_kv for decode),
    and the decode figure's ceiling is the record's copy bandwidth in GB/s."""
    from hello_gpu.bench.plots import size_sweep
    record = made_up_record()
    write(tmp_path, record)
    notes: list[str] = []
    points = plots.points_of(plots.attention_records(tmp_path), notes)
    prefill = plots.series([p for p in points if p.figure == "prefill"])
    figure = size_sweep(prefill, metric="tflop_per_s", x_label=plots.X_LABELS["prefill"])
    (axes,) = figure.axes
    lines = {line.get_gid(): line for line in axes.get_lines() if (line.get_gid() or "").startswith("variant:")}
    t05 = lines["variant:t05_gqa_shared_kv_tiles"]
    assert list(t05.get_xdata()) == [1024, 2048, 4096]
    assert list(t05.get_ydata()) == pytest.approx([300.0] * 3, rel=1e-9)
    assert axes.get_xlabel() == "S = S_q = S_kv"
    ceiling, label = plots.copy_gb_per_s(plots.attention_records(tmp_path), tmp_path)
    assert ceiling == pytest.approx(COPY_BYTES_PER_S / 1e9) and "attention.bfloat16.json" in label
    decode = plots.series([p for p in points if p.figure == "decode-B16"])
    assert {(p["variant"], p["size"]) for p in decode} == {(variant, kv_len) for kv_len in (4096, 32768)
                                                          for variant in ("t06_flash_decoding", "peer_sdpa_cudnn")}
    assert all(p["derived"]["gb_per_s"] == pytest.approx(3000.0 if p["variant"].startswith("t06") else 2000.0)
               for p in decode)


def test_the_newer_record_wins_a_point_and_the_device_ceilings_stand_in(tmp_path):
    """Two records with the same lines: each point is the newer record's. Without a ceiling of their own the
    records take the device's ceilings.json (as committed under records/<device>/)."""
    older = made_up_record("attention.bfloat16", "2026-12-01T00:00:00Z", scale=1.0)
    newer = made_up_record("attention-sweep.bfloat16", "2026-12-06T00:00:00Z", scale=2.0)
    for record in (older, newer):
        del record["ceilings"]
        write(tmp_path, record)
    points = plots.points_of(plots.attention_records(tmp_path), [])
    prefill = plots.series([p for p in points if p.figure == "prefill"])
    assert len(prefill) == 6                                    # 2 lines x 3 sizes, not 12
    assert {round(p["derived"]["tflop_per_s"]) for p in prefill} == {200, 600}
    assert plots.copy_gb_per_s(plots.attention_records(tmp_path), tmp_path) == (None, "")
    (tmp_path / "ceilings.json").write_text(json.dumps({"ceilings": {"copy_bytes_per_s": 4.2e12}}), encoding="utf-8")
    assert plots.copy_gb_per_s(plots.attention_records(tmp_path), tmp_path) == \
        (pytest.approx(4200.0), "measured copy bandwidth (ceilings.json)")


def test_an_invalid_attention_record_is_named_not_half_read(tmp_path):
    record = made_up_record()
    record["entries"][0]["timing"]["median"] = -1.0
    (tmp_path / "attention.bfloat16.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ValueError, match=r"attention.bfloat16.json: not a valid record: .*entries\[0\]\.timing"):
        plots.write_plots(tmp_path)


def test_labels_carry_only_the_dimensions_that_differ():
    """One configuration: the variant alone. Two head layouts at the same S: H=32/32 and H=32/8 tell them apart."""
    def point(shape, variant="t05_gqa_shared_kv_tiles"):
        figure, d = plots.classify(shape_label(shape))
        return plots.Point(figure, "bfloat16", variant, "candidate", d, entry(variant, shape, 1e14),
                           "2026-12-05T00:00:00Z")
    same = plots.series([point((4, 32, 8, 1024, 1024, 128)), point((4, 32, 8, 2048, 2048, 128))])
    assert {p["variant"] for p in same} == {"t05_gqa_shared_kv_tiles"}
    mixed = plots.series([point((4, 32, 8, 4096, 4096, 128)), point((4, 32, 32, 4096, 4096, 128))])
    assert {p["variant"] for p in mixed} == {"t05_gqa_shared_kv_tiles H=32/8", "t05_gqa_shared_kv_tiles H=32/32"}
    assert plots.classify("1x32x8x4x32768x128x1")[0] == "decode-B1"
    assert plots.classify("1x32x8x17x32768x128") is None          # more queries than decode's 16: neither
