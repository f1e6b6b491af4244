"""hello_gpu.models.linear_pdl_kernel: t04's decode GEMV with its first weight tile loaded before the dependent-launch
wait (the hello-gpu-pdl backend's linear at one row). Triton's interpreter on a machine without a GPU (PDL off there),
compiled on a GPU, where PDL's result must equal t04's bit for bit."""

from __future__ import annotations

import pytest
import torch

from hello_gpu.models import dependent_launch
from hello_gpu.models.linear_pdl_kernel import BLOCK_K, gemv, refusal
from hello_gpu.ops.linear import spec
from hello_gpu.runtime.device import gpu_vendor

DEVICE = "cuda" if gpu_vendor() is not None else "cpu"
# One row against weights of every kind of K: less than a tile, one tile, a tile and one, several tiles and a tail;
# N of 1, odd, and one past a program's two rows.
SHAPES = [(1, 1), (3, 31), (5, BLOCK_K), (2049, BLOCK_K + 1), (7, 3 * BLOCK_K + 5)]


def _inputs(n: int, k: int, dtype: torch.dtype, seed: int, lead=(1, 1)):
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(*lead, k, device=DEVICE, dtype=dtype, generator=generator) + 0.25     # never zeros
    weight = torch.randn(n, k, device=DEVICE, dtype=dtype, generator=generator) / k ** 0.5
    return x, weight


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n,k", SHAPES)
def test_one_row_matches_float64_within_the_linear_ladders_bound(n, k, dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())              # fresh inputs each run, named on failure
    x, weight = _inputs(n, k, dtype, seed)
    out = gemv(x, weight)
    assert out.shape == (1, 1, n) and out.dtype == dtype
    problems = spec.invariants((x.reshape(1, k), weight), out.reshape(1, n))
    assert not problems, f"seed {seed}: {problems}"


def test_a_skipped_first_tile_would_fail_the_check():
    """The check is tight enough for the change this kernel makes: the first tile's products dropped (what a
    wrong peel of the first step would do) fails at a K of two tiles."""
    x, weight = _inputs(3, 2 * BLOCK_K, torch.bfloat16, seed=11)
    wrong = gemv(x[..., BLOCK_K:].contiguous(), weight[:, BLOCK_K:].contiguous())
    assert spec.invariants((x.reshape(1, -1), weight), wrong.reshape(1, -1))


def test_what_it_does_not_take_is_refused_by_name():
    x, weight = _inputs(4, 64, torch.bfloat16, seed=3)
    assert refusal(x, weight) is None
    assert "one row only (x has 2)" in refusal(torch.cat([x, x], dim=1), weight)
    assert "bfloat16 or float16" in refusal(x.float(), weight.float())
    assert "of one dtype" in refusal(x, weight.half())
    assert "do not multiply" in refusal(x, weight[:, :32])
    assert "unit column stride" in refusal(x, weight.t().contiguous().t())
    with pytest.raises(ValueError, match="one row only"):
        gemv(torch.cat([x, x], dim=1), weight)
    why_not = dependent_launch.usable(torch.device(DEVICE))
    if why_not:
        with pytest.raises(ValueError, match="pdl=True: no programmatic dependent launch"):
            gemv(x, weight, pdl=True)


def test_the_decode_linear_asks_for_it_only_with_pdl_and_one_row(monkeypatch):
    """The linear replacement takes ``pdl`` (so hello-gpu-pdl asks it), runs this kernel for one 16-bit row with it,
    and ops.linear otherwise."""
    from hello_gpu.models import linear_pdl_kernel
    from hello_gpu.models.backends import REPLACEMENTS
    calls = []
    monkeypatch.setattr(linear_pdl_kernel, "gemv", lambda x, weight, pdl=False: calls.append(pdl) or x)
    decode_linear = REPLACEMENTS["linear"].load()
    x, weight = _inputs(4, 64, torch.bfloat16, seed=5)
    decode_linear(x, weight)
    assert calls == []                                            # without pdl: ops.linear, as hello-gpu runs it
    decode_linear(x, weight, pdl=True)
    assert calls == [True]
    decode_linear(torch.cat([x, x]), weight, pdl=True)            # two rows: ops.linear
    assert calls == [True]


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE == "cpu", reason="programmatic dependent launch is a CUDA feature: no GPU here")
@pytest.mark.parametrize("n,k", [(14336, 4096), (4096, 14336), (2049, BLOCK_K + 1)])
def test_with_pdl_the_result_is_t04s_bit_for_bit(n, k):
    from hello_gpu.ops import linear, linear_rung
    why_not = dependent_launch.usable(torch.device(DEVICE))
    if why_not:
        pytest.skip(why_not)
    x, weight = _inputs(n, k, torch.bfloat16, seed=int(torch.randint(0, 2**31 - 1, ()).item()))
    assert linear_rung(x.reshape(1, k), weight) == "linear/t04_evict_first_gemv"
    expected = linear(x.reshape(1, k), weight)
    assert torch.equal(gemv(x, weight, pdl=True).reshape(1, n), expected)
    assert torch.equal(gemv(x, weight).reshape(1, n), expected)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE == "cpu", reason="programmatic dependent launch is a CUDA feature: no GPU here")
def test_a_graphed_bf16_decode_with_the_early_weight_gemv_gives_eagers_logits():
    """hello-gpu-pdl with the linear forced in, in bf16 (where one row runs this kernel), captured in a CUDA graph:
    eager's logits within the greedy comparison's bf16 rule at every step."""
    from hello_gpu.models import build_model, compare_greedy, make_runner
    from hello_gpu.models.llama import CONFIGS
    why_not = dependent_launch.usable(torch.device(DEVICE))
    if why_not:
        pytest.skip(why_not)
    model = build_model(CONFIGS["tiny"], dtype=torch.bfloat16, seed=8, device=DEVICE)
    prompt = torch.randint(0, CONFIGS["tiny"].vocab_size, (1, 5), generator=torch.Generator().manual_seed(10))
    eager = make_runner(model, "eager", batch=1, max_seq=11)
    ours = make_runner(model, "hello-gpu-pdl", batch=1, max_seq=11, force=["linear"])
    assert "linear" in ours.used(), ours.used()
    assert any(note.startswith("programmatic dependent launch") and "linear" in note for note in ours.notes), ours.notes
    result = compare_greedy(eager, ours, prompt.to(DEVICE), 6)
    assert result.ok, result.summary()

