"""hello_gpu.models.llama and .checkpoint on the CPU: logits against an independent float64 implementation,
cached decode against full recomputation, random weights, the safetensors loader and its refusals.

The reference below is written from the Llama architecture directly (per-head loops, an explicit
causal softmax, the rope scaling as an if/elif per frequency), on Hugging Face-named tensors: it shares
no code with the model. transformers is not in the test environment; where it is importable, the
same checkpoint is also run through its LlamaForCausalLM.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import torch

from hello_gpu.models.checkpoint import CheckpointError, config_from_hf, load_checkpoint, load_tokenizer
from hello_gpu.models.llama import CONFIGS, KVCache, build_model, config_named, generate, rope_frequencies

TINY = CONFIGS["tiny"]
TIED = replace(TINY, name="tiny-tied", tie_word_embeddings=True, rope_scaling=None)


# ------------------------------------------------------------------------------------ the reference


def reference_inverse_frequencies(config) -> torch.Tensor:
    """Llama 3's rope scaling, one frequency at a time, float64."""
    result = []
    for i in range(0, config.head_dim, 2):
        frequency = 1.0 / (config.rope_theta ** (i / config.head_dim))
        s = config.rope_scaling
        if s is not None:
            wavelength = 2 * math.pi / frequency
            if wavelength > s.original_max_position / s.low_freq_factor:
                frequency = frequency / s.factor
            elif wavelength >= s.original_max_position / s.high_freq_factor:
                t = (s.original_max_position / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
                frequency = (1 - t) * frequency / s.factor + t * frequency
        result.append(frequency)
    return torch.tensor(result, dtype=torch.float64)


def reference_logits(weights: dict, config, tokens: torch.Tensor) -> torch.Tensor:
    """Logits (B, T, V) in float64 of the whole sequence, no cache, Hugging Face tensor names."""
    w = {name: tensor.double() for name, tensor in weights.items()}
    batch, length = tokens.shape
    heads, kv_heads, dim = config.num_heads, config.num_kv_heads, config.head_dim
    eps = config.rms_norm_eps

    def norm(x, gain):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gain

    angles = torch.arange(length, dtype=torch.float64)[:, None] * reference_inverse_frequencies(config)[None, :]
    cos = torch.cat([angles.cos(), angles.cos()], -1)
    sin = torch.cat([angles.sin(), angles.sin()], -1)

    def rotate(x):                                   # x (T, D)
        half = dim // 2
        return x * cos + torch.cat([-x[:, half:], x[:, :half]], -1) * sin

    x = w["model.embed_tokens.weight"][tokens]
    causal = torch.tril(torch.ones(length, length, dtype=torch.bool))
    for i in range(config.num_layers):
        p = f"model.layers.{i}."
        h = norm(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(batch, length, heads, dim)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(batch, length, kv_heads, dim)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(batch, length, kv_heads, dim)
        out = torch.empty(batch, length, heads, dim, dtype=torch.float64)
        for b in range(batch):
            for head in range(heads):
                group = head // (heads // kv_heads)
                qh, kh = rotate(q[b, :, head]), rotate(k[b, :, group])
                scores = (qh @ kh.T) / math.sqrt(dim)
                scores = scores.masked_fill(~causal, float("-inf"))
                out[b, :, head] = torch.softmax(scores, -1) @ v[b, :, group]
        x = x + out.reshape(batch, length, heads * dim) @ w[p + "self_attn.o_proj.weight"].T
        h = norm(x, w[p + "post_attention_layernorm.weight"])
        gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate * torch.sigmoid(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    head = w["model.embed_tokens.weight"] if config.tie_word_embeddings else w["lm_head.weight"]
    return norm(x, w["model.norm.weight"]) @ head.T


def random_hf_weights(config, seed: int) -> dict[str, torch.Tensor]:
    """Hugging Face-named float32 tensors, every one random (norm gains around 1, never exactly 1)."""
    g = torch.Generator().manual_seed(seed)
    d, q, kv, inner = config.hidden_size, config.q_size, config.kv_size, config.intermediate_size

    def matrix(rows, columns, scale=0.08):
        return torch.randn(rows, columns, generator=g) * scale

    def gain():
        return 1 + 0.2 * torch.randn(d, generator=g)

    weights = {"model.embed_tokens.weight": matrix(config.vocab_size, d, 1.0), "model.norm.weight": gain()}
    if not config.tie_word_embeddings:
        weights["lm_head.weight"] = matrix(config.vocab_size, d, 0.2)
    for i in range(config.num_layers):
        p = f"model.layers.{i}."
        weights.update({p + "input_layernorm.weight": gain(), p + "post_attention_layernorm.weight": gain(),
                        p + "self_attn.q_proj.weight": matrix(q, d, 0.3), p + "self_attn.k_proj.weight": matrix(kv, d, 0.3),
                        p + "self_attn.v_proj.weight": matrix(kv, d), p + "self_attn.o_proj.weight": matrix(d, q),
                        p + "mlp.gate_proj.weight": matrix(inner, d), p + "mlp.up_proj.weight": matrix(inner, d),
                        p + "mlp.down_proj.weight": matrix(d, inner)})
    return weights


def hf_weights_of(model) -> dict[str, torch.Tensor]:
    """Our fused tensors split back into Hugging Face's names (for a model built with random weights)."""
    c = model.config
    weights = {"model.embed_tokens.weight": model.embed_tokens.weight, "model.norm.weight": model.norm.weight}
    if model.lm_head is not None:
        weights["lm_head.weight"] = model.lm_head.weight
    for i, layer in enumerate(model.layers):
        p = f"model.layers.{i}."
        q, k, v = layer.self_attn.qkv_proj.weight.split([c.q_size, c.kv_size, c.kv_size])
        gate, up = layer.mlp.gate_up_proj.weight.chunk(2)
        weights.update({p + "input_layernorm.weight": layer.input_layernorm.weight,
                        p + "post_attention_layernorm.weight": layer.post_attention_layernorm.weight,
                        p + "self_attn.q_proj.weight": q, p + "self_attn.k_proj.weight": k,
                        p + "self_attn.v_proj.weight": v, p + "self_attn.o_proj.weight": layer.self_attn.o_proj.weight,
                        p + "mlp.gate_proj.weight": gate, p + "mlp.up_proj.weight": up,
                        p + "mlp.down_proj.weight": layer.mlp.down_proj.weight})
    return weights


def hf_config(config) -> dict:
    data = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": config.vocab_size,
            "hidden_size": config.hidden_size, "intermediate_size": config.intermediate_size,
            "num_hidden_layers": config.num_layers, "num_attention_heads": config.num_heads,
            "num_key_value_heads": config.num_kv_heads, "head_dim": config.head_dim, "rope_theta": config.rope_theta,
            "rms_norm_eps": config.rms_norm_eps, "max_position_embeddings": config.max_position,
            "tie_word_embeddings": config.tie_word_embeddings, "hidden_act": "silu", "torch_dtype": "float32"}
    s = config.rope_scaling
    data["rope_scaling"] = None if s is None else {
        "rope_type": "llama3", "factor": s.factor, "low_freq_factor": s.low_freq_factor,
        "high_freq_factor": s.high_freq_factor, "original_max_position_embeddings": s.original_max_position}
    return data


def relative_gap(ours: torch.Tensor, reference: torch.Tensor) -> float:
    return ((ours.double() - reference).abs().max() / reference.abs().max()).item()


def full_logits(model, tokens):
    cache = model.new_cache(tokens.shape[0], tokens.shape[1])
    with torch.no_grad():
        return model(tokens, torch.arange(tokens.shape[1]), cache)


# ------------------------------------------------------------------------------------ the model


def test_rope_frequencies_apply_llama3_scaling_to_some_frequencies_and_not_others():
    ours = rope_frequencies(TINY)
    torch.testing.assert_close(ours, reference_inverse_frequencies(TINY), rtol=1e-15, atol=0)
    plain = rope_frequencies(replace(TINY, rope_scaling=None))
    kept, scaled = (ours == plain), (ours - plain / TINY.rope_scaling.factor).abs() < 1e-15
    assert kept.any() and scaled.any() and not (kept | scaled).all(), "the tiny config must hit all three cases"


@pytest.mark.parametrize("config", [TINY, TIED], ids=["untied-scaled", "tied-plain"])
def test_logits_match_the_float64_reference(config):
    model = build_model(config, dtype=torch.float64, seed=3)
    tokens = torch.randint(0, config.vocab_size, (3, 11), generator=torch.Generator().manual_seed(5))
    expected = reference_logits(hf_weights_of(model), config, tokens)
    assert relative_gap(full_logits(model, tokens), expected) < 1e-12
    model32 = build_model(config, dtype=torch.float32, seed=3)
    assert relative_gap(full_logits(model32, tokens), reference_logits(hf_weights_of(model32), config, tokens)) < 2e-5


@pytest.mark.parametrize("dtype, tolerance", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_cached_decode_equals_full_recomputation_at_every_step(dtype, tolerance):
    model = build_model(TINY, dtype=dtype, seed=1)
    prompt = torch.randint(0, TINY.vocab_size, (2, 9), generator=torch.Generator().manual_seed(2))
    new = 12
    cache = model.new_cache(2, 9 + new)
    for key, value in zip(cache.keys, cache.values):    # rows not written yet hold large values: a mask leak shows
        key.fill_(300.0)
        value.fill_(-700.0)
    tokens = prompt
    with torch.no_grad():
        logits = model(prompt, torch.arange(9), cache, last_only=True)
        for step in range(new):
            expected = full_logits(model, tokens)[:, -1:]
            assert relative_gap(logits, expected.double()) < tolerance, f"step {step}"
            token = logits.argmax(-1)
            tokens = torch.cat([tokens, token], dim=1)
            logits = model(token, torch.tensor([tokens.shape[1] - 1]), cache)
    assert torch.equal(generate(model, prompt, new), tokens[:, 9:9 + new])


def test_random_weights_are_seeded_drawn_in_their_dtype_and_not_trivial():
    a = build_model("tiny", dtype=torch.bfloat16, seed=7)
    b = build_model("tiny", dtype=torch.bfloat16, seed=7)
    c = build_model("tiny", dtype=torch.bfloat16, seed=8)
    for (name, x), y, z in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert x.dtype == torch.bfloat16 and not x.requires_grad, name
        assert torch.equal(x, y) and not torch.equal(x, z), name
        assert x.float().std() > 0.01, name
    norm = a.layers[0].input_layernorm.weight.float()
    assert (norm - 1).abs().max() > 0.05 and abs(norm.mean().item() - 1) < 0.1
    assert a.lm_head is not None and build_model(TIED).lm_head is None


def test_configs_have_the_published_sizes():
    assert round(config_named("1b").parameter_count() / 1e6) == 1236       # Llama-3.2-1B: 1.24e9
    assert round(config_named("8b").parameter_count() / 1e6) == 8030       # Llama-3-8B: 8.03e9
    with pytest.raises(ValueError, match="known: 1b, 8b, tiny"):
        config_named("70b")
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        replace(TINY, num_kv_heads=4)


def test_cache_refuses_more_positions_than_the_model_has():
    with pytest.raises(ValueError, match="exceed the model's max_position"):
        KVCache(TINY, 1, TINY.max_position + 1, device="cpu", dtype=torch.float32)


# ------------------------------------------------------------------------------------ the loader


def write_checkpoint(folder, config, weights, *, shards: int = 1):
    safetensors_torch = pytest.importorskip("safetensors.torch", reason="the loader test writes a checkpoint with "
                                            "the safetensors package (pip install safetensors; in the test extras)")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(hf_config(config)))
    names = sorted(weights)
    if shards == 1:
        safetensors_torch.save_file({n: weights[n].contiguous() for n in names}, str(folder / "model.safetensors"))
        return
    weight_map = {}
    for shard in range(shards):
        file = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        part = names[shard::shards]
        safetensors_torch.save_file({n: weights[n].contiguous() for n in part}, str(folder / file))
        weight_map.update({n: file for n in part})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


@pytest.mark.parametrize("config, shards", [(TINY, 1), (TIED, 3)], ids=["one-file", "sharded-tied"])
def test_a_checkpoint_loads_and_matches_the_reference(tmp_path, config, shards):
    weights = random_hf_weights(config, seed=11)
    write_checkpoint(tmp_path / "ckpt", config, weights, shards=shards)
    tokens = torch.randint(0, config.vocab_size, (2, 10), generator=torch.Generator().manual_seed(4))
    expected = reference_logits(weights, config, tokens)
    model = load_checkpoint(tmp_path / "ckpt", dtype=torch.float64)
    assert model.config.num_kv_heads == config.num_kv_heads and model.config.rope_scaling == config.rope_scaling
    assert relative_gap(full_logits(model, tokens), expected) < 1e-12
    model32 = load_checkpoint(tmp_path / "ckpt", dtype="fp32")
    assert model32.dtype == torch.float32
    assert relative_gap(full_logits(model32, tokens), expected) < 2e-5


def test_the_checkpoint_matches_transformers_where_it_is_installed(tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: the float64 reference "
                                       "above is the comparison")
    weights = random_hf_weights(TINY, seed=12)
    write_checkpoint(tmp_path / "ckpt", TINY, weights)
    theirs = transformers.LlamaForCausalLM.from_pretrained(str(tmp_path / "ckpt"), torch_dtype=torch.float64).eval()
    tokens = torch.randint(0, TINY.vocab_size, (2, 10), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        expected = theirs(tokens).logits
    assert relative_gap(full_logits(load_checkpoint(tmp_path / "ckpt", dtype=torch.float64), tokens), expected) < 1e-10


def test_the_loader_refuses_what_does_not_fit(tmp_path):
    weights = random_hf_weights(TINY, seed=1)
    missing = dict(weights)
    del missing["model.layers.1.mlp.up_proj.weight"]
    write_checkpoint(tmp_path / "missing", TINY, missing)
    with pytest.raises(CheckpointError, match="missing from the checkpoint: model.layers.1.mlp.up_proj.weight"):
        load_checkpoint(tmp_path / "missing")
    extra = {**weights, "model.layers.0.self_attn.q_proj.bias": torch.ones(TINY.q_size)}
    write_checkpoint(tmp_path / "extra", TINY, extra)
    with pytest.raises(CheckpointError, match="no place for: model.layers.0.self_attn.q_proj.bias"):
        load_checkpoint(tmp_path / "extra")
    wrong = {**weights, "model.layers.0.self_attn.k_proj.weight": torch.ones(TINY.kv_size + 1, TINY.hidden_size)}
    write_checkpoint(tmp_path / "wrong", TINY, wrong)
    with pytest.raises(CheckpointError, match=r"k_proj.weight has shape \(17, 48\); config.json makes it \(16, 48\)"):
        load_checkpoint(tmp_path / "wrong")
    with pytest.raises(CheckpointError, match="no config.json"):
        load_checkpoint(tmp_path)


def test_configs_of_other_architectures_are_refused_by_name():
    good = hf_config(TINY)
    assert config_from_hf(good).rope_scaling == TINY.rope_scaling
    with pytest.raises(CheckpointError, match="model_type is 'mistral'"):
        config_from_hf({**good, "model_type": "mistral"})
    with pytest.raises(CheckpointError, match="attention_bias is True"):
        config_from_hf({**good, "attention_bias": True})
    with pytest.raises(CheckpointError, match="rope_scaling of type 'yarn'"):
        config_from_hf({**good, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})
    with pytest.raises(CheckpointError, match="'vocab_size' is missing"):
        config_from_hf({k: v for k, v in good.items() if k != "vocab_size"})


def test_text_needs_a_tokenizer_file_and_the_tokenizers_package(tmp_path):
    tokenizer, why = load_tokenizer(tmp_path)
    assert tokenizer is None and "no tokenizer.json" in why
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed: text in and out is untested "
                                    "here (token ids are)")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    made = tokenizers.Tokenizer(WordLevel({"hello": 0, "gpu": 1, "[UNK]": 2}, unk_token="[UNK]"))
    made.pre_tokenizer = Whitespace()
    made.save(str(tmp_path / "tokenizer.json"))
    tokenizer, why = load_tokenizer(tmp_path)
    assert why is None and tokenizer.encode("hello gpu").ids == [0, 1]
