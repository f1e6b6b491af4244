"""第 12 章：attention 的 FLOP 与字节，prefill 为什么受算力限制、decode 为什么受带宽限制，以及把 S_q × S_kv 的
scores 写进显存要多付多少字节。

    python examples/course/ch12_attention_bounds.py                      # records/nvidia-h200/ceilings.json
    python examples/course/ch12_attention_bounds.py path/to/ceilings.json

FLOP 与字节都来自 attention 的 spec.work（与 ladder record 用的是同一个 work model）：FLOP = 4 × B × H × D ×
（可见的 (query, key) 对数，causal 时逐行精确地数），字节 = Q、K、V 各读一次、O 写一次。上限来自
`hello-gpu ceilings` 的实测值（copy 带宽、bfloat16 的 matmul 峰值）。最后一列是物化版（v01、t01）多出来的
流量：float32 scores 写一次、读三次，每个分数 16 字节，按实测 copy 带宽搬完要多久。
不需要 GPU：读的是提交进仓库的 ceilings record。
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ch07_roofline_bound import RECORD, bound  # noqa: E402
from ch11_gemm_bounds import measured_note  # noqa: E402

from hello_gpu.bench.records import format_figure  # noqa: E402
from hello_gpu.ops.attention.spec import dims, visible_keys, work  # noqa: E402
from hello_gpu.ops.shapes import shape_label  # noqa: E402

# (label, shape): the issue's prefill shapes (full heads and Llama 3's 8 KV heads, causal and not) and its
# four decode shapes (one query token, 32 query / 8 KV heads).
CASES = (
    ("prefill", (4, 32, 32, 4096, 4096, 128)),
    ("prefill, causal", (4, 32, 32, 4096, 4096, 128, 1)),
    ("prefill, GQA 32/8", (4, 32, 8, 4096, 4096, 128)),
    ("prefill, GQA 32/8, causal", (4, 32, 8, 4096, 4096, 128, 1)),
    ("decode, B=1", (1, 32, 8, 1, 4096, 128)),
    ("decode, B=1", (1, 32, 8, 1, 32768, 128)),
    ("decode, B=16", (16, 32, 8, 1, 4096, 128)),
    ("decode, B=16", (16, 32, 8, 1, 32768, 128)),
)
DTYPE = "bfloat16"
SCORE_TRAFFIC = 16          # bytes per float32 score: written once, read three times (v01's header)


def rows(ceilings: dict) -> list[dict]:
    measured = ceilings["ceilings"]
    copy, peak = measured["copy_bytes_per_s"], measured["matmul_flops_per_s"][DTYPE]
    out = []
    for label, shape in CASES:
        d = dims(shape)
        w = work(shape, DTYPE)
        scores = d.batch * d.heads * d.q_len * d.kv_len
        out.append({"label": label, "shape": shape_label(shape), "flops": w.flops, "bytes": w.bytes,
                    "visible": visible_keys(d) / (d.q_len * d.kv_len), **bound(w, copy, peak),
                    "score_bytes": 4 * scores, "score_s": SCORE_TRAFFIC * scores / copy})
    return out


def render(ceilings: dict) -> str:
    lines = ["| case | B x H x H_kv x S_q x S_kv x D | GFLOP | visible pairs | MB moved | FLOP/B | bound | floor µs | "
             "float32 scores, GB | moving them 4x, µs |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for row in rows(ceilings):
        lines.append(f"| {row['label']} | {row['shape']} | {format_figure(row['flops'] / 1e9)} | "
                     f"{row['visible'] * 100:.2f}% | {format_figure(row['bytes'] / 1e6)} | {format_figure(row['I'])} | "
                     f"{row['bound']} | {format_figure(row['floor_s'] * 1e6)} | "
                     f"{format_figure(row['score_bytes'] / 1e9)} | {format_figure(row['score_s'] * 1e6)} |")
    return "\n".join(lines + ["", f"{DTYPE}. {measured_note(ceilings, (DTYPE,))}"])


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else RECORD
    print(render(json.loads(path.read_text(encoding="utf-8"))))
