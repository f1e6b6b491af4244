"""Load a local Hugging Face-format Llama checkpoint: ``config.json`` and ``*.safetensors`` (one file, or
shards named by ``model.safetensors.index.json``). Nothing is downloaded: point it at a folder you have.

Each tensor is read by ``safetensors`` (``pip install safetensors``; the GPU image has 0.8.0) straight
onto the target device, converted to the target dtype, and copied into its place: Hugging Face's
separate ``q_proj``/``k_proj``/``v_proj`` and ``gate_proj``/``up_proj`` into the rows of our fused
``qkv_proj`` and ``gate_up_proj`` (:mod:`.llama`). One tensor is in flight at a time, so loading the 8B
in bf16 needs its 16 GB plus the largest tensor (the 1 GB embedding), not a second copy of the model.

Every expected tensor must be present with its shape, and every tensor present must be one we use:
a checkpoint of another architecture fails with the names that do not fit, never half-loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .llama import Llama, LlamaConfig, RopeScaling, empty_model

INDEX_FILE = "model.safetensors.index.json"
# Buffers some older exports wrote beside the weights; recomputed here, so skipped.
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


class CheckpointError(ValueError):
    """The folder is not a Llama checkpoint we can load; the message says what does not fit."""


def config_from_hf(data: dict, name: str = "checkpoint") -> LlamaConfig:
    """Our :class:`LlamaConfig` from a Hugging Face ``config.json`` of ``model_type`` "llama"; other
    architectures and features this model does not have (biases, other activations, other rope
    scalings) are refused by name."""
    model_type = data.get("model_type")
    if model_type != "llama":
        raise CheckpointError(f"config.json: model_type is {model_type!r}; this loader reads Llama checkpoints "
                              f"(model_type 'llama')")
    for key, wanted in (("hidden_act", "silu"), ("attention_bias", False), ("mlp_bias", False)):
        if data.get(key, wanted) != wanted:
            raise CheckpointError(f"config.json: {key} is {data[key]!r}; this model has {key} = {wanted!r}")
    heads = data["num_attention_heads"]
    scaling = data.get("rope_scaling")
    rope_scaling = None
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind == "llama3":
            rope_scaling = RopeScaling(float(scaling["factor"]), float(scaling["low_freq_factor"]),
                                       float(scaling["high_freq_factor"]),
                                       int(scaling["original_max_position_embeddings"]))
        elif kind != "default":
            raise CheckpointError(f"config.json: rope_scaling of type {kind!r}; this model implements 'llama3' only")
    try:
        return LlamaConfig(
            name=name, vocab_size=data["vocab_size"], hidden_size=data["hidden_size"],
            intermediate_size=data["intermediate_size"], num_layers=data["num_hidden_layers"], num_heads=heads,
            num_kv_heads=data.get("num_key_value_heads") or heads,
            head_dim=data.get("head_dim") or data["hidden_size"] // heads,
            rope_theta=float(data.get("rope_theta", 10_000.0)), rms_norm_eps=float(data.get("rms_norm_eps", 1e-6)),
            max_position=data.get("max_position_embeddings", 2048),
            tie_word_embeddings=bool(data.get("tie_word_embeddings", False)), rope_scaling=rope_scaling)
    except KeyError as error:
        raise CheckpointError(f"config.json: {error.args[0]!r} is missing") from None


def checkpoint_files(folder: Path) -> list[Path]:
    """The safetensors files: those the index names, else every ``*.safetensors`` in the folder."""
    index = folder / INDEX_FILE
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index}: no weight_map")
        files = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [str(path.name) for path in files if not path.is_file()]
        if missing:
            raise CheckpointError(f"{index} names shards that are not in {folder}: {', '.join(missing)}")
        return files
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{folder}: no *.safetensors files (and no {INDEX_FILE})")
    return files


def tensor_slots(model: Llama) -> dict[str, tuple[torch.Tensor, slice]]:
    """Hugging Face tensor name -> (our parameter, the rows it fills)."""
    config = model.config
    q, kv, inner = config.q_size, config.kv_size, config.intermediate_size
    every = slice(None)
    slots = {"model.embed_tokens.weight": (model.embed_tokens.weight, every),
             "model.norm.weight": (model.norm.weight, every)}
    if model.lm_head is not None:
        slots["lm_head.weight"] = (model.lm_head.weight, every)
    for index, layer in enumerate(model.layers):
        prefix = f"model.layers.{index}."
        qkv, gate_up = layer.self_attn.qkv_proj.weight, layer.mlp.gate_up_proj.weight
        slots.update({
            prefix + "input_layernorm.weight": (layer.input_layernorm.weight, every),
            prefix + "post_attention_layernorm.weight": (layer.post_attention_layernorm.weight, every),
            prefix + "self_attn.q_proj.weight": (qkv, slice(0, q)),
            prefix + "self_attn.k_proj.weight": (qkv, slice(q, q + kv)),
            prefix + "self_attn.v_proj.weight": (qkv, slice(q + kv, q + 2 * kv)),
            prefix + "self_attn.o_proj.weight": (layer.self_attn.o_proj.weight, every),
            prefix + "mlp.gate_proj.weight": (gate_up, slice(0, inner)),
            prefix + "mlp.up_proj.weight": (gate_up, slice(inner, 2 * inner)),
            prefix + "mlp.down_proj.weight": (layer.mlp.down_proj.weight, every),
        })
    return slots


def safetensors_module():
    """``safetensors.torch``, or a CheckpointError that says how to get it."""
    try:
        import safetensors.torch  # noqa: F401 - the loader reads through safe_open
        from safetensors import safe_open
    except ImportError:
        raise CheckpointError("reading a checkpoint needs the safetensors package: pip install safetensors") from None
    return safe_open


def load_checkpoint(folder, *, device="cpu", dtype=torch.bfloat16) -> Llama:
    """The model of the Hugging Face-format Llama checkpoint in ``folder``, on ``device`` in ``dtype``."""
    safe_open = safetensors_module()
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"{folder}: no config.json (a Hugging Face checkpoint folder has config.json and "
                              f"*.safetensors)")
    config = config_from_hf(json.loads(config_path.read_text(encoding="utf-8")), name=folder.name)
    model = empty_model(config, device=device, dtype=dtype)
    slots = tensor_slots(model)
    filled: set[str] = set()
    unexpected: list[str] = []
    with torch.no_grad():
        for path in checkpoint_files(folder):
            device_name = str(model.device) if model.device.type != "cpu" else "cpu"
            with safe_open(str(path), framework="pt", device=device_name) as file:
                for name in file.keys():
                    if name.endswith(IGNORED_SUFFIXES) or (name == "lm_head.weight" and model.lm_head is None):
                        continue        # a tied checkpoint may still store the head: it is the embedding
                    if name not in slots:
                        unexpected.append(name)
                        continue
                    target, rows = slots[name]
                    tensor = file.get_tensor(name)
                    place = target[rows]
                    if tuple(tensor.shape) != tuple(place.shape):
                        raise CheckpointError(f"{path.name}: {name} has shape {tuple(tensor.shape)}; config.json "
                                              f"makes it {tuple(place.shape)}")
                    place.copy_(tensor)
                    filled.add(name)
    if unexpected:
        raise CheckpointError(f"{folder}: tensors this Llama model has no place for: {', '.join(sorted(unexpected)[:8])}"
                              + (f" and {len(unexpected) - 8} more" if len(unexpected) > 8 else ""))
    missing = sorted(set(slots) - filled)
    if missing:
        raise CheckpointError(f"{folder}: tensors missing from the checkpoint: {', '.join(missing[:8])}"
                              + (f" and {len(missing) - 8} more" if len(missing) > 8 else ""))
    return model


def load_tokenizer(folder):
    """``(tokenizer, None)`` from ``folder/tokenizer.json`` with the ``tokenizers`` package, or
    ``(None, why not)``: text in and out needs both; token ids work without."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None, f"no tokenizer.json in {folder}"
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None, "the tokenizers package is not installed (pip install tokenizers)"
    return Tokenizer.from_file(str(path)), None
