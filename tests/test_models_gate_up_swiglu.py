"""hello_gpu.models.gate_up_swiglu_kernel: the MLP's gate/up GEMV and SwiGLU in one launch at batch-1 decode
(``ModelOps.gate_up_swiglu``). Triton's interpreter on a machine without a GPU, compiled on a GPU."""

from __future__ import annotations

import pytest
import torch

from hello_gpu.models.backends import REPLACEMENTS, _check_case, choose_replacements, ops_with
from hello_gpu.models.gate_up_swiglu_kernel import BLOCK_K, gate_up_swiglu, refusal
from hello_gpu.models.llama import CONFIGS, gate_up_swiglu as eager_gate_up_swiglu
from hello_gpu.runtime.device import gpu_vendor
from model_checks import always_faster, assert_forced_decode_gives_eagers_logits

DEVICE = "cuda" if gpu_vendor() is not None else "cpu"
# (I outputs, K): one output, odd, one past a program's two; K below, at and past a tile, and several tiles and a tail
SHAPES = [(1, 1), (3, 31), (5, BLOCK_K), (2049, BLOCK_K + 1), (7, 3 * BLOCK_K + 5)]


def _inputs(width: int, k: int, dtype: torch.dtype, seed: int, rows: int = 1):
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(rows, 1, k, device=DEVICE, dtype=dtype, generator=generator) + 0.25       # never zeros
    weight = torch.randn(2 * width, k, device=DEVICE, dtype=dtype, generator=generator) / k ** 0.5
    return x, weight


def _problem(got: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> str | None:
    """The backend's own check of the replacement (float64 eager, the rounded-once bound) on a result already
    computed."""
    return _check_case(REPLACEMENTS["gate_up_swiglu"], lambda *_: got, (x, weight), x.dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("width,k", SHAPES)
def test_one_row_matches_float64_gate_up_then_swiglu(width, k, dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())              # fresh inputs each run, named on failure
    x, weight = _inputs(width, k, dtype, seed)
    problem = _problem(gate_up_swiglu(x, weight), x, weight)
    assert problem is None, f"seed {seed}: {problem}"


def test_the_check_fails_a_kernel_that_swaps_gate_and_up_or_drops_a_tile():
    """What the bound must catch: gate and up read from each other's half, or the first K tile left out."""
    x, weight = _inputs(6, 2 * BLOCK_K, torch.bfloat16, seed=4)
    gate, up = weight.chunk(2)
    assert _problem(gate_up_swiglu(x, torch.cat([up, gate])), x, weight)
    assert _problem(gate_up_swiglu(x[..., BLOCK_K:].contiguous(), weight[:, BLOCK_K:].contiguous()), x, weight)


def test_what_it_does_not_take_is_refused_by_name():
    x, weight = _inputs(4, 64, torch.bfloat16, seed=3)
    assert refusal(x, weight) is None
    assert "one row only (x has 2)" in refusal(torch.cat([x, x]), weight)
    assert "even number" in refusal(x, weight[:7])
    assert "bfloat16 or float16" in refusal(x.float(), weight.float())
    assert "do not multiply" in refusal(x, weight[:, :32])
    assert "unit column stride" in refusal(x, weight.t().contiguous().t())
    with pytest.raises(ValueError, match="gate_up_swiglu: one row only"):
        gate_up_swiglu(torch.cat([x, x]), weight)


def test_the_backend_runs_it_for_one_row_and_linear_then_swiglu_for_a_prompt():
    """ops_with's gate_up_swiglu: the kernel for a decode row, the run's own linear and swiglu for a prompt's rows
    (here eager's: equal to the eager composition bit for bit)."""
    from hello_gpu.models.backends import Choice
    ops = ops_with([Choice("gate_up_swiglu", "GEMM/GEMV", True, "forced")])
    x, weight = _inputs(5, 40, torch.bfloat16, seed=6)
    assert _problem(ops.gate_up_swiglu(x, weight), x, weight) is None
    prompt = torch.randn(1, 4, 40, dtype=torch.bfloat16, device=DEVICE)
    assert torch.equal(ops.gate_up_swiglu(prompt, weight), eager_gate_up_swiglu(prompt, weight))


def test_it_is_timed_against_the_linear_and_swiglu_the_run_chose():
    """Decided after linear and swiglu, timed against them as swapped in; a float32 model refuses it by name."""
    registry = {name: REPLACEMENTS[name] for name in ("linear", "swiglu", "gate_up_swiglu")}
    choices = {c.name: c for c in choose_replacements(CONFIGS["tiny"], batch=1, device=DEVICE, dtype=torch.bfloat16,
                                                      timer=always_faster, replacements=registry)}
    fused = choices["gate_up_swiglu"]
    assert fused.used and "1.50x linear (swapped in) then swiglu (swapped in) [" in fused.reason, fused.reason
    assert choices["linear"].used and choices["swiglu"].used        # both still run (other projections, prompts)
    choices = {c.name: c for c in choose_replacements(CONFIGS["tiny"], batch=1, device=DEVICE, dtype=torch.float32,
                                                      timer=always_faster, replacements=registry)}
    assert not choices["gate_up_swiglu"].used and "bfloat16 or float16" in choices["gate_up_swiglu"].reason


def test_a_greedy_bf16_decode_with_it_forced_in_gives_eagers_logits():
    """Prefill (a prompt's rows: linear then swiglu) and decode (one row: the kernel) of a bf16 model at batch 1."""
    assert_forced_decode_gives_eagers_logits("gate_up_swiglu", torch.bfloat16, DEVICE)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE == "cpu", reason="programmatic dependent launch is a CUDA feature: no GPU here")
def test_with_pdl_the_result_is_the_same_bit_for_bit():
    from hello_gpu.models import dependent_launch
    why_not = dependent_launch.usable(torch.device(DEVICE))
    if why_not:
        pytest.skip(why_not)
    x, weight = _inputs(14336, 4096, torch.bfloat16, seed=int(torch.randint(0, 2**31 - 1, ()).item()))
    plain = gate_up_swiglu(x, weight)
    assert _problem(plain, x, weight) is None
    assert torch.equal(gate_up_swiglu(x, weight, pdl=True), plain)
