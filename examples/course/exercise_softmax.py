"""Check a softmax kernel with hello_gpu.exercise(): here the ladder's first Triton rung, copied as "yours".

    python examples/course/exercise_softmax.py            # on a GPU: checked, then timed against the ladder
    TRITON_INTERPRET=1 python examples/course/exercise_softmax.py   # no GPU: the Triton interpreter, small shapes

Write your own kernel in a file like src/hello_gpu/ops/softmax/t01_row_per_program.py (the header with
parent, change and hypothesis, then the @triton.jit kernel and run(x, out=None)) and pass its path instead.
"""

from pathlib import Path

import hello_gpu

MINE = Path(hello_gpu.__file__).parent / "ops" / "softmax" / "t01_row_per_program.py"

if __name__ == "__main__":
    report = hello_gpu.exercise("softmax", MINE)
    print(report)                      # in a notebook, leave `report` as the cell's last line: a rendered table
    print("hints:", report.hint_keys() or "none", "| passed:", report.passed)
    for timing in report.timings:      # on a GPU: their time / yours, paired in this run, with its 95% interval
        print(f"vs {timing.against}: {timing.speedup:.2f}x [{timing.ci95[0]:.2f}, {timing.ci95[1]:.2f}]")
