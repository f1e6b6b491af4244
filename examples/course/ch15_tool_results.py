"""第 15 章：工具的结构化输出，以及接受规则这个纯函数。

    python examples/course/ch15_tool_results.py

1. 三个候选过 compile 与 check：写对的 t01、故意少写一个元素的 t02_drops_last、
   一个语法错误的改动。失败不是异常，而是一个结果：状态、理由、证据，都能存成 JSON。
2. accept.decide 只做算术：同一个 speedup 区间，noise 不同，门槛就不同。

没有 GPU 时 Triton 在解释器里跑（TRITON_INTERPRET=1）。
"""

import json
from pathlib import Path

from hello_gpu.agent import accept, tools
from hello_gpu.agent.loop import rung_candidate
from hello_gpu.agent.task import Task

OPS_ROOT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "ops"


def short(value, limit=100) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + " ..."


def main() -> None:
    task = Task("toy_add", "t01_block_per_program", "triton", dtypes=("float32",),
                extra={"ops_root": str(OPS_ROOT)})
    right = rung_candidate(task, "t01_block_per_program", "start", "as written")
    wrong = rung_candidate(task, "t02_drops_last", "mask n - 1", "an off-by-one in the tail")
    broken = rung_candidate(task, "t01_block_per_program", "typo", "a syntax error")
    broken.source = broken.source.replace("mask = offsets < n", "mask = offsets <")

    for name, candidate in (("t01", right), ("t02_drops_last", wrong), ("syntax error", broken)):
        compiled = tools.compile(candidate, task)
        print(f"{name}: compile ok={compiled.ok} errors={short(compiled.errors)}")
        if not compiled.ok:
            continue
        checked = tools.check(candidate, task)
        print(f"{name}: check passed={checked.passed} correct={checked.correct}")
        print("   reason:", checked.reason[:100] or "-")
        print("   evidence keys:", sorted(checked.evidence))
        print("   failures:", short(checked.failures))

    print("accept rule: lower bound > 1 + max(2%, 3 x noise)")
    for noise in (None, 0.003, 0.02):
        decision = accept.decide({"speedup": 1.06, "ci95": [1.04, 1.08]}, noise)
        print(f"   noise={noise}: accepted={decision.accepted}  {decision.reason}")


if __name__ == "__main__":
    main()
