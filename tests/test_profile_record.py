"""The profile record (CPU tier) and ``hello-gpu profile`` without a GPU.

A :class:`RungProfile` is put together from the real vector_add operator and rungs, a kernel table
parsed from a saved torch.profiler trace and counters parsed from saved ncu output (both from the
H200), exactly what ``profile_rung`` assembles on the GPU. The profile record the H200 run wrote is
checked against the record schema as it is.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from hello_gpu.bench import records
from hello_gpu.cli import main
from hello_gpu.ops import load_op
from hello_gpu.profile import record as profile_records
from hello_gpu.profile.kernel_table import table_from_trace
from hello_gpu.profile.ncu import METRICS, counters_from_output
from hello_gpu.profile.roofline import load_roofline, measured_bytes_by_rung
from hello_gpu.profile.rung_profile import RungProfile, own_kernel_names, raw_stem
from hello_gpu.runtime.device import gpu_vendor

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "profile"
ENVIRONMENT = {"python": "3.12", "gpu": "NVIDIA H200", "arch": "sm_90", "l2_bytes": 62914560,
               "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False}}


def rung_profile(rung_id: str = "v01_thread_per_element", shape=2**24):
    """The profile of a vector_add rung from its H200 trace and ncu output (``v01_...`` -> ``*_v01.*``)."""
    op = load_op("vector_add")
    rung = op.rung(rung_id)
    ours, triton = own_kernel_names(rung)
    number = rung_id.split("_")[0]
    table = table_from_trace(json.loads((FIXTURES / f"torch_trace_cuda_vector_add_{number}.json").read_text()),
                             ours=ours, triton=triton, title=rung_id)
    work = op.spec.work(shape, "float32")
    table.counted_bytes = work.bytes
    ncu_output = (FIXTURES / f"ncu_raw_vector_add_{number}.csv").read_text()
    table.with_counters(counters_from_output(ncu_output, 0, calls=3, metrics=list(METRICS)))
    return RungProfile(op, rung, shape, "float32", table, work)


def test_profile_entry_follows_the_record_schema():
    record = profile_records.profile_record([rung_profile()], environment=ENVIRONMENT)
    assert records.validate_record(record) == []
    assert record["kind"] == "profile" and record["name"] == "vector_add.float32.profile"
    assert record["device"] == {"slug": "nvidia-h200", "name": "NVIDIA H200", "arch": "sm_90"}
    [entry] = record["entries"]
    assert entry["variant"] == "v01_thread_per_element" and entry["shape"] == "2^24" and entry["correctness"] is None
    assert entry["source"]["path"] == "src/hello_gpu/ops/vector_add/v01_thread_per_element.hip"
    assert entry["sources"][0] == entry["source"]
    assert entry["timing"]["median"] == pytest.approx(62.3835e-6) and entry["timing"]["count"] == 10
    assert (entry["timing"]["cache"], entry["timing"]["clock"]) == ("warm", "device-events")
    extra = entry["extra"]
    assert extra["kernels"][0]["source"] == "hello-gpu" and extra["kernels"][0]["grid"] == [65536, 1, 1]
    assert extra["kernels"][0]["counters"]["sectors_per_request"] == pytest.approx(4.0)
    assert extra["kernels"][0]["counters"]["extra"] == {}           # none of ncu's 300 other columns
    assert extra["bytes"]["counted_bytes"] == 12 * 2**24
    assert extra["bytes"]["measured_over_counted"] == pytest.approx(0.9414, abs=1e-4)
    assert extra["counters"]["tool"] == "ncu" and "kernels" not in extra["counters"]
    assert extra["measured"]["commit"] == ENVIRONMENT["git"]["commit"]
    json.loads(records.record_text(record))          # strict JSON: no NaN anywhere


def test_a_profile_without_device_time_is_not_recorded():
    profile = rung_profile()
    profile.table.per_call_seconds = []
    with pytest.raises(records.RecordError, match="no device time was recorded"):
        profile_records.profile_record([profile], environment=ENVIRONMENT)


def test_a_profile_record_holds_one_operator_and_dtype():
    other = rung_profile()
    other.dtype = "bfloat16"
    with pytest.raises(records.RecordError, match="one operator and one dtype"):
        profile_records.profile_record([rung_profile(), other], environment=ENVIRONMENT)


def test_merging_replaces_the_same_rung_keeps_others_and_drops_stale_ones():
    first = profile_records.profile_record([rung_profile(shape=2**24), rung_profile(shape=2**20)],
                                           environment=ENVIRONMENT)
    stale = copy.deepcopy(first["entries"][0])
    stale.update(variant="v03_grid_stride")
    stale["source"] = {"path": "src/hello_gpu/ops/vector_add/v03_grid_stride.hip", "sha256": "0" * 64}
    stale["sources"] = [stale["source"]]
    first["entries"].append(stale)
    again = rung_profile("v02_strided_chunks")
    merged = profile_records.profile_record([rung_profile(shape=2**24), again], existing=first,
                                            environment=ENVIRONMENT)
    keys = [(e["variant"], e["shape"]) for e in merged["entries"]]
    assert keys == [("v01_thread_per_element", "2^20"), ("v01_thread_per_element", "2^24"),
                    ("v02_strided_chunks", "2^24")]                  # v03's source changed since: dropped
    assert records.validate_record(merged) == []


def test_the_written_profile_record_feeds_the_roofline(tmp_path, monkeypatch):
    """write_profile_record on a stand-in GPU manifest, then the roofline reads ncu's bytes from it."""
    import hello_gpu.runtime.manifest as manifest
    monkeypatch.setattr(manifest, "environment_manifest", lambda: copy.deepcopy(ENVIRONMENT))
    monkeypatch.setattr(manifest, "read_clocks", lambda: None)
    path = profile_records.write_profile_record([rung_profile()], tmp_path / "records")
    assert path == tmp_path / "records" / "nvidia-h200" / "vector_add.float32.profile.json"
    path = profile_records.write_profile_record([rung_profile("v02_strided_chunks")], tmp_path / "records")
    written = json.loads(path.read_text())
    assert [e["variant"] for e in written["entries"]] == ["v01_thread_per_element", "v02_strided_chunks"]
    measured = measured_bytes_by_rung(written)
    assert measured[("v02_strided_chunks", "2^24")] > measured[("v01_thread_per_element", "2^24")]
    ladder = REPO / "records" / "nvidia-h200" / "vector_add.float32.json"
    # The repository ships this record; without it the roofline half of this test would check nothing.
    assert ladder.is_file(), f"{ladder} is missing: the roofline cannot be checked against the ladder record"
    (path.parent / "vector_add.float32.json").write_text(ladder.read_text())
    roofline = load_roofline("vector_add", records_dir=tmp_path / "records", use_cache=False)
    point = next(p for p in roofline.points if (p.variant, p.shape) == ("v02_strided_chunks", "2^24"))
    assert point.measured_over_counted == pytest.approx(measured[("v02_strided_chunks", "2^24")] / (12 * 2**24))


def test_the_record_the_h200_wrote_is_valid_and_shows_the_strided_rung_moving_more():
    """vector_add.float32.profile.json as ``hello-gpu profile vector_add RUNG --record`` wrote it on the H200
    (2026-12-03, three rungs at 2^24): it passes the record checks and says what issue 6 part 5 asks for."""
    record = json.loads((FIXTURES / "profile_record_vector_add_float32.json").read_text())
    assert records.validate_record(record) == []
    assert (record["kind"], record["name"], record["device"]["slug"]) == ("profile", "vector_add.float32.profile",
                                                                           "nvidia-h200")
    entries = {entry["variant"]: entry for entry in record["entries"]}
    assert set(entries) == {"v01_thread_per_element", "v02_strided_chunks", "v04_vector_128bit"}
    summary = {variant: entry["extra"]["counters"]["summary"] for variant, entry in entries.items()}
    assert summary["v01_thread_per_element"]["sectors_per_request"] == pytest.approx(4.0)
    assert summary["v02_strided_chunks"]["sectors_per_request"] == pytest.approx(32.0)
    assert summary["v04_vector_128bit"]["sectors_per_request"] == pytest.approx(16.0)
    measured = measured_bytes_by_rung(record)
    assert measured[("v01_thread_per_element", "2^24")] == pytest.approx(189_524_053.33)
    assert measured[("v02_strided_chunks", "2^24")] == pytest.approx(254_689_877.33)
    # The same figures as this code parses from the ncu output saved in the same run.
    for variant in ("v01_thread_per_element", "v02_strided_chunks"):
        parsed = rung_profile(variant).table.bytes_comparison()
        assert parsed["measured_dram_bytes"] == pytest.approx(measured[(variant, "2^24")])
        assert entries[variant]["extra"]["kernels"][0]["grid"] == list(rung_profile(variant).table.rows[0].grid)


def test_raw_file_names_say_rung_dtype_and_shape():
    assert raw_stem("v01_thread_per_element", 2**24, "float32") == "v01_thread_per_element.float32.2^24"
    assert raw_stem("v01_row", (1823, 781), "bfloat16") == "v01_row.bfloat16.1823x781"


@pytest.mark.skipif(gpu_vendor() is not None, reason="this machine has a GPU")
def test_profile_command_without_a_gpu(capsys):
    assert main(["profile", "vector_add", "v01_thread_per_element", "--shape", "2**20"]) == 2
    assert "no GPU here" in capsys.readouterr().out


def test_profile_command_names_the_rungs_on_a_typo(capsys):
    assert main(["profile", "vector_add", "v99_nothing"]) == 2
    out = capsys.readouterr().out
    assert "vector_add has no rung 'v99_nothing'" in out and "v02_strided_chunks" in out
