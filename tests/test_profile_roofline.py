"""Roofline (CPU tier): classification thresholds, records found and read, the plot, ``hello-gpu roofline``.

Synthetic ladder records are built with the project's record helpers (``new_record``, ``summarize``,
``timing_from_summary``, ``Work``, ``rates``) and validated, so they are records ``ladder --record``
could have written; one test also reads the committed H200 records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hello_gpu.bench import records
from hello_gpu.bench.stats import summarize
from hello_gpu.bench.work import Work, rates
from hello_gpu.cli import main
from hello_gpu.profile.roofline import (DEFAULT_LAUNCH_OVERHEAD_S, FAR_BELOW_FRACTION, LATENCY_LAUNCHES, Roofs,
                                        RooflinePoint, classify, find_ladder_record, load_roofline, points_from_record)
from hello_gpu.profile.roofline_plot import roofline_figure

REPO = Path(__file__).resolve().parents[1]
H200 = {"slug": "nvidia-h200", "name": "NVIDIA H200", "arch": "sm_90"}
ENVIRONMENT = {"python": "3.12", "gpu": "NVIDIA H200", "l2_bytes": 62914560,
               "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False}}
COPY, MATMUL, LAUNCH = 4.0e12, 50.0e12, 6.0e-6          # measured roofs of the synthetic device: ridge 12.5 FLOP/B


def entry(variant: str, shape: str, seconds: float, *, nbytes: float, flops: float, route: str = "hip",
          role: str = "candidate") -> dict:
    work = Work(bytes=nbytes, flops=flops, dtype="float32")
    summary = summarize([seconds * (1 + 0.002 * k) for k in range(-3, 4)])
    return {"variant": variant, "role": role, "source": None, "shape": shape, "dtype": "float32", "correctness": None,
            "timing": records.timing_from_summary(summary, cache="cold", graph=False, clock="device-events"),
            "work": work.to_dict(), "derived": rates(work, summary.median, bandwidth_ceiling=COPY).to_dict(),
            "extra": {"route": route}}


def memory_seconds(nbytes: float, fraction: float) -> float:
    return nbytes / (fraction * COPY)


N = 2**26
BIG = 12.0 * N                                            # a float32 add at 2^26: 805 MB
MATMUL_FLOPS, MATMUL_BYTES = 2 * 4096**3, 3 * 4 * 4096**2


def ladder_record(name: str = "toy.float32", *, device: dict = H200, ceilings: dict | None = None) -> dict:
    entries = [
        entry("v00_torch", "2^26", memory_seconds(BIG, 0.9), nbytes=BIG, flops=N, route="torch", role="baseline"),
        entry("v01_memory", "2^26", memory_seconds(BIG, 0.8), nbytes=BIG, flops=N),
        entry("v02_slow", "2^26", memory_seconds(BIG, 0.05), nbytes=BIG, flops=N),
        entry("v03_tiny", "2^16", 8e-6, nbytes=12.0 * 2**16, flops=2**16),
        entry("v04_small_far_below", "2^20", memory_seconds(12.0 * 2**20, 0.05), nbytes=12.0 * 2**20, flops=2**20),
        entry("t01_matmul", "4096^3", MATMUL_FLOPS / (0.6 * MATMUL), nbytes=MATMUL_BYTES, flops=MATMUL_FLOPS,
              route="triton"),
    ]
    record = records.new_record(name, "ladder", device=device, environment=ENVIRONMENT, entries=entries,
                                ceilings=ceilings, extra={"op": name.split(".")[0]}, created="2026-01-02T03:04:05Z")
    assert records.validate_record(record) == []
    return record


def ceilings_record(device: dict = H200) -> dict:
    record = records.new_record("ceilings", "ceilings", device=device, environment=ENVIRONMENT, entries=[],
                                ceilings={"copy_bytes_per_s": COPY, "matmul_flops_per_s": {"float32": MATMUL},
                                          "launch_overhead_s": LAUNCH}, created="2026-01-02T03:04:05Z")
    assert records.validate_record(record) == []
    return record


def profile_record(measured: dict[tuple[str, str], float]) -> dict:
    entries = []
    for (variant, shape), dram in measured.items():
        e = entry(variant, shape, 1e-3, nbytes=BIG, flops=N)
        e["timing"]["cache"] = "warm"
        e["extra"]["bytes"] = {"counted_bytes": BIG, "measured_dram_bytes": dram, "measured_over_counted": dram / BIG}
        entries.append(e)
    record = records.new_record("toy.float32.profile", "profile", device=H200, environment=ENVIRONMENT, entries=entries,
                                created="2026-01-02T03:04:05Z")
    assert records.validate_record(record) == []
    return record


@pytest.fixture
def store(tmp_path) -> Path:
    """records/nvidia-h200/ with a ladder record and the ceilings record, as a GPU session leaves them."""
    folder = tmp_path / "records" / "nvidia-h200"
    folder.mkdir(parents=True)
    (folder / "toy.float32.json").write_text(records.record_text(ladder_record()))
    (folder / "ceilings.json").write_text(records.record_text(ceilings_record()))
    return tmp_path / "records"


def roofs(**changes) -> Roofs:
    values = dict(device="NVIDIA H200", dtype="float32", bandwidth=COPY, compute=MATMUL, datasheet_bandwidth=4.8e12,
                  datasheet_compute=67e12, launch_overhead_s=LAUNCH, l2_bytes=62914560)
    values.update(changes)
    return Roofs(**values)


def point(seconds: float, nbytes: float, flops: float, **changes) -> RooflinePoint:
    return RooflinePoint(**{"variant": "v", "shape": "s", "dtype": "float32", "route": "hip", "role": "candidate",
                            "seconds": seconds, "bytes": nbytes, "flops": flops, **changes})


# ------------------------------------------------------------------------------------------ classification


def test_roofs_ridge_and_attainable():
    r = roofs()
    assert r.ridge == pytest.approx(12.5)
    assert r.attainable(1.0) == pytest.approx(COPY) and r.attainable(100.0) == pytest.approx(MATMUL)
    assert roofs(bandwidth=None, compute=None).ridge == pytest.approx(67e12 / 4.8e12)     # datasheet when unmeasured


def test_left_of_the_ridge_is_memory_bound_with_the_bandwidth_fraction():
    verdict = classify(point(memory_seconds(BIG, 0.8), BIG, N), roofs())
    assert (verdict.bound, verdict.side) == ("memory", "memory")
    assert verdict.fraction == pytest.approx(0.8)
    assert "3,200 of 4,000 GB/s" in verdict.reason and "ridge 12.5" in verdict.reason
    assert verdict.text.startswith("v s: memory-bound, 80% of the attainable memory roof")


def test_right_of_the_ridge_is_compute_bound():
    verdict = classify(point(MATMUL_FLOPS / (0.6 * MATMUL), MATMUL_BYTES, MATMUL_FLOPS), roofs())
    assert verdict.bound == "compute" and verdict.fraction == pytest.approx(0.6)
    assert "30.0 of 50.0 TFLOP/s" in verdict.reason


def test_within_two_launch_overheads_is_latency_bound():
    limit = LATENCY_LAUNCHES * LAUNCH
    assert classify(point(limit * 0.99, 12.0 * 2**16, 2**16), roofs()).bound == "latency"
    slow_but_long = classify(point(limit * 1.01, BIG, N), roofs())
    assert slow_but_long.bound == "memory"            # 12 us is no launch overhead for 805 MB: just slow
    assert "within 2 launch overheads of 6.00 us" in classify(point(limit * 0.5, 1e3, 1e2), roofs()).reason


def test_far_below_both_roofs_is_latency_bound_only_when_it_fits_in_l2():
    small = 12.0 * 2**20                              # 12.6 MB < 63 MB of L2
    below = FAR_BELOW_FRACTION * 0.5
    tiny = classify(point(memory_seconds(small, below), small, 2**20), roofs())
    assert tiny.bound == "latency" and "fits in the 62.9 MB L2" in tiny.reason
    assert classify(point(memory_seconds(BIG, below), BIG, N), roofs()).bound == "memory"     # 805 MB: no excuse
    assert classify(point(memory_seconds(small, FAR_BELOW_FRACTION * 1.5), small, 2**20), roofs()).bound == "memory"


def test_without_a_measured_launch_overhead_the_default_is_used():
    seconds = LATENCY_LAUNCHES * DEFAULT_LAUNCH_OVERHEAD_S * 0.9
    assert classify(point(seconds, BIG, N), roofs(launch_overhead_s=None)).bound == "latency"
    assert classify(point(seconds, BIG, N), roofs(launch_overhead_s=1e-6)).bound == "memory"


def test_measured_bytes_and_suspect_figures_are_said():
    verdict = classify(point(memory_seconds(BIG, 0.5), BIG, N, measured_dram_bytes=1.5 * BIG), roofs())
    assert "DRAM bytes 1.50x counted" in verdict.reason
    too_fast = classify(point(memory_seconds(BIG, 1.2), BIG, N), roofs())
    assert too_fast.fraction == pytest.approx(1.2) and "SUSPECT" in too_fast.reason


def test_a_copy_without_flops_is_placed_by_bandwidth_alone():
    verdict = classify(point(memory_seconds(BIG, 0.7), BIG, 0.0), roofs())
    assert verdict.bound == "memory" and verdict.fraction == pytest.approx(0.7)


# ------------------------------------------------------------------------------------------ records


def test_points_from_a_ladder_record_and_a_profile_record():
    profile = profile_record({("v02_slow", "2^26"): 8 * BIG})
    points = points_from_record(ladder_record(), profile=profile)
    assert [p.variant for p in points] == ["v00_torch", "v01_memory", "v02_slow", "v03_tiny", "v04_small_far_below",
                                           "t01_matmul"]
    slow = points[2]
    assert slow.counted_intensity == pytest.approx(1 / 12)
    assert slow.measured_intensity == pytest.approx(1 / 96) and slow.measured_over_counted == pytest.approx(8.0)
    assert points[1].measured_intensity is None
    hip = points_from_record(ladder_record(), route="hip")
    assert [p.variant for p in hip] == ["v00_torch", "v01_memory", "v02_slow", "v03_tiny", "v04_small_far_below"]
    assert [p.variant for p in points_from_record(ladder_record(), route="triton")] == ["v00_torch", "t01_matmul"]


def test_load_roofline_takes_ceilings_from_the_record_beside_it(store):
    roofline = load_roofline("toy", records_dir=store, use_cache=False)
    assert roofline.record_path == store / "nvidia-h200" / "toy.float32.json"
    r = roofline.roofs
    assert (r.bandwidth, r.compute, r.launch_overhead_s) == (COPY, MATMUL, LAUNCH)
    assert r.datasheet_bandwidth == pytest.approx(4.8e12) and r.l2_bytes == 62914560
    assert r.sources[0] == "measured: nvidia-h200/ceilings.json" and "datasheet" in r.sources[1]
    bounds = {v.point.variant: v.bound for v in roofline.verdicts}
    assert bounds == {"v00_torch": "memory", "v01_memory": "memory", "v02_slow": "memory", "v03_tiny": "latency",
                      "v04_small_far_below": "latency", "t01_matmul": "compute"}
    assert any("no profile record toy.float32.profile.json" in note for note in roofline.notes)


def test_the_records_own_ceilings_come_first(store):
    own = ladder_record(ceilings={"copy_bytes_per_s": 2 * COPY, "matmul_flops_per_s": {"float32": MATMUL}})
    (store / "nvidia-h200" / "toy.float32.json").write_text(records.record_text(own))
    roofs_now = load_roofline("toy", records_dir=store, use_cache=False).roofs
    assert roofs_now.bandwidth == 2 * COPY and roofs_now.launch_overhead_s == LAUNCH    # the rest from ceilings.json


def test_a_profile_record_beside_it_adds_measured_bytes(store):
    (store / "nvidia-h200" / "toy.float32.profile.json").write_text(
        records.record_text(profile_record({("v01_memory", "2^26"): 1.25 * BIG})))
    roofline = load_roofline("toy", records_dir=store, use_cache=False)
    measured = {p.variant: p.measured_over_counted for p in roofline.points}
    assert measured["v01_memory"] == pytest.approx(1.25) and measured["v02_slow"] is None
    assert roofline.profile_path.name == "toy.float32.profile.json"


def test_finding_the_record_by_device_and_route(store):
    other = store / "amd-radeon-rx-9070-xt"
    other.mkdir()
    (other / "toy.float32.json").write_text("{}")
    with pytest.raises(records.RecordError, match="several devices .*amd-radeon-rx-9070-xt, nvidia-h200.*--device"):
        find_ladder_record("toy", "float32", None, store)
    assert find_ladder_record("toy", "float32", None, store, "nvidia-h200").parent.name == "nvidia-h200"
    routed = store / "nvidia-h200" / "toy.hip.float32.json"
    routed.write_text("{}")
    assert find_ladder_record("toy", "float32", "hip", store, "nvidia-h200") == routed     # a --route run wins
    with pytest.raises(records.RecordError, match=r"no ladder record toy.bfloat16.json .*hello-gpu ladder toy"):
        find_ladder_record("toy", "bfloat16", None, store)


# ------------------------------------------------------------------------------------------ the plot


def gids(figure) -> list[str]:
    return [line.get_gid() for axes in figure.axes for line in axes.lines if line.get_gid()]


def test_the_figure_has_both_roofs_a_point_per_rung_and_the_measured_points(store):
    (store / "nvidia-h200" / "toy.float32.profile.json").write_text(
        records.record_text(profile_record({("v02_slow", "2^26"): 3 * BIG})))
    roofline = load_roofline("toy", records_dir=store, use_cache=False)
    figure = roofline_figure(roofline)
    found = gids(figure)
    assert "roof:measured" in found and "roof:datasheet" in found and "ridge" in found
    assert sorted(g for g in found if g.startswith("point:")) == sorted(
        f"point:{p.variant}:{p.shape}" for p in roofline.points)
    assert [g for g in found if g.startswith("measured:")] == ["measured:v02_slow:2^26"]
    axes = figure.axes[0]
    measured_roof = next(line for line in axes.lines if line.get_gid() == "roof:measured")
    xs, ys = measured_roof.get_data()
    assert max(ys) == pytest.approx(MATMUL / 1e12)                        # flat at the compute roof
    assert ys[0] == pytest.approx(xs[0] * COPY / 1e12)                    # sloped at the memory roof
    assert axes.get_xscale() == "log" and axes.get_yscale() == "log"
    assert "toy roofline (float32) on NVIDIA H200" == axes.get_title()


# ------------------------------------------------------------------------------------------ the command


def test_roofline_command_prints_verdicts_and_saves_png_and_svg(store, tmp_path, monkeypatch, capsys):
    # Plots go to the user's data folder by default (XDG_DATA_HOME here), never into the records folder.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(["roofline", "toy", "--records", str(store)]) == 0
    out = capsys.readouterr().out
    assert "v03_tiny 2^16: latency-bound" in out
    assert "t01_matmul 4096^3: compute-bound, 60% of the attainable compute roof" in out
    assert "v02_slow 2^26: memory-bound, 5% of the attainable memory roof" in out
    for suffix in (".png", ".svg"):
        plot = tmp_path / "data" / "hello-gpu" / "roofline" / "nvidia-h200" / f"toy.float32.roofline{suffix}"
        assert plot.stat().st_size > 1000
        assert not (store / "nvidia-h200" / f"toy.float32.roofline{suffix}").exists()


def test_roofline_command_route_json_and_out(store, tmp_path, capsys):
    out_base = tmp_path / "plots" / "toy-triton"
    assert main(["roofline", "toy", "--records", str(store), "--route", "triton", "--json", "--out", str(out_base)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [v["variant"] for v in data["verdicts"]] == ["v00_torch", "t01_matmul"]
    assert data["roofs"]["ridge"] == pytest.approx(12.5) and data["route"] == "triton"
    assert data["plots"] == [str(out_base) + ".png", str(out_base) + ".svg"]
    assert Path(data["plots"][1]).read_text().startswith("<?xml")


def test_roofline_command_without_a_record(tmp_path, capsys):
    assert main(["roofline", "nothing", "--records", str(tmp_path)]) == 2
    assert "no ladder record nothing.float32.json" in capsys.readouterr().out


def test_roofline_of_the_committed_h200_records(tmp_path):
    """The committed vector_add ladder: the uncoalesced rung far from the roof, 2^20 calls latency-bound."""
    path = REPO / "records" / "nvidia-h200" / "vector_add.float32.json"
    if not path.is_file():
        pytest.skip("no committed vector_add record")
    roofline = load_roofline("vector_add", record_file=path, use_cache=False)
    assert roofline.dtype == "float32" and roofline.roofs.bandwidth and roofline.roofs.launch_overhead_s
    verdicts = {(v.point.variant, v.point.shape): v for v in roofline.verdicts}
    strided = verdicts[("v02_strided_chunks", "2^28")]
    assert strided.bound == "memory" and strided.fraction < 0.5
    # At 2^20 (12 MB, ~8 us) every rung is within two launch overheads but the uncoalesced one (17 us).
    assert all(v.bound == "latency" for (variant, shape), v in verdicts.items()
               if shape == "2^20" and variant != "v02_strided_chunks")
    assert verdicts[("v02_strided_chunks", "2^20")].bound == "memory"
    assert all(v.bound == "memory" for (_, shape), v in verdicts.items() if shape == "2^28")
    assert roofline_figure(roofline) is not None
