"""The ceilings cache (no GPU): per device and driver, atomic, partial runs not taken as complete."""

import json

import pytest

from hello_gpu.bench.ceilings import Ceilings, _cache_path, _save, load_ceilings
from hello_gpu.bench.ceilings_report import ceilings_table
from hello_gpu.bench.specs import lookup


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HG_CACHE_DIR", str(tmp_path / "kernels"))


def sample(complete=True):
    return Ceilings("NVIDIA H200", "cuda-driver-13000", copy_bytes_per_s=4.25e12, read_bytes_per_s=4.1e12,
                    matmul_flops_per_s={"bfloat16": 7.7e14, "float32": 5.1e13}, launch_overhead_s=5.5e-6,
                    graph_call_s=2.1e-6, complete=complete, measured_at="2026-12-03T10:00:00Z")


def test_round_trip_keyed_by_device_and_driver():
    _save(sample())
    assert load_ceilings("NVIDIA H200", "cuda-driver-13000") == sample()
    assert load_ceilings("NVIDIA H200", "cuda-driver-12080") is None       # another driver: measure again
    assert load_ceilings("NVIDIA H100 80GB HBM3", "cuda-driver-13000") is None


def test_partial_results_are_kept_but_not_used_as_complete():
    _save(sample(complete=False))
    assert load_ceilings("NVIDIA H200", "cuda-driver-13000") is None
    assert load_ceilings("NVIDIA H200", "cuda-driver-13000", allow_partial=True).copy_bytes_per_s == 4.25e12


def test_corrupt_or_old_cache_is_ignored():
    path = _cache_path("NVIDIA H200", "cuda-driver-13000")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert load_ceilings("NVIDIA H200", "cuda-driver-13000") is None
    path.write_text(json.dumps({"format": 0, **sample().to_dict()}))
    assert load_ceilings("NVIDIA H200", "cuda-driver-13000") is None
    _save(sample())
    assert not list(path.parent.glob("*.tmp"))           # atomic: no temporary left behind


def test_table_puts_measured_beside_datasheet():
    from rich.console import Console
    console = Console(width=120, record=True)
    console.print(ceilings_table(sample(), lookup("NVIDIA H200")))
    text = console.export_text()
    assert "4250 GB/s" in text and "4800 GB/s" in text and "89%" in text
    assert "matmul float32 (TF32 off)" in text
