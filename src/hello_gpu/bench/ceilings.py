"""Measured ceilings: what this GPU really does, the denominators of every "% of ceiling".

Datasheet peaks are leads (the H200's 4.8 TB/s becomes ~4.3 TB/s for a real copy). So the ceilings
are measured once per device and driver and cached in the user cache dir:
- copy bandwidth: a 1 GiB device-to-device copy, bytes read + bytes written;
- read bandwidth: ``torch.sum`` over 1 GiB of float32 (reads dominate; the output is one number);
- vendor-BLAS matmul at 8192^3 for float32 (TF32 off), tf32, float16, bfloat16, and float8 where the
  GPU has it (through ``torch._scaled_mm``);
- launch overhead: host time per launch of a 1-element kernel, and device time per call in a graph.

Each figure is written to the cache as soon as it is measured (atomically), so an interrupted run
keeps what it finished; the cache is marked complete only when all are done.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..runtime.compiler import cache_dir
from ..runtime.device import device_info, torch_module
from .work import Work

CEILINGS_FORMAT = 1
MATMUL_SIZE = 8192
COPY_BYTES = 2**30
MATMUL_DTYPES = ("float32", "tf32", "float16", "bfloat16", "float8")


@dataclass
class Ceilings:
    device: str
    driver: str
    copy_bytes_per_s: float | None = None
    read_bytes_per_s: float | None = None
    matmul_flops_per_s: dict[str, float] = field(default_factory=dict)
    launch_overhead_s: float | None = None         # host time per launch, back to back
    graph_call_s: float | None = None              # device time per 1-element call inside a CUDA graph
    complete: bool = False
    measured_at: str = ""
    quick: bool = False                            # measured with --quick: 1/8 of the copy, smaller matmuls
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict) -> "Ceilings":
        known = {k: data[k] for k in Ceilings.__dataclass_fields__ if k in data}
        return Ceilings(**known)


def _driver_version() -> str:
    torch = torch_module()
    if getattr(torch.version, "hip", None):
        return f"hip-{torch.version.hip}"
    try:
        from cuda.bindings import driver
        status, version = driver.cuDriverGetVersion()
        return f"cuda-driver-{int(version)}" if int(status) == 0 else "unknown"
    except Exception:  # noqa: BLE001 - the version only names the cache file
        return "unknown"


def _cache_path(device_name: str, driver: str) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in device_name.lower()).strip("-")
    return cache_dir().parent / "ceilings" / f"{slug}--{driver}.json"


def _save(ceilings: Ceilings) -> Path:
    path = _cache_path(ceilings.device, ceilings.driver)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(handle, "w") as file:
        json.dump({"format": CEILINGS_FORMAT, **ceilings.to_dict()}, file, indent=2)
    os.replace(temporary, path)
    return path


def load_ceilings(device_name: str, driver: str, allow_partial: bool = False) -> Ceilings | None:
    """Ceilings cached for this device and driver; None if absent, unreadable, old-format or partial."""
    try:
        data = json.loads(_cache_path(device_name, driver).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != CEILINGS_FORMAT:
        return None
    ceilings = Ceilings.from_dict(data)
    return ceilings if ceilings.complete or allow_partial else None


def cached_ceilings(allow_partial: bool = False) -> Ceilings | None:
    """The cached ceilings of the current GPU and driver, or None if never measured here."""
    torch = torch_module()
    if not torch.cuda.is_available():
        return None
    return load_ceilings(device_info().name, _driver_version(), allow_partial)


def _matmul_operands(dtype: str, size: int):
    torch = torch_module()
    generator = torch.Generator(device="cuda").manual_seed(0)
    # Random values, never zeros: a matmul on zeros ran 13% faster on an H200 of this workplace.
    a = torch.randn(size, size, device="cuda", generator=generator)
    b = torch.randn(size, size, device="cuda", generator=generator)
    if dtype in ("float32", "tf32"):
        return a, b
    if dtype == "float8":
        return a.to(torch.float8_e4m3fn), b.t().contiguous().t().to(torch.float8_e4m3fn)
    return a.to(getattr(torch, dtype)), b.to(getattr(torch, dtype))


def _matmul_call(dtype: str, a, b):
    torch = torch_module()
    if dtype == "float8":
        scale = torch.ones((), device="cuda")
        return lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
    return lambda: torch.matmul(a, b)


def measure_ceilings(*, quick: bool = False, progress: bool = True) -> Ceilings:
    """Measure every ceiling on the current GPU, saving after each one; returns the complete set."""
    from .timing import measure
    torch = torch_module()
    info = device_info()
    ceilings = Ceilings(info.name, _driver_version(), measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        quick=quick)
    copy_bytes = COPY_BYTES // (8 if quick else 1)
    size = MATMUL_SIZE // (2 if quick else 1)
    steps = ["copy", "read", *[f"matmul {d}" for d in MATMUL_DTYPES], "launch"]
    from rich.progress import Progress
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("ceilings", total=len(steps))
        for step in steps:
            bar.update(task, description=f"ceilings: {step}")
            if step == "copy":
                source = torch.randn(copy_bytes // 4, device="cuda")
                target = torch.empty_like(source)
                result = measure(lambda: target.copy_(source), work=Work(bytes=2 * copy_bytes), ceilings=False)
                ceilings.copy_bytes_per_s = 2 * copy_bytes / result.median
                del source, target
            elif step == "read":
                source = torch.randn(copy_bytes // 4, device="cuda")
                result = measure(lambda: source.sum(), ceilings=False)
                ceilings.read_bytes_per_s = copy_bytes / result.median
                del source
            elif step.startswith("matmul"):
                dtype = step.split()[1]
                _measure_matmul(ceilings, dtype, size)
            else:
                _measure_launch(ceilings)
            _save(ceilings)
            bar.advance(task)
    ceilings.complete = True
    _save(ceilings)
    return ceilings


def _measure_matmul(ceilings: Ceilings, dtype: str, size: int) -> None:
    from .timing import measure
    torch = torch_module()
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        a, b = _matmul_operands(dtype, size)
        call = _matmul_call(dtype, a, b)
        result = measure(call, cache="warm", ceilings=False, max_seconds=3.0)
        ceilings.matmul_flops_per_s[dtype] = 2 * size**3 / result.median
    except (RuntimeError, TypeError, AttributeError) as error:   # fp8 where the GPU or build lacks it
        ceilings.notes.append(f"matmul {dtype} not measured: {str(error).splitlines()[0][:200]}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def _measure_launch(ceilings: Ceilings) -> None:
    from .timing import measure
    torch = torch_module()
    a, b = torch.randn(1, device="cuda"), torch.randn(1, device="cuda")
    out = torch.empty_like(a)
    for _ in range(100):
        torch.add(a, b, out=out)
    torch.cuda.synchronize()
    calls = 2000
    started = time.perf_counter()
    for _ in range(calls):
        torch.add(a, b, out=out)
    torch.cuda.synchronize()
    ceilings.launch_overhead_s = (time.perf_counter() - started) / calls
    in_graph = measure(lambda: torch.add(a, b, out=out), cache="warm", graph=True, ceilings=False)
    ceilings.graph_call_s = in_graph.median
