"""Backends: the same model and weights, run four ways, each with its own KV cache.

- ``eager``: the model's PyTorch code as written (:data:`~hello_gpu.models.llama.EAGER_OPS`).
- ``compile``: ``torch.compile`` (default mode) of the prefill and of the decode step.
- ``compile-reduce-overhead``: the decode step compiled with ``mode="reduce-overhead"`` (Inductor's
  kernels replayed from a CUDA graph); prefill as ``compile``.
- ``hello-gpu``: the eager model with our kernels swapped in for the operations they beat, and the
  decode step captured in a CUDA graph (on a GPU).

The hello-gpu backend's replacements are a registry (:data:`REPLACEMENTS`, :func:`register_replacement`):
one per operation of :class:`~hello_gpu.models.llama.ModelOps` we mean to write a kernel for: RMSNorm,
RMSNorm fused with the residual add, RoPE, SwiGLU, the decode GEMV (every projection), attention, sampling.
Where the kernel exists, ``load`` returns it; where it does not yet, ``missing`` says what it waits for.
Wired: RMSNorm (``hello_gpu.ops.rms_norm``), the residual add fused into it (a Triton kernel of
:mod:`.add_rms_norm_kernel`), RoPE and SwiGLU (the model's own Triton kernels, :mod:`.rope_kernel`,
:mod:`.swiglu_kernel`) and every projection's decode GEMV (``hello_gpu.ops.linear``, checked and timed at
each projection shape of the model on the model's own weights, no copy: ``Replacement.model_cases``; timed
over every weight a decode step reads, in its order: ``Replacement.model_step``),
decode attention (the model's own flash-decoding kernel, :mod:`.decode_attention_kernel`:
``hello_gpu.ops.attention`` cannot read the model's KV cache without copying it, the kernel's header says
why) and a prompt's attention (the model's own flash-attention kernel over the cache and the device mask,
:mod:`.prefill_attention_kernel`).

The rule: **a kernel we do not beat is not swapped in, and the report says which were used.**
:func:`choose_replacements` takes that decision per replacement from what it can establish here:
on a GPU it checks the kernel against the float64 result of the eager operation on decode-shaped
inputs of this model (prompt-shaped for prefill_attention), then times the two paired and interleaved
(:func:`hello_gpu.bench.compare`) and swaps the kernel in only on the verdict "faster"; on the CPU nothing can be timed (our kernels
run on a GPU), so nothing is swapped in and each :class:`Choice` says "not measured" and why.
``force`` swaps a kernel in without the timing (still checked), for correctness runs such as the
CPU test in Triton's interpreter.

A runner's ``prefill``/``decode`` return logits that stay valid until its next call (a CUDA graph or a
reduce-overhead graph writes the same output buffer each time): clone what you keep.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import torch
import torch.nn.functional as F

from .llama import (EAGER_OPS, INIT_STD, OP_CATEGORIES, KVCache, Llama, LlamaConfig, ModelOps, cache_write,
                    compute_dtype, rope)

# hello-gpu-pdl: hello-gpu with its own kernels launched as programmatic dependent launches (.dependent_launch),
# a backend of its own so that one run compares the two decode steps
# hello-gpu-unfolded: hello-gpu's kernels without the norm folds (norm_fold.py), to measure the folds in one run
BACKENDS = ("eager", "compile", "compile-reduce-overhead", "hello-gpu", "hello-gpu-pdl", "hello-gpu-unfolded")


# ------------------------------------------------------------------------------------------ replacements


@dataclass(frozen=True)
class RunShape:
    """The shape of the run a kernel is chosen for: its batch, its cache's positions and its prompt. The
    attention kernels are checked and timed there (the prompt's attention at the prompt's length, decode
    attention over a cache filled to the middle of the decode): the prefill kernel chosen at 512 tokens of
    768 ran 0.90x eager there on the H100, which says nothing about a prompt of 2048."""

    batch: int
    max_seq: int
    prompt: int

    @classmethod
    def of(cls, config: "LlamaConfig", batch: "int | RunShape", max_seq: int | None = None,
           prompt: int | None = None) -> "RunShape":
        """``batch`` as a RunShape; an int with no cache length or prompt: the default run, a cache of
        min(768, max_position) positions and a prompt of 2/3 of it (512 of 768, as the 8B's p512 n256 run)."""
        if isinstance(batch, RunShape):
            return batch
        max_seq = min(768, config.max_position) if max_seq is None else max_seq
        prompt = min(max_seq, max(2, 2 * max_seq // 3)) if prompt is None else prompt
        if not 1 <= prompt <= max_seq <= config.max_position or batch < 1:
            raise ValueError(f"run shape: batch {batch}, prompt {prompt} of {max_seq} cache positions; "
                             f"{config.name} allows 1 <= prompt <= cache <= {config.max_position} and batch >= 1")
        return cls(batch, max_seq, prompt)


@dataclass(frozen=True)
class Replacement:
    """A kernel that may replace the :class:`ModelOps` operation ``name`` in the hello-gpu backend."""

    name: str                                       # the ModelOps field it replaces
    description: str
    load: Callable[[], Callable] | None = None      # the replacement function, imported when first asked for
    missing: str = ""                               # why there is no kernel yet (load is None)
    # Decode-shaped (prefill_attention: prompt-shaped) arguments for this model at the run's shape: (config,
    # shape, device, dtype) -> args
    example: Callable[[LlamaConfig, "RunShape", torch.device, torch.dtype], tuple] | None = None
    # Per dtype (rtol, atol) of the kernel against the eager operation computed in float64
    tolerance: dict = field(default_factory=dict)
    # Where one operation runs at several decode shapes (linear: one per projection): (config, shape,
    # device, dtype) -> {label: (arguments, calls a decode step makes)}. Each shape is checked, and the
    # timing runs every shape as often as a decode step does. Without it: {"decode": (example(...), 1)}.
    cases: Callable[[LlamaConfig, "RunShape", torch.device, torch.dtype], dict] | None = None
    # (arguments, dtype) -> (rtol, atol) where the bound depends on the data (a dot product's length); else tolerance
    tolerance_of: Callable[[tuple, torch.dtype], tuple[float, float]] | None = None
    # The float64 answer from the arguments, where the eager operation on float64 copies of them would
    # hold too much memory at once (the 8B's head: 4.2 GB of float64 weight); else that
    reference: Callable | None = None
    # ``cases`` on the model's own tensors where the operation reads tensors as large as the model's (linear:
    # its weights): (model, batch) -> {label: (arguments, calls a decode step makes)}. Used when the caller
    # hands the model (make_runner does), so that choosing copies no weight: ``cases`` draws one of every
    # projection shape, 1.49 GB on the 8B, all alive while they are checked and timed.
    model_cases: Callable[[Llama, int], dict] | None = None
    # The timing on the model's own tensors, where checking one layer's is enough but timing it is not: (model,
    # batch) -> the arguments of every call a decode step makes, in the step's order (linear: each layer's four
    # projections, then the head). Timing ``model_cases`` ran layer 0's weight 32 times in a row, and the 8B's
    # o_proj (32 MB) then stays in the 50 MB L2 from one repeat to the next, which a real step never sees.
    model_step: Callable[[Llama, int], list[tuple]] | None = None
    # What the kernel is timed against where eager has no such operation (rope_cache_write: the two operations it
    # fuses): given op_for(name), the operation this run calls for ``name`` where this kernel is not used (the
    # replacement chosen for it, else eager's), it returns the function to time; else the eager operation is timed
    baseline: Callable[[Callable[[str], Callable]], Callable] | None = None
    # The operations the baseline calls (rope_cache_write: rope, cache_write; gate_up_swiglu: linear, swiglu): they
    # are decided first, so the baseline is what the run would call instead, and the reason names them
    composes: tuple[str, ...] = ()
    # The operations whose work this kernel does wherever it runs (rope_cache_write: rope and cache_write): where
    # it is used, they are not called, and their choices say so
    supersedes: tuple[str, ...] = ()
    # Operations one of which must be used for this kernel to be called at all (linear_add: a layer half ends with
    # it only where the next projection folds the norm in); where none is, it is not used, and its choice says so
    needs_any: tuple[str, ...] = ()

    @property
    def category(self) -> str:
        """The profile's category of the operation (llama.OP_CATEGORIES)."""
        return OP_CATEGORIES[self.name]


REPLACEMENTS: dict[str, Replacement] = {}


def register_replacement(replacement: Replacement) -> Replacement:
    if replacement.name not in OP_CATEGORIES:
        raise ValueError(f"replacement {replacement.name!r}: ModelOps has no operation of that name")
    if replacement.load is not None and replacement.example is None and replacement.cases is None:
        raise ValueError(f"replacement {replacement.name!r}: a kernel needs example arguments to be checked and timed")
    REPLACEMENTS[replacement.name] = replacement
    return replacement


def _hello_gpu_rms_norm() -> Callable:
    from ..ops import rms_norm           # imports the ladders' best rung (Triton) only when asked for
    return rms_norm


def _norm_example(config: LlamaConfig, shape: RunShape, device, dtype) -> tuple:
    batch = shape.batch
    generator = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(batch, 1, config.hidden_size, device=device, dtype=dtype, generator=generator)
    weight = 1 + 0.1 * torch.randn(config.hidden_size, device=device, dtype=dtype, generator=generator)
    return x, weight, config.rms_norm_eps


# bf16: 2^-7 is two units in the last place of a result near 1 (the kernel and eager round differently).
NORM_TOLERANCE = {torch.bfloat16: (2**-7, 1e-5), torch.float16: (2**-10, 1e-6), torch.float32: (1e-5, 1e-7)}

register_replacement(Replacement(
    "rms_norm", "RMSNorm by the fastest rms_norm rung of the ladder (hello_gpu.ops.rms_norm)",
    load=_hello_gpu_rms_norm, example=_norm_example, tolerance=NORM_TOLERANCE))


def _hello_gpu_rope() -> Callable:
    from .rope_kernel import rope
    return rope


def _rope_example(config: LlamaConfig, shape: RunShape, device, dtype) -> tuple:
    """q and k of one token as the model hands them: views of the fused qkv projection's output."""
    batch = shape.batch
    generator = torch.Generator(device=device).manual_seed(0)
    qkv = torch.randn(batch, 1, config.q_size + 2 * config.kv_size, device=device, dtype=dtype, generator=generator)
    q, k, _ = qkv.split([config.q_size, config.kv_size, config.kv_size], dim=-1)
    q = q.view(batch, 1, config.num_heads, config.head_dim).transpose(1, 2)
    k = k.view(batch, 1, config.num_kv_heads, config.head_dim).transpose(1, 2)
    angles = 1000 * torch.rand(1, config.head_dim // 2, device=device, generator=generator, dtype=torch.float64)
    table = compute_dtype(dtype)
    return q, k, torch.cos(angles).to(table), torch.sin(angles).to(table)


def _hello_gpu_cache_write() -> Callable:
    from .cache_write_kernel import cache_write
    return cache_write


def _cache_write_example(config: LlamaConfig, shape: RunShape, device, dtype) -> tuple:
    """The caches of one layer at the run's length, written at the first decode position: k as RoPE returns it
    (contiguous), v as the model hands it (a view of the fused qkv projection's output)."""
    batch = shape.batch
    generator = torch.Generator(device=device).manual_seed(0)
    cache_shape = (batch, config.num_kv_heads, shape.max_seq, config.head_dim)
    keys, values = (torch.randn(cache_shape, device=device, dtype=dtype, generator=generator) for _ in range(2))
    qkv = torch.randn(batch, 1, config.q_size + 2 * config.kv_size, device=device, dtype=dtype, generator=generator)
    _, k, v = qkv.split([config.q_size, config.kv_size, config.kv_size], dim=-1)
    k = k.reshape(batch, 1, config.num_kv_heads, config.head_dim).transpose(1, 2).contiguous()
    v = v.view(batch, 1, config.num_kv_heads, config.head_dim).transpose(1, 2)
    positions = torch.tensor([min(shape.prompt, shape.max_seq - 1)], device=device)
    return keys, values, positions, k, v


def _cache_write_copied(keys, values, positions, k, v) -> tuple:
    """Eager's write on copies of the caches, in their own dtype: a copy is exact, and float64 caches at a long
    run's length would be four times the run's own (2 GB a layer in bf16 at batch 16, 32768 positions)."""
    return cache_write(keys.clone(), values.clone(), positions, k, v)


register_replacement(Replacement(
    "cache_write", "the KV-cache write of keys and values in one Triton kernel (hello_gpu.models.cache_write_kernel)",
    load=_hello_gpu_cache_write, example=_cache_write_example, reference=_cache_write_copied,
    tolerance={dtype: (0.0, 0.0) for dtype in (torch.bfloat16, torch.float16, torch.float32)}))


def _hello_gpu_rope_cache_write() -> Callable:
    from .rope_cache_write_kernel import rope_cache_write
    return rope_cache_write


def _rope_then_cache_write(op_for: Callable[[str], Callable]) -> Callable:
    """The rope then the cache write this run calls where the fused kernel is not swapped in: ours where they were
    swapped in, eager's (or a caller's replacement) otherwise."""
    rotate, write = op_for("rope"), op_for("cache_write")

    def rope_then_cache_write(q, k, v, cos, sin, keys, values, positions):
        q, k = rotate(q, k, cos, sin)
        return (q, *write(keys, values, positions, k, v))
    return rope_then_cache_write


def _rope_cache_write_example(config: LlamaConfig, shape: RunShape, device, dtype) -> tuple:
    """q and k as RoPE's example makes them, v and the caches as the cache write's (views of fused qkv outputs)."""
    q, k, cos, sin = _rope_example(config, shape, device, dtype)
    keys, values, positions, _, v = _cache_write_example(config, shape, device, dtype)
    return q, k, v, cos, sin, keys, values, positions


def _rope_cache_write_rounded(q, k, v, cos, sin, keys, values, positions) -> tuple:
    """q rotated in float64; the caches copied in their own dtype with k rotated in float64 and rounded once, as the
    kernel writes it (float64 caches would be four times a long run's, see _cache_write_copied)."""
    rotated_q, rotated_k = rope(q.double(), k.double(), cos.double(), sin.double())
    return (rotated_q, *cache_write(keys.clone(), values.clone(), positions, rotated_k.to(k.dtype), v))


def _hello_gpu_swiglu() -> Callable:
    from .swiglu_kernel import swiglu
    return swiglu


def _swiglu_example(config: LlamaConfig, shape: RunShape, device, dtype) -> tuple:
    batch = shape.batch
    generator = torch.Generator(device=device).manual_seed(0)
    return (3 * torch.randn(batch, 1, 2 * config.intermediate_size, device=device, dtype=dtype, generator=generator),)


# Computed in float32 and rounded once: on a GPU, half a unit in the last place (at most 2^-8 of the value in
# bf16, 2^-11 in fp16). Triton's interpreter (the CPU tests) truncates float32 to bf16 instead (0.1298 ->
# 0.12890625), up to a whole unit, so bf16 allows 2^-7; atol for results that cancel to ~0. A dropped block of
# work errs by the size of the values themselves.
ROUNDED_ONCE_TOLERANCE = {torch.bfloat16: (2**-7, 1e-5), torch.float16: (2**-11, 1e-6), torch.float32: (1e-5, 1e-6)}

register_replacement(Replacement(
    "rope", "RoPE on q and k, one Triton kernel launched for each (hello_gpu.models.rope_kernel)",
    load=_hello_gpu_rope, example=_rope_example, tolerance=ROUNDED_ONCE_TOLERANCE))
register_replacement(Replacement(
    "rope_cache_write", "RoPE and the KV-cache write in one Triton launch (hello_gpu.models.rope_cache_write_kernel)",
    load=_hello_gpu_rope_cache_write, example=_rope_cache_write_example, reference=_rope_cache_write_rounded,
    tolerance=ROUNDED_ONCE_TOLERANCE, baseline=_rope_then_cache_write, composes=("rope", "cache_write"),
    supersedes=("rope", "cache_write")))
register_replacement(Replacement(
    "swiglu", "SwiGLU, silu(gate) * up in one Triton kernel (hello_gpu.models.swiglu_kernel)",
    load=_hello_gpu_swiglu, example=_swiglu_example, tolerance=ROUNDED_ONCE_TOLERANCE))


def _hello_gpu_add_rms_norm() -> Callable:
    from .add_rms_norm_kernel import add_rms_norm      # imports Triton only when asked for
    return add_rms_norm


def _add_norm_example(config: LlamaConfig, shape: RunShape, device, dtype) -> tuple:
    batch = shape.batch
    generator = torch.Generator(device=device).manual_seed(0)
    residual, delta = (torch.randn(batch, 1, config.hidden_size, device=device, dtype=dtype, generator=generator)
                       for _ in range(2))
    weight = 1 + 0.1 * torch.randn(config.hidden_size, device=device, dtype=dtype, generator=generator)
    return residual, delta, weight, config.rms_norm_eps


register_replacement(Replacement(
    "add_rms_norm", "the residual add fused into the RMSNorm after it, one Triton kernel "
                    "(hello_gpu.models.add_rms_norm_kernel)",
    load=_hello_gpu_add_rms_norm, example=_add_norm_example, tolerance=NORM_TOLERANCE))


# region linear-replacement
def _hello_gpu_linear() -> Callable:
    """F.linear by hello_gpu.ops.linear for the decode rows, F.linear itself for prefill.

    A decode step calls linear with x of (B, 1, K) and an nn.Linear weight (N, K), the layout the
    linear ladder reads in place: up to GEMV_ROWS (16) rows go to ops.linear, which runs the decode
    GEMV rung its rule picks (ops/matmul_functions.py: t04_evict_first_gemv for one row in 16 bits,
    t02_streaming_gemv for 2-16 rows, records of issue 21). More rows (a
    prefill of B x T tokens) stay F.linear (cuBLAS): for M > 16 ops.linear's rule would transpose a
    copy of the weight at every call (a 14336x4096 bf16 weight: 117 MB more traffic per projection),
    and the prefill is not what this backend times against the bound.

    x is made contiguous first: it is only ever not for the prefill's last position with B > 1
    (normed[:, -1:], B x K elements, 16 KB at B = 2 and K = 4096), never a weight.

    CUDA-graph capture of the decode step (captured_decode): ops.linear does its host work (the rule's
    pick, the rung's build, Triton's compile and t02's autotuning per (M, N, K), the replay plan of
    each call signature) at the first call of each signature, which happens in check_replacement, the
    timing, and the three warm-up steps captured_decode runs on a side stream before it captures. Under
    capture each call is then a dictionary look-up on the host, the result's torch.empty (from the
    graph's private memory pool, as every allocation inside a capture) and a kernel launch on the
    capturing stream: nothing synchronises and nothing is read back, so the graph holds the launches.
    """
    from ..ops import linear
    from ..ops.matmul_functions import GEMV_ROWS
    from . import linear_pdl_kernel
    eager = F.linear

    def decode_linear(x: torch.Tensor, weight: torch.Tensor, pdl: bool = False) -> torch.Tensor:
        if x.numel() <= GEMV_ROWS * x.shape[-1]:
            x = x.contiguous()
            # hello-gpu-pdl (dependent_launch.with_dependent_launches asks for pdl): one row in 16 bits runs t04's
            # kernel with its first weight tile loaded before the wait (linear_pdl_kernel); the rest as without
            if pdl and linear_pdl_kernel.refusal(x, weight) is None:
                return linear_pdl_kernel.gemv(x, weight, pdl=True)
            return linear(x, weight)
        return eager(x, weight)
    return decode_linear


def _projection_shapes(config: LlamaConfig) -> dict:
    """{projection: (N, K, calls a decode step makes)} of every weight a decode step multiplies by."""
    return {"qkv_proj": (config.q_size + 2 * config.kv_size, config.hidden_size, config.num_layers),
            "o_proj": (config.hidden_size, config.q_size, config.num_layers),
            "gate_up_proj": (2 * config.intermediate_size, config.hidden_size, config.num_layers),
            "down_proj": (config.hidden_size, config.intermediate_size, config.num_layers),
            "lm_head": (config.vocab_size, config.hidden_size, 1)}


def _linear_cases(config: LlamaConfig, shape: RunShape, device, dtype) -> dict:
    """x (B, 1, K) and a weight (N, K) of every projection a decode step runs, with its count a step;
    weights ~ N(0, 0.02) as build_model draws them, x ~ N(0, 1) as a normed activation. Without a model
    only: the weights drawn here are as large as the model's five shapes (1.49 GB on the 8B)."""
    batch = shape.batch
    generator = torch.Generator(device=device).manual_seed(0)
    cases = {}
    for label, (n, k, count) in _projection_shapes(config).items():
        x = torch.randn(batch, 1, k, device=device, dtype=dtype, generator=generator)
        weight = torch.randn(n, k, device=device, dtype=dtype, generator=generator).mul_(INIT_STD)
        cases[f"{label} {batch}x{n}x{k}"] = ((x, weight), count)
    return cases


def _linear_model_cases(model: Llama, batch: int) -> dict:
    """:func:`_linear_cases` on the model's own weights (its first layer's projections and its head, tied
    or not), x drawn as there: the GEMV is checked and timed on tensors the decode step reads, and no
    weight is copied (the 8B's five shapes drawn anew were 1.49 GB more than eager holds, the head 1.05 GB
    of it)."""
    config, layer = model.config, model.layers[0]
    weights = {"qkv_proj": layer.self_attn.qkv_proj.weight, "o_proj": layer.self_attn.o_proj.weight,
               "gate_up_proj": layer.mlp.gate_up_proj.weight, "down_proj": layer.mlp.down_proj.weight,
               "lm_head": model.head_weight}
    generator = torch.Generator(device=model.device).manual_seed(0)
    cases = {}
    for label, (n, k, count) in _projection_shapes(config).items():
        weight = weights[label]
        if tuple(weight.shape) != (n, k):
            raise ValueError(f"linear cases: the model's {label} weight is {tuple(weight.shape)}, its config says "
                             f"{(n, k)}")
        x = torch.randn(batch, 1, k, device=model.device, dtype=model.dtype, generator=generator)
        cases[f"{label} {batch}x{n}x{k}"] = ((x, weight), count)
    return cases


def _linear_model_step(model: Llama, batch: int) -> list[tuple]:
    """(x, weight) of every GEMV a decode step makes, in its order, each on the model's own weight: every
    weight is read once per step as in the model (the 8B: 32 x 4 projections and the head, ~15 GB)."""
    generator = torch.Generator(device=model.device).manual_seed(0)
    inputs = {}

    def x_for(weight):
        k = weight.shape[1]
        if k not in inputs:
            inputs[k] = torch.randn(batch, 1, k, device=model.device, dtype=model.dtype, generator=generator)
        return inputs[k], weight
    calls = [x_for(weight) for layer in model.layers
             for weight in (layer.self_attn.qkv_proj.weight, layer.self_attn.o_proj.weight,
                            layer.mlp.gate_up_proj.weight, layer.mlp.down_proj.weight)]
    return calls + [x_for(model.head_weight)]


def _linear_tolerance(arguments: tuple, dtype: torch.dtype) -> tuple[float, float]:
    """The linear ladder's own bound (its spec: the output's rounding plus float32 accumulation over K)."""
    from ..ops.linear import spec
    x, weight = arguments
    return spec.tolerance((x.reshape(-1, x.shape[-1]), weight), str(dtype).removeprefix("torch."))


def _linear_float64(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """F.linear in float64, a block of weight rows at a time: at most FLOAT64_BLOCK_ELEMENTS (2^24, 128 MiB)
    float64 elements of the weight at once (1170 rows at K = 14336, 4096 at K = 4096) instead of the whole
    head's 4.2 GB on the 8B."""
    from ..ops.matmul.spec import FLOAT64_BLOCK_ELEMENTS
    wide = x.double()
    block = max(1, FLOAT64_BLOCK_ELEMENTS // max(1, weight.shape[1]))
    return torch.cat([F.linear(wide, rows.double()) for rows in weight.split(block)], dim=-1)


register_replacement(Replacement(
    "linear", "decode GEMV of every projection by hello_gpu.ops.linear (the rung its rule picks; prefill stays "
              "F.linear)", load=_hello_gpu_linear, cases=_linear_cases, tolerance_of=_linear_tolerance,
    reference=_linear_float64, model_cases=_linear_model_cases, model_step=_linear_model_step))
# endregion linear-replacement


def _hello_gpu_gate_up_swiglu() -> Callable:
    from .gate_up_swiglu_kernel import gate_up_swiglu     # imports Triton only when asked for
    return gate_up_swiglu


def _linear_then_swiglu(op_for: Callable[[str], Callable]) -> Callable:
    """The gate/up projection then SwiGLU as this run calls them where the fused kernel is not swapped in."""
    project, activate = op_for("linear"), op_for("swiglu")

    def linear_then_swiglu(x, weight):
        return activate(project(x, weight))
    return linear_then_swiglu


def _gate_up_shape(config: LlamaConfig) -> tuple[int, int]:
    n, k, _ = _projection_shapes(config)["gate_up_proj"]
    return n, k


def _gate_up_cases(config: LlamaConfig, shape: RunShape, device, dtype) -> dict:
    """x (B, 1, K) as a normed activation and a fused [gate | up] weight drawn as build_model draws it, run once a
    layer (without a model only: on the 8B the weight is 235 MB)."""
    n, k = _gate_up_shape(config)
    generator = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(shape.batch, 1, k, device=device, dtype=dtype, generator=generator)
    weight = torch.randn(n, k, device=device, dtype=dtype, generator=generator).mul_(INIT_STD)
    return {f"gate_up_proj {shape.batch}x{n}x{k}": ((x, weight), config.num_layers)}


def _gate_up_model_step(model: Llama, batch: int) -> list[tuple]:
    """(x, weight) of every layer's gate/up projection, on the model's own weights, in the step's order."""
    generator = torch.Generator(device=model.device).manual_seed(0)
    x = torch.randn(batch, 1, model.config.hidden_size, device=model.device, dtype=model.dtype, generator=generator)
    return [(x, layer.mlp.gate_up_proj.weight) for layer in model.layers]


def _gate_up_model_cases(model: Llama, batch: int) -> dict:
    """:func:`_gate_up_cases` on the first layer's own weight: no weight is copied."""
    (x, weight), n, k = _gate_up_model_step(model, batch)[0], *_gate_up_shape(model.config)
    return {f"gate_up_proj {batch}x{n}x{k}": ((x, weight), model.config.num_layers)}


def _gate_up_swiglu_float64(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """llama.gate_up_swiglu in float64, the projection a block of weight rows at a time (_linear_float64)."""
    from .llama import swiglu
    return swiglu(_linear_float64(x, weight))


register_replacement(Replacement(
    "gate_up_swiglu", "the MLP's gate/up GEMV and SwiGLU in one Triton launch at batch-1 decode "
                      "(hello_gpu.models.gate_up_swiglu_kernel; a prompt's rows run linear then swiglu)",
    load=_hello_gpu_gate_up_swiglu, cases=_gate_up_cases, model_cases=_gate_up_model_cases,
    model_step=_gate_up_model_step, reference=_gate_up_swiglu_float64, tolerance=ROUNDED_ONCE_TOLERANCE,
    baseline=_linear_then_swiglu, composes=("linear", "swiglu")))


# A unit of the result's rounding per dtype (half an ulp on a GPU; the interpreter truncates bf16: a whole one)
_UNIT = {torch.bfloat16: 2**-8, torch.float16: 2**-11, torch.float32: 2**-23}


def _hello_gpu_qkv_rope_cache_write() -> Callable:
    from .qkv_rope_cache_write_kernel import qkv_rope_cache_write     # imports Triton only when asked for
    return qkv_rope_cache_write


def _linear_then_rope_cache_write(op_for: Callable[[str], Callable]) -> Callable:
    """The qkv projection, then RoPE and the cache write as this run calls them where the fused kernel is not
    swapped in: one rope_cache_write kernel where that was swapped in, else rope then cache_write."""
    from .llama import split_heads
    project, fused = op_for("linear"), op_for("rope_cache_write")
    if fused is None:
        fused = _rope_then_cache_write(op_for)

    def linear_then_rope_cache_write(x, weight, cos, sin, keys, values, positions):
        q, k, v = split_heads(project(x, weight), keys.shape[1], keys.shape[3])
        return fused(q, k, v, cos, sin, keys, values, positions)
    return linear_then_rope_cache_write


def _qkv_arguments(config: LlamaConfig, shape: RunShape, weight: torch.Tensor, generator) -> tuple:
    """x (B, 1, hidden) as a normed activation, a token's cos/sin at a random angle, one layer's caches of the run's
    length (random contents), the first decode position."""
    device, dtype = weight.device, weight.dtype
    x = torch.randn(shape.batch, 1, config.hidden_size, device=device, dtype=dtype, generator=generator)
    angles = 1000 * torch.rand(1, config.head_dim // 2, device=device, generator=generator, dtype=torch.float64)
    table = compute_dtype(dtype)
    cache = (shape.batch, config.num_kv_heads, shape.max_seq, config.head_dim)
    keys, values = (torch.randn(cache, device=device, dtype=dtype, generator=generator) for _ in range(2))
    positions = torch.tensor([min(shape.prompt, shape.max_seq - 1)], device=device)
    return x, weight, torch.cos(angles).to(table), torch.sin(angles).to(table), keys, values, positions


def _qkv_cases(config: LlamaConfig, shape: RunShape, device, dtype) -> dict:
    """The qkv weight drawn as build_model draws it, run once a layer (without a model only)."""
    n, k, _ = _projection_shapes(config)["qkv_proj"]
    generator = torch.Generator(device=device).manual_seed(0)
    weight = torch.randn(n, k, device=device, dtype=dtype, generator=generator).mul_(INIT_STD)
    return {f"qkv_proj {shape.batch}x{n}x{k}": (_qkv_arguments(config, shape, weight, generator), config.num_layers)}


def _qkv_model_step(model: Llama, batch: int) -> list[tuple]:
    """The arguments of every layer's call in a decode step, on the model's own qkv weights (one example cache:
    its contents do not matter to the timing)."""
    shape = RunShape.of(model.config, batch)
    generator = torch.Generator(device=model.device).manual_seed(0)
    first = _qkv_arguments(model.config, shape, model.layers[0].self_attn.qkv_proj.weight, generator)
    return [(first[0], layer.self_attn.qkv_proj.weight, *first[2:]) for layer in model.layers]


def _qkv_model_cases(model: Llama, batch: int) -> dict:
    n, k, _ = _projection_shapes(model.config)["qkv_proj"]
    return {f"qkv_proj {batch}x{n}x{k}": (_qkv_model_step(model, batch)[0], model.config.num_layers)}


def _qkv_rope_cache_write_rounded(x, weight, cos, sin, keys, values, positions, dtype=None) -> tuple:
    """The projection in float64 rounded once to the model's dtype (F.linear's output, what RoPE reads; ``dtype``,
    else x's), then RoPE and the cache write as the rope_cache_write kernel is checked (_rope_cache_write_rounded)."""
    from .llama import split_heads
    qkv = _linear_float64(x, weight).to(dtype or x.dtype)
    q, k, v = split_heads(qkv, keys.shape[1], keys.shape[3])
    return _rope_cache_write_rounded(q, k, v, cos, sin, keys, values, positions)


def _qkv_tolerance(arguments: tuple, dtype: torch.dtype) -> tuple[float, float]:
    """rtol of one rounding of the result; atol the linear ladder's bound on a projection plus a unit of the
    largest one (the kernel's float32 sum may round to the other side of the reference's: one unit of an input
    of the rotation, whose result can cancel). The caches beyond the position are compared exactly by the same
    bound (they are copied)."""
    x, weight = arguments[:2]
    _rtol, linear_atol = _linear_tolerance((x, weight), dtype)
    unit = _UNIT.get(dtype, 2**-23)
    largest = float(_linear_float64(x, weight).abs().max()) if weight.numel() else 0.0
    return ROUNDED_ONCE_TOLERANCE.get(dtype, (1e-5, 1e-6))[0], linear_atol + 2 * unit * largest + 1e-7


register_replacement(Replacement(
    "qkv_rope_cache_write", "the attention's qkv projection, RoPE and the KV-cache write in one Triton launch at "
                            "batch-1 decode (hello_gpu.models.qkv_rope_cache_write_kernel; a prompt's rows run "
                            "linear then RoPE and the cache write)",
    load=_hello_gpu_qkv_rope_cache_write, cases=_qkv_cases, model_cases=_qkv_model_cases,
    model_step=_qkv_model_step, reference=_qkv_rope_cache_write_rounded, tolerance_of=_qkv_tolerance,
    baseline=_linear_then_rope_cache_write, composes=("linear", "rope_cache_write")))


def _hello_gpu_linear_add_rms_norm() -> Callable:
    from .linear_add_rms_norm_kernel import linear_add_rms_norm     # imports Triton only when asked for
    return linear_add_rms_norm


def _linear_then_add_rms_norm(op_for: Callable[[str], Callable]) -> Callable:
    """The output projection then the residual add and RMSNorm as this run calls them where the fused kernel is
    not swapped in."""
    project, add_norm = op_for("linear"), op_for("add_rms_norm")

    def linear_then_add_rms_norm(x, weight, residual, norm_weight, eps):
        return add_norm(residual, project(x, weight), norm_weight, eps)
    return linear_then_add_rms_norm


def _half_layer_ends(config: LlamaConfig) -> dict:
    """{projection: (N, K)} of the two projections a layer's halves end with."""
    shapes = _projection_shapes(config)
    return {name: shapes[name][:2] for name in ("o_proj", "down_proj")}


def _add_norm_arguments(x_size: int, weight: torch.Tensor, norm_weight: torch.Tensor, batch: int, eps: float,
                        generator: torch.Generator) -> tuple:
    """x (B, 1, K) as an attention output or activation, a residual (B, 1, N) ~ N(0, 1), the given weights."""
    device, dtype = weight.device, weight.dtype
    x = torch.randn(batch, 1, x_size, device=device, dtype=dtype, generator=generator)
    residual = torch.randn(batch, 1, weight.shape[0], device=device, dtype=dtype, generator=generator)
    return x, weight, residual, norm_weight, eps


def _linear_add_norm_cases(config: LlamaConfig, shape: RunShape, device, dtype) -> dict:
    """o_proj and down_proj drawn as build_model draws them, norm weights near 1, each run once a layer (without a
    model only: the 8B's down_proj is 117 MB)."""
    generator = torch.Generator(device=device).manual_seed(0)
    cases = {}
    for label, (n, k) in _half_layer_ends(config).items():
        weight = torch.randn(n, k, device=device, dtype=dtype, generator=generator).mul_(INIT_STD)
        norm_weight = 1 + 0.1 * torch.randn(n, device=device, dtype=dtype, generator=generator)
        arguments = _add_norm_arguments(k, weight, norm_weight, shape.batch, config.rms_norm_eps, generator)
        cases[f"{label} {shape.batch}x{n}x{k}"] = (arguments, config.num_layers)
    return cases


def _linear_add_norm_model_step(model: Llama, batch: int) -> list[tuple]:
    """The arguments of every half layer's end a decode step makes, in its order, on the model's own weights."""
    generator = torch.Generator(device=model.device).manual_seed(0)
    eps, calls = model.config.rms_norm_eps, []
    for index, layer in enumerate(model.layers):
        following = model.layers[index + 1].input_layernorm if index + 1 < len(model.layers) else model.norm
        for weight, norm in ((layer.self_attn.o_proj.weight, layer.post_attention_layernorm.weight),
                             (layer.mlp.down_proj.weight, following.weight)):
            calls.append(_add_norm_arguments(weight.shape[1], weight, norm, batch, eps, generator))
    return calls


def _linear_add_norm_model_cases(model: Llama, batch: int) -> dict:
    """:func:`_linear_add_norm_cases` on the first layer's own weights: no weight is copied."""
    first_layer = _linear_add_norm_model_step(model, batch)[:2]
    return {f"{label} {batch}x{n}x{k}": (arguments, model.config.num_layers)
            for (label, (n, k)), arguments in zip(_half_layer_ends(model.config).items(), first_layer)}


def _linear_add_norm_float64(x, weight, residual, norm_weight, eps) -> tuple:
    """The new residual and its norm in float64 (the projection a block of weight rows at a time)."""
    from .llama import rms_norm
    total = residual.double() + _linear_float64(x, weight)
    return total, rms_norm(total, norm_weight.double(), eps)


def _linear_add_norm_tolerance(arguments: tuple, dtype: torch.dtype) -> tuple[float, float]:
    """The delta is rounded once (F.linear's output), the sum once, the norm once: the bound of
    :func:`residual_add_tolerance` for both outputs. A dropped weight tile moves an output by ~|delta|, a
    dropped partial sum of squares the norm by its share: the tests draw spiky residuals so that share is large."""
    x, weight, _residual, _norm_weight, _eps = arguments
    return residual_add_tolerance((x, weight), dtype)


def residual_add_tolerance(arguments: tuple, dtype: torch.dtype) -> tuple[float, float]:
    """``residual + F.linear(x, weight)`` with the delta rounded once (F.linear's output) and the sum once: rtol
    of two roundings of the result; atol the linear ladder's bound on the delta plus a unit of the largest delta
    (where the sum cancels, the delta's rounding is all that is left). ``arguments`` begin with x and weight."""
    x, weight = arguments[:2]
    _rtol, delta_atol = _linear_tolerance((x, weight), dtype)
    unit = _UNIT.get(dtype, 2**-23)
    largest = float(_linear_float64(x, weight).abs().max()) if weight.numel() else 0.0
    return 4 * unit if dtype != torch.float32 else 1e-5, delta_atol + 2 * unit * largest + 1e-7


register_replacement(Replacement(
    "linear_add_rms_norm", "a layer half's output projection, the residual add and the next RMSNorm in one Triton "
                           "launch at batch-1 decode (hello_gpu.models.linear_add_rms_norm_kernel; a prompt's rows "
                           "run linear then add_rms_norm)",
    load=_hello_gpu_linear_add_rms_norm, cases=_linear_add_norm_cases, model_cases=_linear_add_norm_model_cases,
    model_step=_linear_add_norm_model_step, reference=_linear_add_norm_float64,
    tolerance_of=_linear_add_norm_tolerance, baseline=_linear_then_add_rms_norm, composes=("linear", "add_rms_norm")))


def _hello_gpu_attention() -> Callable:
    from .decode_attention_kernel import attention       # imports Triton only when asked for
    return attention


def _attention_example(config: LlamaConfig, shape: RunShape, device, dtype) -> tuple:
    """q of one token as the model hands it (a view of the qkv projection's output) and one layer's cache of
    the run's max_seq positions written up to the middle of the decode (position 640 of 768 at prompt 512 +
    256 new: the mean context a decode step reads), the mask row the model makes there, and nonzero garbage
    in the positions beyond, larger than the written keys and values: a kernel that ignores the mask is wrong
    by more than the values' size."""
    batch, max_seq = shape.batch, shape.max_seq
    generator = torch.Generator(device=device).manual_seed(0)
    position = min(max_seq - 1, shape.prompt + (max_seq - shape.prompt) // 2)
    qkv = torch.randn(batch, 1, config.q_size + 2 * config.kv_size, device=device, dtype=dtype, generator=generator)
    q = qkv[..., :config.q_size].view(batch, 1, config.num_heads, config.head_dim).transpose(1, 2)
    cache = (batch, config.num_kv_heads, max_seq, config.head_dim)
    keys, values = (torch.randn(cache, device=device, dtype=dtype, generator=generator) for _ in range(2))
    keys[:, :, position + 1:] = 4 + keys[:, :, position + 1:]
    values[:, :, position + 1:] = 8 + values[:, :, position + 1:]
    mask = torch.arange(max_seq, device=device)[None, :] <= position
    return q, keys, values, mask


# (rtol, weight rounding) per dtype. The output is a softmax-weighted mean of the visible values. The kernel
# rounds the weights to the values' dtype for its P @ V dot (as flash attention does): at most one rounding of
# each weight (2^-9 of it in bf16, 2^-11 in fp16 on a GPU; the interpreter truncates, 2^-8), an error of at
# most that times the same weighted mean of |v|; then it rounds the result once (rtol). float32 keeps the
# weights in float32 (an "ieee" dot): float32 arithmetic only. A dropped 64-key split moves an element by
# ~1/8 of a 64-value mean (~0.016 at values ~ N(0, 1), 513 visible keys), ~4x the bf16 bound (~2^-8 x 1.1);
# garbage beyond the mask read as visible, by the garbage's size.
ATTENTION_TOLERANCE = {torch.bfloat16: (2**-7, 2**-8), torch.float16: (2**-10, 2**-10), torch.float32: (1e-5, 1e-6)}


def _attention_tolerance(arguments: tuple, dtype: torch.dtype) -> tuple[float, float]:
    """rtol, and atol = the weight rounding x the largest softmax-weighted mean of |v| (SDPA of |v|, float64)."""
    q, keys, values, mask = arguments
    rtol, weight_rounding = ATTENTION_TOLERANCE.get(dtype, (1e-5, 1e-6))
    mean_size = _attention_float64(q, keys, values.abs(), mask)
    return rtol, weight_rounding * float(mean_size.max()) + 1e-7


ATTENTION_FLOAT64_BLOCK = 2**24     # float64 scores at once (128 MiB): the whole of them is 1.1 GB at prompt 2048


def _attention_float64(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The eager attention in float64, a block of query positions at a time: at most ATTENTION_FLOAT64_BLOCK
    scores (B x H x block x S) at once instead of all of them (1 x 32 x 2048 x 2050 float64 at the 8B's
    p2048 prompt is 1.1 GB, with SDPA's math path holding several such)."""
    batch, heads, length, _ = q.shape
    block = max(1, ATTENTION_FLOAT64_BLOCK // (batch * heads * keys.shape[2]))
    wide_keys, wide_values = keys.double(), values.double()
    return torch.cat([EAGER_OPS.attention(q[:, :, start:start + block].double(), wide_keys, wide_values,
                                          mask[start:start + block]) for start in range(0, length, block)], dim=2)


register_replacement(Replacement(
    "attention", "decode attention over the KV cache in place by a flash-decoding Triton kernel "
                 "(hello_gpu.models.decode_attention_kernel; a prompt's attention is prefill_attention)",
    load=_hello_gpu_attention, example=_attention_example, tolerance_of=_attention_tolerance,
    reference=_attention_float64))


def _hello_gpu_prefill_attention() -> Callable:
    from .prefill_attention_kernel import attention      # imports Triton only when asked for
    return attention


def _prefill_attention_example(config: LlamaConfig, shape: RunShape, device, dtype) -> tuple:
    """The run's prompt at positions 0.. of its max_seq-position cache (512 tokens of 768 by default; 2048 of
    2050 at p2048 n2), q as the model hands it (a view of the qkv projection's output), the causal mask the
    model makes there, and larger nonzero garbage in the cache beyond the prompt (a kernel that reads a masked
    key is wrong by more than the values' size)."""
    batch, max_seq, length = shape.batch, shape.max_seq, shape.prompt
    generator = torch.Generator(device=device).manual_seed(0)
    qkv = torch.randn(batch, length, config.q_size + 2 * config.kv_size, device=device, dtype=dtype,
                      generator=generator)
    q = qkv[..., :config.q_size].view(batch, length, config.num_heads, config.head_dim).transpose(1, 2)
    cache = (batch, config.num_kv_heads, max_seq, config.head_dim)
    keys, values = (torch.randn(cache, device=device, dtype=dtype, generator=generator) for _ in range(2))
    keys[:, :, length:] = 4 + keys[:, :, length:]
    values[:, :, length:] = 8 + values[:, :, length:]
    positions = torch.arange(length, device=device)
    mask = torch.arange(max_seq, device=device)[None, :] <= positions[:, None]
    return q, keys, values, mask


register_replacement(Replacement(
    "prefill_attention", "a prompt's attention over the KV cache in place by a flash-attention Triton kernel "
                         "that reads the mask on the device and visits only the key tiles some query sees "
                         "(hello_gpu.models.prefill_attention_kernel)",
    load=_hello_gpu_prefill_attention, example=_prefill_attention_example, tolerance_of=_attention_tolerance,
    reference=_attention_float64))

# The operations with no kernel yet, and what each waits for.
NOT_WRITTEN = {
    "sample": ("softmax / sampling of the next token (greedy: an argmax over the vocabulary)",
               "no sampling kernel yet; greedy decode needs only torch.argmax"),
}
for _name, (_description, _missing) in NOT_WRITTEN.items():
    register_replacement(Replacement(_name, _description, missing=_missing))


@dataclass
class Choice:
    """What the hello-gpu backend decided for one replacement, and why."""

    name: str
    category: str
    used: bool
    reason: str
    speedup: float | None = None                    # eager time / kernel time, when timed
    ci95: tuple[float, float] | None = None
    superseded_by: str | None = None                # the used kernel that does this one's work, where one does

    def to_dict(self) -> dict:
        return asdict(self)


def decode_cases(replacement: Replacement, config: LlamaConfig, batch: int | RunShape, device, dtype: torch.dtype, *,
                 model: Llama | None = None) -> dict:
    """{label: (arguments, calls a decode step makes)} of ``replacement`` for this model at the run's shape
    (``batch``: a RunShape, or a batch for the default run; see Replacement.cases); given the ``model``, on its
    own tensors where the replacement says how (Replacement.model_cases)."""
    shape = RunShape.of(config, batch)
    if model is not None and replacement.model_cases is not None:
        return replacement.model_cases(model, shape.batch)
    if replacement.cases is not None:
        return replacement.cases(config, shape, device, dtype)
    return {"decode": (replacement.example(config, shape, device, dtype), 1)}


def check_replacement(replacement: Replacement, function: Callable, config: LlamaConfig, batch: int | RunShape,
                      device, dtype: torch.dtype, *, model: Llama | None = None) -> str | None:
    """None when the kernel matches the eager operation computed in float64 at every decode shape of
    this model, else the problem (the shape, the worst element and the bound it broke)."""
    cases = decode_cases(replacement, config, batch, device, dtype, model=model)
    for label, (arguments, _count) in cases.items():
        problem = _check_case(replacement, function, arguments, dtype)
        if problem:
            return problem if len(cases) == 1 else f"{label}: {problem}"
    return None


def _check_case(replacement: Replacement, function: Callable, arguments: tuple, dtype: torch.dtype) -> str | None:
    if replacement.reference is not None:
        expected = replacement.reference(*arguments)
    else:
        eager = getattr(EAGER_OPS, replacement.name)
        expected = eager(*[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                           for a in arguments])
    with torch.no_grad():
        got = function(*arguments)
    rtol, atol = (replacement.tolerance_of(arguments, dtype) if replacement.tolerance_of is not None
                  else replacement.tolerance.get(dtype, (1e-5, 1e-7)))
    several = isinstance(expected, tuple)           # RoPE (q, k), add_rms_norm (sum, norm): each checked
    if several != isinstance(got, tuple) or (several and len(got) != len(expected)):
        return f"returned {type(got).__name__} where the eager operation returns {type(expected).__name__}"
    for index, (one, reference) in enumerate(zip(got, expected) if several else [(got, expected)]):
        which = f"output {index}: " if several else ""
        if one.shape != reference.shape or one.dtype != dtype:
            return f"{which}returned {tuple(one.shape)} {one.dtype}; expected {tuple(reference.shape)} {dtype}"
        error = (one.double() - reference).abs()
        bound = atol + rtol * reference.abs()
        if not torch.isfinite(one).all() or (error > bound).any():
            worst = int((error - bound).argmax())
            return (f"{which}wrong result: element {worst} is {one.flatten()[worst].item():.6g}, float64 eager "
                    f"gives {reference.flatten()[worst].item():.6g} (rtol {rtol:g}, atol {atol:g})")
    return None


def choose_replacements(config: LlamaConfig, *, batch: int, device, dtype: torch.dtype, force=(),
                        timer=None, replacements: dict[str, Replacement] | None = None,
                        model: Llama | None = None, max_seq: int | None = None,
                        prompt: int | None = None) -> list[Choice]:
    """One :class:`Choice` per replacement of ``replacements`` (default: the registry, :data:`REPLACEMENTS`;
    the agent passes the registry with its own kernel in place of one) under the module's rule. ``timer(eager, kernel)``
    returns a :class:`hello_gpu.bench.Comparison` (default: :func:`hello_gpu.bench.compare`, device
    times with warm caches: at decode the operation's input was written by the previous kernel and is
    in L2). Without a GPU nothing is timed unless a ``timer`` is given (the CPU tests time on the wall
    clock to test the decision itself). Given the ``model`` (make_runner gives it), a replacement that reads
    tensors as large as the model's is checked and timed on the model's own (Replacement.model_cases): the
    choice then holds no copy of a weight next to the model. ``max_seq`` and ``prompt``: the run's cache length
    and prompt (default: a 768-position cache and a prompt of 512), where the attention kernels are checked and
    timed (RunShape)."""
    device = torch.device(device)
    shape = RunShape.of(config, batch, max_seq, prompt)
    if model is not None and (model.config != config or model.device.type != device.type or model.dtype != dtype):
        raise ValueError(f"choose_replacements: the model is {model.config.name} in {model.dtype} on {model.device}; "
                         f"the call asks for {config.name} in {dtype} on {device}")
    replacements = REPLACEMENTS if replacements is None else replacements
    unknown = sorted(set(force) - set(replacements))
    if unknown:
        raise ValueError(f"no replacement named {', '.join(unknown)}; known: {', '.join(replacements)}")
    choices, swapped = {}, {}
    # A kernel that does others' work in one launch (Replacement.composes) is decided after them: it is timed
    # against what the run would call in its place. sorted() is stable: the others keep the registry's order.
    for name in sorted(replacements, key=lambda name: bool(replacements[name].composes)):
        replacement = replacements[name]
        choice = choices[name] = Choice(name, replacement.category, False, "")
        if replacement.load is None:
            choice.reason = f"not written yet: {replacement.missing}"
            continue
        if name not in force and device.type != "cuda" and timer is None:
            choice.reason = (f"not measured: no GPU here ({device.type}); our kernels run on a GPU, and a kernel "
                             f"we have not timed against eager is not swapped in")
            continue
        try:
            function = replacement.load()
            problem = check_replacement(replacement, function, config, shape, device, dtype, model=model)
        except Exception as error:  # noqa: BLE001 - an unusable kernel is reported and left out, not fatal
            choice.reason = f"unusable here: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
            continue
        if problem:
            choice.reason = f"not swapped in: {problem}"
            continue
        if name in force:
            choice.used, choice.reason = True, "forced (checked against float64 eager, not timed)"
        else:
            choice.used, choice.reason, choice.speedup, choice.ci95 = _timed_decision(
                replacement, function, config, shape, device, dtype, timer, model, swapped)
        if choice.used:
            swapped[name] = function
    choices = [choices[name] for name in replacements]
    _leave_out_superseded(choices, replacements, force)
    _leave_out_uncalled(choices, replacements)
    return choices


def _leave_out_uncalled(choices: list[Choice], replacements: dict[str, Replacement]) -> None:
    """A used kernel that is called only where one of its ``needs_any`` is used, with none of them used, is not."""
    used = {choice.name for choice in choices if choice.used}
    for choice in choices:
        needs = replacements[choice.name].needs_any
        if choice.used and needs and not used & set(needs):
            choice.used, choice.reason = False, f"not called: none of {', '.join(needs)} is used ({choice.reason})"


def _leave_out_superseded(choices: list[Choice], replacements: dict[str, Replacement], force) -> None:
    """A used kernel that does the work of others (Replacement.supersedes) runs instead of them, unless one of
    those was forced in: then the forced kernel runs, as asked."""
    by_name = {choice.name: choice for choice in choices}
    for choice in choices:
        covered = [by_name[name] for name in replacements[choice.name].supersedes if name in by_name]
        if not choice.used or not covered:
            continue
        forced = [other.name for other in covered if other.name in force]
        if forced:
            choice.used, choice.reason = False, f"not swapped in: {', '.join(forced)} forced in ({choice.reason})"
            continue
        for other in covered:
            if other.used:
                other.used, other.reason = False, f"not called: {choice.name} does its work ({other.reason})"
                other.superseded_by = choice.name


# region swap-rule
def _timed_decision(replacement, function, config, shape, device, dtype, timer, model=None, swapped=None):
    from ..bench import compare
    if model is not None and replacement.model_step is not None:
        cases = [(arguments, 1) for arguments in replacement.model_step(model, shape.batch)]
        over = f" over the {len(cases)} calls of a decode step, each on its own weight"
    else:
        cases = [(arguments, count)
                 for arguments, count in decode_cases(replacement, config, shape, device, dtype, model=model).values()]
        over = f" over the {len(cases)} decode shapes, each as often as a step runs it" if len(cases) > 1 else ""
    eager, label = getattr(EAGER_OPS, replacement.name, None), "eager"
    if replacement.baseline is not None:     # what runs in its place: the kernels swapped in for those ops, or eager's
        swapped = swapped or {}
        eager = replacement.baseline(lambda name: swapped.get(name) or getattr(EAGER_OPS, name))
        label = " then ".join(f"{name} ({'swapped in' if name in swapped else 'eager'})"
                              for name in replacement.composes)
    timer = timer or (lambda a, b: compare(a, b, cache="warm"))

    def every_case(operation):
        """One decode step's worth of the operation: each shape as often as a step runs it (linear on the
        8B: 32 x each of the four projections and the head once, the ~15 GB a step reads)."""
        def run():
            for arguments, count in cases:
                for _ in range(count):
                    operation(*arguments)
        return run
    with torch.no_grad():
        result = timer(every_case(eager), every_case(function))
    used = result.verdict == "faster"
    what = (f"{result.speedup.value:.2f}x {label} [{result.speedup.ci95[0]:.2f}, {result.speedup.ci95[1]:.2f}]{over} "
            f"(batch {shape.batch}, prompt {shape.prompt} of {shape.max_seq} positions)")
    return used, (f"faster: {what}" if used else f"not swapped in: {what}, {result.verdict}"), \
        result.speedup.value, tuple(result.speedup.ci95)
# endregion swap-rule


def ops_with(choices: list[Choice], base: ModelOps = EAGER_OPS,
             replacements: dict[str, Replacement] | None = None) -> ModelOps:
    """``base`` with every used replacement (of ``replacements``, default the registry) swapped in. With
    the rms_norm kernel in and the fused add + norm kernel not used, the add stays a torch add and the norm after
    it is the kernel."""
    replacements = REPLACEMENTS if replacements is None else replacements
    chosen = {c.name: replacements[c.name].load() for c in choices if c.used}
    ops = replace(base, **chosen)
    if "rms_norm" in chosen and "add_rms_norm" not in chosen:
        norm = chosen["rms_norm"]

        def add_then_norm(residual, delta, weight, eps):
            total = residual + delta
            return total, norm(total, weight, eps)
        ops = replace(ops, add_rms_norm=add_then_norm)
    if "gate_up_swiglu" in chosen:
        ops = replace(ops, gate_up_swiglu=_one_row_or_both(chosen["gate_up_swiglu"], ops.linear, ops.swiglu))
    if "qkv_rope_cache_write" in chosen:
        ops = replace(ops, qkv_rope_cache_write=_one_token_or_linear_then_rope(
            chosen["qkv_rope_cache_write"], ops.linear, ops.rope_cache_write, ops.rope, ops.cache_write))
    if "linear_add_rms_norm" in chosen:
        ops = replace(ops, linear_add_rms_norm=_one_row_or_linear_then_add_norm(
            chosen["linear_add_rms_norm"], ops.linear, ops.add_rms_norm))
    if "linear_add" not in chosen and ops.linear is not base.linear:     # the folded step's add after our GEMV
        linear = ops.linear

        def linear_add(x, weight, residual):
            return residual + linear(x, weight)
        ops = replace(ops, linear_add=linear_add)
    return ops


def _one_row_or_both(fused: Callable, linear: Callable, swiglu: Callable) -> Callable:
    """The fused gate/up + SwiGLU kernel for one row of x (a decode step at batch 1, where it was checked and
    timed), the run's own linear then swiglu for more (a prompt). With ``pdl`` where the kernel takes it, so that
    hello-gpu-pdl asks it too."""
    import inspect

    def both(x, weight):
        return swiglu(linear(x, weight))
    if "pdl" not in inspect.signature(fused).parameters:
        return lambda x, weight: fused(x, weight) if x.numel() == x.shape[-1] else both(x, weight)

    def gate_up_swiglu(x, weight, pdl: bool = False):
        return fused(x, weight, pdl=pdl) if x.numel() == x.shape[-1] else both(x, weight)
    return gate_up_swiglu


def _one_token_or_linear_then_rope(fused: Callable, linear: Callable, rope_cache_write: Callable | None,
                                   rope: Callable, cache_write: Callable) -> Callable:
    """The fused qkv + RoPE + cache write kernel for one token of one row (a decode step at batch 1, where it was
    checked and timed), the run's own linear and RoPE + cache write for more (a prompt, a batch), ``pdl`` passed on
    where asked."""
    from .llama import split_heads

    def qkv_rope_cache_write(x, weight, cos, sin, keys, values, positions, pdl: bool = False):
        if x.shape[0] == 1 and x.shape[1] == 1:
            arguments = (x, weight, cos, sin, keys, values, positions)
            return fused(*arguments, pdl=pdl) if pdl else fused(*arguments)
        q, k, v = split_heads(linear(x, weight), keys.shape[1], keys.shape[3])
        if rope_cache_write is not None:
            return rope_cache_write(q, k, v, cos, sin, keys, values, positions)
        q, k = rope(q, k, cos, sin)
        return (q, *cache_write(keys, values, positions, k, v))
    return qkv_rope_cache_write


def _one_row_or_linear_then_add_norm(fused: Callable, linear: Callable, add_rms_norm: Callable) -> Callable:
    """The fused projection + add + RMSNorm kernel for one row of x (a decode step at batch 1, where it was checked
    and timed), the run's own linear then add_rms_norm for more (a prompt), with ``pdl`` passed on where asked."""
    def linear_add_rms_norm(x, weight, residual, norm_weight, eps, pdl: bool = False):
        if x.numel() == x.shape[-1]:
            return fused(x, weight, residual, norm_weight, eps, pdl=pdl) if pdl else \
                fused(x, weight, residual, norm_weight, eps)
        return add_rms_norm(residual, linear(x, weight), norm_weight, eps)
    return linear_add_rms_norm


# ------------------------------------------------------------------------------------------ runners


@dataclass
class Runner:
    """One backend ready to run: ``prefill(tokens (B, T), positions (T,))`` -> last logits ``(B, 1, V)``,
    ``decode(tokens (B, 1), positions (1,))`` -> logits ``(B, 1, V)``."""

    backend: str
    model: Llama
    cache: KVCache
    ops: ModelOps
    prefill: Callable
    decode: Callable
    choices: list[Choice] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def used(self) -> list[str]:
        return [c.name for c in self.choices if c.used]


def make_runner(model: Llama, backend: str, *, batch: int, max_seq: int, force=(), timer=None,
                replacements: dict[str, Replacement] | None = None, prompt: int | None = None,
                choices: list[Choice] | None = None) -> Runner:
    """A runner of ``backend`` with its own cache of ``batch`` x ``max_seq``. Make it before its first
    prefill: the hello-gpu backend's CUDA-graph capture runs the decode step (writing position 0).
    ``replacements``: the hello-gpu backend's registry (default :data:`REPLACEMENTS`; ``{}``: no kernel,
    the decode step's CUDA graph alone). ``prompt``: the prompt length the runner will be given, where the
    hello-gpu backend checks and times the attention kernels (default: 2/3 of ``max_seq``). ``choices``: a
    hello-gpu backend's decisions made already in this run (:func:`choose_replacements`), taken as they are."""
    if backend not in BACKENDS:
        raise ValueError(f"no backend {backend!r}; known: {', '.join(BACKENDS)}")
    if choices is not None and not backend.startswith("hello-gpu"):
        raise ValueError(f"choices are the hello-gpu backends' decisions; {backend} swaps no kernel in")
    cache = model.new_cache(batch, max_seq)
    on_gpu = model.device.type == "cuda"

    def prefill_step(tokens, positions):
        return model(tokens, positions, cache, ops=ops, last_only=True)

    def decode_step(tokens, positions):
        return model(tokens, positions, cache, ops=ops)

    ops, notes = EAGER_OPS, []
    if not backend.startswith("hello-gpu"):
        choices = []                                # only the hello-gpu backends swap kernels in
    prefill, decode = torch.no_grad()(prefill_step), torch.no_grad()(decode_step)
    if backend.startswith("compile"):
        mode = "reduce-overhead" if backend == "compile-reduce-overhead" else None
        prefill = torch.no_grad()(torch.compile(prefill_step, fullgraph=True))
        compiled = torch.no_grad()(torch.compile(decode_step, fullgraph=True, mode=mode))
        if mode and on_gpu:
            def decode(tokens, positions):
                torch.compiler.cudagraph_mark_step_begin()      # the last step's outputs may be overwritten
                return compiled(tokens, positions)
        else:
            decode = compiled
        if mode and not on_gpu:
            notes.append("reduce-overhead replays CUDA graphs: on the CPU it is the default mode")
    elif backend.startswith("hello-gpu"):
        if choices is None:
            choices = choose_replacements(model.config, batch=batch, device=model.device, dtype=model.dtype,
                                          force=force, timer=timer, replacements=replacements, model=model,
                                          max_seq=max_seq, prompt=prompt)
        else:
            notes.append("kernel choices taken from an earlier backend of this run")
        from .norm_fold import decide_folds, folds_used, without_folds
        if backend == "hello-gpu-unfolded":
            choices = without_folds(choices)
            notes.append("the norm folds left out: each layer half ends with its norm, as before them")
        elif batch == 1 and folds_used(choices) and (on_gpu or timer is not None):
            # Only a batch-1 step folds (Llama.forward); the position a first decode step after the prompt writes.
            # (hello-gpu-pdl: the two steps are timed without its dependent launches.)
            position = min(max_seq - 1, prompt if prompt is not None else 2 * max_seq // 3)
            choices, note = decide_folds(choices, lambda chosen: _one_step(
                model, cache, ops_with(chosen, replacements=replacements), position), timer)
            notes.append(note)
        ops = ops_with(choices, replacements=replacements)
        if backend == "hello-gpu-pdl":
            from .dependent_launch import with_dependent_launches
            ops, note = with_dependent_launches(ops, model.device)
            notes.append(note)
        if on_gpu:
            decode = captured_decode(decode, batch, model.device)
            prefill = captured_prefill(prefill, model.device)
            notes.append("decode step captured in a CUDA graph")
            notes.append("prefill captured in a CUDA graph per prompt shape, at its first prefill")
        else:
            notes.append("no CUDA graph on the CPU: the decode step and the prefill run eagerly")
    return Runner(backend, model, cache, ops, prefill, decode, choices, notes)


def _one_step(model: Llama, cache: KVCache, ops: ModelOps, position: int) -> Callable[[], torch.Tensor]:
    """One decode step of ``ops`` on one token at ``position`` as a call without arguments: a CUDA-graph replay on a
    GPU, as the hello-gpu backends run a step. It writes the cache at ``position``, which the prefill (a position
    inside the prompt) or the decode step at that position writes again before any step reads it."""
    step = torch.no_grad()(lambda tokens, positions: model(tokens, positions, cache, ops=ops))
    if model.device.type == "cuda":
        step = captured_decode(step, 1, model.device)
    tokens = torch.ones((1, 1), dtype=torch.long, device=model.device)
    positions = torch.full((1,), position, dtype=torch.long, device=model.device)
    return lambda: step(tokens, positions)


# region cuda-graph
def captured_call(call: Callable, device=None, warmups: int = 3) -> tuple:
    """``(graph, result)``: ``call()`` captured once in a CUDA graph, after ``warmups`` runs on a side stream
    (Triton compiles, first launches, plans, none of which may happen during a capture). ``graph.replay()``
    runs it again, writing the same result tensors."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmups):
            call()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = call()
    return graph, result


def _captured(step: Callable, tokens: torch.Tensor, positions: torch.Tensor, device) -> tuple:
    """``(graph, logits)``: ``step(tokens, positions)`` captured once in a CUDA graph on these input tensors."""
    return captured_call(lambda: step(tokens, positions), device)


def captured_decode(step: Callable, batch: int, device) -> Callable:
    """``step`` captured once in a CUDA graph; each call copies its inputs into the captured ones and
    replays."""
    tokens = torch.zeros((batch, 1), dtype=torch.long, device=device)
    positions = torch.zeros(1, dtype=torch.long, device=device)
    captured = (tokens, positions, *_captured(step, tokens, positions, device))

    def replay(new_tokens, new_positions):
        return _replayed(captured, new_tokens, new_positions)
    replay.graph = captured[2]
    return replay


def _replayed(captured: tuple, new_tokens: torch.Tensor, new_positions: torch.Tensor) -> torch.Tensor:
    """The captured graph's logits for these inputs: copied into the captured input tensors, then replayed."""
    tokens, positions, graph, logits = captured
    tokens.copy_(new_tokens)
    positions.copy_(new_positions)
    graph.replay()
    return logits


PREFILL_GRAPHS = 4      # prompt shapes whose graphs are kept (each holds its activations: ~0.5 GB at 8B, 2048 tokens)


def captured_prefill(step: Callable, device, keep: int = PREFILL_GRAPHS) -> Callable:
    """``step`` captured in a CUDA graph per prompt shape (batch, length), on the first prefill of that
    shape, and replayed for later ones: what reduce-overhead does for each new shape.

    Why: a prefill is ~10 launches a layer that the host issues one by one. At the 1B's 512-token prompt
    the GPU work is ~3 ms (reduce-overhead's prefill, H100, session 18) and eager's host took 12-13 ms;
    ours, each Triton launch with its checks, 15.8-18.2 ms (records/nvidia-h100-80gb-hbm3/models/
    run.1b.b1.p512.n256, 9 prefills). The first prefill of a shape pays three warm-up runs and the
    capture; the ``keep`` most recently used shapes are kept."""
    graphs: OrderedDict = OrderedDict()

    def replay(new_tokens, new_positions):
        key = (tuple(new_tokens.shape), tuple(new_positions.shape), new_tokens.dtype, new_positions.dtype)
        entry = graphs.pop(key, None)
        if entry is None:
            tokens = new_tokens.to(device=device, copy=True)
            positions = new_positions.to(device=device, copy=True)
            entry = (tokens, positions, *_captured(step, tokens, positions, device))
        graphs[key] = entry                      # the most recently used last
        while len(graphs) > keep:
            graphs.popitem(last=False)
        return _replayed(entry, new_tokens, new_positions)
    replay.graphs = graphs
    return replay
# endregion cuda-graph


@torch.no_grad()
def greedy_tokens(runner: Runner, prompt: torch.Tensor, new_tokens: int, on_step: Callable | None = None,
                  on_logits: Callable | None = None) -> torch.Tensor:
    """``new_tokens`` greedy tokens ``(B, new_tokens)`` after ``prompt``: one prefill, then ``new_tokens - 1``
    decode steps. Tokens stay on the device (no synchronisation per step). ``on_logits(step, logits)``
    sees each step's logits ``(B, V)`` before the next call overwrites them."""
    length = prompt.shape[1]
    if length + new_tokens > runner.cache.max_seq:
        raise ValueError(f"{length} prompt + {new_tokens} new tokens exceed the runner's cache "
                         f"({runner.cache.max_seq} positions)")
    positions = torch.arange(length + new_tokens, device=prompt.device)
    logits = runner.prefill(prompt, positions[:length])[:, -1]
    out = []
    for step in range(new_tokens):
        if on_logits is not None:
            on_logits(step, logits)
        token = runner.ops.sample(logits)[:, None]
        out.append(token)
        if on_step is not None:
            on_step(step)
        if step + 1 < new_tokens:
            logits = runner.decode(token, positions[length + step:length + step + 1])[:, -1]
    return torch.cat(out, dim=1)


# The norm-folding replacements register themselves after every kernel they compose (their module imports this one).
from . import norm_fold  # noqa: E402,F401

__all__ = ["BACKENDS", "REPLACEMENTS", "Choice", "Replacement", "Runner", "check_replacement",
           "choose_replacements", "captured_decode", "captured_prefill", "decode_cases", "greedy_tokens", "make_runner", "ops_with",
           "register_replacement"]
