"""Figures of the matmul and linear ladders, drawn from their records (PNG and SVG, for the docs):

- compute shapes (M > 16): TFLOP/s per shape of the best rung of each route (SIMT HIP, mma.sync, Hopper,
  Triton, AMD WMMA), against cuBLAS (v00_torch: torch.mm / F.linear) and the other baselines timed in the
  same run (torch.compile, max-autotune), under the measured vendor-BLAS matmul ceiling of the dtype;
- decode shapes (M <= 16): GB/s per shape, the same lines, under the measured copy bandwidth. The work
  model counts A, B and C once; at M <= 16 the weight is over 99% of those bytes.

    python benchmarks/plot_matmul.py --records records/nvidia-h200 --out docs/figures

Without a record it draws nothing and says which files it looked for and how to make them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hello_gpu.bench import plots
from hello_gpu.ops import load_op

OPS = ("matmul", "linear")
DECODE_ROWS = 16               # M up to which a shape is a decode step (hello_gpu.ops.matmul_functions.GEMV_ROWS)
BASELINE_NAMES = {"v00_torch": "cuBLAS ({call})", "v00_torch_compile": "torch.compile",
                  "peer_torch_max_autotune": "torch.compile max-autotune"}
TORCH_CALL = {"matmul": "torch.mm", "linear": "F.linear"}
ROUTE_NAMES = {"hip": "SIMT / GEMV (HIP)", "mma.sync": "mma.sync (CUDA)", "hopper": "Hopper wgmma (CUDA)",
               "amd": "RDNA4 WMMA (HIP)", "triton": "Triton"}


def route_of(op_name: str, entry: dict) -> str:
    """The route a candidate belongs to, as the issue names them: the record's route, with CUDA rungs split
    by their declared arch (sm_90a: Hopper) and AMD-only HIP rungs apart."""
    route = (entry.get("extra") or {}).get("route") or "?"
    if route not in ("hip", "cuda"):
        return route
    try:
        target = load_op(op_name).rung(entry["variant"]).metadata.target
    except KeyError:                                   # a rung renamed since the record: its route as recorded
        return route
    if route == "cuda":
        return "hopper" if target and (target[1] or "").endswith("a") else "mma.sync"
    return "amd" if target and target[0] == "amd" else "hip"


def rows_of(shape: str) -> int:
    return int(shape.split("x")[0])


def chart_points(record: dict, metric: str, shapes: list[str]) -> tuple[list[dict], list[str]]:
    """At each shape: every baseline and the fastest correct candidate of each route (``label``: its rung);
    and the candidates left out because their figure is suspect (faster than the ceilings allow), named."""
    op_name = record.get("extra", {}).get("op") or record["name"].split(".")[0]
    points, left_out = [], []
    for shape in shapes:
        here = [e for e in record["entries"] if e["shape"] == shape and (e.get("derived") or {}).get(metric)]
        for entry in (e for e in here if e["role"] == "baseline"):
            name = BASELINE_NAMES.get(entry["variant"], entry["variant"]).format(call=TORCH_CALL.get(op_name, "torch"))
            points.append({**entry, "series": name})
        best: dict[str, dict] = {}
        for entry in (e for e in here if e["role"] == "candidate" and (e.get("correctness") or {}).get("passed")):
            if entry["derived"].get("suspect"):
                left_out.append(f"{entry['variant']} at {shape}")
                continue
            route = route_of(op_name, entry)
            if route not in best or entry["derived"][metric] > best[route]["derived"][metric]:
                best[route] = entry
        for route, entry in best.items():
            points.append({**entry, "series": f"{ROUTE_NAMES.get(route, route)}: best rung",
                           "label": entry["variant"].split("_")[0]})
    return points, left_out


def _chart(record: dict, metric: str, shapes: list[str], **chart):
    points, left_out = chart_points(record, metric, shapes)
    figure = plots.shape_chart(points, metric=metric, shapes=shapes, **chart)
    if left_out:
        figure.text(0.01, 0.01, f"left out as SUSPECT (beyond the ceilings, not a win): {'; '.join(left_out)}",
                    fontsize=7, color=plots.SUSPECT_EDGE, gid="left-out")
    return figure


def figures(record: dict) -> dict[str, object]:
    """``{"tflops": Figure, "decode": Figure}`` for the record's compute and decode shapes (those it has)."""
    shapes = (record.get("extra") or {}).get("shapes") or list(dict.fromkeys(e["shape"] for e in record["entries"]))
    dtype = record["name"].split(".")[-1]
    device = (record.get("device") or {}).get("name", "?")
    ceilings = record.get("ceilings") or {}
    drawn = {}
    compute = [s for s in shapes if rows_of(s) > DECODE_ROWS]
    decode = [s for s in shapes if rows_of(s) <= DECODE_ROWS]
    if compute:
        peak = (ceilings.get("matmul_flops_per_s") or {}).get(dtype)
        drawn["tflops"] = _chart(
            record, "tflop_per_s", compute,
            ceiling=peak / 1e12 if peak else None, ceiling_label=f"measured {dtype} vendor-BLAS ceiling",
            title=f"{record['name']}: TFLOP/s per shape (MxNxK) on {device}")
    if decode:
        copy = ceilings.get("copy_bytes_per_s")
        drawn["decode"] = _chart(
            record, "gb_per_s", decode,
            ceiling=copy / 1e9 if copy else None, ceiling_label="measured copy bandwidth",
            title=f"{record['name']}: decode GB/s per shape (MxNxK) on {device}")
    return drawn


def ladder_records(records: Path) -> list[tuple[Path, dict]]:
    """The ladder records of matmul and linear in ``records``: ``matmul.bfloat16.json``, or one per route
    (``matmul.cuda.bfloat16.json``, from ``hello-gpu ladder matmul --route cuda``); profiles are left out."""
    found = []
    for op in OPS:
        for path in sorted(records.glob(f"{op}.*.json")):
            record = json.loads(path.read_text())
            if record.get("kind") == "ladder" and (record.get("extra") or {}).get("op") == op:
                found.append((path, record))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, default=Path("records/nvidia-h200"))
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    arguments = parser.parse_args(argv)
    found = ladder_records(arguments.records)
    if not found:
        print(f"plot_matmul: no matmul or linear ladder record under {arguments.records} (looked for "
              f"{', '.join(f'{op}.<dtype>.json, {op}.<route>.<dtype>.json' for op in OPS)}); nothing drawn. "
              f"Records come from the ladders on the GPU, e.g. `hello-gpu ladder matmul --route cuda --dtype "
              f"bfloat16 --shapes 4096x4096x4096 --record`", file=sys.stderr)
        return 1
    for _, record in found:
        slug = (record.get("device") or {}).get("slug", "device")
        for kind, figure in figures(record).items():
            for written in plots.save(figure, arguments.out / f"{slug}-{record['name']}-{kind}"):
                print(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
