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

from ..bench import Work
from ..ops.rung import load_module
from .task import Task

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
REFERENCE_DTYPE = "float64"


class ProblemError(ValueError):
    """A problem file that does not follow the KernelBench layout; the message names the file."""


def _torch():
    import torch
    return torch


def _load(path: Path) -> ModuleType:
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


# ------------------------------------------------------------------------------------------ operator folder
# The sandbox checks and times candidates as rungs of an operator folder (a spec and rung files), so a
# problem becomes one: a generated spec.py that delegates to ProblemSpec, a v00_torch.py baseline that
# is the Model's own forward, and the user's starting kernel copied in as the first rung.

# Relative and absolute tolerance per dtype for a problem (KernelBench itself uses 1e-2 for both): an
# arbitrary forward may reduce over thousands of values, so float32 gets ~100 ulps of room, not 2.
PROBLEM_TOLERANCE = {"float32": (1e-5, 1e-6), "float16": (2**-9, 1e-4), "bfloat16": (2**-6, 1e-3),
                     "float64": (1e-12, 1e-15)}
# "large" multiplies the floating inputs by 16: magnitudes far from 1 catch a kernel that mixes in a
# constant, while exp(16 x) of a normal x still fits float32 (exp(88) is its limit).
LARGE_SCALE = 16.0


class ProblemSpec:
    """A KernelBench problem with the operator-spec interface (:mod:`hello_gpu.ops`).

    A candidate's ``run`` receives the forward's inputs followed by the Model's parameters (in
    ``named_parameters()`` order), so a problem with weights (a Linear, a norm's scale) is a kernel over
    tensors like any other; the reference runs the Model in float64 with exactly those parameters.
    The shape is fixed by the problem file: the only shape is the first input's.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.module = _load(self.path)
        _check_module(self.module, self.path)
        torch = _torch()
        inputs = make_inputs(self.module, seed=0)
        tensors = [value for value in inputs if isinstance(value, torch.Tensor)]
        if len(tensors) != len(inputs):
            raise ProblemError(f"{self.path}: get_inputs() must return only tensors for the agent "
                               f"(got {', '.join(type(v).__name__ for v in inputs)})")
        model = make_model(self.module, seed=0)
        self.parameter_names = [name for name, _ in model.named_parameters()]
        self.shape = tuple(tensors[0].shape) if tensors[0].dim() != 1 else int(tensors[0].numel())
        self.dtypes = tuple(dict.fromkeys(str(t.dtype).removeprefix("torch.") for t in tensors if t.is_floating_point()))
        if not self.dtypes:
            raise ProblemError(f"{self.path}: no floating-point input: the checker compares floating outputs")
        self.tolerance = {dtype: PROBLEM_TOLERANCE[dtype] for dtype in self.dtypes if dtype in PROBLEM_TOLERANCE}
        with torch.no_grad():
            output = model(*inputs)
        self.output_numel = output.numel()

    def make_inputs(self, shape, dtype: str, *, seed: int, distribution: str = "normal", device: str = "cpu"):
        torch = _torch()
        if shape != self.shape:
            raise ValueError(f"{self.path.name} fixes its input shape at {self.shape}; got {shape}")
        if distribution not in ("normal", "large"):
            raise ValueError(f"unknown distribution {distribution!r}: normal or large")
        scale = LARGE_SCALE if distribution == "large" else 1.0
        target = getattr(torch, dtype)
        inputs = [(value * scale).to(target) if value.is_floating_point() else value
                  for value in make_inputs(self.module, seed=seed)]
        parameters = [p.detach().to(target) for p in make_model(self.module, seed=seed).parameters()]
        return tuple(value.to(device).contiguous() for value in (*inputs, *parameters))

    def reference(self, *tensors):
        """The Model's forward in float64 on the CPU, with the given parameters."""
        torch = _torch()
        count = len(tensors) - len(self.parameter_names)
        inputs = [_to_float64(value.cpu()) for value in tensors[:count]]
        model = make_model(self.module, seed=0, dtype=torch.float64)
        parameters = {name: _to_float64(value.cpu()) for name, value in zip(self.parameter_names, tensors[count:])}
        with torch.no_grad():
            return torch.func.functional_call(model, parameters, tuple(inputs))

    def work(self, shape, dtype: str):
        """Every input and parameter read once and the output written once; FLOPs unknown (0)."""
        torch = _torch()
        tensors = self.make_inputs(shape, dtype, seed=0)
        read = sum(t.numel() * t.element_size() for t in tensors)
        written = self.output_numel * torch.empty(0, dtype=getattr(torch, dtype)).element_size()
        return Work(bytes=read + written, flops=0, dtype=dtype)


_SPEC_TEMPLATE = '''"""{name}: generated by hello_gpu.agent.kernelbench from the KernelBench problem {path}.

The problem file is the truth: this spec only gives it the operator interface (hello_gpu.ops).
"""

from hello_gpu.agent.kernelbench import ProblemSpec

_problem = ProblemSpec({path!r})
NAME = {name!r}
DTYPES = _problem.dtypes
EDGE_SHAPES = (_problem.shape,)      # the problem fixes its shape
BENCH_SHAPES = (_problem.shape,)
DISTRIBUTIONS = ("normal", "large")
TOLERANCE = _problem.tolerance
make_inputs = _problem.make_inputs
reference = _problem.reference
work = _problem.work
'''

_BASELINE_TEMPLATE = '''"""The problem's own Model forward, with the parameters it is given.

parent: none
change: the KernelBench Model's forward in PyTorch, what the problem file defines
hypothesis: the baseline every candidate is measured against
"""

import torch

from hello_gpu.agent.kernelbench import ProblemSpec, make_model

_problem = ProblemSpec({path!r})
_models = {{}}


def run(*tensors):
    count = len(tensors) - len(_problem.parameter_names)
    key = (tensors[0].device, tensors[0].dtype)
    if key not in _models:
        _models[key] = make_model(_problem.module, dtype=tensors[0].dtype, device=tensors[0].device)
    parameters = dict(zip(_problem.parameter_names, tensors[count:]))
    with torch.no_grad():
        return torch.func.functional_call(_models[key], parameters, tuple(tensors[:count]))
'''


def write_operator(problem: str | Path, start: str | Path, folder: str | Path) -> tuple[Task, Path]:
    """An operator folder ``folder/<problem stem>/`` for a problem, with ``start`` (a rung file: a Triton
    ``tNN_name.py``, or a ``vNN_name.hip`` with its ``.py`` launcher beside it when it has one) as its
    first rung. Returns the task (``ops_root`` the folder) and the operator's folder."""
    problem, start = Path(problem).resolve(), Path(start)
    spec = ProblemSpec(problem)                     # refuses a malformed problem before anything is written
    if not start.is_file():
        raise ProblemError(f"{start}: no such starting kernel file")
    route = {".py": "triton", ".hip": "hip"}.get(start.suffix)
    if route is None:
        raise ProblemError(f"{start}: a starting kernel is a Triton .py or a HIP .hip rung file")
    name = problem.stem
    target = Path(folder) / name
    target.mkdir(parents=True, exist_ok=True)
    (target / "spec.py").write_text(_SPEC_TEMPLATE.format(name=name, path=str(problem)), encoding="utf-8")
    (target / "v00_torch.py").write_text(_BASELINE_TEMPLATE.format(path=str(problem)), encoding="utf-8")
    files = [start] + ([start.with_suffix(".py")] if route == "hip" and start.with_suffix(".py").is_file() else [])
    for path in files:
        (target / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    task = Task(op=name, start=start.stem, route=route, dtypes=spec.dtypes, problem_path=str(problem),
                extra={"kind": "kernelbench", "ops_root": str(Path(folder).resolve())})
    return task, target
