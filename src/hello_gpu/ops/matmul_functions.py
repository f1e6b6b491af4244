"""``hello_gpu.ops.matmul(a, b)`` and ``hello_gpu.ops.linear(x, weight)``: the matmul and linear ladders as
plain functions and torch custom ops, the rung picked by a rule the H200 records confirm.

The two layouts of B, as PyTorch has them:

- ``matmul(a, b)`` is ``torch.mm``: A (M, K) times B (K, N).
- ``linear(x, weight)`` is ``F.linear`` without a bias: x (..., K) times the transpose of an
  ``nn.Linear`` weight (N, K), so ``x @ weight.t()``.

Each ladder reads one layout (ops/matmul reads B row-major, ops/linear reads the weight row-major), so
each function accepts both and hands the operand to the ladder that reads it as it lies:
``matmul(x, weight.t())`` runs linear's rung on ``weight``, ``linear(x, b.t())`` matmul's on ``b``; no copy.
Any other layout (a strided view, a transposed ``a``) is refused with its strides named, never copied
behind the caller's back: a copy of a 14336x4096 weight costs more than the decode step it feeds.

The rule, from the H200 records of issue 21 (records/nvidia-h200/matmul.float32, matmul.bfloat16,
linear.bfloat16, linear.float32; runs of 8b07192, 6173353 and b9c47ae), which tests/test_matmul_functions.py holds it to, as
tests/test_functions.py holds softmax's BEST to its records:

- the operand in linear's layout and M <= GEMV_ROWS (16: a decode step): the decode GEMV rungs, which
  read the weight once for up to 16 rows (``LINEAR_DECODE``). 16-bit at M = 1 (``LINEAR_ONE_ROW``):
  Triton's t04, [2, 2048] tiles loaded straight to registers and marked evict-first, then t03, [8, 512]
  tiles through a cp.async pipeline (H100 record linear.bfloat16; the sweeps before them:
  records/nvidia-h100-80gb-hbm3/gemv-sweep.json and gemv-sweep.loads.json), then as for more rows. 16-bit: Triton's t02, the streaming FMA
  GEMV (H200 record of 6173353, against F.linear: 1.02x at 1x4096x14336 where t01 reads 0.87x, 0.96x at
  16x14336x4096 with t01 0.96x, 0.95x at 1x14336x4096 where t01 reads 0.98x: within the rule test's 2%),
  then t01, then the HIP warp-per-row rung (0.70x and 0.14x at 16 rows); float32: t02 as well (H200
  record of b9c47ae: 1.19x F.linear at 1x4096x4096, 1.30x at 16x4096x4096), then the HIP rung (0.60x
  and 0.52x there), then t01 (its tl.dot runs as FFMA on a bank-conflicted tile: 0.21x and 0.38x);
- everything else: matmul's rungs by dtype (``MATMUL_RULE``). float32: the SIMT HIP rung v19, 8x16
  sums a thread (H100 record matmul.float32 of 2d4889b, both routes in one run: 0.883x cuBLAS at 4096^3,
  where Triton's autotuned t04 read 0.830x and its best, t01, 0.837x), Triton's t04 where HIP cannot run
  (the interpreter). bfloat16 / float16: the Hopper rung with the TMA-store epilogue on sm_90 (v18: 0.99x cuBLAS at
  4096^3 and 1.02x at 8192^3 in the H200 record of 6173353, where v14 read 0.90x and 0.96x), the
  mma.sync rungs elsewhere on NVIDIA from sm_80 (v11 where its 106 KiB of shared memory fit a block,
  else v10: on the H200 v11 read 0.91x v10, its 212 registers leaving 8 warps an SM; no sm_80 record
  exists), else Triton (AMD, pre-Ampere NVIDIA);
- a weight (N, K) with M > 16 has no rung that reads it for a large M: it is transposed to a (K, N)
  copy first (one more pass over the weight: at 4096x14336x4096 bf16 ~0.2 GB against ~0.5 TFLOP of
  matmul, a few percent) and matmul's rule runs on the copy.

A candidate is passed over when this machine cannot run it (its declared target, the shared memory a
block of it needs, its dtypes); every list holds a Triton rung, what runs wherever Triton does and
the only kind the Triton interpreter (TRITON_INTERPRET=1, CPU tensors) runs. :func:`matmul_rung` and :func:`linear_rung` name the rung
a call runs ("linear/t02_streaming_gemv"), for any machine given as a :class:`Machine`.

Eager calls and ``torch.compile`` as in :mod:`.functions`: checked eager calls remember the replay plan
of their signature (Triton rungs; a HIP or CUDA rung has none and takes the checked path), compiled
graphs call the custom ops ``hello_gpu::matmul`` and ``hello_gpu::linear`` (fake implementations give
the shapes, so ``fullgraph=True`` keeps each call one node). Forward only. Sizes of 0 need no kernel:
M or N = 0 gives an empty result, K = 0 a result of zeros, as torch.mm does.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch.compiler import is_compiling

from ..runtime import compiled_replay
from ..runtime.checks import lazy_view
from ..runtime.device import device_info
from ..runtime.triton_replay import launch_hooks_set
from .functions import DTYPES, _no_backward, _refuse_unindexable, remember_plan
from .registry import load_op
from .rung import Rung, load_module, requirement_unmet, triton_interpreter_on

GEMV_ROWS = 16          # linear v01's kRows and t01's BLOCK_M: one pass over the weight serves 16 rows of x
# Candidates in order of preference; the first this machine runs is taken.
MATMUL_RULE = {
    "float32": ("v19_thread_tile_8x16", "t04_autotuned"),
    "16-bit": ("v18_tma_store_epilogue", "v11_large_warp_tiles", "v10_cp_async_pipeline", "t04_autotuned"),
}
LINEAR_DECODE = {"float32": ("t02_streaming_gemv", "v01_warp_per_row", "t01_row_block"),
                 "16-bit": ("t02_streaming_gemv", "t01_row_block", "v01_warp_per_row")}
# One row of x in 16 bits (batch-1 decode): t04's evict-first [2, 2048] tiles first (the H100 gemv-sweep --loads:
# 1.12-1.29x F.linear at the 8B's and 1B's projection shapes), then t03's pipelined [8, 512] tiles (1.03-1.04x in
# the H100 record), then as for more rows (t02 read 0.95-1.02x on the H200).
LINEAR_ONE_ROW = {"float32": LINEAR_DECODE["float32"],
                  "16-bit": ("t04_evict_first_gemv", "t03_tiled_gemv", *LINEAR_DECODE["16-bit"])}


@dataclass(frozen=True)
class Machine:
    """What the rule reads of a machine: the GPU's vendor and arch (None, None without one), the shared
    memory a block may ask for, and whether Triton runs in its CPU interpreter."""

    vendor: str | None
    arch: str | None
    shared_per_block: int = 0
    interpreted: bool = False


INTERPRETER = Machine(None, None, 0, interpreted=True)


@functools.cache
def _gpu_machine(index: int) -> Machine:
    info = device_info(index)
    return Machine(info.vendor, info.arch, info.shared_per_block_optin)


def machine_of(tensor: torch.Tensor, name: str = "matmul", argument: str = "a") -> Machine:
    """The machine a call on ``tensor`` runs on: its GPU, or the Triton interpreter for a CPU tensor
    under TRITON_INTERPRET=1; else a ValueError."""
    if tensor.is_cuda:
        return _gpu_machine(tensor.get_device())
    if tensor.device.type == "cpu" and triton_interpreter_on():
        return INTERPRETER
    raise ValueError(f"hello_gpu.ops.{name}: {argument} is on {tensor.device}; the kernels run on a GPU "
                     f"(move the tensors with .cuda())")


@functools.cache
def _shared_bytes(rung: Rung) -> int:
    """Dynamic shared memory a block of ``rung`` asks for: its launcher's SHARED_BYTES (the cp.async
    rungs state it), else 0 (static shared memory fits every GPU the rung's target allows)."""
    if rung.companion is None:
        return 0
    return int(getattr(load_module(rung.companion, f"{rung.op.name}_{rung.id}_for_the_rule"), "SHARED_BYTES", 0))


def unrunnable(rung: Rung, dtype: str, machine: Machine) -> str | None:
    """Why ``rung`` cannot run ``dtype`` on ``machine``, or None when it can."""
    if not rung.supports(dtype):
        return f"takes {', '.join(rung.metadata.dtypes or rung.op.spec.DTYPES)}, not {dtype}"
    if machine.interpreted:
        return None if rung.route == "triton" else "the Triton interpreter runs Triton rungs only"
    if machine.vendor is None:
        return "no GPU"
    if rung.metadata.requires:
        unmet = requirement_unmet(rung.metadata.requires, machine.vendor, machine.arch, str(rung.path))
        if unmet:
            return unmet
    needed = _shared_bytes(rung)
    if needed > machine.shared_per_block:
        return f"needs {needed} bytes of shared memory a block; this GPU allows {machine.shared_per_block}"
    return None


@functools.cache
def _op(op_name: str):
    return load_op(op_name)


def pick(op_name: str, candidates: tuple[str, ...], dtype: str, machine: Machine) -> str:
    """The first of ``candidates`` (rung ids of ``op_name``) that ``machine`` runs in ``dtype``."""
    op = _op(op_name)
    reasons = []
    for rung_id in candidates:
        reason = unrunnable(op.rung(rung_id), dtype, machine)
        if reason is None:
            return rung_id
        reasons.append(f"{rung_id}: {reason}")
    raise RuntimeError(f"no {op_name} rung runs {dtype} here ({'; '.join(reasons)})")


def rule(layout: str, m: int, dtype: torch.dtype, machine: Machine) -> tuple[str, str]:
    """(operator, rung id) the rule picks for an M-row call whose operand is in ``layout``: "b" for
    B (K, N), "weight" for W (N, K)."""
    decode = layout == "weight" and m <= GEMV_ROWS
    return _rule(layout, ("one row" if m == 1 else "rows") if decode else None, dtype, machine)


@functools.cache
def _rule(layout: str, decode: str | None, dtype: torch.dtype, machine: Machine) -> tuple[str, str]:
    name = str(dtype).removeprefix("torch.")
    if decode:
        table = LINEAR_ONE_ROW if decode == "one row" else LINEAR_DECODE
        return "linear", pick("linear", table["float32" if dtype == torch.float32 else "16-bit"], name, machine)
    return "matmul", pick("matmul", MATMUL_RULE["float32" if dtype == torch.float32 else "16-bit"], name, machine)


@functools.cache
def _built(op_name: str, rung_id: str):
    """A rung of the matmul or linear ladder, built once per process (Triton launches replayed per signature)."""
    return load_op(op_name).rung(rung_id).build()


# ------------------------------------------------------------------------------------------ checks


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _check_pair(name: str, first: tuple[str, object], second: tuple[str, object]) -> None:
    """Types, dtypes and devices: what Dynamo knows while tracing, so fullgraph stays one graph."""
    for argument, tensor in (first, second):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"hello_gpu.ops.{name}: {argument} must be a torch.Tensor, got {type(tensor).__name__}")
        _refuse_unindexable(name, argument, tensor)
        if tensor.dtype not in DTYPES:
            supported = ", ".join(_dtype_name(d) for d in DTYPES)
            raise TypeError(f"hello_gpu.ops.{name}: {argument} is {_dtype_name(tensor.dtype)}; supported: {supported}")
    (first_name, x), (second_name, y) = first, second
    if x.dtype != y.dtype or x.device != y.device:
        raise ValueError(f"hello_gpu.ops.{name}: {first_name} is {_dtype_name(x.dtype)} on {x.device} and "
                         f"{second_name} {_dtype_name(y.dtype)} on {y.device}; they must match (no mixed dtypes)")
    if (x.requires_grad or y.requires_grad) and torch.is_grad_enabled():
        raise RuntimeError(f"hello_gpu.ops.{name} is forward only (it has no backward pass): call it under "
                           f"torch.no_grad() or torch.inference_mode(), or on tensors that do not require grad")


def _refuse_layout(name: str, argument: str, tensor: torch.Tensor, wanted: str) -> None:
    raise ValueError(f"hello_gpu.ops.{name}: {argument} has shape {tuple(tensor.shape)} and strides "
                     f"{tuple(tensor.stride())}; the kernels read {wanted}. Pass {argument}.contiguous() (a copy "
                     f"this function does not make for you)")


def _operand_layout(name: str, argument: str, operand: torch.Tensor, native: str) -> str:
    """"b" or "weight": how ``operand`` lies in memory. ``native`` is the layout its name means ("b": B is
    (K, N) row-major; "weight": W is (N, K) row-major); its transpose view, contiguous, is the other one."""
    if operand.is_contiguous():
        return native
    if operand.t().is_contiguous():
        return "weight" if native == "b" else "b"
    wanted = ("a contiguous (K, N) B, or the transpose of a contiguous (N, K) weight (weight.t())" if native == "b"
              else "a contiguous (N, K) weight, or the transpose of a contiguous (K, N) matrix (b.t())")
    _refuse_layout(name, argument, operand, wanted)


def _check_matmul(a, b) -> str:
    """The layout of ``b`` ("b" or "weight"), after every check that needs no kernel."""
    _check_pair("matmul", ("a", a), ("b", b))
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"hello_gpu.ops.matmul takes 2-D a (M, K) and b (K, N), as torch.mm; got a of shape "
                         f"{tuple(a.shape)} and b of {tuple(b.shape)} (for x of (..., K) and an nn.Linear "
                         f"weight use hello_gpu.ops.linear)")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"hello_gpu.ops.matmul: a is {tuple(a.shape)} and b {tuple(b.shape)}: b needs "
                         f"K = {a.shape[1]} rows, one per column of a")
    if not a.is_contiguous():
        _refuse_layout("matmul", "a", a, "a contiguous (M, K) A, row by row")
    return _operand_layout("matmul", "b", b, "b")


def _check_linear(x, weight) -> str:
    """The layout of ``weight`` ("weight" or "b"), after every check that needs no kernel."""
    _check_pair("linear", ("x", x), ("weight", weight))
    if x.dim() < 1 or weight.dim() != 2:
        raise ValueError(f"hello_gpu.ops.linear takes x of (..., K) and a 2-D weight (N, K), as F.linear; got x "
                         f"of shape {tuple(x.shape)} and weight of {tuple(weight.shape)}")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"hello_gpu.ops.linear: x is {tuple(x.shape)} and weight {tuple(weight.shape)}: the "
                         f"weight needs K = {x.shape[-1]} columns, one per element of a row of x (weight is "
                         f"(N, K), as nn.Linear stores it)")
    if not x.is_contiguous():
        _refuse_layout("linear", "x", x, "a contiguous x, row by row")
    return _operand_layout("linear", "weight", weight, "weight")


# ------------------------------------------------------------------------------------------ running


def _route(name: str, a: torch.Tensor, layout: str, machine: Machine | None = None) -> tuple[str, str]:
    return rule(layout, a.shape[0], a.dtype, machine or machine_of(a, name, "a" if name == "matmul" else "x"))


def _gemm(name: str, a: torch.Tensor, operand: torch.Tensor, layout: str) -> torch.Tensor:
    """C (M, N) of a 2-D contiguous ``a`` and ``operand`` in ``layout`` ("b": B (K, N) contiguous, "weight":
    W (N, K) contiguous), by the rung the rule picks."""
    m, k = a.shape
    n = operand.shape[1] if layout == "b" else operand.shape[0]
    op_name, rung_id = _route(name, a, layout)
    if m == 0 or n == 0 or k == 0:
        return a.new_zeros((m, n))                  # nothing to launch: empty, or a sum of no terms
    run = _built(op_name, rung_id)
    if op_name == "linear":
        return run(a, operand)
    return run(a, operand if layout == "b" else operand.t().contiguous())


def _eager(name: str, a: torch.Tensor, operand: torch.Tensor, layout: str) -> torch.Tensor:
    """Inside a custom op (eager): its inputs as the trace left them, so the layout is read again."""
    if not operand.is_contiguous():
        if operand.t().is_contiguous():
            operand, layout = operand.t(), ("weight" if layout == "b" else "b")
        else:
            operand = operand.contiguous()
    return _gemm(name, a.contiguous(), operand, layout)


@torch.library.custom_op("hello_gpu::matmul", mutates_args=())
def _matmul_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _eager("matmul", a, b, "b")


@_matmul_op.register_fake
def _matmul_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.new_empty((a.shape[0], b.shape[1]))


_matmul_op.register_autograd(_no_backward("matmul"))


@torch.library.custom_op("hello_gpu::linear", mutates_args=())
def _linear_op(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _eager("linear", x, weight, "weight")


@_linear_op.register_fake
def _linear_fake(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x.new_empty((x.shape[0], weight.shape[0]))


_linear_op.register_autograd(_no_backward("linear"))


def _compiled(a2d: torch.Tensor, operand: torch.Tensor, layout: str) -> torch.Tensor:
    """Under torch.compile: the custom op of the ladder that reads ``operand`` as it lies."""
    return _matmul_op(a2d, operand) if layout == "b" else _linear_op(a2d, operand)


# The fast path, as functions.py's: call signature -> the replay plan of the rung that ran (False: seen,
# none). The key holds everything the checks read of both tensors (type, dtype, shape, strides, device,
# 16-byte alignment); grad mode and tracing are checked on every call. A plan launches on the inputs'
# pointers only, so it serves a transposed view (b = weight.t()) as it served the weight itself.
_FAST_PLANS: dict[str, dict] = {"matmul": {}, "linear": {}}
_TENSOR = torch.Tensor


# The compiled replay's signature(*args) once it is built (runtime/compiled_replay.cpp): _key's fields in C++,
# 85 ns for two tensors on this CPU where _key costs 952 ns (timeit, a lambda around each), and None for a
# tensor it has no key for (a lazily negated view among them). Its keys are bytes, never equal to _key's
# tuples: a plan made under one kind of key is made once more under the other, never taken for another call's.
_SIGNATURE: list = [None]
compiled_replay.when_ready(lambda: _SIGNATURE.__setitem__(0, compiled_replay.extension().signature))


def _key(x: torch.Tensor, operand: torch.Tensor) -> tuple | None:
    """The Python key, until the compiled one is built. is_neg(): a lazily negated view is not the values
    its memory holds, and its plan would replay the memory (the checked path refuses it)."""
    try:
        return (x.dtype, x.shape, x.stride(), x.get_device(), x.data_ptr() % 16 == 0, x.is_neg(),
                operand.dtype, operand.shape, operand.stride(), operand.get_device(), operand.data_ptr() % 16 == 0,
                operand.is_neg())
    except RuntimeError:            # no strides or no storage (sparse, nested): the checked path
        return None


def _rows(x: torch.Tensor) -> torch.Tensor:
    """A contiguous x of (..., K) as (M, K): a view (flatten would refuse 1-D x, view(-1, K) K = 0)."""
    return x if x.dim() == 2 else x.view(math.prod(x.shape[:-1]), x.shape[-1])


def _refuse_lazy_views(name: str, first: tuple[str, torch.Tensor], second: tuple[str, torch.Tensor]) -> None:
    """An eager call's check: a lazily negated view (z.conj().imag) is refused as an unreadable layout is,
    since the kernels read memory, not values. Not asked while tracing: a compiled graph calls the custom op,
    and the dispatcher's Negative fallback resolves the bit before any custom op runs (the op sees
    is_neg() False; tests/test_lazy_views.py calls the graph ops with negated views)."""
    for argument, tensor in (first, second):
        problem = lazy_view(tensor)
        if problem is not None:
            raise ValueError(f"hello_gpu.ops.{name}: {argument} {problem} (a copy this function does not make "
                             f"for you)")


def _call(name: str, x: torch.Tensor, operand: torch.Tensor, layout: str, key, plan) -> torch.Tensor:
    """The checked eager call: run, and remember the signature's plan the first time (contiguous x)."""
    a2d = _rows(x)
    native = operand if layout == ("b" if name == "matmul" else "weight") else operand.t()
    result = _gemm(name, a2d, native, layout)
    result = result if x.dim() == 2 else result.view(*x.shape[:-1], result.shape[-1])
    if plan is None and key is not None and 0 not in a2d.shape and 0 not in native.shape:
        op_name, rung_id = _route(name, a2d, layout)
        if op_name == "matmul" and layout == "weight":      # the transposed copy: not a replay of the inputs
            _FAST_PLANS[name][key] = False
        else:
            plan = remember_plan(_FAST_PLANS[name], key, _built(op_name, rung_id).function, result.shape, a2d, native)
            if plan and compiled_replay.status() == "not started":
                compiled_replay.start()           # in the background: its keys serve the calls once it is built
    return result


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` (``torch.mm``) on the GPU by the rung :func:`matmul_rung` names; float32 (no TF32),
    bfloat16 or float16, float32 accumulation.

    ``a`` is a contiguous (M, K) tensor; ``b`` a contiguous (K, N) tensor or the transpose view of a
    contiguous (N, K) one (``weight.t()``, run by the linear ladder without a copy). Other layouts are
    refused, naming the strides, and so are lazily negated views (``z.conj().imag``). Forward only.
    """
    key = plan = None
    if not is_compiling() and type(a) is _TENSOR and type(b) is _TENSOR:
        signature = _SIGNATURE[0]
        key = _key(a, b) if signature is None else signature(a, b)
        plan = _FAST_PLANS["matmul"].get(key)
        if (plan and not ((a.requires_grad or b.requires_grad) and torch.is_grad_enabled())
                and not launch_hooks_set()):
            return plan((a, b))
    layout = _check_matmul(a, b)
    if is_compiling():
        return _compiled(a, b if layout == "b" else b.t(), layout)
    _refuse_lazy_views("matmul", ("a", a), ("b", b))
    return _call("matmul", a, b, layout, key, plan)


def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``F.linear(x, weight)`` without a bias (``x @ weight.t()``) on the GPU by the rung
    :func:`linear_rung` names: the decode GEMV rungs for up to 16 rows, matmul's rungs beyond.

    ``x`` is a contiguous (..., K) tensor; ``weight`` a contiguous (N, K) tensor, as ``nn.Linear`` stores
    it, or the transpose view of a contiguous (K, N) one (``b.t()``, run by the matmul ladder without a
    copy). The result is (..., N) in x's dtype. Lazily negated views (``z.conj().imag``) are refused. Forward
    only.
    """
    key = plan = None
    if not is_compiling() and type(x) is _TENSOR and type(weight) is _TENSOR:
        signature = _SIGNATURE[0]
        key = _key(x, weight) if signature is None else signature(x, weight)
        plan = _FAST_PLANS["linear"].get(key)
        if (plan and not ((x.requires_grad or weight.requires_grad) and torch.is_grad_enabled())
                and not launch_hooks_set()):
            return plan((x, weight))
    layout = _check_linear(x, weight)
    if is_compiling():
        result = _compiled(_rows(x), weight if layout == "weight" else weight.t(), layout)
        return result.view(*x.shape[:-1], result.shape[-1])
    _refuse_lazy_views("linear", ("x", x), ("weight", weight))
    return _call("linear", x, weight, layout, key, plan)


def matmul_rung(a: torch.Tensor, b: torch.Tensor, machine: Machine | None = None) -> str:
    """``"op/rung"`` that :func:`matmul` runs for these arguments (after the same checks) on ``machine``
    (default: the one ``a`` lies on); e.g. ``"matmul/v18_tma_store_epilogue"`` for bfloat16 on an H200,
    ``"linear/t02_streaming_gemv"`` for ``b = weight.t()`` and M <= 16."""
    layout = _check_matmul(a, b)
    return "/".join(_route("matmul", a, layout, machine))


def linear_rung(x: torch.Tensor, weight: torch.Tensor, machine: Machine | None = None) -> str:
    """``"op/rung"`` that :func:`linear` runs for these arguments on ``machine`` (default: x's); M is the
    number of rows of x (every dimension but the last)."""
    layout = _check_linear(x, weight)
    return "/".join(_route("linear", _rows(x), layout, machine))
