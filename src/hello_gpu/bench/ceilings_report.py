"""``hello-gpu ceilings``: show the measured ceilings next to the datasheet, and record them."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..runtime import manifest
from ..runtime.device import device_info, gpu_vendor
from .ceilings import Ceilings


def _ratio(measured: float | None, datasheet: float | None) -> str:
    return f"{measured / datasheet:.0%}" if measured and datasheet else "-"


def ceilings_table(ceilings: Ceilings, spec) -> Table:
    """Measured against datasheet: the gap is the first lesson (a real copy never reaches the peak)."""
    table = Table(title=f"ceilings on {ceilings.device} ({ceilings.driver})")
    for column in ("what", "measured", "datasheet", "measured / datasheet"):
        table.add_column(column, justify="left" if column == "what" else "right")
    bandwidth = spec.bandwidth_bytes_per_s if spec else None
    table.add_row("copy bandwidth (read + write)", f"{ceilings.copy_bytes_per_s / 1e9:.0f} GB/s",
                  f"{bandwidth / 1e9:.0f} GB/s" if bandwidth else "-", _ratio(ceilings.copy_bytes_per_s, bandwidth))
    if ceilings.read_bytes_per_s:
        table.add_row("read bandwidth (torch.sum)", f"{ceilings.read_bytes_per_s / 1e9:.0f} GB/s",
                      f"{bandwidth / 1e9:.0f} GB/s" if bandwidth else "-", _ratio(ceilings.read_bytes_per_s, bandwidth))
    for dtype, flops in ceilings.matmul_flops_per_s.items():
        peak = (spec.peak_flops or {}).get(dtype) if spec else None
        label = "matmul float32 (TF32 off)" if dtype == "float32" else f"matmul {dtype}"
        table.add_row(label, f"{flops / 1e12:.1f} TFLOP/s", f"{peak / 1e12:.1f} TFLOP/s" if peak else "-",
                      _ratio(flops, peak))
    if ceilings.launch_overhead_s:
        table.add_row("launch overhead (host, per launch)", f"{ceilings.launch_overhead_s * 1e6:.2f} us", "-", "-")
    if ceilings.graph_call_s:
        table.add_row("1-element call inside a CUDA graph", f"{ceilings.graph_call_s * 1e6:.2f} us", "-", "-")
    return table


def ceilings_record(ceilings: Ceilings, clocks_start: dict | None = None) -> dict:
    """The ceilings as a record (kind "ceilings"), with the environment they were measured in."""
    from .records import device_slug, new_record
    info = device_info()
    environment = manifest.environment_manifest()
    environment.update(clocks_start=clocks_start, clocks_end=manifest.read_clocks())
    return new_record(
        "ceilings", "ceilings", device={"slug": device_slug(info.name), "name": info.name, "arch": info.arch},
        environment=environment, entries=[],
        ceilings={"copy_bytes_per_s": ceilings.copy_bytes_per_s, "read_bytes_per_s": ceilings.read_bytes_per_s,
                  "matmul_flops_per_s": ceilings.matmul_flops_per_s,
                  "launch_overhead_s": ceilings.launch_overhead_s, "graph_call_s": ceilings.graph_call_s},
        extra={"driver": ceilings.driver, "measured_at": ceilings.measured_at, "notes": ceilings.notes})


def run_ceilings(*, refresh: bool, quick: bool, as_json: bool, record_dir: Path | None, console: Console) -> int:
    import json

    from .ceilings import cached_ceilings, measure_ceilings
    from .specs import spec_for_device
    if gpu_vendor() is None:
        console.print("hello-gpu ceilings: no GPU here; ceilings are measured on the device they describe")
        return 2
    clocks_start = manifest.read_clocks()
    ceilings = None if refresh else cached_ceilings()
    if ceilings is None:
        try:
            ceilings = measure_ceilings(quick=quick, progress=console.is_terminal)
        except KeyboardInterrupt:
            partial = cached_ceilings(allow_partial=True)
            console.print("interrupted: what was measured so far is kept in the cache (marked incomplete)")
            if partial:
                console.print(ceilings_table(partial, None))
            return 130
    info = device_info()
    if as_json:
        print(json.dumps(ceilings.to_dict(), indent=2))
    else:
        console.print(ceilings_table(ceilings, spec_for_device(info.name, info.arch)))
    if record_dir is not None:
        from .records import write_record
        path = write_record(ceilings_record(ceilings, clocks_start), record_dir, repo_root=record_dir.resolve().parent)
        console.print(f"wrote {path}")
    return 0
