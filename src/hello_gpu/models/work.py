"""The work of each operation of a Llama step: FLOPs and bytes, counted from the configuration.

``hello-gpu model profile`` measures the time of each labelled operation (:class:`~hello_gpu.models.llama.ModelOps`);
with the work counted here it puts each on the roofline (:func:`operation_roofline`): FLOP/s, bytes/s,
arithmetic intensity, and which roof holds it, as the ladders do for one rung.

What is counted, per step of ``batch`` rows of ``tokens`` tokens each (a decode step: 1 token; a
prefill: the prompt), with a cache of ``cache_length`` positions that attention reads whole (the model
masks the positions not written yet, so every step has the same shapes):

- **linear** (every projection and the output head): ``2 * rows * in * out`` FLOPs; the weight once,
  plus the activations in and out. At decode the weights are nearly all the bytes of the step.
- **attention**: ``4 * B * H * T * S * D`` FLOPs (scores and the weighted sum: two matmuls), as
  ``torch.utils.flop_counter`` counts SDPA; q, the cache's keys and values, the mask and the output.
- **the rest** (embedding, norms, RoPE, cache writes, SwiGLU): the bytes each reads and writes once
  and a few FLOPs per element; they are memory-bound at any size.

These are counted bytes (what an ideal kernel must move), not measured DRAM traffic: an operation
whose inputs sit in L2 can run "above" the memory roof, and the verdict says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .llama import LlamaConfig


@dataclass(frozen=True)
class OperationWork:
    """The work of all calls of one operation in one step."""

    calls: int
    flops: float
    bytes: float

    def __add__(self, other: "OperationWork") -> "OperationWork":
        return OperationWork(self.calls + other.calls, self.flops + other.flops, self.bytes + other.bytes)


def _linear(rows: int, inputs: int, outputs: int, size: int) -> OperationWork:
    return OperationWork(1, 2.0 * rows * inputs * outputs, float(size) * (inputs * outputs + rows * (inputs + outputs)))


# The backends' fused operations (hello_gpu.models.backends): each takes over the work of the operations it
# runs in one launch; those that run, as a profile's operations name them, are ``step_work``'s ``fused``.
FUSED_OPERATIONS = ("rope_cache_write", "gate_up_swiglu", "qkv_rope_cache_write", "linear_add_rms_norm",
                    "norm_qkv_rope_cache_write", "norm_gate_up_swiglu", "linear_add")
# The RMSNorm folded into the projection after it: the model folds only one token of one row (Llama.forward)
NORM_FOLDS = ("norm_qkv_rope_cache_write", "norm_gate_up_swiglu")


def step_work(config: LlamaConfig, dtype: torch.dtype, *, batch: int, tokens: int, cache_length: int,
              last_only: bool = False, fused=()) -> dict[str, OperationWork]:
    """``{operation: work}`` of one forward step (the names of :class:`~hello_gpu.models.llama.ModelOps`).

    ``fused``: the names of :data:`FUSED_OPERATIONS` the step ran (others are ignored, so a profile's operation
    names may be passed whole). Each takes over the work of what it replaces, which leaves those entries:
    ``rope_cache_write`` RoPE and the cache write; ``gate_up_swiglu`` the gate/up projection and SwiGLU;
    ``qkv_rope_cache_write`` the qkv projection, RoPE and the cache write; ``linear_add_rms_norm`` o_proj, down_proj
    and the add_rms_norm after each. With one row (a decode step at batch 1: one kernel) the intermediate round
    trips are not counted; with more, the backend runs the pieces inside the fused operation's call, so it is
    their work summed. The norm folds (:data:`NORM_FOLDS`, one token of one row only, as the model runs them):
    ``norm_qkv_rope_cache_write`` / ``norm_gate_up_swiglu`` also take the norm before their projection (its
    squares and scale, its weight), and each layer half before them ends with ``linear_add`` (the projection and
    the add; the delta and the normed values are never written). Without ``fused``: eager's operations."""
    if min(batch, tokens, cache_length) < 1:
        raise ValueError(f"step_work: batch, tokens and cache_length must be at least 1, got {batch}, {tokens}, "
                         f"{cache_length}")
    if tokens > cache_length:
        raise ValueError(f"step_work: {tokens} tokens do not fit in a cache of {cache_length} positions")
    if isinstance(fused, str):             # set("gate_up_swiglu") would be its letters, silently nothing fused
        raise TypeError(f"step_work: fused is a collection of operation names, not the string {fused!r}")
    fused = set(fused) & set(FUSED_OPERATIONS)
    c, e = config, torch.tensor([], dtype=dtype).element_size()
    layers, rows, h = c.num_layers, batch * tokens, c.hidden_size
    one_kernel = rows == 1
    fold_attention = one_kernel and "norm_qkv_rope_cache_write" in fused
    fold_mlp = one_kernel and "norm_gate_up_swiglu" in fused
    table = 8 if dtype == torch.float64 else 4                  # the rotation tables: float32 (float64 model: float64)
    gate_up = _linear(rows, h, 2 * c.intermediate_size, e)
    qkv, o_proj, down = _linear(rows, h, c.q_size + 2 * c.kv_size, e), _linear(rows, c.q_size, h, e), \
        _linear(rows, c.intermediate_size, h, e)
    rotated = rows * (c.q_size + c.kv_size)
    swiglu = OperationWork(1, 4.0 * rows * c.intermediate_size, 3.0 * rows * c.intermediate_size * e)
    rope = OperationWork(1, 3.0 * rotated, 2.0 * rotated * e + 2 * tokens * c.head_dim // 2 * table)
    cache_write = OperationWork(1, 0.0, 4.0 * batch * c.num_kv_heads * tokens * c.head_dim * e)
    # both in one kernel: the rotated k goes to the cache without a round trip through memory
    rope_cache_write = OperationWork(1, 3.0 * rotated, 2.0 * (rotated + rows * c.kv_size) * e
                                     + 2 * tokens * c.head_dim // 2 * table)
    norm = OperationWork(1, 4.0 * rows * h, (2.0 * rows * h + h) * e)
    add_rms_norm = OperationWork(1, 5.0 * rows * h, (4.0 * rows * h + h) * e)
    # A folded norm inside its projection: its FLOPs and its weight; it reads the residual in place of the normed x
    folded_norm = OperationWork(0, norm.flops, h * e)
    keys_and_values = 2.0 * batch * c.num_kv_heads * cache_length * c.head_dim * e
    attention = OperationWork(
        1, 4.0 * batch * c.num_heads * tokens * cache_length * c.head_dim,
        2.0 * rows * c.q_size * e + keys_and_values + tokens * cache_length)        # q and out, K and V, the bool mask
    works: dict[str, OperationWork] = {}

    def add(name: str, work: OperationWork, saved: float = 0.0) -> None:
        """One call (one launch: fused pieces' sums count once) of ``work`` to ``name``'s entry, less the bytes a
        fused kernel does not move (one row only)."""
        work = OperationWork(1, work.flops, work.bytes - (saved if one_kernel else 0.0))
        works[name] = works.get(name, OperationWork(0, 0.0, 0.0)) + work

    def half_layer_end(projection: OperationWork, fold: bool) -> None:
        """A layer half's output projection and the residual add, with the next norm unless the next projection
        folds it in."""
        if fold:          # the delta is not written and read back; the add's FLOPs, the residual read
            add("linear_add", projection + OperationWork(0, float(rows * h), rows * h * e))
        elif "linear_add_rms_norm" in fused:      # one kernel a call: the delta is not written and read back
            add("linear_add_rms_norm", projection + add_rms_norm, saved=2.0 * rows * h * e)
        else:
            add("linear", projection)
            add("add_rms_norm", add_rms_norm)

    add("embed", OperationWork(1, 0.0, 2.0 * rows * h * e))
    if not fold_attention:
        add("rms_norm", norm)
    for index in range(layers):
        if fold_attention:       # one kernel: q, k, v are not written and read back, nor the normed x
            add("norm_qkv_rope_cache_write", qkv + rope_cache_write + folded_norm,
                saved=2.0 * rows * (c.q_size + 2 * c.kv_size) * e)
        elif "qkv_rope_cache_write" in fused:     # one kernel: q, k, v are not written and read back before RoPE
            add("qkv_rope_cache_write", qkv + rope_cache_write, saved=2.0 * rows * (c.q_size + 2 * c.kv_size) * e)
        else:
            add("linear", qkv)
            if "rope_cache_write" in fused:
                add("rope_cache_write", rope_cache_write)
            else:
                add("rope", rope)
                add("cache_write", cache_write)
        # the model's own labels: one query token a row is "attention", a prompt "prefill_attention"
        add("attention" if tokens == 1 else "prefill_attention", attention)
        half_layer_end(o_proj, fold_mlp)
        if fold_mlp:             # one kernel: the 2I projection outputs are neither written nor read back
            add("norm_gate_up_swiglu", gate_up + swiglu + folded_norm, saved=2.0 * rows * 2 * c.intermediate_size * e)
        elif "gate_up_swiglu" in fused:
            add("gate_up_swiglu", gate_up + swiglu, saved=2.0 * rows * 2 * c.intermediate_size * e)
        else:
            add("linear", gate_up)
            add("swiglu", swiglu)
        half_layer_end(down, fold_attention and index + 1 < layers)
    add("linear", _linear(batch if last_only else rows, h, c.vocab_size, e))
    return works


def _times(count: int, work: OperationWork) -> OperationWork:
    """``count`` calls of ``work``'s one call."""
    return OperationWork(count * work.calls, count * work.flops, count * work.bytes)


def operation_roofline(seconds_per_step: dict[str, float], work: dict[str, OperationWork], roofs,
                       dtype: str) -> list[dict]:
    """One row per operation that has both a time and a work model: achieved FLOP/s and bytes/s, the
    intensity, and the roofline verdict (:func:`hello_gpu.profile.classify`) when ``roofs`` are known
    (None on the CPU: the row says so). Sorted by time, largest first."""
    from ..profile import RooflinePoint, classify
    rows = []
    for name, seconds in sorted(seconds_per_step.items(), key=lambda item: -item[1]):
        counted = work.get(name)
        if counted is None or seconds <= 0:
            continue
        row = {"operation": name, "seconds_per_step": seconds, "calls_per_step": counted.calls,
               "flops": counted.flops, "bytes": counted.bytes, "flop_per_s": counted.flops / seconds,
               "bytes_per_s": counted.bytes / seconds,
               "intensity": counted.flops / counted.bytes if counted.bytes else None}
        if roofs is None:
            row.update(bound=None, fraction_of_roof=None, verdict="no roofs here (a GPU's ceilings and datasheet)")
        else:
            point = RooflinePoint(name, "step", dtype, None, "operation", seconds, counted.bytes, counted.flops)
            verdict = classify(point, roofs)
            row.update(bound=verdict.bound, fraction_of_roof=verdict.fraction, verdict=verdict.reason)
        rows.append(row)
    return rows
