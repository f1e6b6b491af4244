"""KernelBench-style problems as agent tasks, so the agent and its checker can be pointed at the field's
standard benchmark problems.

A problem file defines ``class Model(torch.nn.Module)`` (its ``__init__`` takes ``*get_init_inputs()``,
its ``forward`` is the computation), ``get_inputs()`` (the forward's inputs, random) and
``get_init_inputs()`` (the constructor's arguments). :func:`load_problem` imports it and returns a
:class:`~hello_gpu.agent.task.Task` (``op`` the file's stem, ``problem_path`` set, the input shapes as
the check and benchmark shape) and the module.

The reference is the Model's forward in **float64** where possible: the model's floating parameters and
buffers and the floating inputs are converted to float64, so the checker compares a candidate against
something more exact than the float32 it computes in. Where an operation has no float64 kernel, the
reference falls back to the inputs' own dtype and says so (``Reference.dtype``). Weights are made from a
seed (``torch.manual_seed`` before ``Model(...)``), so the reference and a candidate built from the same
seed share them.

The field's problems are large (KernelBench level 1 softmax: 4096 x 393216 float32, 6.4 GB), so an
operator made from a problem (:class:`ProblemSpec`) never evaluates the Model at full size to learn its
shapes (a forward on the ``meta`` device does, with no data), makes its inputs on the device that uses
them, and gives the checker its float64 reference in chunks of output rows (``reference_chunks``,
:class:`hello_gpu.ops.checking.ReferenceChunks`) where the forward treats the rows of its first input
independently, which a small probe confirms; the checker's memory bound is in :mod:`hello_gpu.ops.checking`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..bench import Work
from ..ops.checking import CHECK_CHUNK_BYTES, ReferenceChunks
from ..ops.header import HeaderError, parse_header
from ..ops.registry import load_op
from ..ops.rung import TORCH_BASELINE, TORCH_COMPILE, load_module
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
    """``get_inputs()`` under ``torch.manual_seed(seed)``, made on ``device`` (its factory calls run with
    ``device`` as the default device: a 6.4 GB input is not made on the host and copied), tensors a
    problem makes elsewhere moved there."""
    torch = _torch()
    torch.manual_seed(seed)
    with torch.device(device):
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


# A chunk-by-chunk reference must be row-separable: the forward of rows [0, 2k) equals the forwards of
# [0, k) and [k, 2k) stacked, to float64 rounding (a batched kernel may sum in another order: 1e-9).
SEPARABLE_RTOL = 1e-9
PROBE_ROWS = 2
# Where a forward cannot be split by rows and its float64 output does not fit the checker's chunk budget,
# the reference runs in the inputs' own dtype; it then carries rounding of the kernel's size, so the
# relative tolerance doubles (both sides may be off by the same few ulps, in opposite directions).
SAME_DTYPE_RTOL_FACTOR = 2.0


def _meta_forward(module: ModuleType):
    """(inputs, model, output, FLOPs) of the problem on the ``meta`` device: shapes and dtypes with no data,
    so a 6.4 GB problem costs nothing to describe. FLOPs are PyTorch's count (matmuls and convolutions;
    0 for elementwise and reduction operations). None where an operation has no meta kernel."""
    torch = _torch()
    from torch.utils.flop_counter import FlopCounterMode
    try:
        torch.manual_seed(0)
        with torch.device("meta"):
            inputs = module.get_inputs()
            model = module.Model(*module.get_init_inputs())
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                output = model(*inputs)
        return inputs, model, output, counter.get_total_flops()
    except Exception:  # noqa: BLE001 - no meta kernel, or a problem that builds data in __init__: run it for real
        return None


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
        described = _meta_forward(self.module)
        if described is None:             # the old way: the forward once on the CPU, at full size
            inputs = make_inputs(self.module, seed=0)
            model = make_model(self.module, seed=0)
            with torch.no_grad():
                output = model(*inputs)
            flops = 0
        else:
            inputs, model, output, flops = described
        tensors = [value for value in inputs if isinstance(value, torch.Tensor)]
        if len(tensors) != len(inputs) or not tensors:
            raise ProblemError(f"{self.path}: get_inputs() must return only tensors for the agent "
                               f"(got {', '.join(type(v).__name__ for v in inputs) or 'nothing'})")
        if not isinstance(output, torch.Tensor):
            raise ProblemError(f"{self.path}: the forward must return one tensor, got {type(output).__name__}")
        self.parameter_names = [name for name, _ in model.named_parameters()]
        self.parameter_shapes = [tuple(value.shape) for _, value in model.named_parameters()]
        self.input_shapes = [tuple(t.shape) for t in tensors]
        self.input_dtypes = [t.dtype for t in tensors]
        self.shape = tuple(tensors[0].shape) if tensors[0].dim() != 1 else int(tensors[0].numel())
        self.dtypes = tuple(dict.fromkeys(str(t.dtype).removeprefix("torch.") for t in tensors if t.is_floating_point()))
        if not self.dtypes:
            raise ProblemError(f"{self.path}: no floating-point input: the checker compares floating outputs")
        self.tolerance = {dtype: PROBLEM_TOLERANCE[dtype] for dtype in self.dtypes if dtype in PROBLEM_TOLERANCE}
        self.output_shape = tuple(output.shape)
        self.output_numel = output.numel()
        self.flops = int(flops)
        self._separable: dict[str, bool] = {}     # per device type: does the forward treat rows independently?

    def make_inputs(self, shape, dtype: str, *, seed: int, distribution: str = "normal", device: str = "cpu"):
        torch = _torch()
        if shape != self.shape:
            raise ValueError(f"{self.path.name} fixes its input shape at {self.shape}; got {shape}")
        if distribution not in ("normal", "large"):
            raise ValueError(f"unknown distribution {distribution!r}: normal or large")
        scale = LARGE_SCALE if distribution == "large" else 1.0
        target = getattr(torch, dtype)
        inputs = [(value * scale if scale != 1.0 else value).to(target) if value.is_floating_point() else value
                  for value in make_inputs(self.module, seed=seed, device=device)]
        parameters = [p.detach().to(target) for p in make_model(self.module, seed=seed).parameters()]
        return tuple(value.to(device).contiguous() for value in (*inputs, *parameters))

    # ------------------------------------------------------------------------------ the reference

    def _float64_call(self, tensors):
        """(model in float64 on the tensors' device, its parameters in float64, the inputs) for ``tensors``."""
        torch = _torch()
        count = len(tensors) - len(self.parameter_names)
        device = tensors[0].device
        model = make_model(self.module, seed=0, dtype=torch.float64, device=str(device))
        parameters = {name: _to_float64(value) for name, value in zip(self.parameter_names, tensors[count:])}
        return model, parameters, list(tensors[:count])

    def _rows_independent(self, tensors) -> bool:
        """Does the forward treat the rows (leading dimension) of its first input independently, with the
        output's rows following them? Probed once per device on the first PROBE_ROWS x 2 rows."""
        torch = _torch()
        first = tensors[0]
        rows = first.shape[0] if first.dim() else 0
        if not self.output_shape or self.output_shape[0] != rows or rows < 2 * PROBE_ROWS:
            return False
        key = first.device.type
        if key not in self._separable:
            model, parameters, inputs = self._float64_call(tensors)
            others = [_to_float64(value) for value in inputs[1:]]

            def forward(x):
                return torch.func.functional_call(model, parameters, (_to_float64(x), *others))
            try:
                with torch.no_grad():
                    whole = forward(first[:2 * PROBE_ROWS])
                    parts = torch.cat([forward(first[:PROBE_ROWS]), forward(first[PROBE_ROWS:2 * PROBE_ROWS])])
                self._separable[key] = (tuple(whole.shape) == tuple(parts.shape)
                                        and whole.shape[0] == 2 * PROBE_ROWS
                                        and bool(torch.allclose(whole, parts, rtol=SEPARABLE_RTOL, atol=0.0,
                                                                equal_nan=True)))
            except Exception:  # noqa: BLE001 - a forward that needs its whole batch is not separable
                self._separable[key] = False
        return self._separable[key]

    def reference_chunks(self, *tensors, max_bytes: int = CHECK_CHUNK_BYTES // 8) -> ReferenceChunks | None:
        """The reference in chunks of output rows of at most ``max_bytes`` of float64 each, on the tensors'
        device, computed when iterated (the checker does so after the candidate's call returned).

        Row-separable forwards (softmax over dim 1, a reduction over a middle dimension, a matmul's rows
        of A) run chunk by chunk in float64. Others run whole: in float64 where the float64 output fits
        ``max_bytes``, else in the inputs' own dtype, with the tolerance widened and a note that says so.
        None for a 0-d output (there are no rows): the checker then takes :meth:`reference`."""
        torch = _torch()
        if not self.output_shape:
            return None
        rows = self.output_shape[0]
        row_elements = math.prod(self.output_shape[1:])
        if self._rows_independent(tensors):
            model, parameters, inputs = self._float64_call(tensors)
            first, others = inputs[0], [_to_float64(value) for value in inputs[1:]]
            # float64 bytes a row costs: its input row and output row, twice for the forward's temporaries
            per_row = 2 * 8 * (math.prod(first.shape[1:]) + row_elements)
            step = max(1, max_bytes // max(1, per_row))

            def chunks():
                with torch.no_grad():
                    for start in range(0, rows, step):
                        stop = min(rows, start + step)
                        yield start, stop, torch.func.functional_call(
                            model, parameters, (_to_float64(first[start:stop]), *others))
            return ReferenceChunks(self.output_shape, chunks)
        fits = 8 * self.output_numel <= max_bytes
        step = max(1, max_bytes // max(1, 8 * row_elements))
        if fits:
            model, parameters, inputs = self._float64_call(tensors)
            arguments, dtype, factor, note = [_to_float64(value) for value in inputs], "float64", 1.0, ""
        else:
            count = len(tensors) - len(self.parameter_names)
            model = make_model(self.module, seed=0, dtype=tensors[0].dtype, device=str(tensors[0].device))
            parameters = dict(zip(self.parameter_names, tensors[count:]))
            arguments, factor = list(tensors[:count]), SAME_DTYPE_RTOL_FACTOR
            dtype = str(tensors[0].dtype).removeprefix("torch.")
            note = (f"the forward does not split by rows and its float64 output ({8 * self.output_numel / 2**30:.1f} "
                    f"GiB) exceeds the checker's chunk budget: reference computed in {dtype}, rtol x {factor:g}")

        def whole():
            with torch.no_grad():
                output = torch.func.functional_call(model, parameters, tuple(arguments))
            for start in range(0, rows, step):
                yield start, min(rows, start + step), output[start:start + step]
        return ReferenceChunks(self.output_shape, whole, dtype, factor, note)

    def reference(self, *tensors):
        """The Model's forward in float64 with the given parameters, on the tensors' device, whole (built
        from :meth:`reference_chunks`, so its float64 work stays within one chunk at a time besides the
        result)."""
        torch = _torch()
        chunked = self.reference_chunks(*tensors)
        if chunked is None:
            model, parameters, inputs = self._float64_call(tensors)
            with torch.no_grad():
                return torch.func.functional_call(model, parameters, tuple(_to_float64(v) for v in inputs))
        output = None
        for start, stop, expected in chunked.chunks():
            if output is None:
                output = torch.empty(chunked.shape, dtype=expected.dtype, device=expected.device)
            output[start:stop] = expected
        return output

    def work(self, shape, dtype: str):
        """Every input and parameter read once and the output written once; FLOPs as PyTorch counts them
        on the meta device (matmuls; 0 for elementwise and reductions). From shapes alone: no data is made."""
        torch = _torch()
        if shape != self.shape:
            raise ValueError(f"{self.path.name} fixes its input shape at {self.shape}; got {shape}")
        size = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
        read = sum(math.prod(s) * (size if d.is_floating_point else torch.empty(0, dtype=d).element_size())
                   for s, d in zip(self.input_shapes, self.input_dtypes))
        read += sum(math.prod(s) * size for s in self.parameter_shapes)
        return Work(read_bytes=read, written_bytes=self.output_numel * size, flops=self.flops, dtype=dtype)


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
reference_chunks = _problem.reference_chunks     # the checker compares row chunk by row chunk
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
    extra = {"kind": "kernelbench", "ops_root": str(Path(folder).resolve())}
    outside = _adopt_start(target / start.name)
    if outside:
        extra["start_parent"] = outside
    try:
        load_op(name, root=folder)               # a header the registry refuses is refused here, by name
    except Exception as error:  # noqa: BLE001 - SpecError, HeaderError, an import error of the kernel file
        raise ProblemError(f"{start}: the operator made for {problem.name} does not load with it as its start: "
                           f"{type(error).__name__}: {error}") from error
    task = Task(op=name, start=start.stem, route=route, dtypes=spec.dtypes, problem_path=str(problem), extra=extra)
    return task, target


# A start's header line naming its parent: the value is a rung id of the operator the file came from.
_PARENT_LINE = re.compile(r"^(?P<key>[ \t]*parent:[ \t]*)(?P<parent>\S+)[ \t]*$", re.M)


def _adopt_start(copy: Path) -> str | None:
    """Take a start kernel as the user wrote it: a ``parent:`` naming a rung of the operator the file came
    from (softmax/t02_online_tiles.py names t01_row_per_program), absent from the operator made for the
    problem, is the file's history, not an error. The copy's parent becomes the problem's baseline and
    the original is kept in a prose line of its header; the code is untouched. Returns the original
    parent when it was rewritten, else None."""
    try:
        header = parse_header(copy)
    except HeaderError as error:
        raise ProblemError(f"{copy.name}: a start kernel needs a rung header (parent, change, hypothesis): "
                           f"{error}") from None
    parent = header.parent_id
    if parent is None or parent in (TORCH_BASELINE, TORCH_COMPILE):
        return None
    text = copy.read_text(encoding="utf-8")
    match = _PARENT_LINE.search(text)
    if match is None or match.group("parent") != parent:
        return None                      # continued over lines, or elsewhere: the registry will say what it finds
    line = (f"{match.group('key')}{TORCH_BASELINE}\n(the start's own header named parent {parent}, a rung of the "
            f"operator it came from; this problem's operator has only its baseline before it)")
    copy.write_text(text[:match.start()] + line + text[match.end():], encoding="utf-8")
    return parent
