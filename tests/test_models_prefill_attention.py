"""The model's prefill attention kernel (hello_gpu.models.prefill_attention_kernel) against float64 SDPA.

On a machine without a GPU it runs in Triton's interpreter (tests/conftest.py sets it before the first
import), with 16 x 16 tiles so that small shapes span several tiles each way; on a GPU, compiled. Fresh
random inputs per case; prompts that start at 0 and further into the cache, odd lengths, grouped and
ungrouped heads, the strided q views the model makes; NaN in every key and value no query sees (beyond the
prompt, and holes of arbitrary masks); rows that see no key; the span the first kernel finds; refusals;
through the model: a greedy decode of the tiny model with both attention kernels forced gives eager's logits.
The GPU tier: the 8B- and 1B-sized prompts compiled in bf16/fp16; an ahead-of-time compile for sm_90 runs
on the CPU.
"""

from __future__ import annotations

import pytest
import torch

from hello_gpu.models.backends import REPLACEMENTS, RunShape, check_replacement, make_runner
from hello_gpu.models.llama import CONFIGS, attention, build_model
from test_models_decode_attention import DEVICE, gpu, runs_here

TINY = CONFIGS["tiny"]


def prompt_inputs(batch, heads, kv_heads, length, seq, dim, start, dtype, seed):
    """q (B, H, T, D) as a view of a (B, T, H + 2 H_kv, D) projection output, a cache (B, H_kv, S, D) written up
    to position start + T - 1 with NaN beyond it, and the model's mask (T, S) for positions start .. start + T - 1."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    qkv = torch.randn(batch, length, (heads + 2 * kv_heads) * dim, device=DEVICE, generator=generator)
    q = qkv.to(dtype)[..., :heads * dim].view(batch, length, heads, dim).transpose(1, 2)
    keys, values = (torch.randn(batch, kv_heads, seq, dim, device=DEVICE, generator=generator) for _ in range(2))
    keys[:, :, start + length:] = float("nan")
    values[:, :, start + length:] = float("nan")
    positions = torch.arange(start, start + length, device=DEVICE)
    mask = torch.arange(seq, device=DEVICE)[None, :] <= positions[:, None]
    return q, keys.to(dtype), values.to(dtype), mask


def expected(q, keys, values, mask):
    """Float64 SDPA with the keys and values no query sees zeroed (the NaN the tests put where the kernel must
    not read: SDPA multiplies a masked value by a zero weight, and 0 x NaN is NaN)."""
    seen = mask.any(dim=0)[None, None, :, None]
    return attention(q.double(), keys.double().where(seen, 0.0), values.double().where(seen, 0.0), mask)


def assert_matches(got, q, keys, values, mask):
    """Within the registry's bound (rtol of the result, atol from the softmax-weighted mean of |v|), in the
    layout the model reshapes without a copy: the (B, H, T, D) view of a contiguous (B, T, H, D)."""
    reference = expected(q, keys, values, mask)
    seen = mask.any(dim=0)[None, None, :, None]
    clean = (q, keys.where(seen, 0.0), values.where(seen, 0.0), mask)
    rtol, atol = REPLACEMENTS["prefill_attention"].tolerance_of(clean, q.dtype)
    assert got.dtype == q.dtype and got.shape == reference.shape and got.transpose(1, 2).is_contiguous()
    error = (got.double() - reference).abs()
    assert torch.isfinite(got).all() and (error <= atol + rtol * reference.abs()).all(), \
        f"max error {float(error.max()):.3g}, atol {atol:.3g}"


@runs_here
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("batch, heads, kv_heads, length, seq, dim, start", [
    (1, 4, 1, 2, 2, 8, 0), (1, 4, 1, 31, 47, 8, 0), (2, 8, 2, 33, 70, 64, 5), (1, 4, 4, 17, 17, 128, 0),
    (1, 6, 2, 50, 100, 6, 20), (2, 4, 2, 40, 200, 16, 100), (1, 2, 1, 16, 16, 16, 0), (1, 4, 1, 65, 300, 32, 0),
    (3, 3, 3, 7, 9, 1, 1)])
def test_the_kernel_matches_float64_sdpa_over_a_partly_written_cache(batch, heads, kv_heads, length, seq, dim,
                                                                     start, dtype):
    from hello_gpu.models.prefill_attention_kernel import prefill_attention
    inputs = prompt_inputs(batch, heads, kv_heads, length, seq, dim, start, dtype, seed=seq * 31 + dim + start)
    assert_matches(prefill_attention(*inputs), *inputs)


@runs_here
@pytest.mark.parametrize("seed", range(4))
def test_any_mask_is_applied_exactly_and_keys_outside_the_span_are_never_read(seed):
    """Random masks (each query sees ~1/3 of the keys, one row sees none, a band of keys none sees): a row
    that sees no key gives 0, as SDPA's math kernel does. Keys and values no row sees hold large garbage
    (a key read as seen moves the result by far more than the bound); beyond the last key any row sees,
    NaN: the kernel loads nothing outside the span of its query tile (inside it, as SDPA, a masked key's
    value enters with weight 0, so a NaN there would reach the output)."""
    from hello_gpu.models.prefill_attention_kernel import prefill_attention
    generator = torch.Generator(device=DEVICE).manual_seed(100 + seed)
    q, keys, values, _ = prompt_inputs(2, 4, 2, 37, 90, 16, 90 - 37, torch.float32, seed=seed)
    mask = torch.rand(37, 90, device=DEVICE, generator=generator) < 0.35
    mask[5] = False
    mask[:, 40:58] = False
    mask[:, 75:] = False
    unseen = ~mask.any(dim=0)[None, None, :, None]
    keys, values = keys.where(~unseen, 30.0 + keys), values.where(~unseen, 60.0 + values)
    beyond = (torch.arange(90, device=DEVICE) >= 75)[None, None, :, None]
    keys, values = keys.masked_fill(beyond, float("nan")), values.masked_fill(beyond, float("nan"))
    got = prefill_attention(q, keys, values, mask)
    assert_matches(got, q, keys, values, mask)
    assert torch.equal(got[:, :, 5], torch.zeros_like(got[:, :, 5]))


@runs_here
def test_the_span_holds_exactly_the_keys_some_query_of_a_tile_sees():
    from hello_gpu.models.prefill_attention_kernel import SPAN_BLOCK_N, span_kernel, tiles_for
    block_m, block_n, _, _ = tiles_for(torch.float32, 16)
    generator = torch.Generator(device=DEVICE).manual_seed(5)
    queries, seq = 3 * block_m + 5, SPAN_BLOCK_N + 7 * block_n + 3
    masks = {"causal from 0": torch.arange(seq, device=DEVICE)[None, :] <= torch.arange(queries, device=DEVICE)[:, None],
             "random": torch.rand(queries, seq, device=DEVICE, generator=generator) < 0.01,
             "none": torch.zeros(queries, seq, dtype=torch.bool, device=DEVICE)}
    masks["random"][:block_m] = False                               # the first query tile sees nothing
    for name, mask in masks.items():
        tiles = -(-queries // block_m)
        span = torch.full((tiles, 2), -7, dtype=torch.int32, device=DEVICE)
        span_kernel[(tiles,)](mask.view(torch.uint8), span, queries, seq, seq, 1, BLOCK_M=block_m,
                              SPAN_BLOCK_N=SPAN_BLOCK_N)
        for tile in range(tiles):
            seen = mask[tile * block_m:(tile + 1) * block_m].any(dim=0).nonzero().flatten().tolist()
            assert span[tile].tolist() == ([seen[0], seen[-1] + 1] if seen else [0, 0]), (name, tile)


@runs_here
def test_a_single_query_token_is_left_to_the_eager_function():
    from hello_gpu.models.prefill_attention_kernel import attention as replacement
    q, keys, values, mask = prompt_inputs(1, 4, 2, 1, 11, 8, 3, torch.float32, seed=2)
    keys, values = torch.nan_to_num(keys), torch.nan_to_num(values)
    assert torch.equal(replacement(q, keys, values, mask), attention(q, keys, values, mask))


@runs_here
def test_the_kernel_refuses_what_it_would_read_wrongly():
    from hello_gpu.models.prefill_attention_kernel import prefill_attention
    q, keys, values, mask = prompt_inputs(1, 4, 2, 5, 31, 16, 0, torch.float32, seed=1)
    with pytest.raises(ValueError, match=r"prefill attention: mask must be a boolean \(5, 31\) matrix"):
        prefill_attention(q, keys, values, mask[:1])
    with pytest.raises(ValueError, match=r"mask must be a boolean \(5, 31\) matrix"):
        prefill_attention(q, keys, values, mask.float())
    with pytest.raises(ValueError, match="q's head_dim has stride 5"):
        prefill_attention(q.transpose(2, 3).contiguous().transpose(2, 3), keys, values, mask)
    with pytest.raises(ValueError, match="4 query heads is not a multiple of 3 key/value heads"):
        prefill_attention(q, keys[:, :1].expand(1, 3, 31, 16), values[:, :1].expand(1, 3, 31, 16), mask)
    with pytest.raises(ValueError, match="one of float16, bfloat16, float32"):
        prefill_attention(q.double(), keys.double(), values.double(), mask)
    with pytest.raises(ValueError, match="do not match q"):
        prefill_attention(q, keys[..., :8], values[..., :8], mask)


@runs_here
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_backend_checks_the_kernel_on_the_models_prompt_and_refuses_one_that_ignores_the_mask(dtype):
    replacement = REPLACEMENTS["prefill_attention"]
    kernel = replacement.load()
    device = torch.device(DEVICE)
    assert check_replacement(replacement, kernel, TINY, 2, device, dtype) is None
    q, keys, values, mask = replacement.example(TINY, RunShape.of(TINY, 2), device, dtype)
    length = q.shape[2]
    assert length > 1 and mask.shape == (length, keys.shape[2]) and q.stride(0) == length * (TINY.q_size + 2 * TINY.kv_size)

    def ignores_the_mask(q, keys, values, mask):
        return kernel(q, keys, values, torch.ones_like(mask))

    def sees_one_key_too_many(q, keys, values, mask):
        above = torch.ones_like(mask).triu(1) & ~torch.ones_like(mask).triu(2)      # key t + 1 for query t
        return kernel(q, keys, values, mask | above)

    def drops_the_first_tile(q, keys, values, mask):
        return kernel(q, keys, values, mask & (torch.arange(mask.shape[1], device=mask.device) >= 16))
    for wrong in (ignores_the_mask, sees_one_key_too_many, drops_the_first_tile):
        problem = check_replacement(replacement, wrong, TINY, 2, device, dtype)
        assert problem and problem.startswith("wrong result: element"), (wrong.__name__, problem)


@runs_here
def test_a_greedy_decode_with_both_attention_kernels_forced_in_gives_eagers_logits():
    from hello_gpu.models.logits import compare_greedy
    model = build_model(TINY, dtype=torch.float32, seed=12, device=DEVICE)
    prompt = torch.randint(0, TINY.vocab_size, (2, 21), generator=torch.Generator().manual_seed(13))
    eager = make_runner(model, "eager", batch=2, max_seq=40)
    ours = make_runner(model, "hello-gpu", batch=2, max_seq=40, force=["attention", "prefill_attention"])
    assert sorted(ours.used()) == ["attention", "prefill_attention"]
    result = compare_greedy(eager, ours, prompt.to(DEVICE), 6)
    assert result.ok and result.first_divergence is None, result.summary()
    assert 0 < max(result.gaps) < 1e-4 * max(result.scales)        # the kernels ran: not bit-identical


_COMPILE_SCRIPT = r"""
import json
import torch, triton
from hopper_ptx import counts, hopper_ptx
from hello_gpu.models.prefill_attention_kernel import SPAN_BLOCK_N, prefill_kernel, span_kernel, tiles_for
results = {}
for dtype, group, dim in (("bf16", 4, 128), ("fp16", 4, 64), ("fp32", 3, 8), ("bf16", 1, 128), ("bf16", 4, 256)):
    block_m, block_n, warps, stages = tiles_for({"bf16": torch.bfloat16, "fp16": torch.float16,
                                                  "fp32": torch.float32}[dtype], dim)
    block_d = max(16, triton.next_power_of_2(dim))
    for kernel, constants, options in (
            (prefill_kernel, {"GROUP": group, "HEAD_DIM": dim, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_D": block_d,
                              "PRECISION": "ieee" if dtype == "fp32" else "tf32"}, {"num_warps": warps, "num_stages": stages}),
            (span_kernel, {"BLOCK_M": block_m, "SPAN_BLOCK_N": SPAN_BLOCK_N}, {"num_warps": 4})):
        def kind(n):
            if n in constants: return "constexpr"
            if n == "mask_ptr": return "*u8"
            if n == "span_ptr": return "*i32"
            if n.endswith("_ptr"): return "*" + dtype
            if n == "scale_log2": return "fp32"
            return "i32"
        # as a launch specialises them: the model's pointers and row strides are multiples of 16 (D = 128: a key
        # row is 256 B; a mask row is max_seq bytes, 768 or 2304 in the runs)
        ptx = hopper_ptx(kernel, constants, kind, options,
                         lambda n: n.endswith("_ptr") or (n.endswith("_stride") and n != "mask_col_stride"))
        results[f"{kernel.__name__} {dtype} G{group} D{dim}"] = counts(
            ptx, "local", "mma", "async_copies", "truncating", "round_to_nearest")
print(json.dumps(results))
"""


def test_the_kernels_compile_for_sm_90_on_tensor_cores_rounding_to_nearest_without_spills(compiled_mode):
    """What the interpreter cannot show: the prefill kernel (its span-bounded key loop included) compiles for the
    H100/H200 with the tiles it is launched with, at the 8B's (GROUP 4, D 128), the 1B's (D 64), MHA's, a
    256-wide head and an odd tiny shape; the 16-bit dots run on tensor cores, the next tiles' K, V and mask
    loads are issued ahead (cp.async: no load's mask depends on another load of the loop; when the K/V masks
    read the mask tile, there were none), results round to nearest, and nothing spills to local memory."""
    for name, found in compiled_mode(_COMPILE_SCRIPT).items():
        assert found["local"] == 0 and found["truncating"] == 0, (name, found)
        if "prefill_kernel" in name and "fp32" not in name:
            assert found["round_to_nearest"] > 0 and found["mma"] > 0, (name, found)
        if "prefill_kernel" in name and "D8" not in name:
            assert found["async_copies"] > 0, (name, found)


# ------------------------------------------------------------------------------------------ GPU tier

@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("batch, heads, kv_heads, length, seq, dim, start", [
    (1, 32, 8, 512, 768, 128, 0), (1, 32, 8, 512, 768, 64, 0), (1, 32, 8, 2048, 2304, 128, 0),
    (4, 32, 8, 300, 1000, 128, 77), (2, 32, 32, 129, 200, 128, 0), (1, 6, 2, 50, 100, 8, 20)])
def test_the_kernel_compiled_at_the_models_sizes(batch, heads, kv_heads, length, seq, dim, start, dtype):
    from hello_gpu.models.prefill_attention_kernel import prefill_attention
    inputs = prompt_inputs(batch, heads, kv_heads, length, seq, dim, start, dtype, seed=length + seq)
    assert_matches(prefill_attention(*inputs), *inputs)


def test_the_attention_kernels_are_checked_and_timed_at_the_runs_own_prompt_and_cache():
    """make_runner(prompt=) hands the run's shape down: the prompt's attention is checked and timed on a prompt
    of the run's length in a cache of the run's positions, decode attention over that cache filled to the
    middle of the decode, and each timed reason says the shape (the 8B's prefill kernel, chosen at 512 of 768,
    was then run at 2048 of 2050)."""
    from dataclasses import replace

    from hello_gpu.bench import compare
    seen = {}

    def watched(name):
        def function(q, keys, values, mask):
            seen.setdefault(name, set()).add((q.shape[2], keys.shape[2], int(mask[-1].sum())))
            return attention(q, keys, values, mask)
        return function
    registry = {name: replace(REPLACEMENTS[name], load=lambda name=name: watched(name))
                for name in ("attention", "prefill_attention")}
    model = build_model(TINY, dtype=torch.float32, seed=21)
    runner = make_runner(model, "hello-gpu", batch=1, max_seq=40, prompt=29, replacements=registry,
                         timer=lambda a, b: compare(a, b, max_seconds=0.05))
    assert seen == {"prefill_attention": {(29, 40, 29)}, "attention": {(1, 40, 29 + (40 - 29) // 2 + 1)}}, seen
    assert all(choice.speedup is not None and "(batch 1, prompt 29 of 40 positions)" in choice.reason
               for choice in runner.choices), runner.choices
    assert RunShape.of(TINY, 3) == RunShape(3, 256, 170)              # tiny: max_position 256, 2/3 of it
    assert RunShape.of(TINY, 1, max_seq=1) == RunShape(1, 1, 1)                      # a one-position cache
    with pytest.raises(ValueError, match="prompt 41 of 40 cache positions"):
        RunShape.of(TINY, 1, max_seq=40, prompt=41)


def test_the_float64_attention_reference_taken_a_block_of_queries_at_a_time_is_the_whole_one(monkeypatch):
    """The check's float64 answer is computed a block of query rows at a time (1.1 GB of scores at the 8B's
    p2048 prompt otherwise): with blocks of 3 rows it equals SDPA over all rows at once, to float64 rounding."""
    import hello_gpu.models.backends as backends
    q, keys, values, mask = REPLACEMENTS["prefill_attention"].example(TINY, RunShape(2, 23, 17), torch.device("cpu"),
                                                                     torch.float32)
    whole = attention(q.double(), keys.double(), values.double(), mask)
    monkeypatch.setattr(backends, "ATTENTION_FLOAT64_BLOCK", 3 * 2 * TINY.num_heads * 23)
    blocked = backends._attention_float64(q, keys, values, mask)
    assert blocked.dtype == torch.float64 and blocked.shape == whole.shape == (2, TINY.num_heads, 17, TINY.head_dim)
    torch.testing.assert_close(blocked, whole, rtol=1e-12, atol=1e-14)      # float64 summed in other orders
