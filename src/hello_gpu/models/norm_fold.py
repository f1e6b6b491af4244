"""The RMSNorm folded into the projection after it: the hello-gpu backend's three replacements that take the norm's
own launch out of a batch-1 decode step.

A layer half ends with its output projection, the residual add and the next RMSNorm; the next projection (qkv, or
gate/up) reads the normed values. With every other kernel of the step fused already, that is 8 launches a layer
at the 8B (qkv + RoPE + cache write, attention split and merge, o_proj, add + norm, gate/up + SwiGLU, down_proj,
add + norm). The norm's scale ``1 / sqrt(mean(x^2) + eps)`` is one number for the whole row, so it moves out of
every dot product: ``W (x * g * s) = s * W (x * g)``. The projection after the norm can sum the squares of x while
it reads x for its own dot products (each of its programs reads all of x anyway) and scale its sums at the end;
no program waits for another, unlike linear_add_rms_norm's last-program norm (0.88x on the H100's 8B). So:

- ``linear_add`` (:func:`.linear_add_rms_norm_kernel.linear_add`): the output projection and the residual add,
  t04's GEMV with the add in its epilogue;
- ``norm_qkv_rope_cache_write`` and ``norm_gate_up_swiglu``: the two fused projection kernels with the norm
  folded in (their ``NORM`` variants).

6 launches a layer instead of 8, and the first layer's norm of the embedding goes too: 64 fewer a step at the 8B
(of 262), 32 at the 1B (of 134). The model folds where the backend gives the ``norm_*`` kernels and a step is one
token of one row (:meth:`hello_gpu.models.llama.Llama.forward`); the last layer still ends with the norm the head
reads.

prediction: an add_rms_norm call took ~2.2 us with ~1-2 us of launch gap in the H100's 1B profile
  (records/nvidia-h100-80gb-hbm3/models/profile.1b.decode.b1.p512.hello-gpu) and an empty launch in a graph costs
  ~1 us (decode-floor.json); the folded kernels add a norm-weight load (8 KB from L2, per program) and a few FMAs
  to a memory-bound loop, nothing to the weight bytes. ~2.5-3 us saved a half layer: ~0.16-0.19 ms of the 8B's
  5.59 ms H100 step (~3%), ~0.08-0.1 ms of the 1B's 1.16 ms (~7-8%); on the H200, whose bandwidth makes a step
  shorter, ~4% of the 8B's step. Each replacement is timed against what the run calls in its place (the norm,
  then the projection kernel; linear, then the add), so each is swapped in only if faster
outcome: wrong: no faster at the 8B and slower at the 1B, on the H100 (run of d3d3573, session 27,
  records/nvidia-h100-80gb-hbm3/models/run.{1b,8b}.b1.p512.n256, backends hello-gpu and hello-gpu-unfolded in one
  run): the 8B's step 0.9995x [0.9993, 0.9997] the step without the folds, the 1B's 0.973x [0.970, 0.974]
  (0.977x [0.975, 0.979] with the two backends in the other order, models/run.1b.b1.p512.n256.order-check).
  Each fold alone was timed faster (norm_qkv_rope_cache_write 1.13x, linear_add 1.04x at the 1B), but
  norm_gate_up_swiglu was within noise and not used, and linear_add is timed against the GEMV then a torch add,
  while the step without folds ends the half with add_rms_norm, where the add is free. The 1B's profile with the
  folds (models/profile.1b.decode.b1.p512.hello-gpu, same session) against the one before them (session 25):
  gemv_add_kernel 15.9 us a call where t04's GEMV took ~13.0 us on the same down_proj weight, and
  norm_qkv_rope_write_kernel 7.4 us against qkv_rope_write_kernel's 6.0 us (its programs of 2 rows each read
  x and the norm's weight, 8 KB from L2 for 8 KB of weight); the 15 add_rms_norm calls saved were 1.8 us each.
  +43 + 23 - 27 us: ~39 us more kernel time a step, against 32 us measured. So the backend now keeps the folds
  only where the whole decode step is faster with them (decide_folds, below): on these runs it would leave
  them out at both sizes. Why the GEMV with the add in its epilogue would be 2.9 us slower than t04 is not found:
  compiled for sm_90 at the down_proj's shape both loops are the same PTX (4 evict-first 16-byte weight loads and
  32 FMAs a thread a step; gemv_add peels the first step for the dependent-launch wait), and the two profiles
  are of two sessions' machines. Next: both backends profiled in one session
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import torch

from .backends import (ROUNDED_ONCE_TOLERANCE, Choice, Replacement, RunShape, _gate_up_cases, _gate_up_model_step,
                       _gate_up_swiglu_float64, _half_layer_ends, _linear_cases, _linear_float64,
                       _linear_model_step, _linear_then_rope_cache_write, _linear_then_swiglu, _qkv_cases,
                       _qkv_model_step, _qkv_rope_cache_write_rounded, _qkv_tolerance, register_replacement,
                       residual_add_tolerance)
from .llama import Llama, LlamaConfig, rms_norm


def _residual_like(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A residual stream for x's shape: N(0, 1) with one column in 64 ten times larger, as a trained model's
    residual has a few large dimensions. A norm that drops part of the sum of squares then errs by the dropped
    share, which the spikes make large."""
    residual = torch.randn(x.shape, device=x.device, dtype=torch.float32, generator=generator)
    residual[..., ::64] *= 10
    return residual.to(x.dtype)


def _norm_weight(size: int, device, dtype, generator: torch.Generator) -> torch.Tensor:
    return 1 + 0.1 * torch.randn(size, device=device, dtype=dtype, generator=generator)


def _normed64(residual: torch.Tensor, norm_weight: torch.Tensor, eps: float) -> torch.Tensor:
    """rms_norm in float64, not rounded: what the folded kernels project (they never round the normed values)."""
    return rms_norm(residual.double(), norm_weight.double(), eps)


def _with_norm(arguments: tuple, norm_weight: torch.Tensor, eps: float, generator: torch.Generator) -> tuple:
    """A projection kernel's arguments (x, weight, ...) as the folded kernel takes them: (residual, norm_weight,
    eps, weight, ...), the residual drawn in place of the normed x."""
    x, *rest = arguments
    return (_residual_like(x, generator), norm_weight, eps, *rest)


# The two folded projections are checked and timed alike: from the unfolded kernel's cases and step, with a
# residual for x and the layer's own norm weight before that projection.


def _folded_cases(plain_cases: Callable) -> Callable:
    """(config, shape, device, dtype) -> the unfolded kernel's cases with the norm's arguments."""
    def cases(config: LlamaConfig, shape: RunShape, device, dtype) -> dict:
        generator = torch.Generator(device=device).manual_seed(1)
        norm_weight = _norm_weight(config.hidden_size, device, dtype, generator)
        return {f"norm + {label}": (_with_norm(arguments, norm_weight, config.rms_norm_eps, generator), count)
                for label, (arguments, count) in plain_cases(config, shape, device, dtype).items()}
    return cases


def _folded_model_step(plain_model_step: Callable, norm_of: Callable) -> Callable:
    """(model, batch) -> every layer's call in a decode step on the model's own weights; ``norm_of(layer)``: the
    norm weight before the projection."""
    def model_step(model: Llama, batch: int) -> list[tuple]:
        generator = torch.Generator(device=model.device).manual_seed(1)
        calls = plain_model_step(model, batch)
        residual = _residual_like(calls[0][0], generator)
        return [(residual, norm_of(layer), model.config.rms_norm_eps, *arguments[1:])
                for layer, arguments in zip(model.layers, calls)]
    return model_step


def _folded_model_cases(model_step: Callable, name: str) -> Callable:
    """(model, batch) -> the first layer's call, run once a layer: no weight is copied."""
    def model_cases(model: Llama, batch: int) -> dict:
        first = model_step(model, batch)[0]
        n, k = first[3].shape
        return {f"norm + {name} {batch}x{n}x{k}": (first, model.config.num_layers)}
    return model_cases


def _norm_then(plain: str, unfused: Callable) -> Callable:
    """The baseline: the norm, then the projection kernel ``plain`` as this run calls them unfolded (``unfused``
    where ``plain`` itself was not swapped in)."""
    def baseline(op_for: Callable[[str], Callable]) -> Callable:
        norm, project = op_for("rms_norm"), op_for(plain) or unfused(op_for)

        def norm_then_project(residual, norm_weight, eps, *arguments):
            return project(norm(residual, norm_weight, eps), *arguments)
        return norm_then_project
    return baseline


def _hello_gpu_norm_qkv() -> Callable:
    from .qkv_rope_cache_write_kernel import norm_qkv_rope_cache_write     # imports Triton only when asked for
    return norm_qkv_rope_cache_write


def _norm_qkv_float64(residual, norm_weight, eps, weight, cos, sin, keys, values, positions) -> tuple:
    """The norm in float64, then the projection rounded once to the model's dtype (what RoPE reads in the kernel),
    RoPE and the cache write as qkv_rope_cache_write is checked."""
    normed = _normed64(residual, norm_weight, eps)
    return _qkv_rope_cache_write_rounded(normed, weight, cos, sin, keys, values, positions, dtype=residual.dtype)


def _norm_qkv_tolerance(arguments: tuple, dtype: torch.dtype) -> tuple[float, float]:
    """qkv_rope_cache_write's bound on the normed input (rounded to the model's dtype for the linear bound)."""
    residual, norm_weight, eps, *rest = arguments
    return _qkv_tolerance((_normed64(residual, norm_weight, eps).to(dtype), *rest), dtype)


_norm_qkv_step = _folded_model_step(_qkv_model_step, lambda layer: layer.input_layernorm.weight)
register_replacement(Replacement(
    "norm_qkv_rope_cache_write",
    "the RMSNorm folded into the qkv projection with RoPE and the cache write, one Triton launch at batch-1 decode "
    "(hello_gpu.models.qkv_rope_cache_write_kernel; with it a layer half ends with linear_add, no norm of its own)",
    load=_hello_gpu_norm_qkv, cases=_folded_cases(_qkv_cases), model_cases=_folded_model_cases(_norm_qkv_step,
                                                                                                "qkv_proj"),
    model_step=_norm_qkv_step, reference=_norm_qkv_float64, tolerance_of=_norm_qkv_tolerance,
    baseline=_norm_then("qkv_rope_cache_write", _linear_then_rope_cache_write),
    composes=("rms_norm", "qkv_rope_cache_write"), supersedes=("qkv_rope_cache_write",)))


def _hello_gpu_norm_gate_up() -> Callable:
    from .gate_up_swiglu_kernel import norm_gate_up_swiglu     # imports Triton only when asked for
    return norm_gate_up_swiglu


def _norm_gate_up_float64(residual, norm_weight, eps, weight) -> torch.Tensor:
    return _gate_up_swiglu_float64(_normed64(residual, norm_weight, eps), weight)


_norm_gate_up_step = _folded_model_step(_gate_up_model_step, lambda layer: layer.post_attention_layernorm.weight)
register_replacement(Replacement(
    "norm_gate_up_swiglu",
    "the RMSNorm folded into the MLP's gate/up GEMV and SwiGLU, one Triton launch at batch-1 decode "
    "(hello_gpu.models.gate_up_swiglu_kernel; with it a layer half ends with linear_add, no norm of its own)",
    load=_hello_gpu_norm_gate_up, cases=_folded_cases(_gate_up_cases),
    model_cases=_folded_model_cases(_norm_gate_up_step, "gate_up_proj"), model_step=_norm_gate_up_step,
    reference=_norm_gate_up_float64, tolerance=ROUNDED_ONCE_TOLERANCE,
    baseline=_norm_then("gate_up_swiglu", _linear_then_swiglu), composes=("rms_norm", "gate_up_swiglu"),
    supersedes=("gate_up_swiglu",)))


# ------------------------------------------------------------------------------------------------- linear_add


def _hello_gpu_linear_add() -> Callable:
    from .linear_add_rms_norm_kernel import linear_add     # imports Triton only when asked for
    return linear_add


def _linear_then_add(op_for: Callable[[str], Callable]) -> Callable:
    """The projection as this run calls it, then torch's add."""
    project = op_for("linear")

    def linear_then_add(x, weight, residual):
        return residual + project(x, weight)
    return linear_then_add


def _linear_add_cases(config: LlamaConfig, shape: RunShape, device, dtype) -> dict:
    """o_proj and down_proj as the linear replacement draws them, with a residual of their output's shape."""
    generator = torch.Generator(device=device).manual_seed(1)
    cases = {}
    for label, ((x, weight), count) in _linear_cases(config, shape, device, dtype).items():
        if label.split()[0] in _half_layer_ends(config):
            residual = _residual_like(torch.empty(*x.shape[:-1], weight.shape[0], device=device, dtype=dtype),
                                      generator)
            cases[f"{label} + residual"] = ((x, weight, residual), count)
    return cases


def _linear_add_model_step(model: Llama, batch: int) -> list[tuple]:
    """(x, weight, residual) of every half layer's end in a decode step, in its order, on the model's weights."""
    generator = torch.Generator(device=model.device).manual_seed(1)
    ends = {id(layer.self_attn.o_proj.weight) for layer in model.layers} | \
        {id(layer.mlp.down_proj.weight) for layer in model.layers}
    calls = [arguments for arguments in _linear_model_step(model, batch) if id(arguments[1]) in ends]
    residual = _residual_like(torch.empty(batch, 1, model.config.hidden_size, device=model.device,
                                          dtype=model.dtype), generator)
    return [(x, weight, residual) for x, weight in calls]


def _linear_add_model_cases(model: Llama, batch: int) -> dict:
    first_layer = _linear_add_model_step(model, batch)[:2]
    return {f"{name} + residual {batch}x{arguments[1].shape[0]}x{arguments[1].shape[1]}": (arguments,
                                                                                          model.config.num_layers)
            for name, arguments in zip(_half_layer_ends(model.config), first_layer)}


def _linear_add_float64(x, weight, residual) -> torch.Tensor:
    return residual.double() + _linear_float64(x, weight)


register_replacement(Replacement(
    "linear_add", "a layer half's output projection and the residual add in one Triton launch at batch-1 decode, "
                  "where the next projection folds the norm in (hello_gpu.models.linear_add_rms_norm_kernel)",
    load=_hello_gpu_linear_add, cases=_linear_add_cases, model_cases=_linear_add_model_cases,
    model_step=_linear_add_model_step, reference=_linear_add_float64, tolerance_of=residual_add_tolerance,
    baseline=_linear_then_add, composes=("linear",), needs_any=("norm_qkv_rope_cache_write", "norm_gate_up_swiglu")))


# ---------------------------------------------------------------------------------------------- without them

FOLDS = ("norm_qkv_rope_cache_write", "norm_gate_up_swiglu", "linear_add")


def without_folds(choices: list[Choice], why: str = "left out: this backend runs without the norm folds") \
        -> list[Choice]:
    """The hello-gpu-unfolded backend's choices: ``choices`` with the folds left out (``why``, then the fold's own
    reason) and the kernels they stood in for (the unfolded qkv and gate/up kernels) used again, each with the
    reason it was decided for. The same decisions otherwise, so a run's hello-gpu / hello-gpu-unfolded ratio is the
    folds' alone."""
    unfolded = []
    for choice in choices:
        if choice.name in FOLDS and choice.used:
            choice = replace(choice, used=False, reason=f"{why} ({choice.reason})")
        elif choice.superseded_by in FOLDS:
            prefix = f"not called: {choice.superseded_by} does its work ("
            reason = choice.reason[len(prefix):-1] if choice.reason.startswith(prefix) else choice.reason
            choice = replace(choice, used=True, reason=reason, superseded_by=None)
        unfolded.append(choice)
    return unfolded


def folds_used(choices: list[Choice]) -> bool:
    return any(choice.used and choice.name in FOLDS for choice in choices)


# region step-decision
def decide_folds(choices: list[Choice], step_with: Callable[[list[Choice]], Callable[[], object]],
                 timer=None) -> tuple[list[Choice], str]:
    """``(choices, note)``: ``choices`` as they are where a whole decode step runs faster with their folds than
    without them, else :func:`without_folds` of them, and a note that says which, with the ratio.

    Each fold was decided alone, against what the run would call in its place (linear_add against the GEMV then a
    torch add), but the step without the folds ends each layer half with add_rms_norm, where the add costs nothing.
    So the only fair measure of the folds is the whole step: on the H100 the folded step was 0.973x [0.970, 0.974]
    the unfolded one at the 1B and 0.9995x at the 8B (records/nvidia-h100-80gb-hbm3/models/run.{1b,8b}.b1.p512.n256,
    session 27), while each fold alone was timed faster. ``step_with(choices)`` gives one decode step of those
    choices as a call without arguments (a CUDA-graph replay on a GPU); ``timer(baseline, candidate)`` returns a
    :class:`hello_gpu.bench.Comparison` (default: paired device times, warm caches, as the replacements are timed)."""
    from ..bench import compare
    timer = timer or (lambda baseline, candidate: compare(baseline, candidate, cache="warm"))
    with torch.no_grad():      # the step's kernels depend only on which choices are used, not on their reasons
        result = timer(step_with(without_folds(choices)), step_with(choices))
    measured = (f"the decode step with them {result.speedup.value:.3f}x the step without them "
                f"[{result.speedup.ci95[0]:.3f}, {result.speedup.ci95[1]:.3f}]")
    if result.verdict == "faster":
        return choices, f"the norm folds kept: {measured}"
    return (without_folds(choices, why=f"not swapped in: {measured}, {result.verdict}"),
            f"the norm folds left out: {measured}, {result.verdict}")
# endregion step-decision
