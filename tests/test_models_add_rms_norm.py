"""The fused residual add + RMSNorm kernel (hello_gpu.models.add_rms_norm_kernel): against float64, on odd
widths, with poisoned outputs, in Triton's interpreter on the CPU (conftest sets TRITON_INTERPRET=1 where
there is no GPU) or on the GPU; then swapped into the tiny model's hello-gpu backend."""

from __future__ import annotations

import pytest
import torch

from hello_gpu.ops.checking import INTERPRETER_BFLOAT16
from hello_gpu.ops.rung import triton_interpreter_on
from hello_gpu.runtime.device import gpu_vendor

DEVICE = "cuda" if gpu_vendor() is not None else "cpu"
runs_here = pytest.mark.skipif(DEVICE == "cpu" and not triton_interpreter_on(),
                               reason="no GPU and TRITON_INTERPRET is not 1: the kernel cannot run here")
# Relative error of the norm against float64 from the same stored sum: its own rounding (2^-9 in bf16,
# 2^-12 in fp16, ~2^-23 in fp32) plus float32 arithmetic, with a factor 2 of room.
NORM_RTOL = {torch.bfloat16: 2**-8, torch.float16: 2**-11, torch.float32: 2**-20}


def inputs(rows: int, hidden: int, dtype: torch.dtype, seed: int):
    generator = torch.Generator().manual_seed(seed)
    residual = torch.randn(rows, hidden, generator=generator) * 3
    delta = torch.randn(rows, hidden, generator=generator) + 0.5
    weight = 1 + 0.1 * torch.randn(hidden, generator=generator)
    return [t.to(DEVICE, dtype) for t in (residual, delta, weight)]


def expected(residual, delta, weight, eps, total):
    """Float64 norm of the sum the kernel stored (its rounding is checked on its own, bit for bit)."""
    wide = total.double()
    return wide * torch.rsqrt(wide.square().mean(-1, keepdim=True) + eps) * weight.double()


@runs_here
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("rows,hidden", [(1, 1), (3, 31), (2, 127), (1, 1000), (2, 4097), (5, 48)])
def test_the_fused_kernel_matches_float64_and_stores_the_sum_torch_stores(rows, hidden, dtype):
    if DEVICE == "cpu" and dtype == torch.bfloat16:
        pytest.skip(INTERPRETER_BFLOAT16)      # it truncates float32 -> bfloat16: the sum is not torch's
    check_fused(rows, hidden, dtype)


def check_fused(rows: int, hidden: int, dtype: torch.dtype) -> None:
    from hello_gpu.models.add_rms_norm_kernel import add_rms_norm
    residual, delta, weight = inputs(rows, hidden, dtype, seed=rows * 7 + hidden)
    total, normed = add_rms_norm(residual, delta, weight, 1e-5)
    assert torch.equal(total, residual + delta)          # float32 add, rounded once: torch's own sum
    want = expected(residual, delta, weight, 1e-5, total)
    error = (normed.double() - want).abs()
    assert normed.dtype == dtype and normed.shape == residual.shape
    assert (error <= NORM_RTOL[dtype] * want.abs() + 1e-6).all(), float((error / want.abs()).max())


@runs_here
def test_every_element_is_written_into_poisoned_outputs():
    from hello_gpu.models.add_rms_norm_kernel import add_rms_norm_kernel
    residual, delta, weight = inputs(3, 1823, torch.float16, seed=11)
    total = torch.full_like(residual, float("nan"))
    normed = torch.full_like(residual, float("nan"))
    add_rms_norm_kernel[(3,)](residual, delta, weight, total, normed, 1e-5, HIDDEN=1823, BLOCK=2048, PDL=False,
                              num_warps=4)
    assert torch.isfinite(total).all() and torch.isfinite(normed).all()
    assert torch.equal(total, residual + delta)
    want = expected(residual, delta, weight, 1e-5, total)
    assert ((normed.double() - want).abs() <= NORM_RTOL[torch.float16] * want.abs() + 1e-6).all()


@runs_here
def test_the_fused_kernel_keeps_the_callers_shape_and_refuses_what_it_would_read_wrongly():
    from hello_gpu.models.add_rms_norm_kernel import add_rms_norm
    residual, delta, weight = inputs(6, 64, torch.float32, seed=3)
    total, normed = add_rms_norm(residual.view(2, 3, 64), delta.view(2, 3, 64), weight, 1e-6)
    assert total.shape == normed.shape == (2, 3, 64)
    with pytest.raises(ValueError, match="strides"):
        add_rms_norm(residual.t().contiguous().t(), delta, weight, 1e-6)
    with pytest.raises(ValueError, match=r"weight must have shape \(64,\)"):
        add_rms_norm(residual, delta, weight[:32], 1e-6)
    with pytest.raises(TypeError, match="float64 is not supported"):
        add_rms_norm(residual.double(), delta.double(), weight.double(), 1e-6)
    with pytest.raises(ValueError, match="must have one shape"):
        add_rms_norm(residual, delta[:3], weight, 1e-6)


@runs_here
def test_the_fused_kernel_swapped_into_the_model_matches_eager_step_by_step():
    """The tiny model with add_rms_norm forced (checked against float64 eager first): every step's logits
    within float32 rounding of eager's, greedy tokens the same."""
    from hello_gpu.models.backends import make_runner
    from hello_gpu.models.llama import CONFIGS, build_model
    from hello_gpu.models.logits import compare_greedy
    model = build_model(CONFIGS["tiny"], device=DEVICE, dtype=torch.float32, seed=12)
    prompt = torch.randint(0, CONFIGS["tiny"].vocab_size, (2, 5), generator=torch.Generator().manual_seed(13))
    eager = make_runner(model, "eager", batch=2, max_seq=11)
    ours = make_runner(model, "hello-gpu", batch=2, max_seq=11, force=["add_rms_norm"])
    reasons = {c.name: c.reason for c in ours.choices}
    assert ours.used() == ["add_rms_norm"] and reasons["add_rms_norm"].startswith("forced"), reasons
    result = compare_greedy(eager, ours, prompt.to(DEVICE), 6)
    assert result.ok and result.first_divergence is None, result.summary()
    assert max(result.gaps) < 1e-4 * max(result.scales)


def test_a_fused_kernel_that_drops_the_add_is_refused():
    """check_replacement compares both outputs: a kernel whose sum is right but whose norm skipped the add fails."""
    from hello_gpu.models.backends import REPLACEMENTS, check_replacement
    from hello_gpu.models.llama import CONFIGS, rms_norm

    def norm_of_residual_only(residual, delta, weight, eps):
        return residual + delta, rms_norm(residual, weight, eps)
    problem = check_replacement(REPLACEMENTS["add_rms_norm"], norm_of_residual_only, CONFIGS["tiny"], 2,
                                torch.device("cpu"), torch.float32)
    assert problem.startswith("output 1: wrong result: element"), problem


# ------------------------------------------------------------------------------------------ GPU tier

@pytest.mark.gpu
@pytest.mark.skipif(gpu_vendor() is None, reason="needs a GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows,hidden", [(1, 4096), (16, 4096), (1, 2048), (3, 4097), (2, 1823), (1, 16384)])
def test_the_fused_kernel_on_the_gpu_at_the_models_widths_and_odd_ones(rows, hidden, dtype):
    """bfloat16 is checked here only (the interpreter truncates it): the sum bit for bit torch's."""
    check_fused(rows, hidden, dtype)


@pytest.mark.gpu
@pytest.mark.skipif(gpu_vendor() is None, reason="needs a GPU")
def test_the_hello_gpu_backend_decides_the_fused_add_rms_norm_by_a_measurement_on_the_gpu():
    from hello_gpu.models.backends import make_runner
    from hello_gpu.models.llama import build_model
    model = build_model("8b", device="cuda", dtype=torch.bfloat16, seed=0)
    runner = make_runner(model, "hello-gpu", batch=1, max_seq=64)
    choice = next(c for c in runner.choices if c.name == "add_rms_norm")
    assert choice.speedup is not None and choice.ci95 is not None, choice
    assert choice.used == choice.reason.startswith("faster"), choice


_COMPILE_SCRIPT = r"""
import json
import triton
from hopper_ptx import counts, hopper_ptx
from hello_gpu.models.add_rms_norm_kernel import add_rms_norm_kernel as kernel
results = {}
for dtype, hidden in (("bf16", 4096), ("bf16", 8192), ("fp16", 4096)):
    block = triton.next_power_of_2(hidden)
    constants = {"HIDDEN": hidden, "BLOCK": block, "PDL": hidden == 8192}   # one as a dependent launch
    ptx = hopper_ptx(kernel, constants, lambda n: "*" + dtype if n.endswith("_ptr") else "fp32",
                     {"num_warps": min(16, block // 512)})
    results[f"{dtype} {hidden}"] = counts(ptx, "round_to_nearest", "truncating", "local", "waits", "releases")
print(json.dumps(results))
"""


def test_the_kernel_compiles_for_sm_90_rounding_to_nearest_without_spills(compiled_mode):
    """What the interpreter cannot show (it truncates float32 -> bfloat16): on the GPU the stored sum and norm
    are rounded to nearest, as torch's add and the eager norm round, and a 4096 or 8192 row stays in registers."""
    for name, found in compiled_mode(_COMPILE_SCRIPT).items():
        assert found["round_to_nearest"] > 0 and found["truncating"] == 0 and found["local"] == 0, (name, found)
        # the 8192 row compiled as a programmatic dependent launch (models.dependent_launch): it waits and releases
        assert (found["waits"], found["releases"]) == ((1, 1) if name.endswith("8192") else (0, 0)), (name, found)
