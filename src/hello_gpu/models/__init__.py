"""models/: whole models, the measure that matters (issue 23): tokens per second of a real architecture.

- :mod:`.llama`: our own compact Llama-architecture decoder (RMSNorm, RoPE with Llama-3 scaling,
  grouped-query attention with a preallocated KV cache, SwiGLU), configurations "1b" (Llama-3.2-1B's
  sizes), "8b" (Llama-3-8B's) and "tiny" (tests); random weights from a seed, drawn in place.
- :mod:`.checkpoint`: a local Hugging Face-format safetensors folder (config.json, shards and index).
- :mod:`.backends`: eager, torch.compile (default, reduce-overhead), hello-gpu (our kernels where
  they beat eager, a registry of replacements, the decode step in a CUDA graph).
- :mod:`.logits`: two backends' logits step by step through a greedy decode.
- :mod:`.run` and :mod:`.profile`: ``hello-gpu model run`` and ``hello-gpu model profile``.

Layer: above profile (it uses ops, bench and profile), below agent (which will optimise a model).
"""

from .backends import BACKENDS, REPLACEMENTS, Choice, Replacement, Runner, greedy_tokens, make_runner, register_replacement
from .checkpoint import CheckpointError, load_checkpoint, load_tokenizer
from .llama import CONFIGS, EAGER_OPS, KVCache, Llama, LlamaConfig, ModelOps, build_model, config_named, generate
from .logits import LogitComparison, compare_greedy

__all__ = ["BACKENDS", "CONFIGS", "CheckpointError", "Choice", "EAGER_OPS", "KVCache", "Llama", "LlamaConfig",
           "LogitComparison", "ModelOps", "REPLACEMENTS", "Replacement", "Runner", "build_model", "compare_greedy",
           "config_named", "generate", "greedy_tokens", "load_checkpoint", "load_tokenizer", "make_runner",
           "register_replacement"]
