"""The first lines every course notebook runs (``from nbsetup import *``), kept in one file.

- ``GPU``: is a GPU visible? Without one, ``TRITON_INTERPRET=1`` is set here, before anything imports triton
  (Triton decides at ``@triton.jit`` time), so the Triton kernels of the notebooks run on CPU tensors.
- ``DEVICE``: "cuda" or "cpu", for the cells that run anywhere (Triton, the checks, the statistics).
- ``REPO``, ``OPS``: the repository and ``src/hello_gpu/ops``: notebooks load the chapters' files from
  there instead of pasting them (``source(path)`` prints one).
- ``example(name)``: ``examples/course/NAME.py`` as a module (the chapter's own script, not a copy);
  ``rung(op, id)``: a ladder rung ready to call (Triton rungs run in the interpreter without a GPU).
- ``against_float64(fn, op, shapes, dtype)``: call ``fn`` on the operator spec's inputs and print, per shape,
  the worst error divided by the spec's tolerance against the float64 reference (<= 1 passes).
- ``gpu_only(what)``: the guard of a cell that needs a GPU: True on a GPU; otherwise it prints what is
  skipped, remembers it, and returns False. ``skipped()`` lists everything skipped so far.
- ``check_answer(name, mine, expected, rel)``: an exercise that asks for a number checks itself: the learner's
  number against the one the project's own code computes, within ``rel``; it prints and never raises, so a
  notebook with an unanswered exercise still runs to its end.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import hello_gpu as hg  # noqa: E402 - after TRITON_INTERPRET

DEVICE = "cuda" if GPU else "cpu"
REPO = Path(__file__).resolve().parents[1]
OPS = Path(hg.__file__).resolve().parent / "ops"
_SKIPPED: list[str] = []

__all__ = ["DEVICE", "GPU", "OPS", "REPO", "against_float64", "check_answer", "example", "gpu_only", "hg", "rung",
           "skipped", "source", "torch"]


def gpu_only(what: str) -> bool:
    """True on a GPU; without one, print and remember that ``what`` is skipped, and return False."""
    if GPU:
        return True
    _SKIPPED.append(what)
    print(f"跳过（没有 GPU）：{what}")
    return False


def skipped() -> None:
    """The notebook's last cell: what ran, and what a GPU machine would add."""
    where = torch.cuda.get_device_name() if GPU else "CPU（没有 GPU）"
    print(f"运行在：{where}")
    if _SKIPPED:
        print(f"跳过了 {len(_SKIPPED)} 个需要 GPU 的 cell：")
        for what in _SKIPPED:
            print(f"  - {what}")
    else:
        print("没有跳过任何 cell。")


def source(path) -> str:
    """Print a repository file (relative to the repository root, or absolute) and return its text."""
    path = Path(path)
    path = path if path.is_absolute() else REPO / path
    text = path.read_text(encoding="utf-8")
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    print(f"# {shown}\n{text}")
    return text


def example(name: str):
    """``examples/course/NAME.py`` loaded as a module (its ``main()`` is not run)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / "course" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rung(op: str, rung_id: str):
    """The ladder's rung ``op/rung_id``, built: call it like the operator (``rung("vector_add", "t01_tile_1024")(a, b)``)."""
    from hello_gpu.ops import load_op
    return load_op(op).rung(rung_id).build()


def against_float64(fn, op: str, shapes, dtype: str = "float32", seed: int = 0) -> bool:
    """Check ``fn`` on the spec's inputs for each shape against its float64 reference and tolerance."""
    from hello_gpu.ops import load_op
    spec = load_op(op).spec
    passed = True
    for shape in shapes:
        inputs = spec.make_inputs(shape, dtype, seed=seed, device=DEVICE)
        exact = spec.reference(*inputs).to(torch.float64)
        rtol, atol = spec.tolerance(inputs, dtype) if hasattr(spec, "tolerance") else spec.TOLERANCE[dtype]
        out = fn(*inputs).to(torch.float64).reshape(exact.shape)
        ratio = (out - exact).abs() / (rtol * exact.abs() + atol)
        worst = torch.nan_to_num(ratio, nan=float("inf")).max().item()
        passed &= worst <= 1
        print(f"  {str(shape):>12} {dtype}: worst error / allowed = {worst:.3g}  {'pass' if worst <= 1 else 'FAIL'}")
    return passed


def check_answer(name: str, mine, expected: float, rel: float = 0.02) -> bool:
    """``mine`` (the learner's number, None until answered) against ``expected`` within the relative error ``rel``."""
    if mine is None:
        print(f"{name}：还没有答案（把你算的数填进去，再运行这个 cell）")
        return False
    error = abs(mine - expected) / abs(expected) if expected else abs(mine)
    if error <= rel:
        print(f"{name}：对（{mine:.4g}，与项目代码算出的 {expected:.4g} 相差 {error:.1%}）")
        return True
    print(f"{name}：不对：{mine:.4g} 与项目代码算出的数相差 {error:.0%}（要在 {rel:.0%} 以内）")
    return False
