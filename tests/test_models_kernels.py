"""The model's own small kernels (RoPE, SwiGLU, the KV-cache write) against the eager operations in float64.

On a machine without a GPU they run in Triton's interpreter (tests/conftest.py sets it before the first
import); on a GPU, compiled. Fresh random inputs per case, odd sizes, the strided views the model hands
them, refusals of the layouts they do not take; and through the model: a greedy decode of the tiny
model with both kernels forced in gives eager's logits at every step.
"""

from __future__ import annotations

import pytest
import torch

from hello_gpu.models.backends import REPLACEMENTS, check_replacement, make_runner
from hello_gpu.models.cache_write_kernel import cache_write as cache_write_kernel
from hello_gpu.models.llama import CONFIGS, build_model, cache_write, rope, swiglu
from hello_gpu.models.logits import compare_greedy
from hello_gpu.models.rope_cache_write_kernel import rope_cache_write as rope_cache_write_kernel
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
    with pytest.raises(ValueError, match="must share their batch, tokens, head_dim, dtype"):
        rope_kernel(q, k.to(torch.float16), cos, cos)


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


def cache_and_rows(batch, heads, max_seq, length, dim, dtype, seed):
    """Caches full of values (never zeros: a row left unwritten must show), k contiguous as RoPE returns it, and v
    as the model hands it: a view of the fused projection's output."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    keys, values = (torch.randn(batch, heads, max_seq, dim, device=DEVICE, dtype=dtype, generator=generator)
                    for _ in range(2))
    kv = torch.randn(batch, length, 2 * heads * dim, device=DEVICE, dtype=dtype, generator=generator)
    k, v = (x.view(batch, length, heads, dim).transpose(1, 2) for x in kv.split([heads * dim, heads * dim], dim=-1))
    return keys, values, k.contiguous(), v


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("batch, heads, max_seq, positions", [
    (1, 2, 11, [7]), (2, 3, 31, [0, 1, 2, 3, 4]), (3, 1, 9, [8]), (1, 8, 40, [5, 39, 17]), (2, 5, 7, [6, 0])])
def test_cache_write_kernel_writes_eagers_rows_and_nothing_else(dtype, batch, heads, max_seq, positions):
    dim = 34 if heads % 2 else 16
    keys, values, k, v = cache_and_rows(batch, heads, max_seq, len(positions), dim, dtype, seed=batch + max_seq)
    at = torch.tensor(positions, device=DEVICE)
    want_keys, want_values = cache_write(keys.clone(), values.clone(), at, k, v)
    got_keys, got_values = cache_write_kernel(keys, values, at, k, v)
    assert got_keys is keys and got_values is values                    # in place, as eager
    assert torch.equal(got_keys, want_keys) and torch.equal(got_values, want_values)


def test_cache_write_kernel_leaves_a_position_outside_the_cache_unwritten():
    keys, values, k, v = cache_and_rows(1, 2, 5, 3, 8, torch.float32, seed=3)
    before = keys.clone(), values.clone()
    cache_write_kernel(keys, values, torch.tensor([5, -1, 2], device=DEVICE), k, v)
    rows = torch.arange(5, device=DEVICE) != 2
    assert torch.equal(keys[:, :, rows], before[0][:, :, rows]) and torch.equal(values[:, :, rows], before[1][:, :, rows])
    assert torch.equal(keys[:, :, 2], k[:, :, 2]) and torch.equal(values[:, :, 2], v[:, :, 2])


def test_cache_write_kernel_refuses_what_it_does_not_take():
    keys, values, k, v = cache_and_rows(1, 2, 6, 2, 8, torch.float32, seed=4)
    at = torch.tensor([1, 2], device=DEVICE)
    with pytest.raises(ValueError, match="of one layout"):
        cache_write_kernel(keys, values.transpose(2, 3).contiguous().transpose(2, 3), at, k, v)
    with pytest.raises(ValueError, match=r"k must be \(1, 2, tokens, 8\)"):
        cache_write_kernel(keys, values, at, k[:, :1], v)
    with pytest.raises(ValueError, match="must have one shape"):
        cache_write_kernel(keys, values, at, k, v[:, :, :1])
    with pytest.raises(ValueError, match=r"positions must be \(2,\) int64"):
        cache_write_kernel(keys, values, at.float(), k, v)
    with pytest.raises(ValueError, match=r"positions must be \(2,\)"):
        cache_write_kernel(keys, values, at[:1], k, v)
    with pytest.raises(ValueError, match="must share a dtype"):
        cache_write_kernel(keys, values, at, k.double(), v)
    with pytest.raises(ValueError, match="head_dim must be contiguous"):
        cache_write_kernel(keys, values, at, k.transpose(2, 3).contiguous().transpose(2, 3), v)


def qkv_cache(batch, length, heads, kv_heads, max_seq, dim, dtype, seed):
    """q, k, v as views of one projection output, angle tables far from 0, and caches full of values (a row left
    unwritten, or written unrotated, must show)."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    qkv = torch.randn(batch, length, (heads + 2 * kv_heads) * dim, device=DEVICE, dtype=dtype, generator=generator)
    q, k, v = qkv.split([heads * dim, kv_heads * dim, kv_heads * dim], dim=-1)
    q, k, v = (x.view(batch, length, -1, dim).transpose(1, 2) for x in (q, k, v))
    angles = 500 * torch.rand(length, dim // 2, dtype=torch.float64, device=DEVICE, generator=generator)
    keys, values = (torch.randn(batch, kv_heads, max_seq, dim, device=DEVICE, dtype=dtype, generator=generator)
                    for _ in range(2))
    return q, k, v, torch.cos(angles).float(), torch.sin(angles).float(), keys, values


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("batch, heads, kv_heads, dim, max_seq, positions", [
    (1, 4, 2, 8, 11, [7]), (2, 3, 1, 6, 31, [0, 1, 2, 3, 4]), (1, 32, 8, 128, 40, [39]), (3, 5, 5, 2, 9, [8, 0]),
    (1, 2, 1, 34, 17, [5, 16, 3]), (2, 3, 1, 6, 50, list(range(49, 12, -1))), (1, 2, 2, 8, 17, list(range(17)))])
def test_rope_cache_write_kernel_is_rope_then_the_cache_write(dtype, batch, heads, kv_heads, dim, max_seq, positions):
    q, k, v, cos, sin, keys, values = qkv_cache(batch, len(positions), heads, kv_heads, max_seq, dim, dtype,
                                                seed=batch * 100 + dim + max_seq)
    at = torch.tensor(positions, device=DEVICE)
    want_q, want_k = rope(q.double(), k.double(), cos.double(), sin.double())
    before_keys, before_values = keys.clone(), values.clone()
    got_q, got_keys, got_values = rope_cache_write_kernel(q, k, v, cos, sin, keys, values, at)
    assert got_keys is keys and got_values is values and got_q.is_contiguous()          # the caches in place
    assert_close(got_q, want_q, dtype)
    assert_close(keys[:, :, at], want_k, dtype)                                         # k rotated at its rows
    assert torch.equal(values[:, :, at], v)                                             # v copied
    untouched = torch.ones(max_seq, dtype=torch.bool, device=DEVICE)
    untouched[at] = False
    assert torch.equal(keys[:, :, untouched], before_keys[:, :, untouched])
    assert torch.equal(values[:, :, untouched], before_values[:, :, untouched])
    # the same numbers as our two kernels one after the other: one rounding of the same float32 math
    two_q, two_k = rope_kernel(q, k, cos, sin)
    assert torch.equal(got_q, two_q) and torch.equal(keys[:, :, at], two_k)


def test_rope_cache_write_kernel_leaves_a_position_outside_the_cache_unwritten():
    q, k, v, cos, sin, keys, values = qkv_cache(1, 3, 4, 2, 5, 8, torch.float32, seed=5)
    before = keys.clone(), values.clone()
    rope_cache_write_kernel(q, k, v, cos, sin, keys, values, torch.tensor([5, -1, 2], device=DEVICE))
    rows = torch.arange(5, device=DEVICE) != 2
    assert torch.equal(keys[:, :, rows], before[0][:, :, rows]) and torch.equal(values[:, :, rows], before[1][:, :, rows])
    assert torch.equal(values[:, :, 2], v[:, :, 2]) and not torch.equal(keys[:, :, 2], before[0][:, :, 2])


def test_rope_cache_write_kernel_refuses_what_it_does_not_take():
    q, k, v, cos, sin, keys, values = qkv_cache(1, 2, 4, 2, 6, 8, torch.float32, seed=6)
    at = torch.tensor([1, 2], device=DEVICE)
    with pytest.raises(ValueError, match="cos and sin must be float32"):
        rope_cache_write_kernel(q, k, v, cos.double(), sin.double(), keys, values, at)
    with pytest.raises(ValueError, match="must share their batch, tokens, head_dim, dtype"):
        rope_cache_write_kernel(q, k.to(torch.float16), v, cos, sin, keys, values, at)
    with pytest.raises(ValueError, match=r"positions must be \(2,\)"):
        rope_cache_write_kernel(q, k, v, cos, sin, keys, values, at[:1])
    with pytest.raises(ValueError, match="must have one shape"):
        rope_cache_write_kernel(q, k, v[:, :, :1], cos, sin, keys, values, at)
    with pytest.raises(ValueError, match=r"k must be \(1, 1, tokens, 8\) for caches of shape \(1, 1, 6, 8\)"):
        rope_cache_write_kernel(q, k, v, cos, sin, keys[:, :1].contiguous(), values[:, :1].contiguous(), at)
    with pytest.raises(ValueError, match="must share a dtype"):
        rope_cache_write_kernel(q, k, v, cos, sin, keys.double(), values.double(), at)
    many = torch.empty(8192, 4, 2, 8, device=DEVICE)[:, :, :2]          # 8192 x (4 + 2 x 2) slots > 65535
    with pytest.raises(ValueError, match="at most 65535: split the batch"):
        rope_cache_write_kernel(many, many[:, :2], many[:, :2], cos, sin, keys.expand(8192, -1, -1, -1),
                                values.expand(8192, -1, -1, -1), at)


@pytest.mark.parametrize("name", ["rope", "swiglu", "cache_write", "rope_cache_write"])
def test_the_backend_checks_each_kernel_on_the_models_decode_shapes(name):
    replacement = REPLACEMENTS[name]
    assert check_replacement(replacement, replacement.load(), CONFIGS["tiny"], 3, torch.device(DEVICE),
                             torch.float32) is None


def test_a_rope_that_swaps_q_and_k_is_refused_by_the_check():
    replacement = REPLACEMENTS["rope"]
    problem = check_replacement(replacement, lambda q, k, cos, sin: rope_kernel(q, k, cos, sin)[::-1],
                                CONFIGS["tiny"], 2, torch.device(DEVICE), torch.float32)
    assert problem.startswith("output 0: returned"), problem


def test_a_cache_write_that_drops_the_values_is_refused_by_the_check():
    replacement = REPLACEMENTS["cache_write"]
    problem = check_replacement(replacement, lambda keys, values, positions, k, v:
                                (cache_write_kernel(keys, values, positions, k, v)[0], values.clone().fill_(1.5)),
                                CONFIGS["tiny"], 2, torch.device(DEVICE), torch.float32)
    assert problem.startswith("output 1: wrong result"), problem


def test_a_rope_cache_write_that_writes_k_unrotated_is_refused_by_the_check():
    replacement = REPLACEMENTS["rope_cache_write"]

    def unrotated(q, k, v, cos, sin, keys, values, positions):
        return (rope_kernel(q, k, cos, sin)[0], *cache_write_kernel(keys, values, positions, k, v))
    problem = check_replacement(replacement, unrotated, CONFIGS["tiny"], 2, torch.device(DEVICE), torch.float32)
    assert problem.startswith("output 1: wrong result"), problem


def test_a_greedy_decode_with_rope_and_the_cache_write_in_one_kernel_gives_eagers_logits():
    """The fused kernel in prefill (several tokens) and decode; the two kernels it does the work of are not called."""
    model = build_model(CONFIGS["tiny"], dtype=torch.float32, seed=8, device=DEVICE)
    prompt = torch.randint(0, CONFIGS["tiny"].vocab_size, (2, 5), generator=torch.Generator().manual_seed(11))
    eager = make_runner(model, "eager", batch=2, max_seq=11)
    ours = make_runner(model, "hello-gpu", batch=2, max_seq=11, force=["rope_cache_write"])
    assert "rope_cache_write" in ours.used() and not {"rope", "cache_write"} & set(ours.used()), ours.used()
    assert ours.ops.rope_cache_write is rope_cache_write_kernel
    result = compare_greedy(eager, ours, prompt.to(DEVICE), 6)
    assert result.ok and result.first_divergence is None, result.summary()
    # float32 RoPE in the kernel is eager's arithmetic: the logits may be bit-identical (they are in the interpreter)
    assert max(result.gaps) < 1e-4 * max(result.scales)


def test_a_greedy_decode_with_the_three_kernels_forced_in_gives_eagers_logits():
    model = build_model(CONFIGS["tiny"], dtype=torch.float32, seed=8, device=DEVICE)
    prompt = torch.randint(0, CONFIGS["tiny"].vocab_size, (2, 5), generator=torch.Generator().manual_seed(9))
    eager = make_runner(model, "eager", batch=2, max_seq=11)
    ours = make_runner(model, "hello-gpu", batch=2, max_seq=11, force=["rope", "swiglu", "cache_write"])
    assert sorted(ours.used()) == ["cache_write", "rope", "swiglu"]
    result = compare_greedy(eager, ours, prompt.to(DEVICE), 6)
    assert result.ok and result.first_divergence is None, result.summary()
    assert 0 < max(result.gaps) < 1e-4 * max(result.scales)        # our kernels ran: not bit-identical


def _our_kernel_ops():
    """ModelOps with each of our model kernels in its operation (the rest eager)."""
    from hello_gpu.models.add_rms_norm_kernel import add_rms_norm
    from hello_gpu.models.decode_attention_kernel import attention
    from hello_gpu.models.llama import ModelOps
    return ModelOps(add_rms_norm=add_rms_norm, rope=rope_kernel, cache_write=cache_write_kernel, attention=attention,
                    swiglu=swiglu_kernel, rope_cache_write=rope_cache_write_kernel,
                    linear=REPLACEMENTS["linear"].load())


def test_dependent_launches_are_asked_of_our_kernels_only_and_refused_where_the_device_has_none(monkeypatch):
    """hello-gpu-pdl (models.dependent_launch): each of our seven decode kernels gets ``pdl=True`` (the decode
    linear too: one row runs linear_pdl_kernel), nothing else (F.linear, the eager RMSNorm, the prefill attention
    stay as they are); on the CPU, in the interpreter or before sm_90 the backend says why it is off, and a kernel
    asked for it directly refuses, naming the reason."""
    from dataclasses import fields

    from hello_gpu.models import dependent_launch
    ops, device = _our_kernel_ops(), torch.device(DEVICE)
    why_not = dependent_launch.usable(device)
    same, note = dependent_launch.with_dependent_launches(ops, device)
    if why_not:
        assert same is ops and note == why_not and "no programmatic dependent launch" in note
        with pytest.raises(ValueError, match="pdl=True: no programmatic dependent launch"):
            swiglu_kernel(torch.rand(2, 8, device=DEVICE) + 0.5, pdl=True)
    monkeypatch.setattr(dependent_launch, "usable", lambda device: None)
    changed, note = dependent_launch.with_dependent_launches(ops, device)
    asked = {field.name for field in fields(ops) if getattr(changed, field.name) is not getattr(ops, field.name)}
    assert asked == {"add_rms_norm", "rope", "cache_write", "attention", "swiglu", "rope_cache_write", "linear"}, asked
    assert all(getattr(changed, name).keywords == {"pdl": True} for name in asked)
    assert note == ("programmatic dependent launch for our kernels of: add_rms_norm, attention, cache_write, linear, "
                    "rope, rope_cache_write, swiglu")


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE == "cpu", reason="programmatic dependent launch is a CUDA feature: no GPU here")
def test_a_graphed_decode_with_dependent_launches_gives_eagers_logits():
    """hello-gpu-pdl's decode step, captured in a CUDA graph with each of our kernels waiting for the one before
    (griddepcontrol.wait) and releasing the next: eager's logits at every step of a greedy decode, as hello-gpu's."""
    from hello_gpu.models import dependent_launch
    why_not = dependent_launch.usable(torch.device(DEVICE))
    if why_not:
        pytest.skip(why_not)
    model = build_model(CONFIGS["tiny"], dtype=torch.float32, seed=8, device=DEVICE)
    prompt = torch.randint(0, CONFIGS["tiny"].vocab_size, (2, 5), generator=torch.Generator().manual_seed(10))
    eager = make_runner(model, "eager", batch=2, max_seq=11)
    kernels = ["add_rms_norm", "attention", "rope_cache_write", "swiglu"]
    ours = make_runner(model, "hello-gpu-pdl", batch=2, max_seq=11, force=kernels)
    # the tiny float32 model may also take rms_norm and linear (they pass their own checks there): ours must be in
    assert set(kernels) <= set(ours.used()), ours.used()
    assert any(note.startswith("programmatic dependent launch for our kernels of: add_rms_norm, attention")
               for note in ours.notes), ours.notes
    result = compare_greedy(eager, ours, prompt.to(DEVICE), 6)
    assert result.ok and result.first_divergence is None, result.summary()
    assert 0 < max(result.gaps) < 1e-4 * max(result.scales)
