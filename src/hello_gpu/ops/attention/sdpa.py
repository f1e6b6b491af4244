"""What the SDPA baselines of this ladder share (not a rung: the registry reads only rung names).

``sdpa(q, k, v, causal, backend)`` calls ``F.scaled_dot_product_attention`` the way this spec defines
attention (spec.py): GQA through ``enable_gqa``, causal through ``is_causal`` where S_q == S_kv (every
benchmark shape). Two edge cases need more than a backend gives:

- bottom-right causal with S_q != S_kv (edge shapes only): an explicit boolean mask, which only the
  math backend takes for every such shape (the fused backends refuse it or, with S_q > S_kv, return
  NaN rows), so those calls run on the math backend whatever ``backend`` says;
- a backend without a GQA kernel (PyTorch's enable_gqa is not implemented by every backend):
  K and V are repeated to H heads first, as a user of that backend would have to, and the copy is
  inside the time. Which backends needed it is remembered per (backend, dtype) after the first
  refusal, so the refusal is paid once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from hello_gpu.ops.attention.spec import visible_mask

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
_NO_GQA: set[tuple[str | None, torch.dtype]] = set()      # (backend, dtype) that refused enable_gqa


def repeat_heads(q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    """K or V with each head repeated H / H_kv times: (B, H_kv, S, D) -> (B, H, S, D), a copy."""
    return kv.repeat_interleave(q.shape[1] // kv.shape[1], dim=1)


def _call(q, k, v, mask, is_causal: bool, backend: str | None):
    grouped = q.shape[1] != k.shape[1]
    key = (backend, q.dtype)
    if grouped and key in _NO_GQA:
        k, v, grouped = repeat_heads(q, k), repeat_heads(q, v), False
    try:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, enable_gqa=grouped)
    except RuntimeError:
        if not grouped:
            raise
        _NO_GQA.add(key)
        return F.scaled_dot_product_attention(q, repeat_heads(q, k), repeat_heads(q, v), attn_mask=mask,
                                              is_causal=is_causal)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal, backend: str | None = None) -> torch.Tensor:
    """Attention by SDPA: PyTorch's choice of backend (None) or one of BACKENDS."""
    causal = bool(causal)
    q_len, kv_len = q.shape[2], k.shape[2]
    if causal and q_len != kv_len:
        mask = visible_mask(q_len, kv_len, q.device)
        with sdpa_kernel(SDPBackend.MATH):
            return _call(q, k, v, mask, False, "math")
    if backend is None:
        return _call(q, k, v, None, causal, None)
    with sdpa_kernel(BACKENDS[backend]):
        return _call(q, k, v, None, causal, backend)
