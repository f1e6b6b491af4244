"""KernelBench-style problems as agent tasks, so the agent and its checker can be pointed at the field's
standard benchmark problems.

A problem file defines ``class Model(torch.nn.Module)`` (its ``__init__`` takes ``*get_init_inputs()``,
its ``forward`` is the computation), ``get_inputs()`` (the forward's inputs, random) and
``get_init_inputs()`` (the constructor's arguments). :func:`load_problem` imports it and returns a
:class:`~hello_gpu.agent.task.Task` (``op`` the file's stem, ``problem_path`` set, the input shapes as
the check and benchmark shape) and the module.

The reference is the Model's forward in **float64** where possible: the model's floating parameters and
buffers and the floating inputs are converted to float64 and the forward is run on the CPU, so the
checker compares a candidate against something more exact than the float32 it computes in. Where an
operation has no float64 kernel, the reference falls back to the inputs' own dtype and says so
(``Reference.dtype``). Weights are made from a seed (``torch.manual_seed`` before ``Model(...)``), so the
reference and a candidate built from the same seed share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .task import Task

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
REFERENCE_DTYPE = "float64"


class ProblemError(ValueError):
    """A problem file that does not follow the KernelBench layout; the message names the file."""


def _torch():
    import torch
    return torch


def _load(path: Path) -> ModuleType:
    from ..ops.rung import load_module
    try:
        return load_module(path, f"kernelbench_{path.stem}")
    except FileNotFoundError:
        raise ProblemError(f"{path}: no such problem file") from None
    except Exception as error:     # the problem's own code failed at import: say where
        raise ProblemError(f"{path}: importing the problem failed: {type(error).__name__}: {error}") from error


def _check_module(module: ModuleType, path: Path) -> None:
    torch = _torch()
    missing = [name for name in REQUIRED if not hasattr(module, name)]
    if missing:
        raise ProblemError(f"{path}: a KernelBench problem defines {', '.join(REQUIRED)}; missing: {', '.join(missing)}")
    if not (isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)):
        raise ProblemError(f"{path}: Model must be a torch.nn.Module subclass, got {module.Model!r}")
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, name)):
            raise ProblemError(f"{path}: {name} must be a function")


def make_inputs(module: ModuleType, seed: int = 0, device: str = "cpu") -> list:
    """``get_inputs()`` under ``torch.manual_seed(seed)``, tensors moved to ``device``."""
    torch = _torch()
    torch.manual_seed(seed)
    inputs = module.get_inputs()
    if not isinstance(inputs, (list, tuple)):
        raise ProblemError(f"{module.__file__}: get_inputs() must return a list, got {type(inputs).__name__}")
    return [value.to(device) if isinstance(value, torch.Tensor) else value for value in inputs]


def make_model(module: ModuleType, seed: int = 0, dtype=None, device: str = "cpu"):
    """``Model(*get_init_inputs())`` with weights from ``seed``; floating parameters in ``dtype`` if given."""
    torch = _torch()
    torch.manual_seed(seed)
    init_inputs = module.get_init_inputs()
    if not isinstance(init_inputs, (list, tuple)):
        raise ProblemError(f"{module.__file__}: get_init_inputs() must return a list, got {type(init_inputs).__name__}")
    model = module.Model(*init_inputs).to(device)
    if dtype is not None:
        model = model.to(dtype)       # floating parameters and buffers only; integer buffers keep their dtype
    return model.eval()


@dataclass
class Reference:
    """The expected output and the dtype it was computed in ("float64", or the inputs' own on fallback)."""

    output: object
    dtype: str
    note: str = ""


def _to_float64(value):
    torch = _torch()
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(torch.float64)
    return value


def reference(module: ModuleType, inputs: list, seed: int = 0) -> Reference:
    """The Model's forward on ``inputs`` in float64 on the CPU (the model's weights from ``seed``)."""
    torch = _torch()
    cpu_inputs = [value.cpu() if isinstance(value, torch.Tensor) else value for value in inputs]
    with torch.no_grad():
        try:
            model = make_model(module, seed, dtype=torch.float64)
            output = model(*[_to_float64(value) for value in cpu_inputs])
            return Reference(output, REFERENCE_DTYPE)
        except (RuntimeError, TypeError, NotImplementedError) as error:
            # Some operations have no float64 CPU kernel; the inputs' own precision is then the best there is.
            model = make_model(module, seed)
            output = model(*cpu_inputs)
            dtype = str(getattr(output, "dtype", "unknown")).removeprefix("torch.")
            return Reference(output, dtype, note=f"float64 forward failed ({type(error).__name__}: {error}); "
                                                 f"computed in {dtype}")


def load_problem(path: str | Path, route: str = "triton", start: str = "problem") -> tuple[Task, ModuleType]:
    """(task, module) for a KernelBench-style problem file.

    ``route``: the route the agent writes candidates in; ``start``: the name of the starting candidate
    (a KernelBench problem has no ladder: the first candidate is whatever the user starts from).
    """
    path = Path(path)
    module = _load(path)
    _check_module(module, path)
    torch = _torch()
    inputs = make_inputs(module, seed=0)
    tensors = [value for value in inputs if isinstance(value, torch.Tensor)]
    if not tensors:
        raise ProblemError(f"{path}: get_inputs() returned no tensors; a kernel needs at least one")
    shapes = tuple(tuple(value.shape) for value in tensors)
    dtypes = tuple(dict.fromkeys(str(value.dtype).removeprefix("torch.") for value in tensors
                                 if value.is_floating_point()))
    task = Task(op=path.stem, start=start, route=route, dtypes=dtypes, check_shapes=(shapes,), bench_shape=shapes,
                problem_path=str(path.resolve()),
                extra={"kind": "kernelbench", "inputs": len(inputs), "reference_dtype": REFERENCE_DTYPE})
    return task, module
