"""Anti-cheat: the ways a candidate can look fast or correct without being either, and the check for each.

Public harnesses for model-written kernels have been beaten by candidates that call the library
they were meant to replace, time nothing, cache answers, or patch the clock. Each cheat here has a
deliberately cheating rung under ``tests/agent_cheats/`` that these checks must reject, with the
reason naming the cheat (every reason starts with one of the tags below).

Three kinds of check, composed by :func:`inspect`:

- **Static**, on the candidate's source (a Triton ``.py``, or a HIP ``.hip`` and its companion ``.py``):
  :func:`find_library_calls`, :func:`find_concurrency`, :func:`find_timer_patching`. The Python scans
  read the syntax tree, so a docstring that says "torch.add" is not a call; the code inside
  ``@triton.jit`` functions is device code and is not scanned for host calls. They judge only what a
  name says for sure; what they cannot decide without types or values is a hint (:func:`static_hints`),
  judged by the run-time evidence (the child's ATen watch in every call, the kernel trace).
- **Run-time**, in the process that runs the candidate (the sandbox's child): :func:`check_fresh_inputs`,
  :func:`check_partial_writes`, :func:`check_input_writes`, :func:`check_precision`,
  :func:`check_stale_output`. :func:`runtime_evidence` runs them all on one built candidate and returns
  their reasons, with launch counts, as JSON-serialisable evidence.
- **From evidence** the sandbox recorded: the kernels a profiled call launched and their streams
  (:func:`evidence_from_trace` reads a ``torch.profiler`` Chrome trace; :func:`profile_evidence` records
  one), launch counts, the rates' ``suspect`` flag, the harness functions found replaced, threads
  started: :func:`check_kernel_sources`, :func:`check_streams`, :func:`check_launches`,
  :func:`check_suspect`.

The evidence :func:`inspect` reads. Every key is optional (absent: that check did not run;
``strict=True`` makes each absence a reason), and each is looked for at the top level first, then in
the tool results the agent's sandbox returns (``evidence["check"]``, ``evidence["bench"]``)::

    {"kernels":         [{"name": str, "source": "hello-gpu" | "triton" | "library" | "other"}],
     "streams":         [{"name": str, "stream": int}],  "timed_stream": int | None,
     "stray_kernels":   [names launched outside every profiled call],
     "launches":        int | [int per call],
     "rates":           {"suspect": str | None, ...},    # hello_gpu.bench.work.Rates.to_dict()
     "runtime":         {check name: [reasons]},        # runtime_evidence(...)["runtime"]
     "triton_kernels":  [names],                        # runtime_evidence: kernels reachable from run()
     "patched":         [dotted names],                 # harness functions found replaced in the child
     "threads_started": int}

Timer and synchronisation patching: a candidate is imported, checked and timed in the sandbox's child
process, never in the agent's, so a patch cannot reach the agent or the parent's clock that bounds the
child. Inside the child the sandbox takes the timing and checking functions before it imports the
candidate and compares them afterwards (the ``patched`` evidence); :func:`find_timer_patching` names
the attempt in the source. Either rejects the candidate, even where the patch could not have changed a
number.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from functools import partial

from ..ops.checking import compare_outputs, fresh_seeds, poison_value, synchronize_device, tensor_bits
from ..profile.cupti_teardown import keep_cupti_for_graphs
from ..profile.kernel_names import kernel_key, kernel_source
from ..profile.kernel_table import CALL_LABEL, is_kernel_event, is_launch_event, trace_events
from ..runtime.signature import list_kernels
from .shared import GUARD as SHARED_GUARD

# Every reason starts with one of these, then ": " and the evidence.
LIBRARY = "library fallback"
CONCURRENCY = "side stream or thread"
CACHED = "cached result"
PARTIAL_WRITE = "partial write"
INPUT_WRITE = "writes into inputs"
LOW_PRECISION = "lower precision than declared"
NO_LAUNCH = "never launches"
TIMER = "timer patching"
SUSPECT = "suspect"
INCORRECT = "incorrect"
MISSING = "evidence missing"
TAMPER = "tamper evidence"              # the child's audit hook or fingerprint saw it (hello_gpu.agent.worker)
COVERAGE = "dtype coverage"             # the header declares fewer dtypes than the task
TIMED_OUTPUT = "timed output wrong"     # a timed call at the benchmark shape gave a wrong output
TIMING = "timing inconsistent"          # the child's claimed times disagree with the parent's clock
GUARD = SHARED_GUARD                    # a write outside the output, into the guard bytes around it
NONDETERMINISTIC = "nondeterministic"   # declared deterministic; two timed calls on the same values differ
TAGS = (LIBRARY, CONCURRENCY, CACHED, PARTIAL_WRITE, INPUT_WRITE, LOW_PRECISION, NO_LAUNCH, TIMER, SUSPECT,
        INCORRECT, MISSING, TAMPER, COVERAGE, TIMED_OUTPUT, TIMING, GUARD, NONDETERMINISTIC)

RUNTIME_CHECKS = ("fresh_inputs", "partial_writes", "input_writes", "precision", "stale_output")
EVIDENCE_KEYS = ("kernels", "streams", "launches", "rates", "runtime")


def tag_of(reason: str) -> str:
    """The tag a reason starts with ("partial write: 232 of 1000 ..." -> "partial write")."""
    return reason.split(":", 1)[0]


# ============================================================================ static: the source


# torch calls a launcher may make: allocate, describe, ask about the device. Anything else computes.
TORCH_ALLOWED_CALLS = frozenset({
    "torch.empty", "torch.empty_like", "torch.empty_strided", "torch.zeros", "torch.zeros_like",
    "torch.full", "torch.full_like", "torch.device", "torch.finfo", "torch.iinfo", "torch.Size",
    "torch.is_tensor", "torch.is_floating_point", "torch.get_default_dtype",
    "torch.cuda.is_available", "torch.cuda.current_device", "torch.cuda.get_device_properties",
    "torch.cuda.device_count", "torch.cuda.get_device_capability", "torch.cuda.current_stream",
})
# Tensor methods that compute (a.add(b), x.softmax(-1)); glue such as .contiguous(), .view(), .stride()
# is allowed. Called on anything but an imported module, outside @triton.jit code.
TENSOR_COMPUTE_METHODS = frozenset({
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "sum", "mean", "prod", "softmax",
    "log_softmax", "exp", "exp_", "log", "matmul", "mm", "bmm", "addmm", "amax", "amin", "norm", "rsqrt",
    "sqrt", "pow", "cumsum", "var", "std", "logsumexp", "layer_norm", "rms_norm", "baddbmm", "einsum",
})
# Other Python libraries that would do the work instead of the kernel.
FOREIGN_COMPUTE_MODULES = ("cupy", "scipy", "jax", "tensorflow", "liger_kernel", "flash_attn", "apex",
                           "xformers", "cutlass", "thunderkittens")
# Vendor libraries and PyTorch internals in HIP-dialect C++.
HIP_LIBRARY_PATTERN = re.compile(
    r"\b(cublas\w*|cublasLt\w*|cudnn\w*|hipblas\w*|hipblaslt\w*|rocblas\w*|miopen\w*|cufft\w*|curand\w*|"
    r"cusparse\w*|cusolver\w*|at::\w+|torch::\w+|c10::\w+|cub::Device\w+|thrust::\w+)", re.IGNORECASE)
HIP_STREAM_PATTERN = re.compile(r"\b((?:cuda|hip|cu)Stream(?:Create|CreateWithFlags|CreateWithPriority)\w*|"
                                r"std::thread|pthread_create|std::async)\b")

CONCURRENCY_MODULES = ("threading", "_thread", "concurrent", "asyncio", "multiprocessing", "torch.multiprocessing",
                       "subprocess")
STREAM_ATTRIBUTES = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream", "torch.Stream",
                     "torch.cuda.StreamContext", "torch.cuda.set_stream", "torch.cuda.graph", "torch.cuda.CUDAGraph",
                     "os.fork")
# Stream names a task with ``side_streams`` allows (the trace then checks each call joins them).
JOINABLE_STREAM_ATTRIBUTES = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.StreamContext", "torch.Stream")
# Anything whose replacement could change a measured time or skip a wait.
TIMING_ROOTS = ("torch", "time", "triton", "builtins", "sys", "os", "importlib", "hello_gpu", "gc", "ctypes")


def _dotted(node: ast.AST) -> str | None:
    """``torch.cuda.synchronize`` for the attribute chain; None when the chain has a call or subscript."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


class _Aliases:
    """What each imported name stands for: ``import torch.nn.functional as F`` -> F = torch.nn.functional."""

    def __init__(self, tree: ast.AST):
        self.names: dict[str, str] = {}
        self.imports: list[tuple[str, int]] = []          # (module, line)
        # Names bound to Python containers (``seen = set()``, ``TILES = {}``): their .add() is not a tensor's.
        self.containers = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                           for target in node.targets if isinstance(target, ast.Name) and _is_container(node.value)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                        alias.name.split(".")[0]
                    self.imports.append((alias.name, node.lineno))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                self.imports.append((node.module, node.lineno))
                for alias in node.names:
                    self.names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        # Modules found without an import statement stand for what they find: ``T = __import__("torch")``,
        # ``importlib.import_module("torch.autograd")``, ``sys.modules["hello_gpu.agent.worker"]``.
        for node in ast.walk(tree):
            target, value = None, None
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target, value = node.targets[0].id, node.value
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name):
                target, value = node.target.id, node.value
            found = _dynamic_module(value) if value is not None else None
            if target and found:
                self.names[target] = found
                self.imports.append((found, node.lineno))
        # Names bound to a module or one of its attributes by assignment (``T = torch``, ``add = T.add``,
        # ``T: object = torch``, ``(T := torch)``): they stand for it too. Twice, for chains of two.
        for _ in range(2):
            for node in ast.walk(tree):
                target = value = None
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    target, value = node.targets[0].id, node.value
                elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name):
                    target, value = node.target.id, node.value
                found = self.find(value) if value is not None else None
                if target and found and target not in self.names:
                    self.names[target] = found

    def resolve(self, dotted: str | None) -> str | None:
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        full = self.names.get(head, head)
        return f"{full}.{rest}" if rest else full

    def is_module(self, name: str) -> bool:
        return name in self.names

    def find(self, node: ast.AST) -> str | None:
        """The dotted name an expression finds when it starts from an imported module and every name on the
        way is spelled out: ``F.softmax``, ``getattr(torch, "add")``, ``vars(torch)["add"]``,
        ``torch.__dict__.get("add")``, ``operator.attrgetter("nn.functional.softmax")(torch)``,
        ``functools.reduce(getattr, ["nn", "functional"], torch)``. None otherwise: a computed name is
        :meth:`dynamic`'s, and anything not rooted in a module is no library's."""
        dotted = _dotted(node)
        if dotted is not None:
            return self.resolve(dotted) if self.is_module(dotted.split(".")[0]) else None
        if isinstance(node, ast.Attribute):
            base = self.find(node.value)
            return f"{base}.{node.attr}" if base else None
        lookup = _lookup_parts(node)
        if lookup is None:
            return None
        base, names = lookup
        found = self.find(base)
        if not found or names is None:
            return None
        return ".".join([found.removesuffix(".__dict__"), *names]) if names else f"{found}.__dict__"

    def dynamic(self, node: ast.AST) -> str | None:
        """The module an expression looks an attribute of up by a computed name (``getattr(torch, name)``,
        ``vars(torch)[name]``, ``operator.attrgetter(name)(torch)``...): what it finds no scan can know."""
        lookup = _lookup_parts(node)
        if lookup is None or lookup[1] is not None:
            return None
        found = self.find(lookup[0])
        return found.removesuffix(".__dict__") if found else None


def _is_container(node: ast.AST) -> bool:
    """A set, dict or list display or comprehension, or a call of set / dict / list / frozenset."""
    return isinstance(node, (ast.Set, ast.Dict, ast.List, ast.SetComp, ast.DictComp, ast.ListComp)) or \
        (isinstance(node, ast.Call) and _dotted(node.func) in ("set", "dict", "list", "frozenset"))


def _constant_names(node: ast.AST | None) -> list[str] | None:
    """``"a.b"`` / ``["a", "b"]`` / ``("a", "b")`` / ``"a.b".split(".")`` -> ["a", "b"]; None when computed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(".")
    if isinstance(node, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                       for e in node.elts):
        return [part for element in node.elts for part in element.value.split(".")]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "split" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
        return node.func.value.value.split(".")
    return None


def _lookup_parts(node: ast.AST) -> tuple[ast.AST, list[str] | None] | None:
    """(the object looked into, the names looked up: [] for its namespace itself, None when computed) for
    the lookups that take names as data; None for anything else."""
    if isinstance(node, ast.Call):
        called = _dotted(node.func) or ""
        short = called.rpartition(".")[2]
        if called == "getattr" and len(node.args) >= 2:
            return node.args[0], _constant_names(node.args[1])
        if called == "vars" and len(node.args) == 1:
            return node.args[0], []
        if short == "reduce" and len(node.args) == 3 and _dotted(node.args[0]) == "getattr":
            return node.args[2], _constant_names(node.args[1])
        if isinstance(node.func, ast.Call) and (_dotted(node.func.func) or "").rpartition(".")[2] == "attrgetter" \
                and len(node.func.args) == 1 and len(node.args) == 1:
            return node.args[0], _constant_names(node.func.args[0])
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "__getitem__") and node.args \
                and _is_namespace(node.func.value):
            return node.func.value, _constant_names(node.args[0])
    if isinstance(node, ast.Subscript) and _is_namespace(node.value):
        return node.value, _constant_names(node.slice)
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value, []
    return None


def _is_namespace(node: ast.AST) -> bool:
    """``vars(x)`` or ``x.__dict__``, or a name bound to one (the aliases then say ``....__dict__``)."""
    return (isinstance(node, ast.Call) and _dotted(node.func) == "vars") or \
        (isinstance(node, ast.Attribute) and node.attr == "__dict__") or isinstance(node, ast.Name)


def _dynamic_module(node: ast.AST) -> str | None:
    """The module a ``__import__("a.b", ...)``, ``importlib.import_module("a.b")`` or ``sys.modules["a.b"]``
    expression finds (``__import__`` without a fromlist returns the top package, "a"); None otherwise."""
    if isinstance(node, ast.Subscript) and _dotted(node.value) == "sys.modules":
        key = node.slice
        return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant) \
            or not isinstance(node.args[0].value, str):
        return None
    name, called = node.args[0].value, _dotted(node.func)
    if called in ("importlib.import_module", "import_module"):
        return name
    if called == "__import__":
        fromlist = node.args[3] if len(node.args) > 3 else next((k.value for k in node.keywords if k.arg == "fromlist"),
                                                                None)
        empty = fromlist is None or isinstance(fromlist, (ast.Tuple, ast.List)) and not fromlist.elts
        return name.split(".")[0] if empty else name
    return None


def _jit_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``@triton.jit`` (and autotune/heuristics) functions: device code."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = [_dotted(d.func if isinstance(d, ast.Call) else d) or "" for d in node.decorator_list]
            if any(d.split(".")[-1] in ("jit", "autotune", "heuristics") for d in decorators):
                inside.update(id(child) for child in ast.walk(node) if child is not node)
    return inside


def _parse(source: str, where: str) -> ast.AST | str:
    try:
        return ast.parse(source)
    except SyntaxError as error:
        return f"{where} does not parse ({error.msg}, line {error.lineno}): it cannot be scanned"


def _within(name: str, roots: Iterable[str]) -> str | None:
    return next((root for root in roots if name == root or name.startswith(root + ".")), None)


def _host_calls(tree: ast.AST, aliases: _Aliases):
    """(resolved dotted name or None, node) of every call outside @triton.jit code."""
    device = _jit_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in device:
            yield aliases.find(node.func) or aliases.resolve(_dotted(node.func)), node


def _python_library_calls(source: str, where: str) -> tuple[list[str], list[str]]:
    """(findings, hints). Findings are sound: a call whose target the source spells out, through any alias
    or constant-named lookup, is a torch function that computes (or another array library's). Hints are
    what a scan cannot decide without types or values: ``x.add(y)`` (a tensor's method, or a set's?),
    host ``@``, an attribute of a module looked up by a computed name. Hints reject nothing: the run-time
    evidence (the ATen watch in every call, the kernel trace) decides those."""
    tree = _parse(source, where)
    if isinstance(tree, str):
        return [], []               # find_library_calls reports the parse error
    aliases = _Aliases(tree)
    found, hints = [], []
    device = _jit_nodes(tree)
    for name, node in _host_calls(tree, aliases):
        if name and name.startswith("torch.") and name not in TORCH_ALLOWED_CALLS \
                and not name.startswith("torch.cuda."):       # streams, events, graphs: find_concurrency's
            found.append(f"{where} line {node.lineno} calls {name}()")
        elif name and _within(name, FOREIGN_COMPUTE_MODULES):
            found.append(f"{where} line {node.lineno} calls {name}()")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_COMPUTE_METHODS \
                and aliases.find(node.func) is None \
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id in aliases.containers):
            hints.append(f"{where} line {node.lineno} calls .{node.func.attr}() on something whose type the scan "
                         f"cannot know (a tensor's method computes; a set's does not)")
    for node in ast.walk(tree):
        if id(node) in device:
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            hints.append(f"{where} line {node.lineno} uses @ on the host (torch.matmul, if its operands are tensors)")
        module = aliases.dynamic(node)
        if module:
            hints.append(f"{where} line {node.lineno} looks up an attribute of {module} by a computed name "
                         f"({ast.unparse(node)[:80]}): what it finds, no scan can know")
    for module, line in aliases.imports:
        if _within(module, FOREIGN_COMPUTE_MODULES):
            found.append(f"{where} line {line} imports {module}")
    return found, list(dict.fromkeys(hints))


def _sources(candidate) -> list[tuple[str, str, str]]:
    """(language, text, where) of each file of the candidate: the rung file, and a HIP rung's companion."""
    if candidate.route == "hip":
        files = [("hip", candidate.source, "the .hip source")]
        if candidate.companion:
            files.append(("python", candidate.companion, "the companion .py"))
        return files
    return [("python", candidate.source, "the Triton source")]


def find_library_calls(candidate) -> list[str]:
    """Library fallback, static half: the candidate calls PyTorch or a vendor library to do the work.

    A Triton rung (and a HIP rung's companion) may call torch only to allocate (``torch.empty``,
    ``empty_like``, ``zeros``, ``full`` ...) or to ask about the device; any other ``torch.*`` call
    (``torch.add``, ``torch.nn.functional.softmax``, ``torch.ops.aten...``, ``torch.compile``), reached
    by its name through any alias or constant-named lookup (``getattr(torch, "add")``, ``vars(torch)["add"]``,
    ``operator.attrgetter("add")(torch)``, ``functools.reduce(getattr, [...], torch)``), or another array
    library is a fallback. In a ``.hip`` file: cuBLAS, cuDNN, hipBLAS, rocBLAS, MIOpen, ``at::``, ``torch::``,
    ``c10::``, device-wide CUB and Thrust.

    The scan judges only what it can read for sure. Without types and values it cannot know whether
    ``x.add(y)`` is a tensor's method or a set's, what ``x @ w`` multiplies, or what a computed name finds
    (``getattr(torch, name)`` is also how a launcher picks a dtype); those are :func:`static_hints`, and the
    run-time evidence judges them: the child's ATen watch records every computing ATen op in every call
    (``a + b`` included), and on a GPU the kernel trace names every kernel by its origin.
    """
    reasons = []
    for language, text, where in _sources(candidate):
        unparsed = _parse(text, where) if language == "python" else None
        if isinstance(unparsed, str):
            reasons.append(f"{INCORRECT}: {unparsed}")
            continue
        if language == "hip":
            names = sorted({match.group(1) for match in HIP_LIBRARY_PATTERN.finditer(_without_c_comments(text))})
            found = [f"{where} uses {', '.join(names)}"] if names else []
        else:
            found = _python_library_calls(text, where)[0]
        reasons += [f"{LIBRARY}: {item}: the work must be done by the candidate's own kernel" for item in found]
    return reasons


def static_hints(candidate) -> list[str]:
    """What the source scan cannot decide (see :func:`_python_library_calls`): notes for a reader and for the
    policy, never a reason to reject. The run-time evidence decides them."""
    hints = []
    for language, text, where in _sources(candidate):
        if language == "python":
            hints += _python_library_calls(text, where)[1]
    return hints


def _without_c_comments(text: str) -> str:
    """C++ with its comments blanked (the header comment of a rung names libraries in prose)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.DOTALL)


def find_concurrency(candidate, side_streams: bool = False) -> list[str]:
    """Side stream or another thread, static half: work moved where the timer does not wait for it.

    The timer records events on one stream and waits on them; a kernel launched on another stream
    (``torch.cuda.Stream``, ``torch.cuda.stream(...)``), from another thread or process (``threading``,
    ``concurrent.futures``, ``asyncio``, ``multiprocessing``, ``subprocess``) or captured into a graph
    that replays elsewhere finishes outside the timed interval. Rejected on sight: no rung of the
    course needs any of them. In a ``.hip`` file: stream creation, ``std::thread``, ``pthread_create``.

    ``side_streams`` (a task that allows them): PyTorch streams in Python are left to the device trace,
    which must show every side-stream kernel joined before the call returned (:func:`check_streams`);
    threads, processes, graphs and streams made in C++ stay refused.
    """
    reasons = []
    for language, text, where in _sources(candidate):
        if language == "hip":
            names = sorted({m.group(1) for m in HIP_STREAM_PATTERN.finditer(_without_c_comments(text))})
            reasons += [f"{CONCURRENCY}: {where} uses {', '.join(names)}"] if names else []
            continue
        tree = _parse(source=text, where=where)
        if isinstance(tree, str):
            continue                # find_library_calls reports the parse error
        aliases = _Aliases(tree)
        for module, line in aliases.imports:
            if _within(module, CONCURRENCY_MODULES):
                reasons.append(f"{CONCURRENCY}: {where} line {line} imports {module}: work on another thread or "
                               f"process is not waited for by the timer")
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Name)):
                name = aliases.resolve(_dotted(node))
                stream = name and _within(name, STREAM_ATTRIBUTES)
                if stream and side_streams and _within(name, JOINABLE_STREAM_ATTRIBUTES):
                    continue
                if stream and not isinstance(getattr(node, "ctx", None), ast.Store):
                    reasons.append(f"{CONCURRENCY}: {where} line {node.lineno} uses {name}: kernels on another "
                                   f"stream run outside the timed one")
    return sorted(set(reasons), key=reasons.index)


def _assigned(target: ast.AST) -> list[ast.AST]:
    """What an assignment target rebinds: itself, or each element of a tuple/list target (``a.x, b = ...``)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [part for element in target.elts for part in _assigned(element)]
    return [target.value if isinstance(target, ast.Starred) else target]


def find_timer_patching(candidate) -> list[str]:
    """Timer or synchronisation patching, static half: the candidate rebinds what the harness times with.

    Flags an assignment to (or ``setattr``/``delattr`` on) anything under ``torch`` (``torch.cuda.Event``,
    ``torch.cuda.synchronize``, ``torch.Tensor.record_stream`` ...), ``time``, ``triton`` (``triton.testing``,
    ``triton.runtime``), ``builtins``, ``sys`` (``sys.modules[...] = ...``), ``os`` (``os.environ``),
    ``importlib``, ``gc``, ``ctypes`` or ``hello_gpu``; any use of ``__builtins__``; and ``import builtins``.
    Aliases are followed (``import time as t; t.perf_counter = ...``). The timing itself runs where the
    candidate cannot reach it (see the module docstring); this names the attempt, which is reason enough
    to reject.
    """
    reasons = []
    for language, text, where in _sources(candidate):
        if language != "python":
            continue
        tree = _parse(text, where)
        if isinstance(tree, str):
            continue                # find_library_calls reports the parse error
        aliases = _Aliases(tree)

        def flag(line: int, what: str, where: str = where) -> None:
            reasons.append(f"{TIMER}: {where} line {line} {what}: timing and synchronisation belong to the harness")

        for node in ast.walk(tree):
            targets = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                for part in _assigned(target):
                    base = part.value if isinstance(part, (ast.Attribute, ast.Subscript)) else None
                    name = aliases.find(base) if base is not None else None
                    if name and _within(name.removesuffix(".__dict__"), TIMING_ROOTS):
                        shown = f"{name}.{part.attr}" if isinstance(part, ast.Attribute) else f"{name}[...]"
                        flag(node.lineno, f"replaces {shown}")
            if isinstance(node, ast.Call):
                called = aliases.resolve(_dotted(node.func))
                if called in ("setattr", "delattr", "object.__setattr__") and node.args:
                    name = aliases.find(node.args[0]) or aliases.resolve(_dotted(node.args[0]))
                    if name and _within(name, TIMING_ROOTS):
                        flag(node.lineno, f"calls {called}({name}, ...)")
                if called and (called.startswith("unittest.mock") or called.endswith("monkeypatch.setattr")):
                    flag(node.lineno, f"calls {called}()")
            if isinstance(node, ast.Name) and node.id == "__builtins__":
                flag(node.lineno, "touches __builtins__")
        for module, line in aliases.imports:
            if module in ("builtins", "unittest.mock", "ctypes"):
                flag(line, f"imports {module}")
    return sorted(set(reasons), key=reasons.index)


def candidate_kernel_names(candidate) -> tuple[list[str], list[str]]:
    """(HIP ``__global__`` names, ``@triton.jit`` names) the candidate's source defines: its own kernels in
    a trace. A Triton rung that dispatches to kernels of sibling modules names them at run time instead
    (``runtime_evidence(...)["triton_kernels"]``)."""
    if candidate.route == "hip":
        return list_kernels(candidate.source), []
    tree = _parse(candidate.source, "the Triton source")
    if isinstance(tree, str):
        return [], []
    names = [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
             and any((_dotted(d.func if isinstance(d, ast.Call) else d) or "").endswith("jit")
                     for d in node.decorator_list)]
    return [], names


# ============================================================================ evidence: traces and rates


# torch.zeros / torch.full on a GPU: ATen's fill kernel (or a memset). It writes a constant: no fallback.
CONSTANT_FILL_KERNEL = re.compile(r"FillFunctor|\bfill_kernel|memset", re.IGNORECASE)


def check_kernel_sources(kernels: Sequence[dict] | None, own_names: Iterable[str] = ()) -> list[str]:
    """Library fallback, dynamic half: a kernel in the profiled calls that is not the candidate's own.

    ``kernels`` is what a kernel table records (``{"name", "source"}`` per kernel, source labelled by
    :func:`hello_gpu.profile.kernel_names.kernel_source` against the candidate's own kernel names): any
    source other than ``hello-gpu`` or ``triton`` (an ATen ``vectorized_elementwise_kernel``, a cuBLAS
    ``nvjet_...``, an unknown name) ran inside the call, so some of the timed work is not the candidate's.
    ``own_names``: the candidate's kernel names, for a table labelled without them (source "other").
    A fill with a constant (``torch.zeros`` of an accumulator: ATen's ``FillFunctor`` kernel, a memset)
    is allowed: it computes nothing from the inputs.
    On the CPU (Triton interpreter) the same list comes from the profiler's CPU ops: a computing
    ``aten::`` op inside the call is the fallback.
    """
    own = {kernel_key(name) for name in own_names}

    def is_own(kernel: dict) -> bool:
        if kernel.get("own") or kernel_key(str(kernel.get("name", ""))) in own:
            return True
        # "hello-gpu" is given only to the candidate's own names; "triton" also to any Inductor-style name
        # (triton_poi_fused_add_0): torch.compile's kernels are not the candidate's, whatever they look like.
        return kernel.get("source") == "hello-gpu" or (kernel.get("source") == "triton" and "own" not in kernel
                                                       and not own_names)

    foreign = [k for k in kernels or () if not is_own(k)
               and not CONSTANT_FILL_KERNEL.search(str(k.get("name", "")))]
    if not foreign:
        return []
    names = sorted({f"{k.get('name', '?')} ({k.get('library') or k.get('source')})" for k in foreign})
    return [f"{LIBRARY}: the profiled call ran {len(foreign)} kernel(s) that are not the candidate's own: "
            + "; ".join(names[:4]) + (" ..." if len(names) > 4 else "")]


# How the candidate's own kernels are launched: hello_gpu's runtime and Triton both call the driver API with
# a function handle from a module they loaded. PyTorch (ATen), cuBLAS and cuDNN launch through the runtime
# API (cudaLaunchKernel, hipLaunchKernel): a kernel launched that way is not the candidate's, whatever its name.
DRIVER_LAUNCH_APIS = ("cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "hipModuleLaunchKernel",
                      "hipExtModuleLaunchKernel", "hipModuleLaunchKernelExt")


def check_kernel_origin(kernels: Sequence[dict] | None, own_launches: Sequence[int] | None = None) -> list[str]:
    """Library fallback by origin, not by name (issue 17, part 4).

    ``kernels``: the profiled calls' kernels as :func:`evidence_from_trace` records them, each with
    ``own`` (its name is one the candidate's sources compiled), ``launched_by`` (the launch API call it
    is correlated with) and ``call`` (which profiled call). ``own_launches``: the candidate's own Triton
    launches counted per profiled call by its JIT functions' hooks (None for HIP, counted by name and API).

    Rejected: a kernel named like the candidate's but launched through the runtime API (a dummy
    ``__global__`` named like ATen's kernel while ``torch.add`` does the work); more own-named kernels in
    a call than the candidate's JIT launched (an Inductor kernel that took an own name). Any kernel not
    named like the candidate's is :func:`check_kernel_sources`'s.
    """
    reasons = []
    spoofed = sorted({str(k.get("name")) for k in kernels or () if k.get("own") and k.get("launched_by")
                      and not str(k["launched_by"]).startswith(DRIVER_LAUNCH_APIS)})
    if spoofed:
        launched = sorted({str(k["launched_by"]) for k in kernels if str(k.get("name")) in spoofed})
        reasons.append(f"{LIBRARY}: {len(spoofed)} kernel(s) named like the candidate's own were launched by "
                       f"{', '.join(launched)} (the runtime API ATen and the vendor libraries use), not from a module "
                       f"the candidate compiled: {'; '.join(spoofed[:3])}")
    if own_launches is not None:
        per_call: dict[int, int] = {}
        for kernel in kernels or ():
            if kernel.get("own") and kernel.get("call") is not None:
                per_call[int(kernel["call"])] = per_call.get(int(kernel["call"]), 0) + 1
        excess = [(call, count, own_launches[call]) for call, count in sorted(per_call.items())
                  if call < len(own_launches) and count > own_launches[call]]
        if excess:
            call, count, launched = excess[0]
            reasons.append(f"{LIBRARY}: profiled call {call} ran {count} kernel(s) named like the candidate's, but "
                           f"its own Triton kernels were launched {launched} time(s): the others came from elsewhere "
                           f"(torch.compile / Inductor, a library)")
    return reasons


def check_streams(streams: Sequence[dict] | None, timed_stream: int | None = None,
                  stray: Sequence[str] = (), *, joins: Sequence | None = None, side_streams: bool = False) -> list[str]:
    """Side stream, dynamic half: a kernel of the profiled call ran on a stream other than the timed one.

    ``streams`` lists ``{"name", "stream"}`` for each kernel inside the call (with ``call``, and the
    device ``end`` time where the trace has it); ``timed_stream`` is the stream the harness recorded its
    events on (its marker kernel's stream, see :func:`profile_evidence`). Without it, kernels on more
    than one stream are enough: a rung of the course uses one. ``stray``: kernels launched between the
    profiled calls, when the harness launches nothing: by another thread.

    ``side_streams`` (the task allows them): a kernel off the timed stream passes when it lies inside its
    call's interval on the timed stream: ``joins[call]`` holds the device start of a one-element fill
    queued just before the call (``before``) and of one queued as it returned (``after``), both behind
    a ~10 ms spin on the timed stream (``held``: the spin was still running when the after-call fill was
    queued). With the stream held, the order on the device depends only on the waits: a side kernel
    that waited for the caller's stream starts after ``before``; one the caller's stream waited for
    ends before ``after``. Anything else, or missing times, is refused.
    """
    if stray:
        names = sorted(set(stray))
        return [(f"{CONCURRENCY}: {len(stray)} kernel(s) launched outside every call, by another thread: "
                 f"{'; '.join(names[:4])}")]
    seen = [(entry.get("name", "?"), entry.get("stream")) for entry in streams or () if entry.get("stream") is not None]
    if timed_stream is not None and side_streams:
        unjoined = _unjoined(streams or (), timed_stream, joins or ())
        if unjoined:
            return [(f"{CONCURRENCY}: {len(unjoined)} kernel(s) on a side stream outside the timed interval "
                     f"(not waited for by the timed stream {timed_stream} before the call returned, or started "
                     f"before the call began): {'; '.join(sorted(set(unjoined))[:4])}")]
        return []
    if timed_stream is not None:
        off = sorted({f"{name} on stream {stream}" for name, stream in seen if stream != timed_stream})
        if off:
            return [(f"{CONCURRENCY}: {len(off)} kernel(s) ran off the timed stream {timed_stream}: "
                     f"{'; '.join(off[:4])}")]
        return []
    ids = sorted({stream for _, stream in seen})
    if len(ids) > 1:
        return [(f"{CONCURRENCY}: the call's kernels ran on {len(ids)} streams ({', '.join(map(str, ids))}); "
                 f"only one is timed")]
    return []


def _unjoined(streams: Sequence[dict], timed_stream, joins: Sequence) -> list[str]:
    """Side-stream kernels not inside their call's timed interval on the device (see check_streams)."""
    found = []
    for entry in streams:
        if entry.get("stream") is None or entry.get("stream") == timed_stream:
            continue
        name = f"{entry.get('name', '?')} on stream {entry.get('stream')}"
        call = entry.get("call")
        window = joins[call] if call is not None and 0 <= call < len(joins) else None
        if not isinstance(window, dict) or window.get("after") is None or entry.get("end") is None:
            found.append(f"{name} (no device times to place it)")
        elif window.get("held") is not True:
            found.append(f"{name} (the timed stream was not held while the call was queued: the order proves nothing)")
        elif window.get("before") is not None and entry.get("start") is not None \
                and float(entry["start"]) < float(window["before"]):
            found.append(f"{name} (started {float(window['before']) - float(entry['start']):.1f} us before the call's "
                         f"interval began)")
        elif float(entry["end"]) > float(window["after"]):
            found.append(f"{name} (ended {float(entry['end']) - float(window['after']):.1f} us after the timed stream "
                         f"went on)")
    return found


def check_launches(launches) -> list[str]:
    """A kernel that never launches: every call must launch at least one kernel.

    ``launches`` is a total (int) or one count per call (list). A call that launched nothing returned
    whatever the output memory held: a previous call's answer, or a tensor filled before timing.
    None (not counted here, such as a HIP rung in the CPU tier) passes.
    """
    if launches is None:
        return []
    counts = list(launches) if isinstance(launches, (list, tuple)) else [launches]
    silent = [index for index, count in enumerate(counts) if not count]
    if not silent:
        return []
    return [(f"{NO_LAUNCH}: {len(silent)} of {len(counts)} counted call(s) launched no kernel "
             f"(call(s) {', '.join(map(str, silent[:6]))}): the result came from memory, not from a kernel")]


def check_suspect(rates: dict | None) -> list[str]:
    """Faster than the roofline allows: never accepted, whatever the speedup says.

    ``rates`` is :class:`hello_gpu.bench.work.Rates` as a dict; its ``suspect`` is set when a cold-cache
    figure beats the measured copy bandwidth by 5% or the compute peak by 10%: bytes not moved, work
    skipped, or a wrong work model. Any of them makes the figure worthless as a win.
    """
    reason = (rates or {}).get("suspect")
    return [f"{SUSPECT}: {reason}"] if reason else []


# The CPU profile of a Triton-interpreter call: glue ops, never the work itself.
CPU_GLUE_OPS = frozenset({
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided",
    "aten::set_", "aten::copy_", "aten::zeros", "aten::zeros_like", "aten::zero_", "aten::fill_", "aten::full",
    "aten::full_like", "aten::view", "aten::reshape", "aten::_reshape_alias", "aten::as_strided", "aten::detach",
    "aten::detach_", "aten::contiguous", "aten::clone", "aten::to", "aten::_to_copy", "aten::lift_fresh",
    "aten::resolve_conj", "aten::resolve_neg", "aten::alias", "aten::t", "aten::expand", "aten::slice",
    "aten::select", "aten::unsqueeze", "aten::squeeze", "aten::flatten", "aten::numpy_T", "aten::result_type",
    "aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::resize_", "aten::record_stream",
})
TIMED_STREAM_LABEL = "hello_gpu.timed_stream"
JOIN_LABEL = "hello_gpu.after_call"       # the marker queued on the timed stream as each call returns
BEFORE_LABEL = "hello_gpu.before_call"    # the marker queued on the timed stream just before each call
HOLD_LABEL = "hello_gpu.hold"             # a spin on the timed stream that holds it while a call is queued
FLUSH_LABEL = "hello_gpu.flush"           # what the worker queues before every call (the timed calls' L2 flush)
HOLD_CYCLES = 2 * 10**7                   # ~10 ms at the H200's 1.98 GHz: longer than a profiled call's host time
                                          # (~0.1-1 ms); whether it was long enough is read from the trace ("held")


def evidence_from_trace(trace, *, ours: Iterable[str] = (), triton: Iterable[str] = ()) -> dict:
    """Kernels, streams and launches per call from a torch.profiler Chrome trace (pure: tested on saved traces).

    Kernels count when their launch (matched by correlation id) falls inside a ``hello_gpu.call#i``
    range; a kernel launched inside a :data:`TIMED_STREAM_LABEL` range marks the timed stream; any other
    kernel was launched outside every call (``stray_kernels``: by a thread the candidate left behind), except
    the harness's own (its markers, holds and the flushes it queues before each call, each in its own range). Without
    device kernels (a CPU-only profile), the computing ``aten::`` CPU ops inside the calls stand in
    for library kernels and ``launches`` is None (the interpreter's launches are counted elsewhere).
    """
    events = trace_events(trace)

    def spans(prefix: str) -> list[tuple[float, float]]:
        return sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
                      if e.get("ph") == "X" and str(e.get("name", "")).startswith(prefix) and "ts" in e
                      and e.get("cat") in ("user_annotation", "cpu_op", "python_function", None))

    calls, markers, after = spans(CALL_LABEL), spans(TIMED_STREAM_LABEL), spans(JOIN_LABEL)
    before, holds, flushes = spans(BEFORE_LABEL), spans(HOLD_LABEL), spans(FLUSH_LABEL)

    def which(moment, ranges) -> int:
        return next((i for i, (start, end) in enumerate(ranges) if moment is not None and start <= moment <= end), -1)

    launches = {e["args"]["correlation"]: e for e in events if is_launch_event(e)}
    kernels, streams, stray, timed = [], [], [], None
    per_call = [0] * len(calls)
    joins: list = [{"before": None, "after": None, "after_queued": None, "hold_end": None} for _ in calls]
    ours, triton = tuple(ours), tuple(triton)
    own_keys = {kernel_key(name) for name in (*ours, *triton)}
    for event in (e for e in events if is_kernel_event(e)):
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        launch = launches.get(args.get("correlation"), {})
        moment = float(launch.get("ts", event.get("ts", -1)))
        if which(moment, markers) >= 0:
            timed = args.get("stream", timed)
            continue
        if which(moment, flushes) >= 0:
            continue
        # The harness's own markers and holds, placed by the range they were launched in and never counted as
        # a call's kernels: each marker's device start, a hold's device end, the after-call marker's launch time.
        harness = [(key, index) for ranges, key in ((after, "after"), (before, "before"), (holds, "hold_end"))
                   for index in (which(moment, ranges),) if index >= 0]
        if harness:
            key, index = harness[0]
            if index < len(joins) and "ts" in event:
                joins[index][key] = float(event["ts"]) + (float(event.get("dur", 0)) if key == "hold_end" else 0.0)
                if key == "after":
                    joins[index]["after_queued"] = moment
            continue
        index = which(moment, calls)
        if index < 0:
            if calls:       # the harness launches nothing between calls: someone else did (a thread)
                stray.append(str(event.get("name", "?")))
            continue
        per_call[index] += 1
        name = str(event.get("name", "?"))
        source, library = kernel_source(name, ours=ours, triton=triton)
        kernels.append({"name": name, "source": source, "library": library, "call": index,
                        "own": kernel_key(name) in own_keys, "launched_by": launch.get("name")})
        streams.append({"name": name, "stream": args.get("stream"), "call": index,
                        "start": float(event["ts"]) if "ts" in event else None,
                        "end": float(event["ts"]) + float(event.get("dur", 0)) if "ts" in event else None})
    device_kernels = any(is_kernel_event(e) for e in events)
    if not device_kernels:
        for event in events:
            name = str(event.get("name", ""))
            if event.get("cat") == "cpu_op" and name.startswith("aten::") and name not in CPU_GLUE_OPS \
                    and which(float(event.get("ts", -1)), calls) >= 0:
                kernels.append({"name": name, "source": "library", "library": "PyTorch ATen (CPU op)"})
    for window in joins:
        # held: the spin was still running when the after-call marker was queued (None: no spin was used)
        window["held"] = (None if window["hold_end"] is None or window["after_queued"] is None
                          else window["hold_end"] > window["after_queued"])
    return {"kernels": kernels, "streams": streams, "timed_stream": timed, "stray_kernels": stray,
            "launches": per_call if device_kernels and calls else None,
            "joins": joins if device_kernels and after else None}


class ProfiledCalls:
    """The profiler around a run of calls, and the ranges each call is marked with (what
    :func:`evidence_from_trace` reads), as steps a caller takes around each call of its own.

    Entered (a context manager), the profiler runs; on a GPU a one-element fill runs first, inside a
    :data:`TIMED_STREAM_LABEL` range, on the current (timed) stream, so the trace says which stream that is.
    Around call ``index``: ``prepare(index)`` before it (where ``hold``, a spin holding the timed stream;
    ``before_call``, what the caller queues before each call, in a :data:`FLUSH_LABEL` range: the worker's L2
    flush, so that the profiled calls begin as the timed ones do, issue 17; where ``hold``, a marker just
    before the call), ``brackets(index)``: the (opening, closing) of the call's ``hello_gpu.call#index`` range,
    called just before and just after it; ``after(index)``: the join marker, queued as the call returns, then a
    synchronize. :meth:`evidence` reads the trace once the profiler has stopped. The worker calls the candidate
    from its one calling loop with these steps (Worker._calls: every call from the same lines, issue 17);
    :func:`profile_evidence` runs a callable through them. ``marker``: the one-element tensor the markers fill
    (made here when None; the worker makes its own before the candidate runs, so that the profile allocates
    nothing a call could see in the memory statistics). On the CPU only CPU ops are recorded.
    """

    def __init__(self, *, hold: bool = False, before_call: Callable[[], object] | None = None, marker=None):
        import torch
        from torch.profiler import ProfilerActivity, profile, supported_activities

        self.cuda = torch.cuda.is_available() and ProfilerActivity.CUDA in supported_activities()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        if self.cuda and marker is None:
            marker = torch.empty(1, device="cuda")
        self.marker, self.hold, self.before_call = marker, self.cuda and hold, before_call
        keep_cupti_for_graphs()
        self.profiler = profile(activities=activities)

    def __enter__(self) -> "ProfiledCalls":
        import torch
        from torch.profiler import record_function
        self.profiler.__enter__()
        if self.cuda:
            with record_function(TIMED_STREAM_LABEL):
                self.marker.fill_(0)
            torch.cuda.synchronize()
        return self

    def __exit__(self, *failure) -> None:
        self.profiler.__exit__(*failure)

    def prepare(self, index: int) -> None:
        import torch
        from torch.profiler import record_function
        if self.hold:
            # Where side streams are allowed: hold the timed stream while the call is queued, and mark
            # where its interval begins, so that the device order shows which waits the call made.
            with record_function(f"{HOLD_LABEL}#{index}"):
                torch.cuda._sleep(HOLD_CYCLES)
        if self.before_call is not None:
            with record_function(f"{FLUSH_LABEL}#{index}"):
                self.before_call()
        if self.hold:
            with record_function(f"{BEFORE_LABEL}#{index}"):
                self.marker.fill_(0)

    def brackets(self, index: int) -> tuple[Callable[[], object], Callable[[], object]]:
        from torch.profiler import record_function
        named = record_function(f"{CALL_LABEL}#{index}")
        return named.__enter__, partial(named.__exit__, None, None, None)

    def after(self, index: int) -> None:
        import torch
        from torch.profiler import record_function
        if self.cuda:
            # Queued on the timed stream as the call returns, before anything waits: it starts only
            # after every side-stream kernel the call joined to this stream (check_streams).
            with record_function(f"{JOIN_LABEL}#{index}"):
                self.marker.fill_(0)
            torch.cuda.synchronize()

    def evidence(self, *, ours: Iterable[str] = (), triton: Iterable[str] = (), trace_path=None) -> dict:
        """:func:`evidence_from_trace` of the profiled calls (after the profiler stopped)."""
        import tempfile
        from pathlib import Path
        with tempfile.TemporaryDirectory(prefix="hello-gpu-anticheat-") as folder:
            path = Path(trace_path) if trace_path is not None else Path(folder) / "trace.json"
            self.profiler.export_chrome_trace(str(path))
            trace = json.loads(path.read_text(encoding="utf-8"))
        return evidence_from_trace(trace, ours=ours, triton=triton)


def profile_evidence(call: Callable[[], object], *, ours: Iterable[str] = (), triton: Iterable[str] = (),
                     repeats: int = 3, trace_path=None, hold: bool = False,
                     before_call: Callable[[], object] | None = None, marker=None) -> dict:
    """Profile ``call()`` ``repeats`` times and return :func:`evidence_from_trace` of it (the steps of
    :class:`ProfiledCalls` around each call)."""
    profiled = ProfiledCalls(hold=hold, before_call=before_call, marker=marker)
    with profiled:
        for index in range(repeats):
            profiled.prepare(index)
            opening, closing = profiled.brackets(index)
            opening()
            call()
            closing()
            profiled.after(index)
    return profiled.evidence(ours=ours, triton=triton, trace_path=trace_path)


# ============================================================================ run-time checks


def _tensor_sha256(tensor) -> str:
    return hashlib.sha256(tensor_bits(tensor).cpu().numpy().tobytes()).hexdigest()


def input_checksums(inputs: Sequence) -> list[str | None]:
    """sha256 of each tensor input's bytes (None for a non-tensor argument)."""
    import torch
    return [_tensor_sha256(x) if isinstance(x, torch.Tensor) else None for x in inputs]


def _second_poison(dtype):
    """A finite poison unlike any answer: -0.75 x the largest finite value (a NaN output may be legitimate)."""
    import torch
    return -0.75 * torch.finfo(dtype).max if dtype.is_floating_point else torch.iinfo(dtype).min


def _poisoned(expected, dtype, value):
    import torch
    return torch.full(tuple(expected.shape), value, dtype=dtype, device=expected.device)


def _call(run_candidate, inputs, out, device: str):
    output = run_candidate(inputs, out)
    synchronize_device(device)
    return out if output is None else output


def _tolerance_for(tolerance, inputs):
    return tolerance(inputs) if callable(tolerance) else tolerance


def _first_failure(output, expected, tolerance) -> str | None:
    import torch
    if not isinstance(output, torch.Tensor):
        return f"returned {type(output).__name__}, not a tensor"
    if tuple(output.shape) != tuple(expected.shape):
        return f"output shape {tuple(output.shape)}, expected {tuple(expected.shape)}"
    rtol, atol = tolerance
    return compare_outputs(output, expected, rtol, atol)[2]


def check_input_writes(run_candidate, inputs: Sequence, out=None, *, device: str = "cpu") -> list[str]:
    """Writes into inputs: each input's sha256 before and after one call must be the same.

    A candidate that uses an input as scratch (or stores its result there as well) changes what the
    next timed iteration reads, and a caller's data: rejected whatever its output.
    """
    before = input_checksums(inputs)
    _call(run_candidate, inputs, out, device)
    after = input_checksums(inputs)
    changed = [index for index, (old, new) in enumerate(zip(before, after)) if old != new]
    if not changed:
        return []
    return [(f"{INPUT_WRITE}: input(s) {', '.join(map(str, changed))} changed during the call (sha256 "
             f"{before[changed[0]][:12]} -> {after[changed[0]][:12]}): inputs must be read-only")]


def check_partial_writes(run_candidate, inputs: Sequence, expected, *, device: str = "cpu") -> list[str]:
    """Partial writes: an output element the candidate never writes keeps the poison it was given.

    The call runs twice into outputs filled with two poisons, NaN and a finite one (-0.75 x the dtype's
    maximum): an element holding its poison both times was never written. Two, because NaN alone
    cannot tell "not written" from "correctly NaN" (softmax of an all -inf row), and a finite poison
    alone could equal a correct answer. Every element unwritten is reported as a kernel that did not
    run (:data:`NO_LAUNCH`); some of them, as a partial write. Needs a candidate that takes ``out=``.
    """
    import torch
    dtype = inputs[0].dtype
    kept = None
    for value in (poison_value(dtype), _second_poison(dtype)):
        out = _poisoned(expected, dtype, value)
        poison_bits = tensor_bits(out.clone())
        output = _call(run_candidate, inputs, out, device)
        if not isinstance(output, torch.Tensor) or output.data_ptr() != out.data_ptr():
            return [f"{PARTIAL_WRITE}: was given out= but returned another tensor, so what it wrote there is unknown"]
        same = tensor_bits(output) == poison_bits
        kept = same if kept is None else kept & same
    count, total = int(kept.sum()), kept.numel()
    if not count:
        return []
    first = int(kept.flatten().nonzero()[0])
    if count == total:
        return [(f"{NO_LAUNCH}: none of the {total} output elements was written (both poisons intact): "
                 f"no kernel ran, or it wrote elsewhere")]
    return [(f"{PARTIAL_WRITE}: {count} of {total} output elements never written (kept both the NaN and the "
             f"finite poison); first at flat index {first}")]


def input_signature(inputs) -> tuple:
    """Each tensor input's shape and dtype, each plain option's value (attention's causal): two calls alike
    in these could have been answered from one cache entry."""
    import torch
    return tuple((tuple(x.shape), str(x.dtype)) if isinstance(x, torch.Tensor) else ("option", x) for x in inputs)


def check_fresh_inputs(run_candidate, make_inputs: Callable[[int], tuple], reference: Callable, seeds: Sequence[int],
                       *, tolerance, device: str = "cpu", accepts_out: bool = True,
                       history: Callable[[], Sequence[tuple]] | None = None) -> list[str]:
    """Cached results: fresh inputs every call, in the order that makes any cache return a stale answer.

    ``make_inputs(seed)`` draws inputs from a seed generated here in the checker (``seeds``, from
    :func:`~hello_gpu.ops.checking.fresh_seeds`); the candidate only ever sees tensors. The calls:

    1. inputs A into a poisoned output buffer;
    2. inputs B of the same shape into the **same output buffer** (a cache keyed on shape or on the
       output pointer returns A's answer);
    3. inputs C whose **first half equals B's** and the rest is fresh (a cache keyed on the first
       elements, or a sample of them, returns B's answer);
    4. **new values written into C's own tensors** (same pointers, same shapes: a cache keyed on
       ``data_ptr`` returns C's answer).

    Each output is compared with the float64 reference of its own inputs; a wrong output that matches
    an earlier call's reference is a cached result, any other is reported as incorrect. ``history``:
    the inputs of calls made before this check (the checker's own, on the same lent buffers), whose
    answers a cache may also return.
    """
    import torch
    if len(seeds) < 3:
        raise ValueError(f"check_fresh_inputs needs at least 3 seeds, got {len(seeds)}")
    seeds = list(seeds) + [(seeds[0] * 1103515245 + 12345) % 2**31]
    first = make_inputs(seeds[0])
    expected = reference(*first)
    out = _poisoned(expected, first[0].dtype, poison_value(first[0].dtype)) if accepts_out else None
    answers: list[tuple[str, object]] = []
    reasons = []

    def step(label: str, inputs) -> None:
        want = reference(*inputs)
        tolerance_now = _tolerance_for(tolerance, inputs)
        output = _call(run_candidate, inputs, out, device)
        failure = _first_failure(output, want, tolerance_now)
        if failure:
            stale = next((earlier for earlier, answer in answers
                          if _first_failure(output, answer, tolerance_now) is None), None)
            for index, earlier_inputs in enumerate(history() if history is not None and not stale else ()):
                if input_signature(earlier_inputs) == input_signature(inputs) and \
                        _first_failure(output, reference(*earlier_inputs), tolerance_now) is None:
                    stale = f"an earlier call of the checker's (#{index}, other inputs)"
                    break
            if stale:
                reasons.append(f"{CACHED}: call '{label}' returned the answer of call '{stale}' (stale: {failure})")
            elif not any(reason.startswith(INCORRECT) for reason in reasons):     # wrong once says enough
                reasons.append(f"{INCORRECT}: call '{label}' on fresh inputs: {failure}")
        answers.append((label, want))

    step("A: first inputs", first)
    second = make_inputs(seeds[1])
    step("B: new inputs, same shape, same output buffer", second)
    mixed = make_inputs(seeds[2])
    if mixed[0].numel() > 1:
        for new, old in zip(mixed, second):
            if isinstance(new, torch.Tensor) and new.numel() > 1:
                half = new.numel() // 2
                new.view(-1)[:half] = old.reshape(-1)[:half]
        step("C: first half as B's, rest fresh", mixed)
    fourth = make_inputs(seeds[3])
    for target, values in zip(mixed, fourth):
        if isinstance(target, torch.Tensor):
            target.copy_(values)
    step("D: new values written into C's tensors (same pointers)", mixed)
    return reasons


# Significant bits (with the implicit one) of the float dtypes a candidate may compute in.
SIGNIFICAND_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}


PROBE_SPREAD = 8


def precision_probe_inputs(inputs: Sequence, seed: int) -> tuple:
    """The spec's inputs with every float element scaled by 2^k, k uniform in [-8, 8] (exact in float32).

    The values keep all 24 significant bits and spread over 2^16 of range, within float16's normal
    numbers for most of a normal distribution: a float16 or bfloat16 intermediate rounds each value
    (about 2^-12 and 2^-9 relative), wherever in the range it lies, and the float32 tolerance is 2^-23.
    """
    import torch
    generator = torch.Generator(device="cpu").manual_seed(seed)
    probed = []
    for tensor in inputs:
        if isinstance(tensor, torch.Tensor) and tensor.dtype.is_floating_point:
            exponents = torch.randint(-PROBE_SPREAD, PROBE_SPREAD + 1, tuple(tensor.shape), generator=generator)
            exponents = exponents.to(tensor.device)
            probed.append((tensor.to(torch.float64) * torch.pow(2.0, exponents.to(torch.float64))).to(tensor.dtype))
        else:
            probed.append(tensor)
    return tuple(probed)


def within_range(inputs: Sequence, reference: Callable, dtype: str, headroom: float = 4.0) -> tuple:
    """``(inputs, reference(*inputs))`` with the float inputs scaled by one power of two, where needed, so the
    reference stays under ``dtype``'s largest finite value over ``headroom``: the probe's 2^8 spread can take a
    result past float16's 65504 (a K = 1025 matmul reached 73458), where a correct kernel's answer is inf. A power of
    two keeps the significand of every value that stays a normal number. Each step takes half the exponent needed
    (a product of two inputs drops by the square), so the inputs move no further down than needed: values that
    leave float16's normal range lose bits, and the reference is computed on the inputs as scaled."""
    import torch
    limit = torch.finfo(getattr(torch, dtype)).max / headroom
    for _ in range(8):
        expected = reference(*inputs)
        finite = expected[torch.isfinite(expected)] if hasattr(expected, "dtype") else None
        largest = float(finite.abs().max()) if finite is not None and finite.numel() else 0.0
        if largest <= limit:
            break
        scale = 2.0 ** -max(1, math.ceil(math.log2(largest / limit) / 2))
        inputs = tuple(t * scale if isinstance(t, torch.Tensor) and t.dtype.is_floating_point else t for t in inputs)
    return tuple(inputs), expected


def effective_bits(output, expected, quantile: float = 0.9) -> float:
    """-log2 of the 90th percentile of the relative error where the reference is a normal number.

    A percentile, not the maximum: where a sum nearly cancels (a = -b + tiny) the relative error of
    one rounding of the inputs is unbounded, whatever the precision; 90% of the elements are not
    near a cancellation, and their error is the rounding of the precision used.
    """
    import torch
    got, want = output.to(torch.float64), expected.to(torch.float64)
    usable = torch.isfinite(want) & (want.abs() >= torch.finfo(torch.float32).tiny)
    if not bool(usable.any()):
        return math.inf
    relative = ((got - want).abs() / want.abs())[usable].nan_to_num(nan=math.inf, posinf=math.inf)
    typical = float(torch.quantile(relative.clamp(max=1e300), quantile)) if relative.numel() > 1 else float(relative)
    return math.inf if typical == 0 else -math.log2(typical)


def bits_against_scale(output, expected, quantile: float = 0.9) -> float:
    """-log2 of the 90th percentile of the absolute error over the root mean square of the reference.

    What :func:`effective_bits` cannot see past: in a long dot product of random signs every element is a
    partial cancellation (K = 1025 terms summing to ~sqrt(K) of one term), so the error of bfloat16 products
    (~2^-9 of a term) over the element is a ratio of two Gaussians, whose 90th percentile over 24 elements
    ranged from 3.6 to 9 bits across seeds (4 of 60 under 5 bits, read as "incorrect"). Against the output's
    overall scale the same result keeps ~8 bits for every seed; a dropped block of work keeps ~0 either way.
    """
    import torch
    got, want = output.to(torch.float64), expected.to(torch.float64)
    usable = torch.isfinite(want)
    if not bool(usable.any()):
        return math.inf
    scale = float(want[usable].square().mean().sqrt())
    error = (got - want).abs()[usable].nan_to_num(nan=math.inf, posinf=math.inf).clamp(max=1e300)
    typical = float(torch.quantile(error, quantile)) if error.numel() > 1 else float(error)
    if scale == 0:
        return math.inf if typical == 0 else -math.inf
    return math.inf if typical == 0 else -math.log2(typical / scale)


def check_precision(run_candidate, inputs: Sequence, reference: Callable, dtype: str, *, tolerance,
                    device: str = "cpu", accepts_out: bool = True) -> list[str]:
    """Precision lower than declared: computed in bfloat16/float16 while the task declares float32.

    The inputs (already probed, see :func:`precision_probe_inputs`) expose 8- and 11-bit significands;
    the error must stay under the declared dtype's tolerance. A result that is close but not that close
    is reported with the significant bits it kept, which names the precision used (about 11: float16;
    about 8: bfloat16). A result that is far off is reported as incorrect instead.
    """
    declared = SIGNIFICAND_BITS.get(dtype)
    lower = [name for name, bits in SIGNIFICAND_BITS.items() if declared and bits < declared]
    if not lower:
        return []
    inputs, expected = within_range(inputs, reference, dtype)
    out = _poisoned(expected, inputs[0].dtype, poison_value(inputs[0].dtype)) if accepts_out else None
    output = _call(run_candidate, inputs, out, device)
    failure = _first_failure(output, expected, _tolerance_for(tolerance, inputs))
    if not failure:
        return []
    bits = effective_bits(output, expected) if hasattr(output, "shape") else -math.inf
    if bits < 5 and hasattr(output, "shape"):          # cancellation, or wrong: the output's scale tells which
        bits = max(bits, bits_against_scale(output, expected))
    if 5 <= bits < declared - 1:
        like = min(SIGNIFICAND_BITS, key=lambda name: abs(SIGNIFICAND_BITS[name] - bits))
        return [(f"{LOW_PRECISION}: on inputs with full {declared}-bit significands spread over 2^+-{PROBE_SPREAD}, "
                 f"90% of the result keeps only about {bits:.1f} significant bits ({like}: "
                 f"{SIGNIFICAND_BITS[like]}), not {dtype}'s "
                 f"{declared}: {failure}")]
    return [f"{INCORRECT}: on precision-probe inputs: {failure}"]


def check_stale_output(run_candidate, make_inputs: Callable[[int], tuple], reference: Callable, seeds: Sequence[int],
                       *, tolerance, device: str = "cpu", launch_counter=None) -> list[str]:
    """A kernel that never launches: stale memory (a previous call's answer) must not pass for a result.

    1. Inputs X into a poisoned output O (the answer is now in O).
    2. The same X into the same O, which already holds the right answer, with launches counted: the
       answer is right whatever the candidate does, so only a launch count can tell; zero is rejected.
    3. New values written into X in place, into O as it is: an output still equal to the previous
       answer is stale memory.
    4. Fresh inputs into a freshly poisoned O: an output still entirely poison is a kernel that never ran.

    ``launch_counter``: a context manager factory whose value has ``.count`` (:func:`triton_launch_counter`);
    None where launches cannot be counted in-process (HIP on the CPU tier; the trace counts them on a GPU).
    """
    import torch
    reasons = []
    inputs = make_inputs(seeds[0])
    dtype = inputs[0].dtype
    first = reference(*inputs)
    out = _poisoned(first, dtype, poison_value(dtype))
    _call(run_candidate, inputs, out, device)
    if launch_counter is not None:
        with launch_counter() as counter:
            _call(run_candidate, inputs, out, device)
        if counter.count == 0:
            reasons.append(f"{NO_LAUNCH}: a repeated call on the same inputs, into an output already holding the "
                           f"answer, launched no kernel: the answer came from stale memory")
    for target, values in zip(inputs, make_inputs(seeds[1])):
        if isinstance(target, torch.Tensor):
            target.copy_(values)
    want = reference(*inputs)
    tolerance_now = _tolerance_for(tolerance, inputs)
    output = _call(run_candidate, inputs, out, device)
    failure = _first_failure(output, want, tolerance_now)
    if failure and _first_failure(output, first, tolerance_now) is None:
        reasons.append(f"{NO_LAUNCH}: after new values were written into the same inputs, the output still held "
                       f"the previous call's answer (stale memory: {failure})")
    fresh = make_inputs(seeds[2])
    fresh_expected = reference(*fresh)
    out = _poisoned(fresh_expected, dtype, poison_value(dtype))
    poison_bits = tensor_bits(out.clone())
    output = _call(run_candidate, fresh, out, device)
    if isinstance(output, torch.Tensor) and output.data_ptr() == out.data_ptr() \
            and bool((tensor_bits(output) == poison_bits).all()):
        reasons.append(f"{NO_LAUNCH}: on fresh inputs the poisoned output came back untouched: no kernel ran")
    return reasons


class _LaunchCount:
    """The launches of one counted call: ``count`` through the candidate's kernels' pre-run hooks, and
    ``streams``, the (kernel name, raw stream) of every Triton launch the call made (Triton's launch-enter
    hook: any JIT function's, or a compiled kernel's ``kernel[grid](...)``, whatever stream it names)."""

    def __init__(self):
        self.count = 0
        self.streams: list[tuple[str, object]] = []

    def hook(self, *args, **kwargs):
        self.count += 1

    def enter(self, metadata=None, *args, **kwargs):
        """Triton's launch-enter hook. While one is set, hello_gpu's launch replay (runtime.triton_replay)
        stands aside and every launch goes through the JIT, where the pre-run hooks count it (a replayed
        launch, as Rung.build replays Triton rungs, would count as none). Reads the launch's own metadata
        (its ``data``: name and stream, as Triton made it), never the candidate's ``launch_metadata``
        function, which ``get()`` would run. The interpreter calls no launch hook: no streams there."""
        data = getattr(metadata, "data", None)
        if isinstance(data, dict):
            self.streams.append((str(data.get("name", "?")), data.get("stream")))


def _launch_hook_chain():
    """Triton's launch-enter hook chain (3.6: a HookChain with add/remove), or None in older Tritons,
    whose launches are never replayed by hello_gpu (runtime.triton_replay needs the chain's lists)."""
    try:
        from triton import knobs
        chain = knobs.runtime.launch_enter_hook
    except (ImportError, AttributeError):
        return None
    return chain if hasattr(chain, "add") and hasattr(chain, "remove") else None


def candidate_namespace(function) -> dict:
    """The globals of the module a built rung's function comes from: through any wrapper that names
    what it wraps (``__wrapped__``: the Triton launch replay of Rung.build, functools.wraps)."""
    import inspect
    return getattr(inspect.unwrap(function), "__globals__", {})


def triton_launch_counter(namespace: dict):
    """A context manager factory counting launches of the ``@triton.jit`` kernels found in ``namespace``
    (a candidate module's globals, e.g. ``built.function.__globals__``), on a GPU and in the interpreter.

    Counts through Triton's pre-run hooks; autotune/heuristics wrappers are unwrapped to their kernel.
    A rung that dispatches to sibling rungs (softmax t05 loads t02-t04) has their kernels counted too:
    modules in ``namespace`` whose file lies in the candidate's own folder are searched, four levels deep
    (t07 -> t06 -> t05 -> t02..t04). The counter also records the stream of every Triton launch made while
    it is on (:class:`_LaunchCount`): the worker keeps it on in every call, checked, profiled or timed, so
    that its hooks are no sign of which kind of call it is (issue 17), and names a timed call's launch on
    another stream than the timed one.
    """
    import contextlib
    import types
    from pathlib import Path

    folder = Path(namespace["__file__"]).resolve().parent if namespace.get("__file__") else None
    kernels: list = []

    def collect(names: dict, depth: int) -> None:
        for value in list(names.values()):
            if isinstance(value, types.ModuleType):
                path = getattr(value, "__file__", None)
                if depth and folder is not None and path and Path(path).resolve().parent == folder:
                    collect(vars(value), depth - 1)
                continue
            seen = 0
            while value is not None and seen < 4 and not hasattr(value, "pre_run_hooks"):
                value, seen = getattr(value, "fn", None), seen + 1
            if value is not None and isinstance(getattr(value, "pre_run_hooks", None), list) \
                    and all(value is not kernel for kernel in kernels):
                kernels.append(value)

    collect(namespace, 4)

    @contextlib.contextmanager
    def counting():
        counter = _LaunchCount()
        chain = _launch_hook_chain()
        if chain is not None:
            chain.add(counter.enter)
        for kernel in kernels:
            kernel.pre_run_hooks.append(counter.hook)
        try:
            yield counter
        finally:
            for kernel in kernels:
                if counter.hook in kernel.pre_run_hooks:
                    kernel.pre_run_hooks.remove(counter.hook)
            if chain is not None:
                chain.remove(counter.enter)
    counting.kernel_names = sorted({getattr(k, "__name__", None) or getattr(getattr(k, "fn", None), "__name__", "?")
                                    for k in kernels})
    return counting


def _spec_tolerance(spec, dtype: str):
    def tolerance(inputs):
        return spec.tolerance(inputs, dtype) if hasattr(spec, "tolerance") else spec.TOLERANCE[dtype]
    return tolerance


def runtime_evidence(built, spec, *, dtypes: Sequence[str], shapes: Sequence, device: str, seeds=None,
                     distribution: str = "normal", launch_counter=None) -> dict:
    """Run every run-time check on a built candidate; JSON-serialisable evidence for :func:`inspect`.

    ``built`` is a :class:`hello_gpu.ops.rung.BuiltRung` (``built(*inputs, out=...)``); ``spec`` the
    operator's spec (inputs, float64 reference, tolerance). Seeds are drawn here when not given, and
    recorded, so a failure replays. A check that raises is reported as incorrect with what it raised.
    Returns ``{"runtime": {check: [reasons]}, "launches": [per plain call] or None, "seeds": [...],
    "skipped": {check: why}, "triton_kernels": [names]}``: merge it into the evidence dict.
    """
    import torch
    seeds = list(seeds) if seeds is not None else list(fresh_seeds(4))
    if launch_counter is None and getattr(built.rung, "route", None) == "triton":
        launch_counter = triton_launch_counter(candidate_namespace(built.function))
    runtime: dict[str, list[str]] = {name: [] for name in RUNTIME_CHECKS}
    skipped: dict[str, str] = {}

    def run_candidate(inputs, out):
        return built(*inputs, out=out) if out is not None else built(*inputs)

    def reference(*inputs):
        return spec.reference(*inputs).to(device=inputs[0].device, dtype=torch.float64)   # see ops.checking

    for dtype in dtypes:
        tolerance = _spec_tolerance(spec, dtype)
        for shape in shapes:
            def make(seed, shape=shape, dtype=dtype):
                return spec.make_inputs(shape, dtype, seed=seed, distribution=distribution, device=device)
            where = f"[{dtype} {shape}]"
            inputs = make(seeds[0])
            expected = reference(*inputs)
            checks = {
                "fresh_inputs": partial(check_fresh_inputs, run_candidate, make, reference, seeds, tolerance=tolerance,
                                        device=device, accepts_out=built.accepts_out,
                                        history=getattr(built, "history", None)),
                "input_writes": partial(check_input_writes, run_candidate, make(seeds[1]), device=device),
                "precision": partial(check_precision, run_candidate, precision_probe_inputs(make(seeds[2]), seeds[2]),
                                     reference, dtype, tolerance=tolerance, device=device,
                                     accepts_out=built.accepts_out),
            }
            if built.accepts_out:
                checks["partial_writes"] = partial(check_partial_writes, run_candidate, inputs, expected, device=device)
                checks["stale_output"] = partial(check_stale_output, run_candidate, make, reference, seeds,
                                                 tolerance=tolerance, device=device, launch_counter=launch_counter)
            else:
                why = "the candidate's run() takes no out=, so its output cannot be poisoned"
                skipped["partial_writes"] = skipped["stale_output"] = why
            for name, check in checks.items():
                try:
                    found = check()
                except Exception as error:  # noqa: BLE001 - a candidate that raises fails, with what it raised
                    found = [f"{INCORRECT}: {name} check: raised {type(error).__name__}: {error}"]
                placed = [_placed(reason, where) for reason in found]
                runtime[name] += [reason for reason in placed if reason not in runtime[name]]
    launches = None
    if launch_counter is not None:
        launches = []
        for dtype in dtypes:
            for shape in shapes:
                inputs = spec.make_inputs(shape, dtype, seed=seeds[3 % len(seeds)], distribution=distribution,
                                          device=device)
                try:
                    with launch_counter() as counter:
                        run_candidate(inputs, None)
                        synchronize_device(device)
                except Exception as error:  # noqa: BLE001 - reported, not raised: the verdict must still come
                    runtime["stale_output"].append(f"{INCORRECT}: a plain call raised {type(error).__name__}: {error}")
                launches.append(counter.count)
    return {"runtime": runtime, "launches": launches, "seeds": seeds, "skipped": skipped,
            "triton_kernels": list(getattr(launch_counter, "kernel_names", []))}


def _placed(reason: str, where: str) -> str:
    """"partial write: 232 of ..." -> "partial write: [float32 1000] 232 of ...": the tag stays first."""
    tag, _, detail = reason.partition(": ")
    return f"{tag}: {where} {detail}"


# ============================================================================ the verdict


def _found(evidence: dict, key: str):
    """``evidence[key]``, else the same key in the sandbox's check result, or in its anti-cheat part."""
    check = evidence.get("check") if isinstance(evidence.get("check"), dict) else {}
    for place in (evidence, check, check.get("anticheat") or {}, evidence.get("anticheat") or {}):
        if isinstance(place, dict) and place.get(key) is not None:
            return place[key]
    return None


def _rates(evidence: dict) -> dict | None:
    rates = _found(evidence, "rates")
    if rates is not None:
        return rates
    for step in ("bench", "compare"):
        result = evidence.get(step)
        if isinstance(result, dict) and ("suspect" in result or "derived" in result):
            return result.get("derived") or {"suspect": result.get("suspect")}
    return None


def inspect(candidate, task, evidence: dict | None = None, *, strict: bool = False) -> list[str]:
    """Every reason to reject ``candidate`` as a cheat; an empty list means none was found.

    The static scans always run (on the source); the evidence checks run on what ``evidence`` holds
    (see the module docstring for its keys and where they are looked for). ``strict``: an absent
    evidence key is itself a reason, for the accept step, where nothing unchecked may pass. ``task``:
    the :class:`~hello_gpu.agent.task.Task` (its route must be the candidate's) or None.
    """
    evidence = evidence or {}
    reasons: list[str] = []
    if task is not None and getattr(task, "route", candidate.route) != candidate.route:
        reasons.append(f"{INCORRECT}: the candidate's route {candidate.route} is not the task's {task.route}")
    reasons += find_library_calls(candidate)
    side_streams = bool(getattr(task, "side_streams", False))
    reasons += find_concurrency(candidate, side_streams)
    reasons += find_timer_patching(candidate)
    hip_names, triton_names = candidate_kernel_names(candidate)
    own = [*hip_names, *triton_names, *(_found(evidence, "triton_kernels") or ())]
    reasons += check_kernel_sources(_found(evidence, "kernels"), own)
    reasons += check_kernel_origin(_found(evidence, "kernels"), _found(evidence, "own_launches"))
    for key in ("coverage", "tamper", "guard"):
        reasons += [str(reason) for reason in _found(evidence, key) or ()]
    reasons += check_streams(_found(evidence, "streams"), _found(evidence, "timed_stream"),
                             _found(evidence, "stray_kernels") or (), joins=_found(evidence, "joins"),
                             side_streams=side_streams)
    reasons += check_launches(_found(evidence, "launches"))
    reasons += check_suspect(_rates(evidence))
    runtime = _found(evidence, "runtime") or {}
    for name in RUNTIME_CHECKS:
        reasons += [str(reason) for reason in runtime.get(name, ())]
    reasons += [f"{TIMER}: {name} was replaced in the candidate's process"
                for name in _found(evidence, "patched") or ()]
    threads = _found(evidence, "threads_started")
    if threads:
        reasons.append(f"{CONCURRENCY}: {threads} thread(s) started during the check and still running")
    if strict:
        missing = [key for key in EVIDENCE_KEYS
                   if (_rates(evidence) if key == "rates" else _found(evidence, key)) is None]
        missing += [f"runtime.{name}" for name in RUNTIME_CHECKS if runtime and name not in runtime]
        if missing:
            reasons.append(f"{MISSING}: no {', '.join(missing)} in the evidence: unchecked is not accepted")
    return list(dict.fromkeys(reasons))
