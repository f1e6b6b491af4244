"""The counted work of a Llama step (hello_gpu.models.work) against independent counts, and the
roofline per operation in `hello-gpu model profile`."""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from hello_gpu.cli import main
from hello_gpu.models import build_model
from hello_gpu.models.llama import CONFIGS
from hello_gpu.models.profile import profile_llama
from hello_gpu.models.work import FUSED_OPERATIONS, OperationWork, operation_roofline, step_work
from hello_gpu.profile import Roofs


def _explicit_attention(q, keys, values, mask):
    """The attention the model computes, written as plain matmuls (torch's FLOP counter does not count
    the CPU's fused SDPA kernel): heads of K and V repeated for the query heads, masked softmax."""
    repeat = q.shape[1] // keys.shape[1]
    keys, values = keys.repeat_interleave(repeat, dim=1), values.repeat_interleave(repeat, dim=1)
    scores = (q @ keys.transpose(-1, -2)) / q.shape[-1] ** 0.5
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ values


@pytest.mark.parametrize("batch, tokens, cache_length, last_only", [(1, 1, 13, False), (3, 1, 40, False),
                                                                     (2, 9, 9, True), (1, 5, 17, False)])
def test_the_matmul_flops_are_what_torch_counts(batch, tokens, cache_length, last_only):
    """torch's own FLOP counter on a real forward step of the tiny model (attention written as the plain
    matmuls it is, on the shapes the model hands it): the counted work must give the same FLOPs."""
    from dataclasses import replace

    from hello_gpu.models.llama import EAGER_OPS
    model = build_model("tiny", dtype=torch.float32, seed=3)
    cache = model.new_cache(batch, cache_length)
    tokens_in = torch.randint(0, model.config.vocab_size, (batch, tokens), generator=torch.Generator().manual_seed(4))
    positions = torch.arange(cache_length - tokens, cache_length)
    attention_flops = []

    def counted_attention(*args):
        with FlopCounterMode(display=False) as inner:        # the attention calls' own count
            result = _explicit_attention(*args)
        attention_flops.append(inner.get_total_flops())
        return result
    ops = replace(EAGER_OPS, attention=counted_attention, prefill_attention=counted_attention)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(tokens_in, positions, cache, ops=ops, last_only=last_only)
    work = step_work(model.config, torch.float32, batch=batch, tokens=tokens, cache_length=cache_length,
                     last_only=last_only)
    assert len(attention_flops) == model.config.num_layers
    attention = "attention" if tokens == 1 else "prefill_attention"           # the model's label of each
    assert work[attention].flops == sum(attention_flops)
    # every other matmul of the step is a projection or the head (mm, or bmm for the head on a sliced row)
    assert work["linear"].flops == counter.get_total_flops() - sum(attention_flops)


def test_a_decode_steps_bytes_are_nearly_all_weights():
    """At decode the projections read every weight once: the counted linear bytes are the weights'
    bytes (all but the norms' gains and, untied, the embedding table) plus a sliver of activations."""
    config = CONFIGS["8b"]
    work = step_work(config, torch.bfloat16, batch=1, tokens=1, cache_length=768)
    model = torch.device("meta")
    with model:
        from hello_gpu.models.llama import Llama
        meta = Llama(config, dtype=torch.bfloat16)
    weights = sum(p.numel() * 2 for name, p in meta.named_parameters() if p.dim() == 2 and "embed_tokens" not in name)
    assert weights <= work["linear"].bytes <= weights * 1.001
    assert work["linear"].calls == 4 * config.num_layers + 1
    # the KV cache a step reads: 2 (K and V) x layers x 8 heads x 768 positions x 128 x 2 bytes = 100.7 MB
    assert work["attention"].bytes == pytest.approx(2 * 32 * 8 * 768 * 128 * 2, rel=0.01)
    total = sum(entry.bytes for entry in work.values())
    assert work["linear"].bytes / total > 0.98


def test_with_the_fused_gate_up_kernel_its_projection_moves_out_of_linear():
    """step_work(fused={"gate_up_swiglu"}): the gate/up GEMV is that entry's (one call a layer), linear keeps the other
    three projections and the head, and the only bytes saved are the 2I - I outputs not written."""
    config = CONFIGS["8b"]
    plain = step_work(config, torch.bfloat16, batch=1, tokens=1, cache_length=768)
    fused = step_work(config, torch.bfloat16, batch=1, tokens=1, cache_length=768, fused={"gate_up_swiglu"})
    assert "gate_up_swiglu" not in plain and fused["gate_up_swiglu"].calls == config.num_layers
    assert fused["linear"].calls == 3 * config.num_layers + 1
    gate_up_weight = 2 * config.intermediate_size * config.hidden_size * 2
    assert fused["gate_up_swiglu"].bytes == pytest.approx(config.num_layers * gate_up_weight, rel=0.01)
    assert fused["linear"].bytes + fused["gate_up_swiglu"].bytes == (
        plain["linear"].bytes - config.num_layers * config.intermediate_size * 2)


@pytest.mark.parametrize("batch", [1, 3])
def test_each_fused_operation_takes_over_the_work_it_replaces(batch):
    """Every fused operation a profile may name, alone and all together: the FLOPs of the step are unchanged; its
    entry has the calls of one launch a layer (two for linear_add_rms_norm), the entries it replaces are gone,
    and the bytes saved are exactly the intermediate round trips at one row (one kernel) and none at more rows
    (the backend's fallback runs the pieces)."""
    config = CONFIGS["1b"]
    layers, h, i, e = config.num_layers, config.hidden_size, config.intermediate_size, 2
    plain = step_work(config, torch.bfloat16, batch=batch, tokens=1, cache_length=600)
    one = batch == 1
    rotated_k = layers * 2.0 * batch * config.kv_size * e           # rope's k written, then read by cache_write
    saved = {"rope_cache_write": rotated_k,
             "gate_up_swiglu": layers * 2.0 * 2 * i * e if one else 0.0,
             "qkv_rope_cache_write": (layers * 2.0 * (config.q_size + 2 * config.kv_size) * e if one else 0.0)
             + rotated_k,                                                  # and what rope_cache_write saves
             "linear_add_rms_norm": 2 * layers * 2.0 * h * e if one else 0.0}
    replaced = {"rope_cache_write": {"rope", "cache_write"}, "gate_up_swiglu": {"swiglu"},
                "qkv_rope_cache_write": {"rope", "cache_write"}, "linear_add_rms_norm": {"add_rms_norm"}}
    calls = {"rope_cache_write": layers, "gate_up_swiglu": layers, "qkv_rope_cache_write": layers,
             "linear_add_rms_norm": 2 * layers}
    projections = {"rope_cache_write": 0, "gate_up_swiglu": 1, "qkv_rope_cache_write": 1, "linear_add_rms_norm": 2}
    for name in calls:
        work = step_work(config, torch.bfloat16, batch=batch, tokens=1, cache_length=600, fused=[name, "attention"])
        assert name not in plain and work[name].calls == calls[name], name
        assert not replaced[name] & set(work), name
        assert work["linear"].calls == plain["linear"].calls - projections[name] * layers, name
        assert sum(w.flops for w in work.values()) == pytest.approx(sum(w.flops for w in plain.values()), rel=1e-12)
        expected = sum(w.bytes for w in plain.values()) - saved[name]
        assert sum(w.bytes for w in work.values()) == pytest.approx(expected, rel=1e-12), name
    everything = step_work(config, torch.bfloat16, batch=batch, tokens=1, cache_length=600, fused=FUSED_OPERATIONS)
    assert everything["linear"].calls == 1 and "rope_cache_write" not in everything     # the head alone
    assert sum(w.flops for w in everything.values()) == pytest.approx(sum(w.flops for w in plain.values()), rel=1e-12)


@pytest.mark.parametrize("batch", [1, 3])
def test_the_norm_folds_take_the_norms_out_of_a_one_row_step(batch):
    """With both norm folds and linear_add: every layer half ends with linear_add but the last (the head reads its
    norm), the embedding's norm goes into the first qkv kernel, the FLOPs are unchanged, and the bytes saved are
    the delta's round trip and the normed values' write at each folded end (3 h a row, less the norm weight the
    projection now reads: the same h) plus the two projections' fusions. With more rows nothing folds."""
    config = CONFIGS["1b"]
    layers, h, i, e = config.num_layers, config.hidden_size, config.intermediate_size, 2
    plain = step_work(config, torch.bfloat16, batch=batch, tokens=1, cache_length=600)
    folds = ["norm_qkv_rope_cache_write", "norm_gate_up_swiglu", "linear_add", "linear_add_rms_norm", "attention"]
    work = step_work(config, torch.bfloat16, batch=batch, tokens=1, cache_length=600, fused=folds)
    if batch != 1:      # the model folds one token of one row only; linear_add_rms_norm is the fused end there
        assert not {"norm_qkv_rope_cache_write", "norm_gate_up_swiglu", "linear_add"} & set(work)
        assert work["linear_add_rms_norm"].calls == 2 * layers
        return
    assert work["norm_qkv_rope_cache_write"].calls == layers and work["norm_gate_up_swiglu"].calls == layers
    assert work["linear_add"].calls == 2 * layers - 1 and work["linear_add_rms_norm"].calls == 1
    assert "rms_norm" not in work and "add_rms_norm" not in work and work["linear"].calls == 1      # the head
    assert sum(w.flops for w in work.values()) == pytest.approx(sum(w.flops for w in plain.values()), rel=1e-12)
    saved = ((2 * layers - 1) * 3.0 * h * e                          # delta round trip, normed write, less the weight
             + 2.0 * h * e                                            # the last end: linear_add_rms_norm's delta
             + 2.0 * h * e                                            # the embedding's norm: read and write, not weight
             + layers * 2.0 * (config.q_size + 2 * config.kv_size) * e + layers * 2.0 * config.kv_size * e
             + layers * 2.0 * 2 * i * e)
    assert sum(w.bytes for w in work.values()) == pytest.approx(sum(w.bytes for w in plain.values()) - saved, rel=1e-12)


def test_bad_step_arguments_are_refused():
    with pytest.raises(TypeError, match="not the string"):
        step_work(CONFIGS["tiny"], torch.float32, batch=1, tokens=1, cache_length=4, fused="gate_up_swiglu")
    with pytest.raises(ValueError, match="at least 1"):
        step_work(CONFIGS["tiny"], torch.float32, batch=0, tokens=1, cache_length=4)
    with pytest.raises(ValueError, match="do not fit"):
        step_work(CONFIGS["tiny"], torch.float32, batch=1, tokens=5, cache_length=4)


def test_the_roofline_rows_place_each_operation_under_its_roof():
    roofs = Roofs("a GPU", "bfloat16", bandwidth=4e12, compute=8e14)           # ridge at 200 FLOP/B
    work = {"linear": OperationWork(10, 2e9, 1e9), "matmul": OperationWork(1, 4e12, 1e9),
            "swiglu": OperationWork(2, 1e3, 1e3)}
    rows = operation_roofline({"linear": 5e-4, "matmul": 1e-2, "swiglu": 0.0, "unknown": 1e-3}, work, roofs, "bfloat16")
    assert [row["operation"] for row in rows] == ["matmul", "linear"]     # by time; no time or no work: no row
    by_name = {row["operation"]: row for row in rows}
    assert by_name["linear"]["bound"] == "memory"
    assert by_name["linear"]["fraction_of_roof"] == pytest.approx(1e9 / 5e-4 / 4e12)      # 2 TB/s of 4
    assert by_name["matmul"]["bound"] == "compute"
    assert by_name["matmul"]["fraction_of_roof"] == pytest.approx(4e12 / 1e-2 / 8e14)     # 400 of 800 TFLOP/s
    assert by_name["matmul"]["intensity"] == pytest.approx(4000)
    cpu = operation_roofline({"linear": 5e-4}, work, None, "float32")
    assert cpu[0]["bound"] is None and "no roofs" in cpu[0]["verdict"]


def test_a_cpu_profile_has_a_roofline_row_per_labelled_operation(tmp_path, capsys):
    model = build_model("tiny", dtype=torch.float32, seed=1)
    profile = profile_llama(model, batch=1, prompt=12, phase="decode", steps=2)
    operations = {row["operation"] for row in profile.roofline}
    assert {"linear", "attention", "add_rms_norm", "rope", "swiglu"} <= operations
    linear = next(row for row in profile.roofline if row["operation"] == "linear")
    want = step_work(model.config, torch.float32, batch=1, tokens=1, cache_length=13)["linear"]
    assert linear["flops"] == want.flops
    assert linear["seconds_per_step"] == pytest.approx(profile.operations["linear"] / 2)
    assert main(["model", "profile", "--config", "tiny", "--prompt", "10", "--steps", "2", "--out", str(tmp_path)]) == 0
    assert "on the roofline" in capsys.readouterr().out
    saved = json.loads((tmp_path / "model-profile.json").read_text())
    assert {row["operation"] for row in saved["roofline"]} >= {"linear", "attention"}
