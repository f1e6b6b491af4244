"""第 16 章：作弊的候选怎样被抓住，诚实的对照怎样一条理由都没有；停止规则怎样选出第一条。

    python examples/course/ch16_catch_a_cheat.py

tests/agent_cheats/ 里都是 vector_add 的 Triton 候选。每个文件过一遍 tools.check：
passed（能否进入计时）、correct（只看 checker 的判定）、理由的 tag（anticheat.tag_of）。
没有 GPU 时 Triton 在解释器里跑（TRITON_INTERPRET=1）。
"""

from pathlib import Path

from hello_gpu.agent import tools
from hello_gpu.agent.anticheat import tag_of
from hello_gpu.agent.candidate import Candidate
from hello_gpu.agent.stop import SearchState, StopRules
from hello_gpu.agent.task import Task

CHEATS = Path(__file__).resolve().parents[2] / "tests" / "agent_cheats"
FILES = ("t90_calls_torch.py", "t92_caches_result.py", "t93_partial_write.py", "t99_honest.py")


def main() -> None:
    task = Task("vector_add", "t01_tile_1024", "triton", dtypes=("float32",), check_shapes=(1000, 4097))
    for name in FILES:
        result = tools.check(Candidate(None, None, "triton", (CHEATS / name).read_text()), task)
        tags = sorted({tag_of(reason) for reason in result.cheats})
        print(f"{name:22} passed={result.passed!s:5} correct={result.correct!s:5} tags={tags}")

    rules = StopRules(max_rounds=12, time_budget_s=60, patience=4, target_fraction=0.9)
    for state in (SearchState(rounds_done=3, elapsed_s=20, rounds_since_accept=1),
                  SearchState(rounds_done=5, elapsed_s=20, rounds_since_accept=4),
                  SearchState(rounds_done=5, elapsed_s=75, rounds_since_accept=4),
                  SearchState(rounds_done=5, elapsed_s=20, fraction_of_roofline=0.93, policy_exhausted=True)):
        print(f"{state}: {rules.reason(state)}")


if __name__ == "__main__":
    main()
