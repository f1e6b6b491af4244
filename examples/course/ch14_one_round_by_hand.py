"""第 14 章：手动走一轮优化，用的正是 agent 的工具。

    python examples/course/ch14_one_round_by_hand.py

"模型"是我们自己：读起点 t01_block_per_program，提出一个改动（BLOCK 1024 -> 2048），
然后让工具给反馈：compile（能编译吗）、check（答案对吗、有没有作弊）、compare（与起点成对计时），
最后 accept 按规则下判定。agent 的循环（hello_gpu.agent.loop）做的是同一件事，只是提案交给策略。

没有 GPU 时：Triton 在解释器里跑（TRITON_INTERPRET=1，CPU tensor），计时用墙钟，
数字只说明循环在工作，不能当 GPU 的数字。
"""

from pathlib import Path

from hello_gpu.agent import tools
from hello_gpu.agent.loop import start_candidate
from hello_gpu.agent.task import Task

OPS_ROOT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "ops"


def main() -> None:
    task = Task("toy_add", "t01_block_per_program", "triton", dtypes=("float32",),
                extra={"ops_root": str(OPS_ROOT)})
    start = start_candidate(task)                                   # 起点：一个手写的 rung

    # 1. 提案（这一步是"模型"的工作）：只改一件事，并写下为什么
    edit = start_candidate(task)
    edit.source = start.source.replace("BLOCK = 1024", "BLOCK = 2048")
    edit.action, edit.hypothesis = "BLOCK 1024 -> 2048", "fewer programs, less per-program overhead"

    # 2. 工具给反馈：每一步都在子进程里跑候选，返回可以存成 JSON 的结果
    compiled = tools.compile(edit, task)
    print("compile:", compiled.ok, compiled.errors)
    checked = tools.check(edit, task)
    print("check:  ", checked.passed, "cases =", checked.evidence.get("cases"), "cheats =", checked.cheats)
    if not (compiled.ok and checked.passed):
        print("reason: ", checked.reason[:200])
        return
    comparison = tools.compare(start, edit, task, min_rounds=10, max_seconds=2.0)
    print("compare:", f"speedup {comparison.speedup:.3f}x", "ci95", [round(x, 3) for x in comparison.ci95],
          "pairs", comparison.pairs, "clock", comparison.clock)

    # 3. 判定：纯计算，不运行候选
    decision = tools.accept(comparison)
    print("accept: ", decision.accepted, "-", decision.reason)


if __name__ == "__main__":
    main()
