"""Datasheet peaks per GPU, every number with its source (the table itself is ``specs.json``).

These are leads, not denominators: "% of ceiling" divides by what ``hello-gpu ceilings`` measured.
The datasheet says what the vendor promises, which helps explain the gap and spot a throttled GPU.
All FLOP/s are dense (no 2:4 sparsity); ``specs.json``'s "notes" says why and how they were halved.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

SCHEMA = "hello-gpu/specs/1"
SPECS_PATH = Path(__file__).with_name("specs.json")

NUMERIC_FIELDS = ("multiprocessors", "wave_size", "memory_bytes", "bandwidth_bytes_per_s", "l2_bytes")
OPTIONAL_NUMERIC_FIELDS = ("l2_bytes_reported",)      # only where someone saw the device report it
REQUIRED_FIELDS = ("name", "aliases", "vendor", "arch", *NUMERIC_FIELDS, "cache_note", "peak_flops", "sources")
REQUIRED_DTYPES = ("float32", "float16", "bfloat16")  # tf32 and float8 are missing on some GPUs
DTYPES = ("float32", "tf32", "float16", "bfloat16", "float8")


class UnknownDeviceWarning(UserWarning):
    """The GPU is not in the datasheet table (or only its arch is)."""


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    aliases: tuple[str, ...]
    vendor: str                          # "nvidia" or "amd"
    arch: str                            # "sm_90", "gfx942"
    multiprocessors: int                 # SMs (NVIDIA) or CUs (AMD)
    wave_size: int
    memory_bytes: int
    bandwidth_bytes_per_s: float
    l2_bytes: int                        # last-level cache; cache_note says which cache that is
    cache_note: str
    peak_flops: Mapping[str, float]      # dense FLOP/s per dtype
    sources: Mapping[str, str]           # field (or "peak_flops.<dtype>") -> where the number comes from
    l2_bytes_reported: int | None = None  # what cudaDeviceProp.l2CacheSize said, where known

    def source_for(self, field: str) -> str:
        """Where a number comes from: a field name, "peak_flops.bfloat16", or just "bfloat16"."""
        for key in (field, f"peak_flops.{field}"):
            if key in self.sources:
                return self.sources[key]
        raise KeyError(f"{self.name}: no source for {field!r}")


def _fail(gpu: str, field: str, problem: str) -> None:
    raise ValueError(f"specs.json: GPU {gpu!r}, field {field!r}: {problem}")


def _check_number(name: str, field: str, value, sources: dict) -> None:
    # bool is an int in Python; a True here is a typo, not a count.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        _fail(name, field, f"must be a positive finite number, got {value!r}")
    if not isinstance(sources.get(field), str) or not sources[field].strip():
        _fail(name, field, "has no source (add it to 'sources')")


def validate_specs(data: dict) -> None:
    """Raise ValueError naming the GPU and field for anything missing, non-positive, or unsourced."""
    if data.get("schema") != SCHEMA:
        raise ValueError(f"specs.json: schema must be {SCHEMA!r}, got {data.get('schema')!r}")
    gpus = data.get("gpus")
    if not isinstance(gpus, list) or not gpus:
        raise ValueError("specs.json: 'gpus' must be a non-empty list")
    seen = set()
    for index, gpu in enumerate(gpus):
        name = gpu.get("name") or f"#{index}"
        for field in REQUIRED_FIELDS:
            if field not in gpu:
                _fail(name, field, "missing")
        if name in seen:
            _fail(name, "name", "listed twice")
        seen.add(name)
        if gpu["vendor"] not in ("nvidia", "amd"):
            _fail(name, "vendor", f"must be 'nvidia' or 'amd', got {gpu['vendor']!r}")
        if not isinstance(gpu["aliases"], list) or not all(isinstance(a, str) and a for a in gpu["aliases"]):
            _fail(name, "aliases", "must be a list of non-empty strings")
        sources = gpu["sources"]
        for field in NUMERIC_FIELDS + tuple(f for f in OPTIONAL_NUMERIC_FIELDS if f in gpu):
            _check_number(name, field, gpu[field], sources)
        if gpu["wave_size"] not in (32, 64):
            _fail(name, "wave_size", f"must be 32 or 64, got {gpu['wave_size']!r}")
        flops = gpu["peak_flops"]
        for dtype in REQUIRED_DTYPES:
            if dtype not in flops:
                _fail(name, f"peak_flops.{dtype}", "missing")
        for dtype, value in flops.items():
            if dtype not in DTYPES:
                _fail(name, f"peak_flops.{dtype}", f"unknown dtype; expected one of {DTYPES}")
            _check_number(name, f"peak_flops.{dtype}", value, sources)


def _to_spec(gpu: dict) -> DeviceSpec:
    return DeviceSpec(
        name=gpu["name"], aliases=tuple(gpu["aliases"]), vendor=gpu["vendor"], arch=gpu["arch"],
        multiprocessors=gpu["multiprocessors"], wave_size=gpu["wave_size"], memory_bytes=gpu["memory_bytes"],
        bandwidth_bytes_per_s=gpu["bandwidth_bytes_per_s"], l2_bytes=gpu["l2_bytes"], cache_note=gpu["cache_note"],
        # Read-only views, so a caller cannot edit the shared table through one spec.
        peak_flops=MappingProxyType(dict(gpu["peak_flops"])), sources=MappingProxyType(dict(gpu["sources"])),
        l2_bytes_reported=gpu.get("l2_bytes_reported"))


@lru_cache(maxsize=1)
def _specs() -> tuple[DeviceSpec, ...]:
    data = json.loads(SPECS_PATH.read_text(encoding="utf-8"))
    validate_specs(data)
    return tuple(_to_spec(gpu) for gpu in data["gpus"])


def all_specs() -> list[DeviceSpec]:
    return list(_specs())


def _key(text: str) -> str:
    key = text.strip().lower()
    if key.startswith("gfx"):
        key = key.split(":")[0]        # "gfx942:sramecc+:xnack-" -> "gfx942": target features don't change peaks
    elif key.startswith("sm_"):
        key = key.rstrip("af")         # "sm_90a" -> "sm_90", as runtime.device.arch_limits does
    return key


def lookup_all(query: str) -> list[DeviceSpec]:
    """Every GPU whose name, alias or arch matches (case-insensitive), in table order."""
    key = _key(query)
    if not key:
        return []
    return [s for s in _specs() if key in {_key(s.name), _key(s.arch), *(_key(a) for a in s.aliases)}]


def lookup(query: str) -> DeviceSpec | None:
    """The first match of lookup_all: an arch like "sm_90" matches several GPUs, the table lists the likeliest first."""
    matches = lookup_all(query)
    return matches[0] if matches else None


def spec_for_device(name: str, arch: str) -> DeviceSpec | None:
    """The datasheet spec for a device as PyTorch names it, by name first and then by arch.

    An arch-only match warns too: GPUs sharing an arch can differ several-fold (an H20 is sm_90 like an H200).
    """
    spec = lookup(name) if name else None
    if spec is not None:
        return spec
    spec = lookup(arch) if arch else None
    if spec is not None:
        warnings.warn(f"GPU {name!r} is not in the datasheet table; using the figures of {spec.name} (same arch "
                      f"{spec.arch}), which may not fit. Measured ceilings (`hello-gpu ceilings`) are what counts.",
                      UnknownDeviceWarning, stacklevel=2)
        return spec
    warnings.warn(f"GPU {name!r} (arch {arch!r}) is unknown to the datasheet table; measured ceilings "
                  f"(`hello-gpu ceilings`) will be used instead.", UnknownDeviceWarning, stacklevel=2)
    return None
