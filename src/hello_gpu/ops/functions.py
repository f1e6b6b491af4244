"""The best rung of softmax, rms_norm and attention as plain functions, registered as torch custom ops.

``hello_gpu.ops.softmax(x)`` and ``hello_gpu.ops.rms_norm(x, weight, eps)`` run the rung that the
H200 records name fastest (``BEST``; ``tests/test_functions.py`` holds it to the committed records,
so it cannot drift from them silently). ``hello_gpu.ops.attention(q, k, v, causal)`` picks its rung by
a rule (``ATTENTION_RULE``, see :func:`attention_rung`) that tests/test_attention_function.py holds to
the attention records in the same way.

Two paths, one kernel. Called eagerly (the common case: a model's decode step), the function checks
its arguments and calls the built rung directly: a ``torch.library.custom_op`` costs ~40-50 us of
host time per call in eager mode (its dispatch, autograd wrapper and ``torch._dynamo.disable``),
several times the kernel itself at decode sizes. Under ``torch.compile`` the same call goes through
the custom op with its fake (meta) implementation, so ``fullgraph=True`` keeps it as one node in the
graph instead of breaking the graph or tracing into Triton. ``is_compiling()`` is the first thing a
function asks, before it reads any state of the eager fast path below: Dynamo guards on every global
a traced function reads, and the compiled replay's function is a C builtin that torch 2.11's guard
builder refuses as a constant (``AssertionError: Unexpected type <class 'builtin_function_or_method'>``,
H200 run of 2f3f333); a graph guarded on fast-path state would also recompile whenever that state moved.

An eager call whose signature (dtype, shape, strides, device, alignment, eps) has passed the checks
once goes straight to the replay plan of that signature (``_FAST_PLANS``; runtime.triton_replay):
one key per call, no view for N-D input. Everything else takes the checked path, so every error is
the one it always was. Once runtime.compiled_replay has built its C++ extension (in the background,
started by the first plan), the same plans run from C++: the key, the result's allocation and the
argument substitution in one call (``_COMPILED``); a call it holds no plan for returns None there and
goes on as above.

Forward only: the ladders have no backward pass. A call that autograd would have to differentiate
(an input that requires grad, with grad mode on) is refused at once with an error that says so,
instead of failing later in ``backward()``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

import torch
from torch.compiler import is_compiling

from .attention import spec as attention_spec       # imported, not load_op'd: Dynamo traces dims_of, not file reads
from .registry import load_op
from ..runtime import compiled_replay
from ..runtime.checks import unindexable
from ..runtime.triton_replay import launch_hooks_set, plain_tensor_types, plan_of, replayable
from .rung import triton_interpreter_on

# Within noise of the fastest candidate at every shape of the H200 records (softmax.float32, rms_norm.bfloat16).
BEST = {"softmax": "t10_one_warp_per_row", "rms_norm": "t07_static_width"}


@functools.cache
def _best(op_name: str):
    """The built best rung (compiled or imported once per process). A Triton rung's launches are
    replayed per call signature (hello_gpu.runtime.triton_replay, applied by Rung.build)."""
    return load_op(op_name).rung(BEST[op_name]).build()


@functools.cache
def best_launcher(op_name: str) -> Callable:
    """The best rung's launch on 2-D contiguous rows, with no checks: ``launch(rows)`` for softmax,
    ``launch(rows, weight, eps)`` for rms_norm. For a Triton rung it is a
    :func:`hello_gpu.runtime.triton_replay.replayable` launcher, so
    ``triton_replay.plan_of(launch, *args)`` gives the replay plan of a call it has seen.

    Resolved once: whether the rms_norm rung's run() takes eps was read with inspect on every call
    before (~10 us)."""
    built = _best(op_name)
    if op_name == "softmax":
        return built.function
    run = getattr(built.function, "__wrapped__", built.function)      # the rung's own run(), not its replay
    if "eps" in inspect.signature(run).parameters:
        # eps by position, so each (shape, dtype, eps) replays its launches (runtime.triton_replay)
        def launch(rows, weight, eps):
            return run(rows, weight, eps=eps)
    else:
        spec_eps = load_op("rms_norm").spec.EPS

        def launch(rows, weight, eps):
            if eps != spec_eps:
                raise ValueError(f"hello_gpu.ops.rms_norm: the rung it runs ({BEST['rms_norm']}) has eps fixed at "
                                 f"{spec_eps}; got eps={eps}")
            return run(rows, weight)
    return replayable(launch) if built.rung.route == "triton" and not built.interpreted else launch


def _interpreted(op_name: str) -> bool:
    """A Triton best rung under TRITON_INTERPRET=1 runs on CPU tensors (the CPU test tier uses this)."""
    return triton_interpreter_on() and load_op(op_name).rung(BEST[op_name]).route == "triton"


def _check_device(name: str, x: torch.Tensor) -> None:
    """Inside the custom op, which runs eagerly (Dynamo does not trace into it: load_op reads files)."""
    if not x.is_cuda and not _interpreted(name):
        raise ValueError(f"hello_gpu.ops.{name}: x is on {x.device}; the kernels run on a GPU (move it with .cuda())")


DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _check(name: str, x: torch.Tensor, dtypes: tuple[torch.dtype, ...] = DTYPES) -> None:
    """Checks on what Dynamo knows while tracing (type, shape, dtype, grad), so fullgraph stays one graph."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"hello_gpu.ops.{name}: x must be a torch.Tensor, got {type(x).__name__}")
    _refuse_unindexable(name, "x", x)
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"hello_gpu.ops.{name}: x needs a last dimension of at least 1 element; "
                         f"got shape {tuple(x.shape)}")
    if x.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise TypeError(f"hello_gpu.ops.{name}: x is {str(x.dtype).removeprefix('torch.')}; supported: {names}")
    if x.requires_grad and torch.is_grad_enabled():
        raise RuntimeError(f"hello_gpu.ops.{name} is forward only (it has no backward pass): call it under "
                           f"torch.no_grad() or torch.inference_mode(), or on a tensor that does not require grad")


def _refuse_unindexable(name: str, argument: str, tensor: torch.Tensor) -> None:
    """A nested or sparse tensor has no rows to copy into a contiguous one: refused by name (runtime.checks)."""
    problem = unindexable(tensor)
    if problem is not None:
        raise ValueError(f"hello_gpu.ops.{name}: {argument} {problem}")


def _no_backward(name: str):
    def backward(ctx, *grads):
        raise RuntimeError(f"hello_gpu.ops.{name} is forward only: it has no backward pass")
    return backward


def _softmax_eager(x: torch.Tensor) -> torch.Tensor:
    """``x`` contiguous and checked: the kernel on its rows (a view costs ~1 us: none for 2-D x)."""
    _check_device("softmax", x)
    if x.dim() == 2:
        return best_launcher("softmax")(x)
    return best_launcher("softmax")(x.view(-1, x.shape[-1])).view(x.shape)


def _rms_norm_eager(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    _check_device("rms_norm", x)
    if x.dim() == 2:
        return best_launcher("rms_norm")(x, weight, eps)
    return best_launcher("rms_norm")(x.view(-1, x.shape[-1]), weight, eps).view(x.shape)


# The fast path of an eager call: call signature -> the replay plan of the best rung's launch, result
# in the caller's shape (False: the signature was seen and has none). A signature gets a plan once a call of it passed every check on contiguous
# tensors and the launch was replayable; the key holds everything those checks read (type, dtype,
# shape, strides, device, 16-byte alignment, eps), so a later call with the same key would pass them
# again. What the key leaves out is checked on every call: grad mode with requires_grad (torch.compile
# tracing is asked before any of this is read: it takes the custom op). A call whose key has no plan takes the checked
# path, which raises every error exactly as before. Before: the checks, a contiguous() and a view per
# call, then replayable's own signature: 3.7 us of Python over the replay at 16x4096 on the H200.
_FAST_PLANS: dict[str, dict] = {"softmax": {}, "rms_norm": {}}
FAST_PLANS = 256              # signatures remembered per function (a shape sweep stays within it)
_PLAIN_TENSORS = plain_tensor_types()     # Tensor and nn.Parameter: what a plan replays for
# The compiled replay (runtime.compiled_replay), once built: its replay(table, *args), and per function
# the keys of _FAST_PLANS it holds a plan for (a plan made before it was built is added at the next
# call of its signature, with that call's arguments).
_COMPILED: list = [None]
_COMPILED_KEYS: dict[str, set] = {"softmax": set(), "rms_norm": set()}
_SOFTMAX_TABLE, _RMS_NORM_TABLE = compiled_replay.table("softmax"), compiled_replay.table("rms_norm")


def _compiled_ready() -> None:
    _COMPILED[0] = compiled_replay.function()


# Registered at import, not at the first plan: whoever builds the extension first (this module's first
# plan, `hello-gpu doctor`, benchmarks/call_overhead.py, a test), these functions take it up. Registered
# only at the first plan, a build started before it was never taken up: the H200 run of 8b07192
# measured ops.softmax through the Python replay only (call-overhead.json: no "compiled replay alone"
# row, ops.softmax 8.28 us against 8.33 us through the Python replay).
compiled_replay.when_ready(_compiled_ready)


def _add_compiled(name: str, key: tuple, call_args: tuple, plan) -> None:
    """Give the compiled replay the plan of ``key`` for calls like ``call_args`` (as the public function
    receives them: its key is computed from those, in C++)."""
    keys = _COMPILED_KEYS[name]
    compiled_replay.add(name, call_args, plan)    # a refusal (status says why) leaves the Python replay
    keys.add(key)                                 # tried once either way
    if len(keys) > FAST_PLANS:
        keys.intersection_update(_FAST_PLANS[name])     # keys _FAST_PLANS has let go of


def remember_plan(plans: dict, key: tuple, launcher: Callable, shape, *args):
    """After the first checked eager call of a signature (contiguous tensors): keep in ``plans`` the plan
    ``launcher`` replayed ``args`` by, returning ``shape``, or False when it has none (not replayable,
    not a Triton rung), so that later calls of the signature skip this look-up. Returns what it kept."""
    plan = plan_of(launcher, *args) or False
    if plan and plan.result_shape != tuple(shape):
        try:
            plan = plan.reshaped(shape)
        except ValueError:          # a result that is not plain contiguous rows: the checked path it is
            plan = False
    plans[key] = plan
    if len(plans) > FAST_PLANS:
        plans.pop(next(iter(plans)), None)         # the oldest: a dict keeps insertion order
    return plan


def _remember(name: str, key: tuple, shape, call_args: tuple, *args) -> None:
    """remember_plan for softmax / rms_norm; the first plan also starts the compiled replay's build, and
    once it is built each new plan is handed to it."""
    plan = remember_plan(_FAST_PLANS[name], key, best_launcher(name), shape, *args)
    if plan:
        if compiled_replay.status() == "not started":
            compiled_replay.start()
        if _COMPILED[0] is not None:
            _add_compiled(name, key, call_args, plan)


# The custom ops take any layout and make it contiguous inside, so that a compiled graph holds the op
# alone (no contiguous() node beside it); their fake results are contiguous, as the real ones are.
@torch.library.custom_op("hello_gpu::softmax", mutates_args=())
def _softmax_op(x: torch.Tensor) -> torch.Tensor:
    return _softmax_eager(x.contiguous())


@_softmax_op.register_fake
def _softmax_fake(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape)


_softmax_op.register_autograd(_no_backward("softmax"))


@torch.library.custom_op("hello_gpu::rms_norm", mutates_args=())
def _rms_norm_op(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return _rms_norm_eager(x.contiguous(), weight.contiguous(), eps)


@_rms_norm_op.register_fake
def _rms_norm_fake(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x.new_empty(x.shape)


_rms_norm_op.register_autograd(_no_backward("rms_norm"))


def softmax(x: torch.Tensor) -> torch.Tensor:
    """``torch.softmax(x, dim=-1)`` on the GPU by the fastest softmax rung; float32, bfloat16 or float16.

    A non-contiguous ``x`` is copied to a contiguous one first (the kernels read rows of stride
    ``x.shape[-1]``), and so is a lazily negated view (``z.conj().imag``). Forward only.
    """
    if is_compiling():          # first: Dynamo must never read the fast path's state (module docstring)
        _check("softmax", x)
        return _softmax_op(x)
    compiled = _COMPILED[0]
    if compiled is not None:
        result = compiled(_SOFTMAX_TABLE, x)
        if result is not None:
            return result
    key = plan = None
    if type(x) in _PLAIN_TENSORS:
        try:
            key = (x.dtype, x.shape, x.stride(), x.get_device(), x.data_ptr() % 16 == 0, x.is_neg())
        except RuntimeError:        # no strides or no storage (sparse, nested): the checked path
            key = None
        plan = _FAST_PLANS["softmax"].get(key)
        if plan and not (x.requires_grad and torch.is_grad_enabled()) and not launch_hooks_set():
            if compiled is not None and key not in _COMPILED_KEYS["softmax"]:
                _add_compiled("softmax", key, (x,), plan)
            return plan((x,))
    _check("softmax", x)
    if x.is_neg():              # a lazily negated view (z.conj().imag): its values, copied; never remembered
        return _softmax_eager(x.resolve_neg().contiguous())
    if plan is not None or key is None or not x.is_contiguous():      # seen before, or not to be remembered
        return _softmax_eager(x.contiguous())
    result = _softmax_eager(x)
    _remember("softmax", key, x.shape, (x,), x if x.dim() == 2 else x.view(-1, x.shape[-1]))
    return result


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x * rsqrt(mean(x^2, -1) + eps) * weight`` on the GPU by the fastest RMSNorm rung.

    ``weight`` has one element per column of ``x`` and the same dtype and device. Float32
    accumulation whatever the dtype. A non-contiguous or lazily negated (``z.conj().imag``) ``x`` or
    ``weight`` is copied first. Forward only.
    """
    if is_compiling():          # first: Dynamo must never read the fast path's state (module docstring)
        _check_rms_norm(x, weight, eps)
        return _rms_norm_op(x, weight, float(eps))
    compiled = _COMPILED[0]
    if compiled is not None:
        result = compiled(_RMS_NORM_TABLE, x, weight, eps)
        if result is not None:
            return result
    key = plan = None
    if type(x) in _PLAIN_TENSORS and type(weight) in _PLAIN_TENSORS and type(eps) in (float, int):
        try:
            key = (x.dtype, x.shape, x.stride(), x.get_device(), x.data_ptr() % 16 == 0, x.is_neg(),
                   weight.dtype, weight.shape, weight.stride(), weight.get_device(), weight.data_ptr() % 16 == 0,
                   weight.is_neg(), type(eps), eps)
        except RuntimeError:        # no strides or no storage (sparse, nested): the checked path
            key = None
        plan = _FAST_PLANS["rms_norm"].get(key)
        if (plan and not ((x.requires_grad or weight.requires_grad) and torch.is_grad_enabled())
                and not launch_hooks_set()):
            if compiled is not None and key not in _COMPILED_KEYS["rms_norm"]:
                _add_compiled("rms_norm", key, (x, weight, eps), plan)
            return plan((x, weight, eps))
    _check_rms_norm(x, weight, eps)
    if x.is_neg() or weight.is_neg():       # lazily negated views (z.conj().imag): their values; never remembered
        return _rms_norm_eager(x.resolve_neg().contiguous(), weight.resolve_neg().contiguous(), float(eps))
    if plan is not None or key is None or not (x.is_contiguous() and weight.is_contiguous()):
        return _rms_norm_eager(x.contiguous(), weight.contiguous(), float(eps))
    result = _rms_norm_eager(x, weight, float(eps))
    _remember("rms_norm", key, x.shape, (x, weight, eps), x if x.dim() == 2 else x.view(-1, x.shape[-1]), weight,
              float(eps))
    return result


def _check_rms_norm(x, weight, eps) -> None:
    """rms_norm's checks (what Dynamo knows while tracing, as _check's)."""
    _check("rms_norm", x)
    if isinstance(weight, torch.Tensor):
        _refuse_unindexable("rms_norm", "weight", weight)
    if not isinstance(weight, torch.Tensor) or weight.shape != (x.shape[-1],):
        shape = tuple(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise ValueError(f"hello_gpu.ops.rms_norm: weight must have shape ({x.shape[-1]},), one per column of x; "
                         f"got {shape}")
    if weight.dtype != x.dtype or weight.get_device() != x.get_device():
        raise ValueError(f"hello_gpu.ops.rms_norm: weight is {weight.dtype} on {weight.device}; x is {x.dtype} "
                         f"on {x.device}: they must match")
    if weight.requires_grad and torch.is_grad_enabled():
        raise RuntimeError("hello_gpu.ops.rms_norm is forward only (it has no backward pass): call it under "
                           "torch.no_grad() or on a weight that does not require grad")
    if not (isinstance(eps, (int, float)) and eps >= 0 and eps == eps):
        raise ValueError(f"hello_gpu.ops.rms_norm: eps must be a number >= 0, got {eps!r}")


# ------------------------------------------------------------------------------------------ attention

# Candidates in order of preference; the first this machine runs in the call's dtype is taken (the same
# test as matmul's rule: dtypes, declared target, shared memory). Flash-decoding where a KV head has few
# (query, head) rows, so the keys must be split across programs to fill the GPU; else the Hopper rung on
# sm_90a, the GQA Triton rung everywhere else. H200 records of 89ae604 (attention.bfloat16.json), against
# torch's SDPA in the same run: prefill 4x32x32x4096x4096x128 v07_wgmma_tma 0.84x (0.82x causal), the
# Triton rungs 0.66-0.72x (t04 0.69x, t05 0.67x: within 3% of each other without GQA; t05 stays the
# Triton pick because it reads each K/V tile once for a whole query group); decode 16x32x8x1x32768x128:
# t06 487 us against t05's 495 and v05's 1.4 ms.
ATTENTION_RULE = {"decode": ("t06_flash_decoding",), "prefill": ("v07_wgmma_tma", "t05_gqa_shared_kv_tiles")}
# (query, head) rows of one KV head up to which the decode rung runs: t06_flash_decoding's DECODE_ROWS
# (past it, t06 hands the call to t05 itself). tests/test_attention_function.py checks the two agree.
ATTENTION_DECODE_ROWS = 64


@functools.cache
def _attention_built(rung_id: str):
    """A rung of the attention ladder, built once per process (its Triton launches replayed per signature)."""
    return load_op("attention").rung(rung_id).build()


def _check_attention(q, k, v, causal):
    """The dimensions of a call (spec.Dims), after the checks Dynamo can trace (types, shapes, dtypes, grad)."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"hello_gpu.ops.attention: {name} must be a torch.Tensor, got {type(tensor).__name__}")
        _refuse_unindexable("attention", name, tensor)
    if type(causal) is not bool:
        raise TypeError(f"hello_gpu.ops.attention: causal must be True or False, got {type(causal).__name__}")
    if q.dtype not in DTYPES:
        names = ", ".join(str(d).removeprefix("torch.") for d in DTYPES)
        raise TypeError(f"hello_gpu.ops.attention: q is {str(q.dtype).removeprefix('torch.')}; supported: {names}")
    try:
        d = attention_spec.dims_of(q, k, v, causal)
    except ValueError as error:              # the spec's messages begin "attention: ..."
        raise ValueError(f"hello_gpu.ops.{error}") from None
    if any(t.requires_grad for t in (q, k, v)) and torch.is_grad_enabled():
        raise RuntimeError("hello_gpu.ops.attention is forward only (it has no backward pass): call it under "
                           "torch.no_grad() or torch.inference_mode(), or on tensors that do not require grad")
    return d


@functools.cache
def _attention_candidates(kind: str, dtype: torch.dtype, machine) -> tuple[tuple[str, int], ...]:
    """The rule's candidates for ``kind`` ("decode" or "prefill") that ``machine`` runs in ``dtype``, in order,
    each with the alignment its tensors' addresses need: the launcher's TMA_ALIGNMENT where it reads q, k and v
    through TMA tensor maps (v07: 16 bytes), else 1. A contiguous view at an odd offset (x[1:]) then goes to the
    next candidate instead of being refused by the launcher."""
    from .matmul_functions import unrunnable        # here, not at the top: matmul_functions imports this module
    op = load_op("attention")
    name = str(dtype).removeprefix("torch.")
    reasons = {rung_id: unrunnable(op.rung(rung_id), name, machine) for rung_id in ATTENTION_RULE[kind]}
    runnable = tuple((rung_id, _address_alignment(op.rung(rung_id)))
                     for rung_id, reason in reasons.items() if reason is None)
    if not runnable:
        raise RuntimeError(f"hello_gpu.ops.attention: no {kind} rung runs {name} here "
                           f"({'; '.join(f'{rung_id}: {reason}' for rung_id, reason in reasons.items())})")
    if runnable[-1][1] != 1:
        raise RuntimeError(f"hello_gpu.ops.attention: the last {kind} candidate {runnable[-1][0]} needs aligned "
                           f"addresses; the rule must end with a rung that takes any address")
    return runnable


def _address_alignment(rung) -> int:
    """Bytes a rung's q, k and v addresses must be a multiple of: its launcher's TMA_ALIGNMENT, else 1."""
    from .rung import load_module
    if rung.companion is None:
        return 1
    return int(getattr(load_module(rung.companion, f"attention_{rung.id}_for_the_rule"), "TMA_ALIGNMENT", 1))


def _attention_rung_id(d, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, machine) -> str:
    kind = "decode" if d.group * d.q_len <= ATTENTION_DECODE_ROWS else "prefill"
    for rung_id, alignment in _attention_candidates(kind, q.dtype, machine):
        if alignment == 1 or not any(t.is_cuda and t.data_ptr() % alignment for t in (q, k, v)):
            return rung_id
    raise AssertionError("unreachable: the last candidate takes any address")


def _attention_machine(q: torch.Tensor):
    from .matmul_functions import machine_of        # here, not at the top: matmul_functions imports this module
    return machine_of(q, "attention", "q")


def _attention_eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """Contiguous, checked tensors: the rung the rule picks, on the GPU (or in the Triton interpreter)."""
    d = _check_attention(q, k, v, causal)
    return _attention_built(_attention_rung_id(d, q, k, v, _attention_machine(q)))(q, k, v, causal)


@torch.library.custom_op("hello_gpu::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return _attention_eager(q, k, v, causal)


@_attention_op.register_fake
def _attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return torch.empty_like(q)


_attention_op.register_autograd(_no_backward("attention"))


def attention_rung(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, machine=None) -> str:
    """The id of the attention rung :func:`attention` runs for these arguments (after the same checks), on
    ``machine`` (a :class:`~hello_gpu.ops.matmul_functions.Machine`; default: q's GPU, or the Triton
    interpreter for CPU tensors under TRITON_INTERPRET=1): ``t06_flash_decoding`` when each KV head has at
    most ATTENTION_DECODE_ROWS (query, head) rows (decode: 1 query token x 4 query heads a KV head in
    Llama 3); else ``v07_wgmma_tma`` for 16-bit tensors on sm_90a whose addresses TMA can read, else
    ``t05_gqa_shared_kv_tiles``."""
    d = _check_attention(q, k, v, causal)
    return _attention_rung_id(d, q, k, v, _attention_machine(q) if machine is None else machine)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """``softmax(q k^T / sqrt(D) [+ causal mask]) v`` on the GPU, by the rung :func:`attention_rung` names.

    q is (B, H, S_q, D); k and v are (B, H_kv, S_kv, D) with H a multiple of H_kv (grouped-query
    attention, no repeated copy of k and v); D is 64 or 128; float32, bfloat16 or float16, one dtype
    and one device for all three. ``causal`` masks bottom-right (query i sees key j when
    j <= i + S_kv - S_q: the queries are the last S_q positions, as in decoding against a KV cache);
    with S_q == S_kv it is F.scaled_dot_product_attention's is_causal. A query that sees no key
    (causal, S_q > S_kv) gets 0. Non-contiguous tensors, and lazily negated views (``z.conj().imag``), are
    copied to contiguous ones first.
    Forward only.
    """
    _check_attention(q, k, v, causal)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if is_compiling():
        return _attention_op(q, k, v, causal)
    if q.is_neg() or k.is_neg() or v.is_neg():     # lazily negated views (z.conj().imag): their values
        q, k, v = q.resolve_neg(), k.resolve_neg(), v.resolve_neg()
    return _attention_eager(q, k, v, causal)
