"""第 17 章：让 agent 自己在 toy_add 上跑两轮，然后像读 GPU 上的运行一样读它的候选库和报告。

    python examples/course/ch17_toy_run.py [RUN_DIR]      # 默认写到一个新的临时目录

与命令行的这一句相同（--run-dir 必须是新目录）：
    hello-gpu agent toy_add --ops-root tests/fixtures/ops --from t01_block_per_program \\
        --rounds 2 --no-counters --run-dir RUN_DIR

没有 GPU 时 Triton 在解释器里跑、用墙钟计时：这里的加速比只说明循环在工作，
每次运行都会不同，和 GPU 无关（解释器一个 program 一个 program 地执行 kernel）。
"""

import sqlite3
import sys
import tempfile
from pathlib import Path

from hello_gpu.agent.loop import run_agent
from hello_gpu.agent.task import Task

OPS_ROOT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "ops"


def show(event: dict) -> None:
    if event["event"] == "candidate":
        print(f"  candidate {event['id']}: {event['state']:9} {event['action']}: {event['reason'][:90]}")
    elif event["event"] in ("round", "stop"):
        print(event["event"], {k: v for k, v in event.items() if k != "event"})


def main(run_dir: Path) -> None:
    task = Task("toy_add", "t01_block_per_program", "triton", dtypes=("float32",),
                extra={"ops_root": str(OPS_ROOT)})
    result = run_agent(task, "scripted", run_dir, rounds=2, seed=0, progress=show,
                       timeouts={"counters": False, "compare_seconds": 2.0, "bench_seconds": 1.0})
    print("stop reason:", result.stop_reason)

    # 候选库：每个候选一行，每个工具的输出一行（JSON）
    with sqlite3.connect(run_dir / "candidates.sqlite") as db:
        for row in db.execute("SELECT id, parent_id, round, state, action FROM candidates ORDER BY id"):
            print("  row:", row)
        tools_run = db.execute("SELECT candidate_id, group_concat(tool, ' ') FROM tool_results "
                               "GROUP BY candidate_id ORDER BY candidate_id").fetchall()
        print("  tools per candidate:", tools_run)

    report = run_dir / "report.md"
    print("report:", report)
    for line in report.read_text().splitlines()[2:8]:          # 报告开头的摘要
        print("  ", line)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="agent-toy-")) / "run")
