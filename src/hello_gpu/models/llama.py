"""A compact Llama-architecture decoder in PyTorch: the model the whole-model lessons (issue 23) run.

One file, the architecture of Llama 3 as Hugging Face checkpoints store it:

- token embedding, then ``num_layers`` blocks, then a final RMSNorm and the output head (its own
  matrix, or the embedding's when ``tie_word_embeddings``);
- a block: ``h = x + attention(rms_norm(x))``, ``out = h + mlp(rms_norm(h))``;
- attention: grouped-query (``num_kv_heads`` key/value heads shared by ``num_heads`` query heads),
  rotary position embedding on q and k in the "rotate half" layout of Hugging Face checkpoints (the
  first half of each head's dimensions pairs with the second half), Llama-3 rope scaling where the
  3.1/3.2 configs use it, and a preallocated key/value cache (:class:`KVCache`);
- MLP: SwiGLU, ``down(silu(gate(x)) * up(x))``.

Two choices made for speed, invisible in the results:

- q, k and v are one matrix (``qkv_proj``, rows q then k then v) and gate and up are one
  (``gate_up_proj``): at batch-1 decode each projection is a GEMV, so 5 launches per layer become 2.
  The checkpoint loader (:mod:`.checkpoint`) writes Hugging Face's separate tensors into their rows.
- Shapes do not change from one decode step to the next: attention runs over the whole cache with a
  mask that hides the positions not written yet, and the position is a tensor. So one compiled graph
  (``torch.compile``) or one CUDA graph serves every step. At prompt 512 + 256 new tokens the extra
  cache read is at most 768/513 of the filled part: 0.1 GB of KV against 15 GB of weights for the 8B.

Every operation the backends may replace goes through a :class:`ModelOps` (``EAGER_OPS`` by default;
attention is two operations there, ``attention`` for one query token a row and ``prefill_attention`` for a
prompt, the same eager function):
the hello-gpu backend (:mod:`.backends`) swaps functions in it, and the profiler labels each with its
category (:func:`labelled_ops`).

Arithmetic: RMSNorm and RoPE compute in float32 (float64 for a float64 model) and round once at the
end, as the Hugging Face implementation does for the norm; matmuls and attention run in the model's
dtype (PyTorch accumulates bf16 GEMMs in float32).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn


# ------------------------------------------------------------------------------------------ configs


@dataclass(frozen=True)
class RopeScaling:
    """Llama-3 rope scaling ("rope_type": "llama3" in config.json): wavelengths longer than
    ``original_max_position / low_freq_factor`` are stretched by ``factor``, shorter than
    ``original_max_position / high_freq_factor`` kept, and those between blended smoothly."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position: int


@dataclass(frozen=True)
class LlamaConfig:
    name: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float = 500_000.0
    rms_norm_eps: float = 1e-5
    max_position: int = 8192
    tie_word_embeddings: bool = False
    rope_scaling: RopeScaling | None = None

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
                     "head_dim", "max_position"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"LlamaConfig {self.name!r}: {name} must be a positive integer, got {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"LlamaConfig {self.name!r}: num_heads ({self.num_heads}) must be a multiple of "
                             f"num_kv_heads ({self.num_kv_heads}): each key/value head serves a whole group")
        if self.head_dim % 2:
            raise ValueError(f"LlamaConfig {self.name!r}: head_dim ({self.head_dim}) must be even: RoPE rotates "
                             f"pairs of dimensions")
        if not (self.rope_theta > 0 and self.rms_norm_eps >= 0):
            raise ValueError(f"LlamaConfig {self.name!r}: rope_theta must be > 0 and rms_norm_eps >= 0")

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def parameter_count(self) -> int:
        """Every weight, counted once (a tied head adds nothing)."""
        d, layer = self.hidden_size, (self.q_size + 2 * self.kv_size) * self.hidden_size
        layer += self.q_size * d + 3 * self.intermediate_size * d + 2 * d
        head = 0 if self.tie_word_embeddings else self.vocab_size * d
        return self.vocab_size * d + self.num_layers * layer + d + head

    def to_dict(self) -> dict:
        data = {field.name: getattr(self, field.name) for field in fields(self)}
        data["rope_scaling"] = None if self.rope_scaling is None else vars(self.rope_scaling).copy()
        return data


LLAMA3_ROPE_SCALING = RopeScaling(factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position=8192)

CONFIGS: dict[str, LlamaConfig] = {
    # Llama-3.2-1B's sizes (1.24e9 parameters, 2.47 GB in bf16): tied head, 131072 positions by rope scaling.
    "1b": LlamaConfig("1b", vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_layers=16, num_heads=32,
                      num_kv_heads=8, head_dim=64, max_position=131072, tie_word_embeddings=True,
                      rope_scaling=LLAMA3_ROPE_SCALING),
    # Llama-3-8B's sizes (8.03e9 parameters, 16.1 GB in bf16): its own head, 8192 positions, no rope scaling.
    "8b": LlamaConfig("8b", vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_layers=32, num_heads=32,
                      num_kv_heads=8, head_dim=128, max_position=8192),
    # For tests: every feature on (grouped heads, rope scaling that changes some frequencies and not others,
    # an untied head), sizes that are multiples of nothing in particular, 0.1 M parameters.
    "tiny": LlamaConfig("tiny", vocab_size=389, hidden_size=48, intermediate_size=136, num_layers=2, num_heads=6,
                        num_kv_heads=2, head_dim=8, rope_theta=10_000.0, rms_norm_eps=1e-5, max_position=256,
                        rope_scaling=RopeScaling(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                                 original_max_position=160)),
}


def config_named(name: str) -> LlamaConfig:
    try:
        return CONFIGS[name]
    except KeyError:
        raise ValueError(f"no model configuration {name!r}; known: {', '.join(CONFIGS)}") from None


# ------------------------------------------------------------------------------------------ RoPE


def rope_frequencies(config: LlamaConfig) -> torch.Tensor:
    """Inverse frequencies of the ``head_dim / 2`` rotation pairs, float64, Llama-3 scaling applied."""
    exponents = torch.arange(0, config.head_dim, 2, dtype=torch.float64) / config.head_dim
    inverse = 1.0 / config.rope_theta ** exponents
    scaling = config.rope_scaling
    if scaling is None:
        return inverse
    wavelength = 2 * math.pi / inverse
    long_limit = scaling.original_max_position / scaling.low_freq_factor      # longer: stretched by factor
    short_limit = scaling.original_max_position / scaling.high_freq_factor    # shorter: kept
    smooth = ((scaling.original_max_position / wavelength - scaling.low_freq_factor)
              / (scaling.high_freq_factor - scaling.low_freq_factor))
    blended = (1 - smooth) * inverse / scaling.factor + smooth * inverse
    return torch.where(wavelength < short_limit, inverse,
                       torch.where(wavelength > long_limit, inverse / scaling.factor, blended))


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Norms and rotations compute in float32, or float64 for a float64 model."""
    return torch.float64 if dtype == torch.float64 else torch.float32


# ------------------------------------------------------------------------------------------ the cache


class KVCache:
    """Keys and values of every layer, ``(batch, num_kv_heads, max_seq, head_dim)`` each, allocated once,
    plus the rotation tables for positions ``0 .. max_seq - 1``. One per generation: two runs that
    must not see each other's keys (a reference and a candidate, decoding side by side) use two.

    The tensors keep their addresses for the cache's life and are marked static for ``torch.compile``,
    so a ``mode="reduce-overhead"`` graph can write them in place."""

    def __init__(self, config: LlamaConfig, batch: int, max_seq: int, *, device, dtype: torch.dtype):
        if batch < 1 or max_seq < 1:
            raise ValueError(f"KVCache: batch and max_seq must be at least 1, got {batch} and {max_seq}")
        if max_seq > config.max_position:
            raise ValueError(f"KVCache: {max_seq} positions exceed the model's max_position ({config.max_position})")
        self.batch, self.max_seq, self.dtype = batch, max_seq, dtype
        shape = (batch, config.num_kv_heads, max_seq, config.head_dim)
        # Zeros, not torch.empty: a masked key gets weight 0, but 0 * NaN is NaN, so uninitialised
        # memory holding a NaN pattern in a value row not written yet would poison every output.
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.num_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.num_layers)]
        angles = torch.outer(torch.arange(max_seq, dtype=torch.float64), rope_frequencies(config))
        table = compute_dtype(dtype)
        self.cos = torch.cos(angles).to(device=device, dtype=table)
        self.sin = torch.sin(angles).to(device=device, dtype=table)
        self.key_positions = torch.arange(max_seq, device=device)
        for tensor in (*self.keys, *self.values, self.cos, self.sin, self.key_positions):
            torch._dynamo.mark_static_address(tensor)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


# ------------------------------------------------------------------------------------------ operations


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dimension, computed in float32, rounded once."""
    wide = x.to(compute_dtype(x.dtype))
    return (wide * torch.rsqrt(wide.square().mean(-1, keepdim=True) + eps) * weight.to(wide.dtype)).to(x.dtype)


def add_rms_norm(residual: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float):
    """The residual add and the next RMSNorm: ``(residual + delta, rms_norm(residual + delta))``."""
    total = residual + delta
    return total, rms_norm(total, weight, eps)


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Rotate q ``(B, H, T, D)`` and k ``(B, K, T, D)`` by the angles of their positions (``cos``/``sin``:
    ``(T, D/2)``): pair ``i`` is dimensions ``i`` and ``i + D/2`` (Hugging Face's "rotate half")."""
    def rotate(x):
        first, second = x.to(cos.dtype).chunk(2, dim=-1)
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1).to(x.dtype)
    return rotate(q), rotate(k)


def cache_write(keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Write ``k``, ``v`` ``(B, K, T, D)`` at ``positions`` of the cache tensors; returns the whole cache."""
    keys.index_copy_(2, positions, k)
    values.index_copy_(2, positions, v)
    return keys, values


def rope_cache_write(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor):
    """:func:`rope` then :func:`cache_write`: ``(q rotated, keys, values)``. The model calls the two itself
    unless a backend gives ``ModelOps.rope_cache_write`` one kernel doing both; this is what such a kernel
    is checked against."""
    q, k = rope(q, k, cos, sin)
    return (q, *cache_write(keys, values, positions, k, v))


def attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Grouped-query attention of q ``(B, H, T, D)`` over the cache ``(B, K, S, D)``; ``mask`` ``(T, S)``
    is True where a query may see a key. Query head ``h`` uses key/value head ``h // (H / K)``."""
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)


def swiglu(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def gate_up_swiglu(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The MLP's first half, :func:`swiglu` of the fused gate/up projection. The model calls ``linear`` then
    ``swiglu`` itself unless a backend gives ``ModelOps.gate_up_swiglu`` one kernel doing both; this is what such a
    kernel is checked against."""
    return swiglu(F.linear(x, weight))


def qkv_rope_cache_write(x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor):
    """The start of the attention: the fused [q | k | v] projection of x ``(B, T, hidden)``, RoPE on q and k and
    the cache write of k and v (the caches ``(B, K, S, D)`` give the heads' count and size); ``(q rotated
    (B, H, T, D), keys, values)``. The model calls ``linear`` then ``rope_cache_write`` (or ``rope`` then
    ``cache_write``) itself unless a backend gives ``ModelOps.qkv_rope_cache_write`` one kernel doing all of it;
    this is what such a kernel is checked against."""
    q, k, v = split_heads(F.linear(x, weight), keys.shape[1], keys.shape[3])
    return rope_cache_write(q, k, v, cos, sin, keys, values, positions)


def split_heads(qkv: torch.Tensor, kv_heads: int, head_dim: int):
    """q ``(B, H, T, D)``, k and v ``(B, K, T, D)`` as views of the fused projection's output ``(B, T, N)``."""
    batch, length, n = qkv.shape
    kv_size = kv_heads * head_dim
    q, k, v = qkv.split([n - 2 * kv_size, kv_size, kv_size], dim=-1)
    return tuple(t.view(batch, length, -1, head_dim).transpose(1, 2) for t in (q, k, v))


def linear_add_rms_norm(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor,
                        eps: float):
    """The end of each half of a layer: its output projection, the residual add and the next RMSNorm,
    ``add_rms_norm(residual, F.linear(x, weight), norm_weight, eps)``. The model calls ``linear`` then
    ``add_rms_norm`` itself unless a backend gives ``ModelOps.linear_add_rms_norm`` one kernel doing all three;
    this is what such a kernel is checked against."""
    return add_rms_norm(residual, F.linear(x, weight), norm_weight, eps)


def linear_add(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """``residual + F.linear(x, weight)``: the end of a half layer where the projection after it normalises the
    new residual itself (``norm_qkv_rope_cache_write``, ``norm_gate_up_swiglu``), so no norm is computed here."""
    return residual + F.linear(x, weight)


def norm_qkv_rope_cache_write(residual: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
                              cos: torch.Tensor, sin: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                              positions: torch.Tensor):
    """:func:`qkv_rope_cache_write` of ``rms_norm(residual, norm_weight, eps)``: what a kernel that normalises its
    input itself is checked against."""
    return qkv_rope_cache_write(rms_norm(residual, norm_weight, eps), weight, cos, sin, keys, values, positions)


def norm_gate_up_swiglu(residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                        weight: torch.Tensor) -> torch.Tensor:
    """:func:`gate_up_swiglu` of ``rms_norm(residual, norm_weight, eps)``: what a kernel that normalises its input
    itself is checked against."""
    return gate_up_swiglu(rms_norm(residual, norm_weight, eps), weight)


def greedy(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(dim=-1)


@dataclass(frozen=True)
class ModelOps:
    """The operations of a forward pass a backend may replace (same signatures as the eager ones above)."""

    embed: Callable = F.embedding
    rms_norm: Callable = rms_norm
    add_rms_norm: Callable = add_rms_norm
    linear: Callable = F.linear
    rope: Callable = rope
    cache_write: Callable = cache_write
    # One kernel for RoPE and the cache write together (hello-gpu); None: ``rope`` then ``cache_write``
    rope_cache_write: Callable | None = None
    attention: Callable = attention             # one query token a row (decode)
    prefill_attention: Callable = attention     # several (a prompt): the same function, replaced on its own
    swiglu: Callable = swiglu
    # One kernel for the gate/up projection and SwiGLU together (hello-gpu); None: ``linear`` then ``swiglu``
    gate_up_swiglu: Callable | None = None
    # One kernel for the qkv projection, RoPE and the cache write (hello-gpu); None: ``linear`` then the above
    qkv_rope_cache_write: Callable | None = None
    # One kernel for an output projection (o_proj, down_proj), the residual add and the next RMSNorm (hello-gpu);
    # None: ``linear`` then ``add_rms_norm``
    linear_add_rms_norm: Callable | None = None
    # The RMSNorm folded into the projection after it (hello-gpu, one token of one row): where a backend gives
    # these, a half layer ends with ``linear_add`` (no norm) and the next projection's kernel normalises the
    # residual itself as it reads it. None: the norm is its own step (``add_rms_norm`` or ``linear_add_rms_norm``)
    norm_qkv_rope_cache_write: Callable | None = None
    norm_gate_up_swiglu: Callable | None = None
    linear_add: Callable = linear_add
    sample: Callable = greedy


EAGER_OPS = ModelOps()

# The profile's category of each operation (hello_gpu.models.profile); "GEMM/GEMV" is every projection.
OP_CATEGORIES = {"embed": "other", "rms_norm": "norm", "add_rms_norm": "norm", "linear": "GEMM/GEMV",
                 "rope": "elementwise", "cache_write": "elementwise", "rope_cache_write": "elementwise",
                 "attention": "attention", "prefill_attention": "attention", "swiglu": "elementwise",
                 "gate_up_swiglu": "GEMM/GEMV", "linear_add_rms_norm": "GEMM/GEMV", "qkv_rope_cache_write": "GEMM/GEMV",
                 "norm_qkv_rope_cache_write": "GEMM/GEMV", "norm_gate_up_swiglu": "GEMM/GEMV", "linear_add": "GEMM/GEMV",
                 "sample": "sampling"}
LABEL_PREFIX = "hello_gpu.model/"


def labelled_ops(ops: ModelOps = EAGER_OPS) -> ModelOps:
    """``ops`` with each call inside a ``record_function("hello_gpu.model/<category>/<op>")`` range, so a
    profile can assign every kernel and every CPU op to its category. Only for profiling: a range costs
    ~1-2 us of host time, ~200 ranges a decode step of the 1B."""
    def wrap(name: str, function: Callable) -> Callable:
        label = f"{LABEL_PREFIX}{OP_CATEGORIES[name]}/{name}"

        def labelled(*args, **kwargs):
            with torch.profiler.record_function(label):
                return function(*args, **kwargs)
        return labelled
    return replace(ops, **{field.name: wrap(field.name, getattr(ops, field.name)) for field in fields(ops)
                           if getattr(ops, field.name) is not None})


# ------------------------------------------------------------------------------------------ modules


class Weight(nn.Module):
    """A module holding one weight tensor as ``.weight`` (names match the checkpoint's ``...weight``)."""

    def __init__(self, *shape: int, dtype: torch.dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(shape, dtype=dtype), requires_grad=False)


class Attention(nn.Module):
    def __init__(self, config: LlamaConfig, dtype: torch.dtype):
        super().__init__()
        self.config = config
        self.qkv_proj = Weight(config.q_size + 2 * config.kv_size, config.hidden_size, dtype=dtype)
        self.o_proj = Weight(config.hidden_size, config.q_size, dtype=dtype)

    def forward(self, x, keys, values, positions, cos, sin, mask, ops: ModelOps):
        return ops.linear(self.attend(x, keys, values, positions, cos, sin, mask, ops), self.o_proj.weight)

    def attend(self, x, keys, values, positions, cos, sin, mask, ops: ModelOps, norm: tuple | None = None):
        """The attention's output before its projection (o_proj): (B, T, q_size). ``norm``: (weight, eps) where x
        is the residual and ``ops.norm_qkv_rope_cache_write`` normalises it in the same launch."""
        c = self.config
        batch, length, _ = x.shape
        if norm is not None:                          # one launch for the norm, the projection, RoPE and the write
            q, keys, values = ops.norm_qkv_rope_cache_write(x, *norm, self.qkv_proj.weight, cos, sin, keys, values,
                                                            positions)
        elif ops.qkv_rope_cache_write is not None:   # one launch for the projection, RoPE and the cache write
            q, keys, values = ops.qkv_rope_cache_write(x, self.qkv_proj.weight, cos, sin, keys, values, positions)
        else:
            q, k, v = split_heads(ops.linear(x, self.qkv_proj.weight), c.num_kv_heads, c.head_dim)
            if ops.rope_cache_write is not None:     # one launch for both
                q, keys, values = ops.rope_cache_write(q, k, v, cos, sin, keys, values, positions)
            else:
                q, k = ops.rope(q, k, cos, sin)
                keys, values = ops.cache_write(keys, values, positions, k, v)
        # decode and prefill attention are different kernels (one query against the cache, or a tile of them),
        # each swapped in by its own timing; the length is a host integer, the same at every decode step
        attend = ops.attention if length == 1 else ops.prefill_attention
        out = attend(q, keys, values, mask)
        return out.transpose(1, 2).reshape(batch, length, c.q_size)


class MLP(nn.Module):
    def __init__(self, config: LlamaConfig, dtype: torch.dtype):
        super().__init__()
        self.gate_up_proj = Weight(2 * config.intermediate_size, config.hidden_size, dtype=dtype)
        self.down_proj = Weight(config.hidden_size, config.intermediate_size, dtype=dtype)

    def forward(self, x, ops: ModelOps):
        return ops.linear(self.activate(x, ops), self.down_proj.weight)

    def activate(self, x, ops: ModelOps, norm: tuple | None = None):
        """The MLP's activation before its projection (down_proj): (B, T, intermediate_size). ``norm``: (weight,
        eps) where x is the residual and ``ops.norm_gate_up_swiglu`` normalises it in the same launch."""
        if norm is not None:                      # one launch for the norm, the projection and SwiGLU
            return ops.norm_gate_up_swiglu(x, *norm, self.gate_up_proj.weight)
        if ops.gate_up_swiglu is not None:        # one launch for both
            return ops.gate_up_swiglu(x, self.gate_up_proj.weight)
        return ops.swiglu(ops.linear(x, self.gate_up_proj.weight))


class DecoderLayer(nn.Module):
    def __init__(self, config: LlamaConfig, dtype: torch.dtype):
        super().__init__()
        self.input_layernorm = Weight(config.hidden_size, dtype=dtype)
        self.self_attn = Attention(config, dtype)
        self.post_attention_layernorm = Weight(config.hidden_size, dtype=dtype)
        self.mlp = MLP(config, dtype)


def _project_add_norm(ops: ModelOps, x, weight, residual, norm_weight, eps, fold: bool = False):
    """A half layer's end: (new residual, its norm) from the output projection of ``x``, in one kernel where the
    backend has one (``ops.linear_add_rms_norm``), else ``linear`` then ``add_rms_norm``. ``fold``: the next
    projection normalises the residual itself, so (new residual, None) from ``linear_add``."""
    if fold:
        return ops.linear_add(x, weight, residual), None
    if ops.linear_add_rms_norm is not None:
        return ops.linear_add_rms_norm(x, weight, residual, norm_weight, eps)
    return ops.add_rms_norm(residual, ops.linear(x, weight), norm_weight, eps)


class Llama(nn.Module):
    """The decoder. Build one with :func:`build_model` (random weights) or
    :func:`hello_gpu.models.checkpoint.load_checkpoint`; run it with :meth:`forward` and a :class:`KVCache`."""

    def __init__(self, config: LlamaConfig, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.config = config
        self.embed_tokens = Weight(config.vocab_size, config.hidden_size, dtype=dtype)
        self.layers = nn.ModuleList(DecoderLayer(config, dtype) for _ in range(config.num_layers))
        self.norm = Weight(config.hidden_size, dtype=dtype)
        self.lm_head = None if config.tie_word_embeddings else Weight(config.vocab_size, config.hidden_size,
                                                                        dtype=dtype)

    @property
    def dtype(self) -> torch.dtype:
        return self.embed_tokens.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.embed_tokens.weight.device

    @property
    def head_weight(self) -> torch.Tensor:
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def new_cache(self, batch: int, max_seq: int) -> KVCache:
        return KVCache(self.config, batch, max_seq, device=self.device, dtype=self.dtype)

    # region decode-step
    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache, *, ops: ModelOps = EAGER_OPS,
                last_only: bool = False) -> torch.Tensor:
        """Logits ``(B, T, vocab)`` (``(B, 1, vocab)`` with ``last_only``) in the model's dtype for
        ``tokens`` ``(B, T)`` at ``positions`` ``(T,)`` (the same for every row), after writing their keys
        and values into ``cache``. Positions not written yet are masked out; a position written before
        is overwritten. The caller keeps positions within the cache (a tensor is not checked on the
        device: that would synchronize every step)."""
        config = self.config
        cos, sin = cache.cos[positions], cache.sin[positions]
        mask = cache.key_positions[None, :] <= positions[:, None]
        eps = config.rms_norm_eps
        # One token of one row, with a backend whose projections normalise their input themselves: a half layer
        # then ends with the residual add alone, and the next projection's kernel norms the residual as it reads it
        fold_attention = tokens.numel() == 1 and ops.norm_qkv_rope_cache_write is not None
        fold_mlp = tokens.numel() == 1 and ops.norm_gate_up_swiglu is not None
        residual = ops.embed(tokens, self.embed_tokens.weight)
        normed = None if fold_attention else ops.rms_norm(residual, self.layers[0].input_layernorm.weight, eps)
        for index, layer in enumerate(self.layers):
            norm = (layer.input_layernorm.weight, eps) if fold_attention else None
            attended = layer.self_attn.attend(residual if norm else normed, cache.keys[index], cache.values[index],
                                              positions, cos, sin, mask, ops, norm)
            residual, normed = _project_add_norm(ops, attended, layer.self_attn.o_proj.weight, residual,
                                                 layer.post_attention_layernorm.weight, eps, fold_mlp)
            norm = (layer.post_attention_layernorm.weight, eps) if fold_mlp else None
            activated = layer.mlp.activate(residual if norm else normed, ops, norm)
            last = index + 1 == len(self.layers)
            following = self.norm if last else self.layers[index + 1].input_layernorm
            residual, normed = _project_add_norm(ops, activated, layer.mlp.down_proj.weight, residual,
                                                 following.weight, eps, fold_attention and not last)
        if last_only:
            normed = normed[:, -1:]
        return ops.linear(normed, self.head_weight)
    # endregion decode-step


# ------------------------------------------------------------------------------------------ weights

INIT_STD = 0.02               # Hugging Face's initializer_range for Llama


def parse_dtype(dtype) -> torch.dtype:
    """A torch dtype from itself or a name: float32/fp32, bfloat16/bf16, float16/fp16/half, float64/fp64."""
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {"fp32": "float32", "float": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16",
             "fp64": "float64", "double": "float64"}
    name = names.get(str(dtype).lower(), str(dtype).lower().removeprefix("torch."))
    if name not in ("float32", "bfloat16", "float16", "float64"):
        raise ValueError(f"dtype {dtype!r}: the model runs in float32, bfloat16, float16 or float64")
    return getattr(torch, name)


def empty_model(config: LlamaConfig, *, device, dtype) -> Llama:
    """The model's parameters allocated on ``device`` in ``dtype``, never in float32 first (built on the
    meta device, then allocated): the 8B in bf16 takes its 16 GB, not 32 GB on the way. Unfilled."""
    with torch.device("meta"):
        model = Llama(config, dtype=parse_dtype(dtype))
    return model.to_empty(device=device).eval()


def build_model(config: LlamaConfig | str, *, device="cpu", dtype=torch.bfloat16, seed: int = 0) -> Llama:
    """A model with random weights, the same for the same seed, device type and dtype (CPU and CUDA
    generators draw different numbers). Each tensor is drawn in place, in its own dtype: projections
    and embedding ~ N(0, 0.02); norm gains ~ 1 + N(0, 0.1), not exactly 1, so a norm that drops its
    gain changes the logits."""
    config = config_named(config) if isinstance(config, str) else config
    model = empty_model(config, device=device, dtype=dtype)
    generator = torch.Generator(device=model.device).manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():        # registration order: fixed by the class
            if parameter.dim() == 1:
                parameter.normal_(0.0, 0.1, generator=generator).add_(1.0)
            else:
                parameter.normal_(0.0, INIT_STD, generator=generator)
    return model


# ------------------------------------------------------------------------------------------ generation


@torch.no_grad()
def generate(model: Llama, prompt: torch.Tensor, new_tokens: int, *, ops: ModelOps = EAGER_OPS,
             cache: KVCache | None = None) -> torch.Tensor:
    """Greedy decode: the prompt ``(B, T)`` in one prefill, then one token a step; returns the ``new_tokens``
    generated ids ``(B, new_tokens)``. The plain loop the backends (:mod:`.backends`) speed up."""
    batch, length = prompt.shape
    cache = cache or model.new_cache(batch, length + new_tokens)
    positions = torch.arange(length, device=prompt.device)
    token = ops.sample(model(prompt, positions, cache, ops=ops, last_only=True))
    out = [token]
    for step in range(1, new_tokens):
        token = ops.sample(model(token, positions[-1:] + step, cache, ops=ops))
        out.append(token)
    return torch.cat(out, dim=1)
