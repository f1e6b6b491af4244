"""The course's example files (examples/course/): each runs what runs without a GPU (CPU tier).

One function per example, named test_chNN_<what>, next to the chapter that includes the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COURSE_EXAMPLES = REPO / "examples" / "course"


def _run_without_gpu(script: Path, *args: str) -> subprocess.CompletedProcess:
    """Run a course script as a learner would, with every GPU hidden, so its CPU path runs on any machine."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, str(script), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_ch04_first_kernel_cpu_path():
    """Chapter 4's script without a GPU: compiles vector_add for sm_90, the checker passes torch.add and
    catches a grid rounded down, and the script says what it skipped."""
    done = _run_without_gpu(COURSE_EXAMPLES / "ch04_first_kernel.py")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "compiled for sm_90" in out
    assert "registers_per_thread=" in out and "blocks/SM of 256 threads" in out
    right, wrong = out.split("torch.add:\n", 1)[1].split("grid = n // 256 (rounded down):\n", 1)
    assert right.count("pass") == 6 and "FAIL" not in right
    assert "FAIL" in wrong
    assert "skipped (needs a GPU)" in out
