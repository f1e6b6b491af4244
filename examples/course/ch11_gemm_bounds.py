"""第 11 章：matmul 为什么会变成计算受限，而 decode 的 GEMV 为什么仍然受带宽限制；以及每一级 rung 的 block tile
从一次 global 加载里拿到多少 FLOP。

    python examples/course/ch11_gemm_bounds.py                      # records/nvidia-h200/ceilings.json
    python examples/course/ch11_gemm_bounds.py path/to/ceilings.json

第一张表：整个 matmul 的算术强度 = 2MNK / ((MK + KN + MN) × 每元素字节)（matmul 的 spec.work_for），
和实测的 ridge（这个 dtype 的 matmul 峰值 / copy 带宽，都来自 `hello-gpu ceilings`）比较，再给出时间下限。
第二张表：一个 block 每走一步 K，从 global memory（DRAM 或 L2）读 (BM + BN) × BK 个元素、做 2 × BM × BN × BK 次
运算，所以 block 的强度是 2 × BM × BN / ((BM + BN) × 每元素字节)，与 K、BK 都无关。tile 大小从 rung 文件里读
（`constexpr int kBM = ...`，v08 的 `#define HG_MATMUL_BM ...`，Triton rung 的模块常量），不是抄来的。
不需要 GPU：读的是提交进仓库的 ceilings record。
"""

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ch07_roofline_bound import RECORD, bound  # noqa: E402

from hello_gpu.bench.records import format_figure  # noqa: E402
from hello_gpu.ops import load_op  # noqa: E402
from hello_gpu.ops.matmul.spec import work_for  # noqa: E402
from hello_gpu.ops.matmul.tensor_cores import tile_constants  # noqa: E402

# (label, M, N, K, dtype): the square shapes, one prefill layer and the decode steps through it.
CASES = (
    ("SIMT float32, 4096³", 4096, 4096, 4096, "float32"),
    ("tensor core bfloat16, 4096³", 4096, 4096, 4096, "bfloat16"),
    ("tensor core bfloat16, 8192³", 8192, 8192, 8192, "bfloat16"),
    ("prefill: 4096 tokens × MLP up (14336x4096)", 4096, 14336, 4096, "bfloat16"),
    ("decode: 16 tokens × MLP up", 16, 14336, 4096, "bfloat16"),
    ("decode: 1 token × MLP up", 1, 14336, 4096, "bfloat16"),
    ("decode: 1 token × output head (128256x4096)", 1, 128256, 4096, "bfloat16"),
)
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def shape_bounds(ceilings: dict) -> list[dict]:
    """One row per CASES entry: intensity, measured ridge, bound, time floor, and B's (the weight's) share of
    the bytes."""
    measured = ceilings["ceilings"]
    rows = []
    for label, m, n, k, dtype in CASES:
        work = work_for(m, n, k, dtype)
        b = bound(work, measured["copy_bytes_per_s"], measured["matmul_flops_per_s"][dtype])
        rows.append({"label": label, "shape": f"{m}x{n}x{k}", "dtype": dtype, **b,
                     "weight_share": k * n * BYTES[dtype] / work.bytes})
    return rows


def block_tile(path: Path) -> tuple[int, int]:
    """(BM, BN) of a rung: its constexpr lines (kBM / kBN, or v01-v03's square kTile), v08's HG_MATMUL_* defaults,
    or a Triton rung's BLOCK_M / BLOCK_N (t03: its 16-bit sizes)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        if "SIZES = " in text:
            sizes = re.search(r"torch\.bfloat16: \((\d+), (\d+),", text)
            return int(sizes[1]), int(sizes[2])
        found = re.search(r"^BLOCK_M, BLOCK_N, BLOCK_K[^=]*= (\d+), (\d+),", text, re.M)
        return int(found[1]), int(found[2])
    defines = dict(re.findall(r"^#define HG_MATMUL_(BM|BN) (\d+)$", text, re.M))
    if defines:
        return int(defines["BM"]), int(defines["BN"])
    constants = tile_constants(path)
    if "Tile" in constants:
        return constants["Tile"], constants["Tile"]
    return constants["BM"], constants["BN"]


def tile_intensities(ceilings: dict) -> list[dict]:
    """Every rung from v03 (the first to stage tiles) on, and t01-t03: its block tile, the FLOPs per byte a block
    loads, and the measured ridge of its dtype (float32 for the SIMT rungs, bfloat16 for the others)."""
    measured = ceilings["ceilings"]
    op = load_op("matmul")
    rows = []
    for rung in op.rungs:
        if rung.is_baseline or rung.id in ("v01_naive", "v02_coalesced", "t04_autotuned", "t05_persistent_tma",
                                           "t06_warp_specialized"):
            continue        # no tiles (v01, v02), or sizes chosen per shape by an autotuner (t04, t05, t06)
        dtype = "float32" if rung.path.suffix == ".hip" else "bfloat16"
        bm, bn = block_tile(rung.path)
        intensity = 2 * bm * bn / ((bm + bn) * BYTES[dtype])
        ridge = measured["matmul_flops_per_s"][dtype] / measured["copy_bytes_per_s"]
        rows.append({"rung": rung.id, "dtype": dtype, "tile": f"{bm}x{bn}", "I": intensity, "ridge": ridge})
    return rows


def render(ceilings: dict) -> str:
    lines = ["| case | MxNxK | dtype | FLOP/B | ridge FLOP/B (measured) | bound | floor µs | "
             "weight's share of the bytes |",
             "|---|---|---|---:|---:|---|---:|---:|"]
    for row in shape_bounds(ceilings):
        lines.append(f"| {row['label']} | {row['shape']} | {row['dtype']} | {format_figure(row['I'])} | "
                     f"{format_figure(row['ridge'])} | {row['bound']} | {format_figure(row['floor_s'] * 1e6)} | "
                     f"{row['weight_share'] * 100:.1f}% |")
    lines += ["", "| rung | dtype | block tile | FLOP per byte a block loads | ridge FLOP/B (measured) | "
                  "tile loads alone, all from DRAM |", "|---|---|---|---:|---:|---|"]
    for row in tile_intensities(ceilings):
        verdict = "above the ridge" if row["I"] >= row["ridge"] else f"{row['I'] / row['ridge']:.2f}x of the ridge"
        lines.append(f"| `{row['rung']}` | {row['dtype']} | {row['tile']} | {format_figure(row['I'])} | "
                     f"{format_figure(row['ridge'])} | {verdict} |")
    return "\n".join(lines + ["", measured_note(ceilings, ("float32", "bfloat16"))])


def measured_note(ceilings: dict, dtypes) -> str:
    """The line under a table made from the ceilings record: what was measured, where and when (chapter 12's
    table ends with it too)."""
    measured = ceilings["ceilings"]
    peaks = ", ".join(f"{dtype} {measured['matmul_flops_per_s'][dtype] / 1e12:,.1f} TFLOP/s" for dtype in dtypes)
    return (f"Measured: copy {measured['copy_bytes_per_s'] / 1e9:,.0f} GB/s; vendor matmul (torch.matmul at 8192³) "
            f"{peaks} (`{ceilings['name']}` record, {ceilings['device']['name']}, {ceilings['extra']['measured_at']}).")


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else RECORD
    print(render(json.loads(path.read_text(encoding="utf-8"))))
