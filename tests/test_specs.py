"""The datasheet table: complete, sourced, and found the way PyTorch names devices."""

import copy
import dataclasses
import json
import warnings

import pytest

from hello_gpu.bench import specs
from hello_gpu.bench.specs import (SPECS_PATH, UnknownDeviceWarning, all_specs, lookup, lookup_all,
                                   spec_for_device, validate_specs)

REQUIRED = ["NVIDIA H200 SXM", "NVIDIA H100 SXM", "NVIDIA H100 PCIe", "NVIDIA A100 SXM 80GB", "NVIDIA L40S",
            "NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 5090", "AMD Radeon RX 9070 XT", "AMD Radeon RX 7900 XTX",
            "AMD Instinct MI300X", "AMD Instinct MI250X (one GCD)"]


def raw():
    return json.loads(SPECS_PATH.read_text())


def test_every_required_gpu_is_listed():
    assert set(REQUIRED) <= {s.name for s in all_specs()}


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.name)
def test_every_number_is_positive_and_sourced(spec):
    fields = list(specs.NUMERIC_FIELDS) + (["l2_bytes_reported"] if spec.l2_bytes_reported else [])
    for field in fields:
        assert getattr(spec, field) > 0, field
        assert spec.source_for(field).strip(), field
    assert set(specs.REQUIRED_DTYPES) <= set(spec.peak_flops)
    for dtype, flops in spec.peak_flops.items():
        assert flops > 0 and spec.source_for(dtype).strip(), dtype
    assert spec.vendor in ("nvidia", "amd") and spec.cache_note


def test_peaks_are_dense_not_sparse():
    # Dense tensor peaks sit well below ~1.5 PFLOP/s for bf16 on any listed GPU; the sparse headline (1,979) would not.
    assert all(s.peak_flops["bfloat16"] < 1.5e15 for s in all_specs())


@pytest.mark.parametrize("query, expected", [
    ("NVIDIA H200", "NVIDIA H200 SXM"),                   # torch's name
    ("nvidia h100 80gb hbm3", "NVIDIA H100 SXM"),         # alias, any case
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("  AMD Radeon RX 9070 XT ", "AMD Radeon RX 9070 XT"),
    ("AMD INSTINCT MI300X", "AMD Instinct MI300X"),
    ("gfx942:sramecc+:xnack-", "AMD Instinct MI300X"),    # gcnArchName with target features
    ("GFX1201", "AMD Radeon RX 9070 XT"),
    ("gfx1100", "AMD Radeon RX 7900 XTX"),
    ("gfx90a:sramecc+:xnack-", "AMD Instinct MI250X (one GCD)"),
    ("sm_120", "NVIDIA GeForce RTX 5090"),
    ("sm_90a", "NVIDIA H200 SXM"),                        # arch-specific suffix stripped; first listed wins
    ("nvidia geforce rtx 4090", "NVIDIA GeForce RTX 4090"),
])
def test_lookup(query, expected):
    assert lookup(query).name == expected


def test_arch_matches_several():
    assert [s.name for s in lookup_all("sm_90")] == ["NVIDIA H200 SXM", "NVIDIA H100 SXM", "NVIDIA H100 PCIe"]
    assert {s.name for s in lookup_all("SM_89")} == {"NVIDIA L40S", "NVIDIA GeForce RTX 4090"}
    assert lookup("no such gpu") is None and lookup_all("") == []


def test_h200_against_h100():
    h200, h100 = lookup("NVIDIA H200"), lookup("NVIDIA H100 80GB HBM3")
    assert h200.bandwidth_bytes_per_s == 4.8e12 > h100.bandwidth_bytes_per_s
    assert h200.peak_flops["bfloat16"] == h100.peak_flops["bfloat16"]   # same GH100 tensor cores and clocks
    assert h200.l2_bytes_reported == 60 * 2**20 and h200.source_for("l2_bytes_reported")


def test_wave_sizes():
    assert lookup("AMD Instinct MI300X").wave_size == 64
    assert lookup("AMD Radeon RX 9070 XT").wave_size == 32
    assert lookup("NVIDIA H200").wave_size == 32


def test_specs_are_read_only():
    spec = lookup("NVIDIA H200")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.bandwidth_bytes_per_s = 1
    with pytest.raises(TypeError):
        spec.peak_flops["bfloat16"] = 1


def test_spec_for_device_by_name_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert spec_for_device("NVIDIA H200", "sm_90").name == "NVIDIA H200 SXM"


def test_spec_for_device_by_arch_only_warns():
    with pytest.warns(UnknownDeviceWarning, match="not in the datasheet table"):
        assert spec_for_device("AMD Instinct MI300X-ish", "gfx942:sramecc+:xnack-").name == "AMD Instinct MI300X"


def test_unknown_gpu_warns_and_returns_none():
    with pytest.warns(UnknownDeviceWarning, match="hello-gpu ceilings"):
        assert spec_for_device("Imaginary GPU 9000", "sm_999") is None


def _break(mutate):
    data = copy.deepcopy(raw())
    mutate(data["gpus"][0])
    return data


def test_validate_accepts_the_shipped_table():
    validate_specs(raw())


def test_validate_rejects_missing_source():
    data = _break(lambda gpu: gpu["sources"].pop("bandwidth_bytes_per_s"))
    with pytest.raises(ValueError, match=r"NVIDIA H200 SXM.*bandwidth_bytes_per_s.*source"):
        validate_specs(data)


def test_validate_rejects_negative_number():
    data = _break(lambda gpu: gpu["peak_flops"].update(bfloat16=-1))
    with pytest.raises(ValueError, match=r"NVIDIA H200 SXM.*peak_flops\.bfloat16.*positive"):
        validate_specs(data)


def test_validate_rejects_missing_field():
    data = _break(lambda gpu: gpu.pop("wave_size"))
    with pytest.raises(ValueError, match=r"NVIDIA H200 SXM.*wave_size.*missing"):
        validate_specs(data)
