"""The model's own small kernels (RoPE, SwiGLU) against the eager operations in float64.

On a machine without a GPU they run in Triton's interpreter (tests/conftest.py sets it before the first
import); on a GPU, compiled. Fresh random inputs per case, odd sizes, the strided views the model hands
them, refusals of the layouts they do not take; and through the model: a greedy decode of the tiny
model with both kernels forced in gives eager's logits at every step.
"""

from __future__ import annotations

import pytest
import torch

from hello_gpu.models.backends import REPLACEMENTS, check_replacement, make_runner
from hello_gpu.models.llama import CONFIGS, build_model, rope, swiglu
from hello_gpu.models.logits import compare_greedy
from hello_gpu.models.rope_kernel import rope as rope_kernel
from hello_gpu.models.swiglu_kernel import swiglu as swiglu_kernel
from hello_gpu.runtime.device import gpu_vendor

DEVICE = "cuda" if gpu_vendor() is not None else "cpu"
# (rtol, atol) per dtype: computed in float32 and rounded once (backends.ROUNDED_ONCE_TOLERANCE).
TOLERANCE = REPLACEMENTS["rope"].tolerance


def assert_close(got: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype):
    rtol, atol = TOLERANCE[dtype]
    assert got.dtype == dtype and got.shape == expected.shape
    error = (got.double() - expected).abs()
    assert torch.isfinite(got).all() and (error <= atol + rtol * expected.abs()).all(), float(error.max())


def qkv_views(batch, length, heads, kv_heads, dim, dtype, seed):
    """q and k as the model's attention makes them: views of one (B, T, q + 2 kv) projection output."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    qkv = torch.randn(batch, length, (heads + 2 * kv_heads) * dim, device=DEVICE, dtype=dtype, generator=generator)
    q, k, _ = qkv.split([heads * dim, kv_heads * dim, kv_heads * dim], dim=-1)
    return (q.view(batch, length, heads, dim).transpose(1, 2), k.view(batch, length, kv_heads, dim).transpose(1, 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("batch, length, heads, kv_heads, dim", [
    (1, 1, 4, 2, 8), (2, 5, 3, 1, 6), (1, 3, 32, 8, 128), (3, 1, 5, 5, 2), (1, 7, 2, 1, 34)])
def test_rope_kernel_matches_float64_rope_on_the_models_views(dtype, batch, length, heads, kv_heads, dim):
    q, k = qkv_views(batch, length, heads, kv_heads, dim, dtype, seed=batch * 100 + length * 10 + dim)
    angles = 500 * torch.rand(length, dim // 2, dtype=torch.float64, device=DEVICE)   # far from 0: sin is not ~0
    cos, sin = torch.cos(angles), torch.sin(angles)
    got_q, got_k = rope_kernel(q, k, cos.float(), sin.float())
    want_q, want_k = rope(q.double(), k.double(), cos.float().double(), sin.float().double())
    assert_close(got_q, want_q, dtype)
    assert_close(got_k, want_k, dtype)
    assert got_q.is_contiguous() and got_k.is_contiguous()


def test_rope_kernel_refuses_what_it_does_not_take():
    q, k = qkv_views(1, 2, 2, 1, 8, torch.float32, seed=1)
    cos = torch.rand(2, 4, device=DEVICE)
    with pytest.raises(ValueError, match="cos and sin must be float32"):
        rope_kernel(q, k, cos.double(), cos.double())
    with pytest.raises(ValueError, match=r"cos and sin must be \(2, 4\)"):
        rope_kernel(q, k, cos[:1], cos[:1])
    with pytest.raises(ValueError, match="head_dim must be even and contiguous"):
        rope_kernel(q.transpose(2, 3), k, cos, cos)
    with pytest.raises(ValueError, match=r"must be \(batch, heads, tokens, head_dim\)"):
        rope_kernel(q[0], k, cos, cos)
    with pytest.raises(ValueError, match="the kernel takes float16, bfloat16 or float32"):
        rope_kernel(q.double(), k, cos, cos)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(1, 1, 2), (2, 3, 62), (1, 1, 2 * 1031), (4, 1, 2 * 2048), (5, 2 * 3001)])
def test_swiglu_kernel_matches_float64_swiglu(dtype, shape):
    generator = torch.Generator(device=DEVICE).manual_seed(sum(shape))
    gate_up = 4 * torch.randn(shape, device=DEVICE, dtype=dtype, generator=generator)
    assert_close(swiglu_kernel(gate_up), swiglu(gate_up.double()), dtype)


def test_swiglu_kernel_refuses_an_odd_width_and_float64():
    with pytest.raises(ValueError, match="must be even"):
        swiglu_kernel(torch.randn(2, 5, device=DEVICE))
    with pytest.raises(ValueError, match="float16, bfloat16 or float32"):
        swiglu_kernel(torch.randn(2, 4, device=DEVICE, dtype=torch.float64))


@pytest.mark.parametrize("name", ["rope", "swiglu"])
def test_the_backend_checks_each_kernel_on_the_models_decode_shapes(name):
    replacement = REPLACEMENTS[name]
    assert check_replacement(replacement, replacement.load(), CONFIGS["tiny"], 3, torch.device(DEVICE),
                             torch.float32) is None


def test_a_rope_that_swaps_q_and_k_is_refused_by_the_check():
    replacement = REPLACEMENTS["rope"]
    problem = check_replacement(replacement, lambda q, k, cos, sin: rope_kernel(q, k, cos, sin)[::-1],
                                CONFIGS["tiny"], 2, torch.device(DEVICE), torch.float32)
    assert problem.startswith("output 0: returned"), problem


def test_a_greedy_decode_with_both_kernels_forced_in_gives_eagers_logits():
    model = build_model(CONFIGS["tiny"], dtype=torch.float32, seed=8, device=DEVICE)
    prompt = torch.randint(0, CONFIGS["tiny"].vocab_size, (2, 5), generator=torch.Generator().manual_seed(9))
    eager = make_runner(model, "eager", batch=2, max_seq=11)
    ours = make_runner(model, "hello-gpu", batch=2, max_seq=11, force=["rope", "swiglu"])
    assert ours.used() == ["rope", "swiglu"]
    result = compare_greedy(eager, ours, prompt.to(DEVICE), 6)
    assert result.ok and result.first_divergence is None, result.summary()
    assert 0 < max(result.gaps) < 1e-4 * max(result.scales)        # our kernels ran: not bit-identical
