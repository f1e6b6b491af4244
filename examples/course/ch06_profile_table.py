"""第 6 章：把一个 profile record（`hello-gpu profile ... --record` 写的 JSON）读成一张 Markdown 表。

    python examples/course/ch06_profile_table.py records/nvidia-h200/vector_add.float32.profile.json

每个 kernel 一行。计数器在 record 里是 ncu / rocprofv3 跑 `calls` 次的总和，这里除以 `calls` 得到每次调用。
不需要 GPU：读的是提交进仓库的 record。
"""

import json
import sys
from pathlib import Path

COLUMNS = ("rung", "shape", "kernel", "warm µs", "DRAM MB/call", "DRAM/counted", "sect/req", "occupancy",
           "SM", "memory", "L2 hit", "top stalls (cycles/inst)")


def _pct(value) -> str:
    return "—" if value is None else f"{value:.0f}%"


def kernel_rows(entry: dict) -> list[list[str]]:
    extra = entry["extra"]
    calls = (extra.get("counters") or {}).get("calls") or 1
    ratio = (extra.get("bytes") or {}).get("measured_over_counted")
    rows = []
    for index, kernel in enumerate(extra["kernels"]):
        c = kernel.get("counters") or {}
        dram = c.get("dram_bytes")
        stalls = ", ".join(f"{name} {cycles:.1f}" for name, cycles in c.get("top_stalls", []))
        rows.append([entry["variant"], entry["shape"], kernel["key"], f"{kernel['mean_seconds'] * 1e6:.1f}",
                     "—" if dram is None else f"{dram / calls / 1e6:.1f}",
                     f"{ratio:.2f}×" if ratio is not None and index == 0 else "—",
                     "—" if c.get("sectors_per_request") is None else f"{c['sectors_per_request']:.1f}",
                     _pct(c.get("achieved_occupancy_pct")), _pct(c.get("sm_throughput_pct")),
                     _pct(c.get("memory_throughput_pct")), _pct(c.get("l2_hit_rate_pct")), stalls or "—"])
    return rows


def render(record: dict) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---"] * 3 + ["---:"] * 8 + ["---"]) + "|"]
    for entry in record["entries"]:
        lines += ["| " + " | ".join(row) + " |" for row in kernel_rows(entry)]
    commits = sorted({e["extra"]["measured"]["commit"] for e in record["entries"]})
    lines += ["", f"Record `{record['name']}`, {record['device']['name']}, commit {', '.join(commits)}; "
                  f"warm µs: torch.profiler (L2 not flushed); counters: {record['entries'][0]['extra']['counters']['tool']}."]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))))
