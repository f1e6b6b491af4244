"""第 7 章：从实测上限算出一个 kernel 的算术强度、ridge 点和可达上限。

    python examples/course/ch07_roofline_bound.py                      # records/nvidia-h200/ceilings.json
    python examples/course/ch07_roofline_bound.py path/to/ceilings.json

可达上限 = min(P, I × BW)：I = FLOP / 字节（work model 算的最少字节），P 是这个 dtype 的 matmul 峰值，
BW 是 copy 带宽。时间下限 = 字节 / BW（memory 一侧）与 FLOP / P（compute 一侧）中较大的那个。
不需要 GPU：读的是提交进仓库的 ceilings record 和 bench/specs.json 里的数据手册峰值。
"""

import json
import sys
from pathlib import Path

from hello_gpu.bench import Work
from hello_gpu.bench.specs import lookup

RECORD = Path(__file__).resolve().parents[2] / "records" / "nvidia-h200" / "ceilings.json"
N, ROWS, COLS, M = 2**28, 8192, 8192, 4096

# 与各算子 spec.py 的 work model 相同的公式（每个输入读一次、每个输出写一次）。
CASES = {
    "vector_add 2^28 float32": Work(bytes=3 * N * 4, flops=N, dtype="float32"),
    "reduce_sum 2^28 float32": Work(bytes=4 * N + 4, flops=N, dtype="float32"),
    "softmax 8192x8192 bfloat16": Work(bytes=2 * ROWS * COLS * 2, flops=5 * ROWS * COLS, dtype="bfloat16"),
    "matmul 4096^3 float16": Work(bytes=3 * M * M * 2, flops=2 * M**3, dtype="float16"),
}


def bound(work: Work, bandwidth: float, peak: float) -> dict:
    intensity = work.flops / work.bytes
    return {"I": intensity, "ridge": peak / bandwidth, "attainable": min(peak, intensity * bandwidth),
            "floor_s": max(work.bytes / bandwidth, work.flops / peak),
            "bound": "memory" if intensity < peak / bandwidth else "compute"}


def render(ceilings: dict) -> str:
    measured = ceilings["ceilings"]
    sheet = lookup(ceilings["device"]["name"])
    lines = ["| kernel | FLOP/B | ridge FLOP/B (measured) | attainable TFLOP/s | floor µs | bound | "
             "ridge FLOP/B (datasheet) |", "|---|---:|---:|---:|---:|---|---:|"]
    for name, work in CASES.items():
        ours = bound(work, measured["copy_bytes_per_s"], measured["matmul_flops_per_s"][work.dtype])
        theirs = bound(work, sheet.bandwidth_bytes_per_s, sheet.peak_flops[work.dtype])
        lines.append(f"| {name} | {ours['I']:.3g} | {ours['ridge']:.3g} | {ours['attainable'] / 1e12:.3g} | "
                     f"{ours['floor_s'] * 1e6:.3g} | {ours['bound']} | {theirs['ridge']:.3g} |")
    lines += ["", f"Measured: copy {measured['copy_bytes_per_s'] / 1e9:,.0f} GB/s, read {measured['read_bytes_per_s'] / 1e9:,.0f}"
                  f" GB/s, device call (graph) {measured['graph_call_s'] * 1e6:.2f} µs "
                  f"(`{ceilings['name']}` record, {ceilings['device']['name']}, {ceilings['extra']['measured_at']}); "
                  f"datasheet: {sheet.name}, {sheet.bandwidth_bytes_per_s / 1e12:.1f} TB/s (bench/specs.json)."]
    return "\n".join(lines)


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else RECORD
    print(render(json.loads(path.read_text(encoding="utf-8"))))
