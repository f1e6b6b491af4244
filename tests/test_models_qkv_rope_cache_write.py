"""hello_gpu.models.qkv_rope_cache_write_kernel: the attention's qkv projection, RoPE and the KV-cache write in one
launch at batch-1 decode (``ModelOps.qkv_rope_cache_write``). Triton's interpreter on a machine without a GPU,
compiled on a GPU."""

from __future__ import annotations

import pytest
import torch

from hello_gpu.models.backends import REPLACEMENTS, Choice, _check_case, choose_replacements, ops_with
from hello_gpu.models.llama import CONFIGS, qkv_rope_cache_write as eager_qkv_rope_cache_write
from hello_gpu.models.qkv_rope_cache_write_kernel import BLOCK_K, qkv_rope_cache_write, refusal
from hello_gpu.runtime.device import gpu_vendor
from model_checks import always_faster, assert_forced_decode_gives_eagers_logits

DEVICE = "cuda" if gpu_vendor() is not None else "cpu"
# (q heads, kv heads, head_dim, K, cache positions, position): MHA and GQA, head_dim 2 (one pair), odd pair
# counts, K below, at and past a tile and several tiles with a tail, the first and the last position
SHAPES = [(1, 1, 2, 1, 1, 0), (4, 2, 6, 31, 9, 8), (4, 1, 16, BLOCK_K, 33, 0), (2, 2, 10, BLOCK_K + 1, 5, 3),
          (6, 2, 8, 3 * BLOCK_K + 5, 17, 16)]


def _inputs(q_heads, kv_heads, dim, k, seq, position, dtype, seed, tokens=1):
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    n = (q_heads + 2 * kv_heads) * dim
    x = torch.randn(1, tokens, k, device=DEVICE, generator=generator) + 0.25          # never zeros
    weight = torch.randn(n, k, device=DEVICE, generator=generator) / k ** 0.5
    angles = 1000 * torch.rand(tokens, dim // 2, device=DEVICE, generator=generator, dtype=torch.float64)
    keys, values = (torch.randn(1, kv_heads, seq, dim, device=DEVICE, generator=generator) + 3 for _ in range(2))
    positions = torch.arange(position, position + tokens, device=DEVICE)
    return (x.to(dtype), weight.to(dtype), torch.cos(angles).float(), torch.sin(angles).float(), keys.to(dtype),
            values.to(dtype), positions)


def _problem(got, arguments) -> str | None:
    """The backend's own check of the replacement (its float64 reference, its bound) on a result already computed
    (the reference writes copies of the caches as they were before the call)."""
    return _check_case(REPLACEMENTS["qkv_rope_cache_write"], lambda *_: got, arguments, arguments[0].dtype)


def _call(arguments, **options):
    """The kernel on copies of the caches, so ``arguments`` keep the caches as they were."""
    x, weight, cos, sin, keys, values, positions = arguments
    return qkv_rope_cache_write(x, weight, cos, sin, keys.clone(), values.clone(), positions, **options)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("q_heads,kv_heads,dim,k,seq,position", SHAPES)
def test_one_token_matches_float64_linear_then_rope_and_the_cache_write(q_heads, kv_heads, dim, k, seq, position,
                                                                        dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())              # fresh inputs each run, named on failure
    arguments = _inputs(q_heads, kv_heads, dim, k, seq, position, dtype, seed)
    got = _call(arguments)
    assert got[0].is_contiguous() and got[0].shape == (1, q_heads, 1, dim)
    problem = _problem(got, arguments)
    assert problem is None, f"seed {seed}: {problem}"


def test_the_check_fails_swapped_halves_an_unrotated_k_or_a_lost_tile():
    """What the bound must catch: the rotation's halves swapped in q (a wrong sin sign), k written unrotated, the
    first K tile left out."""
    arguments = _inputs(4, 2, 8, 2 * BLOCK_K, 9, 4, torch.float32, seed=4)
    x, weight, cos, sin, keys, values, positions = arguments
    assert _problem(_call(arguments), arguments) is None
    assert _problem(_call((x, weight, cos, -sin, keys, values, positions)), arguments)
    no_rotation = _call((x, weight, torch.ones_like(cos), torch.zeros_like(sin), keys, values, positions))
    assert _problem(no_rotation, arguments)
    short = _call((x[..., BLOCK_K:].contiguous(), weight[:, BLOCK_K:].contiguous(), cos, sin, keys, values, positions))
    assert _problem(short, arguments)


def test_a_position_outside_the_cache_writes_nothing():
    """As the rope_cache_write kernel: q is still rotated; neither cache changes."""
    arguments = _inputs(4, 2, 8, 40, 9, 0, torch.float32, seed=5)
    x, weight, cos, sin, keys, values, _ = arguments
    outside = torch.tensor([9], device=DEVICE)
    q, got_keys, got_values = _call((x, weight, cos, sin, keys, values, outside))
    assert torch.equal(got_keys, keys) and torch.equal(got_values, values)
    reference = _call(arguments)[0]
    assert torch.equal(q, reference)


def test_what_it_does_not_take_is_refused_by_name():
    arguments = _inputs(4, 2, 8, 64, 9, 3, torch.bfloat16, seed=3)
    x, weight, cos, sin, keys, values, positions = arguments
    assert refusal(*arguments) is None
    assert "one token of one row only" in refusal(torch.cat([x, x], dim=1), weight, cos, sin, keys, values, positions)
    assert "one dtype" in refusal(x.float(), weight.float(), cos, sin, keys, values, positions)
    assert "do not multiply" in refusal(x, weight[:, :32], cos, sin, keys, values, positions)
    assert "q heads then 2 k heads" in refusal(x, weight[:-8], cos, sin, keys, values, positions)
    assert "one token's (1, 4)" in refusal(x, weight, cos[:, :2], sin[:, :2], keys, values, positions)
    assert "one integer position" in refusal(x, weight, cos, sin, keys, values, positions.float())
    assert "unit column stride" in refusal(x, weight.t().contiguous().t(), cos, sin, keys, values, positions)
    assert "must be a torch.Tensor" in refusal(x, weight, cos, sin, keys, values, [3])
    with pytest.raises(ValueError, match="qkv_rope_cache_write: one token of one row only"):
        qkv_rope_cache_write(torch.cat([x, x], dim=1), weight, cos, sin, keys, values, positions)


def test_the_backend_runs_it_for_one_token_and_linear_then_rope_for_a_prompt():
    """ops_with's qkv_rope_cache_write: the kernel for a decode token, the run's own linear, RoPE and cache write for
    a prompt (here eager's: equal to the eager composition bit for bit)."""
    ops = ops_with([Choice("qkv_rope_cache_write", "GEMM/GEMV", True, "forced")])
    arguments = _inputs(4, 2, 8, 40, 9, 3, torch.bfloat16, seed=6)
    x, weight, cos, sin, keys, values, positions = arguments
    assert _problem(ops.qkv_rope_cache_write(x, weight, cos, sin, keys.clone(), values.clone(), positions),
                    arguments) is None
    prompt = _inputs(4, 2, 8, 40, 9, 2, torch.bfloat16, seed=7, tokens=4)
    x, weight, cos, sin, keys, values, positions = prompt
    got = ops.qkv_rope_cache_write(x, weight, cos, sin, keys.clone(), values.clone(), positions)
    expected = eager_qkv_rope_cache_write(x, weight, cos, sin, keys.clone(), values.clone(), positions)
    assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_it_is_timed_against_the_linear_and_rope_the_run_chose():
    names = ("linear", "rope", "cache_write", "rope_cache_write", "qkv_rope_cache_write")
    registry = {name: REPLACEMENTS[name] for name in names}
    choices = {c.name: c for c in choose_replacements(CONFIGS["tiny"], batch=1, device=DEVICE, dtype=torch.bfloat16,
                                                      timer=always_faster, replacements=registry)}
    fused = choices["qkv_rope_cache_write"]
    assert fused.used and "1.50x linear (swapped in) then rope_cache_write (swapped in) [" in fused.reason, \
        fused.reason


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_greedy_decode_with_it_forced_in_gives_eagers_logits(dtype):
    """Prefill (a prompt: linear, then RoPE and the cache write) and decode (one token: the kernel) at batch 1; the
    decode reads the keys the kernel wrote at every earlier step."""
    assert_forced_decode_gives_eagers_logits("qkv_rope_cache_write", dtype, DEVICE)


_COMPILE_SCRIPT = r"""
import json, re
from hopper_ptx import counts, hopper_ptx
from hello_gpu.models import qkv_rope_cache_write_kernel as module
kinds = {"cos_ptr": "*fp32", "sin_ptr": "*fp32", "positions_ptr": "*i64"}
results = {}
for dtype, q_heads, kv_heads, half in (("bf16", 32, 8, 64), ("fp16", 32, 8, 32)):
    for pdl in (False, True):
        constants = {"Q_HEADS": q_heads, "KV_HEADS": kv_heads, "HALF": half, "BLOCK_K": module.BLOCK_K, "PDL": pdl}
        ptx = hopper_ptx(module.qkv_rope_write_kernel, constants,
                         lambda n: kinds.get(n, "*" + dtype if n.endswith("_ptr") else "i32"),
                         {"num_warps": module.WARPS, "num_stages": 1})
        wait = ptx.find("griddepcontrol.wait")
        first_evict = re.search(r"ld\.global[.\w:]*evict_first", ptx)
        results[f"{dtype}{' pdl' if pdl else ''}"] = {
            **counts(ptx, "local", "waits", "round_to_nearest"),
            "weight_before_wait": bool(first_evict) and (wait < 0 or first_evict.start() < wait),
        }
print(json.dumps(results))
"""


def test_it_compiles_for_sm_90_without_spills(compiled_mode):
    """The 8B's heads (bf16, head_dim 128) and the 1B's (fp16 here, head_dim 64), with and without PDL: no spill,
    results rounded to nearest, the first weight loads before the dependent-launch wait."""
    for name, found in compiled_mode(_COMPILE_SCRIPT).items():
        assert found["local"] == 0 and found["round_to_nearest"] > 0, (name, found)
        assert found["weight_before_wait"] and found["waits"] == (1 if name.endswith(" pdl") else 0), (name, found)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE == "cpu", reason="the 8B's shapes compiled: no GPU here")
@pytest.mark.parametrize("pdl", [False, True])
def test_the_8bs_shape_on_the_gpu(pdl):
    """32 query and 8 KV heads of 128, K = 4096, a 768-position cache at position 700, with and without PDL."""
    from hello_gpu.models import dependent_launch
    if pdl and dependent_launch.usable(torch.device(DEVICE)):
        pytest.skip(dependent_launch.usable(torch.device(DEVICE)))
    arguments = _inputs(32, 8, 128, 4096, 768, 700, torch.bfloat16, seed=int(torch.randint(0, 2**31 - 1, ()).item()))
    problem = _problem(_call(arguments, pdl=pdl), arguments)
    assert problem is None, problem
