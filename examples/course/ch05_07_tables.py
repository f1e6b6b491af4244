"""第 5–7 章（以及第 11、12 章）页面里由 record 生成的表：`hello-gpu records tables` 画不了的那几种
（不是 schema record 的 flush-experiment.json、profile record 的计数器、从 ceilings 算出的上限）。

页面里的一段

    <!-- course:KIND records/nvidia-h200/NAME.json -->
    ...（生成的内容）
    <!-- /course:KIND -->

由 KIND 对应的函数重新生成。KIND：ch05_flush、ch06_profile_table、ch07_roofline_bound、ch11_gemm_bounds、
ch12_attention_bounds。

    python examples/course/ch05_07_tables.py            # 重写 docs/course/part1/*.md 与第 11、12 章里的这些段
    python examples/course/ch05_07_tables.py --check    # 只检查，过期时退出码 1（CPU 测试也这样查）
"""

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import ch06_profile_table  # noqa: E402
import ch07_roofline_bound  # noqa: E402
import ch11_gemm_bounds  # noqa: E402
import ch12_attention_bounds  # noqa: E402

PAGES = sorted((ROOT / "docs" / "course" / "part1").glob("*.md")) + [
    ROOT / "docs" / "course" / "part2" / name for name in ("ch11-matmul.md", "ch12-attention.md")]
REGION = re.compile(r"^<!-- course:(?P<kind>\w+) (?P<record>\S+) -->\n.*?^<!-- /course:(?P=kind) -->$", re.S | re.M)

# flush-experiment.json 的八个变体（benchmarks/flush_experiment.py 的文档串），各只改一处。
FLUSH_VARIANTS = {
    "A": "measure()（当时每 10 次调用同步一次）",
    "B": "triton.testing.do_bench",
    "C": "do_bench 的循环照写：每次重复都排进队列，最后同步一次",
    "D": "同 C，换成我们的冲刷缓冲区",
    "E": "同 A，换成 Triton 的冲刷缓冲区",
    "F": "同 C，冲刷后让 GPU 空转约 20 µs 再计时（原意：给脏行时间写回）",
    "G": "同 C，冲刷改为读一遍缓冲区（L2 里只有干净的行）",
    "H": "同 A，每 100 次调用同步一次",
}


def ch05_flush(record: dict) -> str:
    lines = ["| 变体 | 只改了哪一处 | 三轮中位数 (µs) |", "|---|---|---:|"]
    lines += [f"| {key} | {FLUSH_VARIANTS[key]} | {', '.join(f'{v:.2f}' for v in values)} |"
              for key, values in record.items()]
    return "\n".join(lines + ["", "torch.add，2^20 个 float32，冷 L2，H200（`benchmarks/flush_experiment.py`）。"])


RENDERERS = {"ch05_flush": ch05_flush, "ch06_profile_table": ch06_profile_table.render,
             "ch07_roofline_bound": ch07_roofline_bound.render, "ch11_gemm_bounds": ch11_gemm_bounds.render,
             "ch12_attention_bounds": ch12_attention_bounds.render}


def regenerate(text: str) -> str:
    def one(match: re.Match) -> str:
        record = json.loads((ROOT / match["record"]).read_text(encoding="utf-8"))
        body = RENDERERS[match["kind"]](record)
        note = f"由 `python examples/course/ch05_07_tables.py` 从 `{match['record']}` 生成，不要手改。"
        return f"<!-- course:{match['kind']} {match['record']} -->\n\n{body}\n\n{note}\n\n<!-- /course:{match['kind']} -->"
    return REGION.sub(one, text)


def stale_pages(write: bool) -> list[Path]:
    stale = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        new = regenerate(text)
        if new != text:
            stale.append(page)
            if write:
                page.write_text(new, encoding="utf-8")
    return stale


if __name__ == "__main__":
    check = "--check" in sys.argv[1:]
    pages = stale_pages(write=not check)
    for page in pages:
        print(("out of date: " if check else "updated: ") + str(page.relative_to(ROOT)))
    sys.exit(1 if check and pages else 0)
