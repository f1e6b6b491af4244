"""One rung of a ladder: a file, its header, and how to turn it into ``fn(*inputs, out=None) -> output``.

The routes, told apart by the file name (see :mod:`.registry`):

- ``hip``: a ``vNN_name.hip`` kernel compiled with :func:`hello_gpu.hip`. Called with the header's
  ``block``/``grid``, the output passed by name when the checker poisons it; or, where launching needs
  more than the signature gives (zeroing an accumulator, two kernels), by the companion
  ``vNN_name.py``'s ``run(kernel, *inputs)``.
- ``cuda``: a ``vNN_name.cu`` kernel in the CUDA dialect (:func:`hello_gpu.cuda`), launched as a ``hip``
  rung is (companion included); NVIDIA only, so elsewhere it is skipped with the reason. Compiled for
  the arch its header declares (``arch: sm_90a``: the Hopper-only ``wgmma`` and ``setmaxnreg``).
- ``triton``: a ``tNN_name.py`` module; its ``run(*inputs)`` launches its ``@triton.jit`` kernels.
- ``torch``: ``v00_torch.py``'s ``run(*inputs)``, and the derived ``v00_torch_compile`` rung.
- ``peer``: ``peer_name.py``'s ``run(*inputs)``, calling a library (Liger-Kernel) a user would pick instead.

A rung whose ``run`` has an ``out`` parameter accepts an output tensor; the checker then fills it with
NaN first, so an element the rung never writes cannot pass by luck.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable

from ..runtime import cuda, hip
from ..runtime.checks import lazy_view, unindexable
from ..runtime.device import device_info, gpu_vendor
from ..runtime.kernel import DEFAULT_BLOCK
from ..runtime.triton_replay import replayable
from .header import C_TYPES, Header, HeaderError, instantiate_entry, parse_requires  # noqa: F401 - public here too
from .sources import INCLUDE_FOLDER, OPS_DIR, collect_sources

if TYPE_CHECKING:
    from .registry import Op

ROUTES = ("hip", "cuda", "triton", "torch", "peer")
COMPILED_ROUTES = {"hip": hip, "cuda": cuda}       # C++ rungs: route -> the dialect's compile function
TORCH_BASELINE = "v00_torch"
TORCH_COMPILE = "v00_torch_compile"

_module_counter = itertools.count()



# Device code shared by the HIP rungs (warp and block reductions, 16-byte packs). A rung's `#include "x"`
# resolves beside the rung first, then here: the rule the compiler, the compile gate and the sources a
# record hashes all follow.
INCLUDE_DIR = OPS_DIR / INCLUDE_FOLDER


def include_dirs_for(path: Path) -> tuple[str, str]:
    """Where the ``#include``s of the HIP file ``path`` resolve, in order: its folder, then INCLUDE_DIR."""
    return str(path.resolve().parent), str(INCLUDE_DIR)


class RungError(ValueError):
    """A rung that cannot be built or called as its files say. The message names the file."""


def triton_interpreter_on() -> bool:
    """TRITON_INTERPRET=1: @triton.jit kernels run on CPU tensors (read when a kernel is decorated)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def require_interpreted_triton() -> None:
    """Refuse, with the reason, a process that set TRITON_INTERPRET=1 after importing Triton.

    Triton decorates its own library (tl.sum, tl.max: @jit functions) once, at the first import of
    triton.language. Imported in compiled mode, those functions refuse to run inside an interpreted
    kernel, and every reduction would fail with Triton's "Cannot call @triton.jit'd outside of the
    scope of a kernel", which names neither the cause nor the fix."""
    import triton.language as tl
    if type(tl.sum).__name__ == "JITFunction":
        raise RungError("TRITON_INTERPRET=1 was set after Triton was imported in compiled mode, so Triton's own "
                        "functions (tl.sum, tl.max) cannot run in the interpreter: set TRITON_INTERPRET=1 before "
                        "anything imports triton (in the shell, or first thing in a fresh process or notebook)")


MODULE_PREFIX = "_hello_gpu_ops_"     # every rung module's name in sys.modules starts so (see load_module)


def load_module(path: Path, label: str) -> ModuleType:
    """Import ``path`` as a fresh module every time.

    Fresh, because Triton picks the interpreter or the GPU compiler when ``@triton.jit`` runs, that is
    at import: a module imported once and cached would keep the first choice. The module is put in
    ``sys.modules`` (under a unique name) because dataclasses and ``inspect.getsource`` look there.
    """
    name = f"{MODULE_PREFIX}{re.sub(r'[^0-9A-Za-z_]', '_', label)}_{next(_module_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RungError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def requirement_unmet(text: str, vendor: str | None, arch: str | None, where: str = "requires") -> str | None:
    """Why this machine does not meet ``requires: text``, or None when it does."""
    wanted_vendor, wanted_arch = parse_requires(text, where)
    if vendor is None:
        return f"requires {text}; no GPU here"
    if vendor != wanted_vendor:
        return f"requires {text}; this GPU is {vendor} {arch}"
    if wanted_arch is None or arch is None:
        return None
    if wanted_vendor == "nvidia":
        # sm_90a code (wgmma, setmaxnreg) runs on sm_90 exactly; plain sm_XY runs on XY and newer.
        wanted, have = int(re.sub(r"\D", "", wanted_arch)), int(re.sub(r"\D", "", arch))
        met = have == wanted if wanted_arch.endswith("a") else have >= wanted
    else:
        met = arch.split(":")[0] == wanted_arch          # AMD code objects are per exact gfx target
    return None if met else f"requires {text}; this GPU is {arch}"


def _declared_arch_to_build(target: tuple[str, str | None]) -> str | None:
    """The arch to compile a rung for, given its declared (vendor, arch); None: this GPU's own.

    An arch-specific target (``sm_90a``: wgmma, setmaxnreg) is compiled for as declared, since the device
    reports plain ``sm_90``. A plain ``sm_80`` is a minimum: an sm_80 cubin does not load on an sm_90 GPU
    (cubins run within one major version), so on a GPU that meets it the GPU's own arch is used."""
    vendor, arch = target
    if arch is None or arch.endswith("a"):
        return arch
    return None if _gpu()[0] == vendor else arch


def _gpu() -> tuple[str | None, str | None]:
    vendor = gpu_vendor()
    return vendor, device_info().arch if vendor else None


def _accepts_out(function: Callable) -> bool:
    try:
        return "out" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


# Shapes a ladder compiles for: 5 edge shapes and 3 benchmark shapes, each its own specialisation.
COMPILE_SHAPES_LIMIT = 64


def compile_per_shape(run: Callable, options: dict | None = None) -> Callable:
    """``torch.compile(run, dynamic=False)``: one specialised graph per shape, as a user with fixed shapes
    gets; ``options``: Inductor settings for those graphs (ops/matmul/max_autotune.py).

    With the default (dynamic after the second shape), the ladder's edge-shape checks turned the sizes
    symbolic, and Inductor then reduced 2^28 floats in one program at ~1 GB/s (records/nvidia-h200/
    reduce_sum.float32.json, commit d2bc961). Dynamo allows 8 recompiles per function by default; a
    ladder sees 8 shapes or more, so the limit is raised (a process-wide Dynamo setting).
    """
    import torch
    import torch._dynamo
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), COMPILE_SHAPES_LIMIT))
    return torch.compile(run, dynamic=False, **({"options": dict(options)} if options else {}))


class LayoutError(RungError):
    """A tensor a rung cannot read as laid out (not contiguous), refused before anything is launched."""


def _input_names(function: Callable, count: int) -> list[str]:
    """The names of a run()'s first ``count`` parameters (``a``, ``b``; ``x``, ``weight``), else input 0, 1, ..."""
    try:
        names = [name for name, parameter in inspect.signature(function).parameters.items()
                 if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    names = [name for name in names if name not in ("kernel", "out")]    # a companion's run(kernel, *inputs, out)
    return [names[i] if i < len(names) else f"input {i}" for i in range(count)]


@dataclass
class BuiltRung:
    """A rung ready to call: ``built(*inputs)`` or, where ``accepts_out``, ``built(*inputs, out=tensor)``.

    ``any_layout``: the rung reads its tensors through their strides (the torch route: PyTorch does).
    Every other rung is handed raw pointers and indexes them as contiguous rows, so a call refuses a
    non-contiguous tensor (``x[::2]``, ``w.t()``, an ``expand``) with a :class:`LayoutError` naming the
    rung, the tensor and its strides, before anything is launched: a strided view read as contiguous is
    a silently wrong answer (the Triton vector_add and reduce_sum rungs returned one on ``x[::2]``,
    issue 19). One ``is_contiguous()`` a tensor costs ~0.1 us of host time.
    """

    rung: "Rung"
    function: Callable
    accepts_out: bool
    interpreted: bool = False          # a Triton rung running in the CPU interpreter
    any_layout: bool = False
    input_names: tuple[str, ...] = ()  # for messages; default: the names of function's parameters

    def __post_init__(self):
        # The torch dtypes the header lists (None: every dtype of the op): one set lookup a call (~0.1 us).
        declared = self.rung.metadata.dtypes
        self.declared_dtypes = None if not declared else frozenset(_torch_dtype(name) for name in declared)

    def __call__(self, *inputs, out=None):
        if self.declared_dtypes is not None and inputs and getattr(inputs[0], "dtype", None) not in self.declared_dtypes:
            self.rung.check_dtype(inputs)
        if not self.any_layout:
            self.check_layout(inputs, out)
        if out is None:
            return self.function(*inputs)
        if not self.accepts_out:
            raise RungError(f"{self.rung.path}: run() takes no out= tensor")
        return self.function(*inputs, out=out)

    def check_layout(self, inputs, out=None) -> None:
        """Raise :class:`LayoutError` for the first tensor among ``inputs`` and ``out`` that this rung cannot read
        as contiguous memory holding its values: non-contiguous, a lazily negated view (runtime.checks.lazy_view),
        nested or sparse (runtime.checks.unindexable)."""
        tensors = list(inputs) + ([out] if out is not None else [])
        for index, tensor in enumerate(tensors):
            if not hasattr(tensor, "is_contiguous"):
                continue
            # is_neg() alone (~0.1 us a tensor): a conjugate bit exists only on complex tensors, no rung's dtype;
            # is_nested (~0.05 us): a nested tensor of equal rows says it is contiguous
            if tensor.is_neg() or tensor.is_nested:
                problem = lazy_view(tensor) or unindexable(tensor)
            else:
                try:
                    contiguous = tensor.is_contiguous()
                except RuntimeError:            # sparse CSR and its kin have no strides at all
                    contiguous = False
                if contiguous:
                    continue
                # sparse COO reports strides (0, 0): the layout, not the strides, is the problem
                problem = unindexable(tensor) or (
                    f"has shape {tuple(tensor.shape)} and strides {tuple(tensor.stride())}, not contiguous (that "
                    f"would be strides {tuple(_contiguous_strides(tensor.shape))}); this rung indexes its tensors as "
                    f"contiguous memory, so it refuses rather than read the wrong elements: pass "
                    f"{self._name(inputs, index)}.contiguous()")
            raise LayoutError(f"{self.rung.op.name}/{self.rung.id}: {self._name(inputs, index)} {problem}")

    def _name(self, inputs, index: int) -> str:
        """The name of tensor ``index`` of a call's inputs, then ``out``."""
        return [*(self.input_names[:len(inputs)] or _input_names(self.function, len(inputs))), "out"][index]


def _torch_dtype(name: str):
    import torch
    return getattr(torch, name)


def _contiguous_strides(shape) -> list[int]:
    strides, step = [], 1
    for size in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(size), 1)
    return strides[::-1]


@dataclass(eq=False)
class Rung:
    """One variant of an operator. ``id`` is the file name's stem (``v03_warp_shuffle``)."""

    op: "Op" = field(repr=False)
    id: str
    route: str
    path: Path
    metadata: Header
    companion: Path | None = None       # vNN_name.py beside a vNN_name.hip or .cu

    # ------------------------------------------------------------------ the tree
    @property
    def parent(self) -> "Rung | None":
        parent = self.metadata.parent_id
        return next((rung for rung in self.op.rungs if rung.id == parent), None) if parent else None

    def children(self) -> list["Rung"]:
        """The rungs whose header names this one as parent, in ladder order."""
        return [rung for rung in self.op.rungs if rung.metadata.parent_id == self.id]

    @property
    def sources(self) -> list[Path]:
        """Every operator-code file this rung runs: its own file first, its companion, then what they
        load, import or #include (:mod:`.sources`). A record hashes them all."""
        return collect_sources([self.path], self.op.path.parent)

    @property
    def is_baseline(self) -> bool:
        """torch and the peers: what the candidates are measured against, never candidates themselves."""
        return self.route in ("torch", "peer")

    @property
    def deterministic(self) -> bool:
        return self.metadata.deterministic

    def supports(self, dtype: str) -> bool:
        return dtype in (self.metadata.dtypes or tuple(self.op.spec.DTYPES))

    def check_dtype(self, inputs) -> None:
        """Refuse, naming the dtype, a call whose first tensor has a dtype the header's ``dtypes`` does not list,
        before anything is compiled or launched (v06_mma_sync given float32 failed inside NVRTC, instantiating
        its 16-bit mma.sync template for float: records/nvidia-h200/gpu-tests.test_attention_mma.xml)."""
        dtype = str(inputs[0].dtype).removeprefix("torch.") if inputs and hasattr(inputs[0], "dtype") else None
        if dtype is not None and not self.supports(dtype):
            allowed = self.metadata.dtypes or tuple(self.op.spec.DTYPES)
            names = " or ".join([", ".join(allowed[:-1]), allowed[-1]] if len(allowed) > 1 else allowed)
            raise RungError(f"{self.op.name}/{self.id} takes {names} (its header's dtypes), not {dtype}: refused "
                            f"before compiling or launching anything")

    # ------------------------------------------------------------------ where it can run
    def unmet_requirement(self) -> str | None:
        """Why this machine does not meet the rung's declared target (``requires``, ``vendor``, ``arch``, a
        ``.cu`` file's NVIDIA), or None when it does or the rung declares none."""
        if not self.metadata.requires:
            return None
        vendor, arch = _gpu()
        return requirement_unmet(self.metadata.requires, vendor, arch, str(self.path))

    def skip_reason(self) -> str | None:
        """Why this rung cannot run on this machine now, or None."""
        if self.route == "peer":
            package = self.metadata.package
            if package is None:
                return f"{self.path.name} names no package: (the Python package the peer calls)"
            try:
                found = importlib.util.find_spec(package) is not None
            except (ImportError, ValueError):           # "a.b" with no package a; an empty name
                found = False
            if not found:
                return f"needs the Python package {package}, which is not installed here"
        unmet = self.unmet_requirement()
        if unmet:
            return unmet
        if _gpu()[0] is None:
            if self.route in COMPILED_ROUTES:
                return "no GPU: HIP rungs launch on a GPU (`hello-gpu compile-check` still compiles them here)"
            if self.route == "triton" and not triton_interpreter_on():
                return "no GPU (set TRITON_INTERPRET=1 to check Triton rungs on the CPU)"
            if self.id == TORCH_COMPILE:
                return "no GPU: the torch.compile baseline is checked and timed on the GPU"
            if self.route == "peer":
                return "no GPU: peers are checked and timed on the GPU"
        return None

    def device(self) -> str:
        """Where this rung's tensors live: the GPU, except for the Triton interpreter (and no GPU at all)."""
        vendor, _ = _gpu()
        if self.route == "triton" and triton_interpreter_on():
            return "cpu"
        return "cuda" if vendor is not None else "cpu"

    # ------------------------------------------------------------------ building
    def entry_for(self, dtype: str | None = None) -> str | None:
        """The kernel to compile: the header's ``entry``, with ``{T}`` replaced by the C type of ``dtype``.

        ``entry: vector_add<{T}>`` lets one template serve every dtype of the op; ``dtype`` None means
        the first dtype the rung supports (what the compile gate and a bare ``kernel()`` use).
        """
        entry = self.metadata.entry
        if entry is None or "{T}" not in entry:
            return entry
        dtype = dtype or (self.metadata.dtypes or tuple(self.op.spec.DTYPES))[0]
        try:
            return instantiate_entry(entry, dtype, str(self.path))
        except HeaderError as error:
            raise RungError(str(error)) from None

    def kernel(self, arch: str | None = None, dtype: str | None = None):
        """The C++ rung's :class:`hello_gpu.Kernel` for ``dtype`` (``arch`` given: compiled for it, no GPU needed;
        else for the arch the header declares, else for this GPU)."""
        if self.route not in COMPILED_ROUTES:
            raise RungError(f"{self.path}: only HIP and CUDA rungs have a kernel (this is a {self.route} rung)")
        if arch is None and self.metadata.target:
            arch = _declared_arch_to_build(self.metadata.target)
        compile_in_dialect = COMPILED_ROUTES[self.route]
        return compile_in_dialect(self.path.read_text(encoding="utf-8"), entry=self.entry_for(dtype), arch=arch,
                                  name=self.path.name, include_dirs=include_dirs_for(self.path))

    def build(self) -> BuiltRung:
        """Compile or import the rung now and return the callable the checker and the timer use."""
        if self.route in COMPILED_ROUTES:
            return self._build_compiled()
        if self.route == "triton" and triton_interpreter_on():
            require_interpreted_triton()
        module = load_module(self.path, f"{self.op.name}_{self.path.stem}")
        run = getattr(module, "run", None)
        if not callable(run):
            raise RungError(f"{self.path}: defines no run(*inputs) function")
        if self.id == TORCH_COMPILE:
            return BuiltRung(self, compile_per_shape(run), _accepts_out(run), any_layout=True)
        interpreted = self.route == "triton" and triton_interpreter_on()
        accepts_out = _accepts_out(run)
        if self.route == "triton" and not interpreted:
            # Repeated call signatures replay the rung's recorded Triton launches: its host time becomes
            # the launches' alone (see runtime.triton_replay; rungs that are not replayable run as written).
            run = replayable(run)
        return BuiltRung(self, run, accepts_out, interpreted=interpreted, any_layout=self.route == "torch")

    def _build_compiled(self) -> BuiltRung:
        kernels = _KernelsByDtype(self)
        kernel = kernels.first()          # compile now: a rung that does not build fails its check, not its timing
        if self.companion is not None:
            run = getattr(load_module(self.companion, f"{self.op.name}_{self.companion.stem}"), "run", None)
            if not callable(run):
                raise RungError(f"{self.companion}: defines no run(kernel, *inputs) function")
            if _accepts_out(run):
                function = lambda *inputs, out=None: run(kernels.like(inputs), *inputs, out=out)  # noqa: E731
            else:
                function = lambda *inputs: run(kernels.like(inputs), *inputs)  # noqa: E731
            return BuiltRung(self, function, _accepts_out(run), input_names=tuple(_input_names(run, 8)))
        outputs = [p.name for p in kernel.signature.parameters if p.is_output]
        if len(outputs) != 1:
            raise RungError(f"{self.path}: {kernel.signature.entry} has {len(outputs)} outputs; write "
                            f"{self.path.with_suffix('.py').name} with run(kernel, *inputs) to say how to launch it")
        header, output = self.metadata, outputs[0]
        scalars = [p for p in kernel.signature.parameters if not p.is_pointer]
        sizes = [p.name for p in scalars]
        explicit = all(p.is_size for p in scalars)       # n, numel...: each is the first input's numel()

        def launch(*inputs, out=None):
            grid = None
            if header.grid is not None:
                grid = header.grid_for(inputs[0].numel(), device_info().multiprocessors, inputs[0].element_size())
            if not explicit:
                extra = {output: out} if out is not None else {}
                return kernels.like(inputs)(*inputs, block=header.block or DEFAULT_BLOCK, grid=grid, **extra)
            # Every argument passed (the output allocated here, like the first input; each size its numel),
            # so a repeated call reuses its checked launch (Kernel.__call__) and costs a few us of host time.
            if out is None:
                import torch
                out = torch.empty_like(inputs[0])
            arguments = {output: out, **{name: inputs[0].numel() for name in sizes}}
            return kernels.like(inputs)(*inputs, block=header.block or DEFAULT_BLOCK, grid=grid, **arguments)

        inputs = tuple(p.name for p in kernel.signature.parameters if p.is_pointer and not p.is_output)
        return BuiltRung(self, launch, True, input_names=inputs)


class _KernelsByDtype:
    """A C++ rung's kernels, one per dtype for a templated ``entry: name<{T}>``, compiled on first use."""

    def __init__(self, rung: Rung):
        self.rung = rung
        self.templated = "{T}" in (rung.metadata.entry or "")
        self.kernels: dict[str | None, object] = {}

    def get(self, dtype: str | None):
        key = dtype if self.templated else None
        if key not in self.kernels:
            self.kernels[key] = self.rung.kernel(dtype=key)
        return self.kernels[key]

    def first(self):
        """The kernel of the first dtype the rung supports."""
        metadata = self.rung.metadata
        return self.get((metadata.dtypes or tuple(self.rung.op.spec.DTYPES))[0])

    def like(self, inputs):
        """The kernel for the first input's dtype (``torch.bfloat16`` -> ``name<__hip_bfloat16>``)."""
        if not self.templated:
            return self.get(None)
        self.rung.check_dtype(inputs)          # never instantiate the template for a dtype the header leaves out
        dtype = str(inputs[0].dtype).removeprefix("torch.")
        return self.get(dtype)
