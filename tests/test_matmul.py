"""The matmul and linear specs, their launchers' refusals and v08's tile plumbing (CPU tier), and the
tile sweep's candidates and t04's autotuner on the GPU (GPU tier). Every rung's own correctness is
checked by tests/test_ops_ladders.py (interpreter, compile gate, GPU) and the known-wrong rungs by
tests/test_known_wrong.py."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from hello_gpu.ops import load_op
from hello_gpu.ops.checking import compare_outputs
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.device import gpu_vendor

HAS_GPU = gpu_vendor() is not None
MATMUL, LINEAR = load_op("matmul"), load_op("linear")
SHAPES = ((1, 1, 1), (3, 5, 517), (39, 41, 37), (17, 9, 4095))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ("float32", "bfloat16", "float16"))
@pytest.mark.parametrize("distribution", ("normal", "large"))
def test_torch_in_the_inputs_dtype_passes_both_bounds(shape, dtype, distribution):
    """What PyTorch computes in the operator's own dtype (float32 accumulation) is within the element
    and the Frobenius bounds: the bounds admit honest rounding."""
    spec = MATMUL.spec
    a, b = spec.make_inputs(shape, dtype, seed=5, distribution=distribution)
    assert a.shape == (shape[0], shape[2]) and b.shape == (shape[2], shape[1]) and a.dtype == getattr(torch, dtype)
    assert bool((a != 0).all()) and bool((b != 0).all()) and a.is_contiguous() and b.is_contiguous()
    expected = spec.reference(a, b)
    native = (a.float() @ b.float()).to(a.dtype)
    rtol, atol = spec.tolerance((a, b), dtype)
    assert compare_outputs(native, expected, rtol, atol)[2] is None
    assert spec.invariants((a, b), native) == []


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
def test_one_skipped_k_tile_of_one_tile_row_fails_both_bounds(dtype):
    """The rows of C a last tile row owns (32 of 129), without their last K step of 32: the element
    bound and the Frobenius bound each reject it on their own, at 129x131x4095 as at 129x131x64."""
    spec = MATMUL.spec
    for k in (64, 4095):
        a, b = spec.make_inputs((129, 131, k), dtype, seed=9)
        expected = spec.reference(a, b)
        wrong = expected.clone()
        last = (k - 1) // 32 * 32
        wrong[96:] -= a[96:, last:].double() @ b[last:].double()
        wrong = wrong.to(a.dtype)
        rtol, atol = spec.tolerance((a, b), dtype)
        assert compare_outputs(wrong, expected, rtol, atol)[2] is not None, k
        problems = spec.invariants((a, b), wrong)
        assert problems and "relative Frobenius error" in problems[0], k


def test_tf32_fails_the_float32_bound():
    """Inputs rounded to TF32's 10 mantissa bits (what TF32 tensor cores multiply) fail float32."""
    spec = MATMUL.spec
    a, b = spec.make_inputs((64, 64, 1024), "float32", seed=2)
    tf32 = lambda x: (x.view(torch.int32) & ~0x1FFF).view(torch.float32)       # noqa: E731 - truncate 13 bits
    assert spec.invariants((a, b), tf32(a) @ tf32(b))


def test_bounds_grow_with_k_as_stated():
    spec = MATMUL.spec
    assert spec.frobenius_bound("float32", 4096) == 1e-5
    assert spec.frobenius_bound("float32", 14336) == pytest.approx(2 * 2**-24 * math.sqrt(14336))
    assert spec.frobenius_bound("bfloat16", 14336) == 1e-2


def test_work_model_and_shapes():
    spec = MATMUL.spec
    work = spec.work((4096, 14336, 4096), "bfloat16")
    assert work.flops == 2 * 4096 * 14336 * 4096
    assert work.bytes == 2 * (4096 * 4096 + 4096 * 14336 + 4096 * 14336)
    assert spec.work((1, 1, 1), "float32").bytes == 12
    assert {(1, 14336, 4096), (16, 4096, 14336), (8192, 8192, 8192), (4096, 128256, 4096)} <= set(spec.BENCH_SHAPES)
    assert {(1, 1, 1), (1823, 781, 517), (1000, 1000, 1000)} <= set(spec.EDGE_SHAPES)
    assert any(4095 in shape for shape in spec.EDGE_SHAPES)
    with pytest.raises(ValueError, match=r"matmul takes an \(M, N, K\) shape"):
        spec.work((4096, 4096), "float32")
    with pytest.raises(ValueError, match="unknown distribution"):
        spec.make_inputs((2, 2, 2), "float32", seed=1, distribution="zeros")


def test_inputs_are_fresh_per_seed_and_linear_sees_matmuls_numbers():
    a1, b1 = MATMUL.spec.make_inputs((5, 7, 9), "float32", seed=1)
    a2, b2 = MATMUL.spec.make_inputs((5, 7, 9), "float32", seed=2)
    assert not torch.equal(a1, a2) and not torch.equal(b1, b2)
    x, weight = LINEAR.spec.make_inputs((5, 7, 9), "float32", seed=1)
    assert torch.equal(x, a1) and torch.equal(weight, b1.t()) and weight.is_contiguous()
    assert torch.allclose(LINEAR.spec.reference(x, weight), MATMUL.spec.reference(a1, b1), rtol=1e-13, atol=0)


def largest_made(function, *args) -> tuple:
    """(function(*args), the element count of the largest tensor any operation made while it ran: views excluded)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Largest(TorchDispatchMode):
        numel = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not func.is_view:
                for tensor in out if isinstance(out, (tuple, list)) else [out]:
                    if isinstance(tensor, torch.Tensor):
                        Largest.numel = max(Largest.numel, tensor.numel())
            return out
    with Largest():
        result = function(*args)
    return result, Largest.numel


def test_the_error_scale_widens_a_block_of_rows_at_a_time_never_the_whole_weight(monkeypatch):
    """The tolerance's row norms in float64 without a float64 copy of the weight: the hello-gpu backend's check of
    the 8B's head (128256 x 4096 bf16) widened it whole, 4.2 GB, the peak of its model run (21.9 GB, eager's
    16.3). Same value as the whole computation, NaN kept."""
    from hello_gpu.ops.matmul import spec
    x, weight = LINEAR.spec.make_inputs((3, 389, 48), "bfloat16", seed=4)
    whole = (float(x.double().norm(dim=1).max()) * float(weight.double().norm(dim=1).max()), 48)
    assert spec.error_scale(x, weight) == pytest.approx(whole, rel=1e-15)
    monkeypatch.setattr(spec, "FLOAT64_BLOCK_ELEMENTS", 10 * 48)            # 10 rows of the weight a block
    scale, made = largest_made(spec.error_scale, x, weight)
    assert scale == pytest.approx(whole, rel=1e-15) and made <= 10 * 48, made
    assert LINEAR.spec.tolerance((x, weight), "bfloat16") == spec.tolerance_for(*whole, "bfloat16")
    monkeypatch.setattr(spec, "FLOAT64_BLOCK_ELEMENTS", 7)                  # a row longer than a block: one row
    assert spec.largest_row_norm(weight) == pytest.approx(float(weight.double().norm(dim=1).max()), rel=1e-15)
    poisoned = weight.clone()
    poisoned[300, 5] = float("nan")                                         # in a block after the first
    assert math.isnan(spec.largest_row_norm(poisoned))


def test_launchers_refuse_what_the_kernels_cannot_read_by_name():
    """Before any kernel is touched (None stands in for it)."""
    matmul_launch = load_module(MATMUL.path / "v01_naive.py", "test_matmul_v01").run
    linear_launch = load_module(LINEAR.path / "v01_warp_per_row.py", "test_linear_v01").run
    weight = torch.randn(6, 4)
    with pytest.raises(ValueError, match=r"b must be contiguous row-major.*use the linear operator"):
        matmul_launch(None, torch.randn(3, 4), weight.t())
    with pytest.raises(ValueError, match="a's columns must equal b's rows"):
        matmul_launch(None, torch.randn(3, 4), torch.randn(5, 6))
    with pytest.raises(ValueError, match="these kernels take float32"):
        matmul_launch(None, torch.randn(3, 4, dtype=torch.bfloat16), torch.randn(4, 6, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"out must be a contiguous \(3, 6\) float32"):
        matmul_launch(None, torch.randn(3, 4), torch.randn(4, 6), out=torch.empty(6, 3).t())
    with pytest.raises(ValueError, match=r"weight must be contiguous row-major.*\(N, K\)"):
        linear_launch(None, torch.randn(3, 4), torch.randn(4, 6).t().t().t())
    with pytest.raises(ValueError, match=r"both need K = 4 columns"):
        linear_launch(None, torch.randn(3, 4), torch.randn(6, 5))
    with pytest.raises(ValueError, match="they must match"):
        linear_launch(None, torch.randn(3, 4), torch.randn(6, 4, dtype=torch.float16))


def test_v08_launcher_reads_the_tiles_the_kernel_was_compiled_with():
    launcher = load_module(MATMUL.path / "v08_tuned_tiles.py", "test_matmul_v08")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import matmul_tile_sweep as sweep
    finally:
        sys.path.pop(0)
    assert tuple(launcher.DEFAULTS[name] for name in sweep.NAMES) in sweep.CANDIDATES
    kernel = MATMUL.rung("v08_tuned_tiles").kernel(arch="sm_90")
    assert launcher.tiles_of(kernel) == launcher.DEFAULTS
    from hello_gpu import hip
    from hello_gpu.ops.rung import include_dirs_for
    path = MATMUL.rung("v08_tuned_tiles").path
    other = hip(path.read_text(), entry="matmul_tuned_tiles", include_dirs=include_dirs_for(path),
                defines={f"HG_MATMUL_{n}": v for n, v in zip(sweep.NAMES, sweep.CANDIDATES[0])})
    assert launcher.tiles_of(other) == dict(zip(sweep.NAMES, sweep.CANDIDATES[0]))


def test_every_route_is_timed_with_the_baselines_of_the_issue():
    """The issue's baselines, in the same run as each route's rungs: torch.mm / F.linear in the run's dtype
    (v00_torch: cuBLAS, float32 with TF32 off), torch.compile (v00_torch_compile) and torch.compile in
    max-autotune with its compile time capped (peer_torch_max_autotune)."""
    from hello_gpu.ops.ladder import select_rungs
    for op in (MATMUL, LINEAR):
        for route in ("hip", "cuda", "triton"):
            baselines = [rung.id for rung in select_rungs(op, route) if rung.is_baseline]
            assert baselines == ["v00_torch", "v00_torch_compile", "peer_torch_max_autotune"], (op.name, route)
        peer = op.rung("peer_torch_max_autotune")
        assert peer.metadata.package == "torch" and MATMUL.path / "max_autotune.py" in peer.sources
    options = load_module(MATMUL.path / "max_autotune.py", "test_matmul_max_autotune").OPTIONS
    assert options["max_autotune"] and options["triton.cudagraphs"] is False
    assert 0 < options["precompilation_timeout_seconds"] <= 300
    assert set(options["max_autotune_gemm_backends"].split(",")) == {"ATEN", "TRITON"}
    assert "TF32 off" in MATMUL.rung("v00_torch").metadata.change


# ------------------------------------------------------------------------------------------ GPU tier


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_every_sweep_candidate_is_correct_on_the_gpu():
    """Each candidate of benchmarks/matmul_tile_sweep.py, compiled with its defines, on every edge path."""
    from hello_gpu import hip
    from hello_gpu.ops.checking import output_failure
    from hello_gpu.ops.rung import include_dirs_for
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import matmul_tile_sweep as sweep
    finally:
        sys.path.pop(0)
    rung = MATMUL.rung("v08_tuned_tiles")
    launcher = load_module(rung.companion, "test_matmul_v08_gpu")
    for candidate in sweep.CANDIDATES:
        kernel = hip(rung.path.read_text(), entry="matmul_tuned_tiles", include_dirs=include_dirs_for(rung.path),
                     defines={f"HG_MATMUL_{n}": v for n, v in zip(sweep.NAMES, candidate)})
        for shape in ((1, 1, 1), (1823, 781, 517), (257, 132, 52), (4095, 7, 3)):
            inputs = MATMUL.spec.make_inputs(shape, "float32", seed=3, device="cuda")
            assert output_failure(MATMUL.spec, inputs, launcher.run(kernel, *inputs), "float32") is None, (candidate, shape)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_the_autotuned_rung_names_its_winner(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    module = load_module(MATMUL.rung("t04_autotuned").path, "test_matmul_t04_gpu")
    a, b = MATMUL.spec.make_inputs((512, 384, 256), "bfloat16", seed=4, device="cuda")
    module.run(a, b)
    winners = module.winners()
    assert len(winners) == 1 and "BLOCK_M" in next(iter(winners.values()))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_the_float32_baseline_runs_without_tf32_and_the_checker_would_see_tf32():
    """The ladder's float32 baseline is cuBLAS with TF32 off (PyTorch's default, recorded in every record's
    environment as float32_matmul); the same call with TF32 on fails the float32 Frobenius bound, so a
    process that turned TF32 on would lose its baseline to the checker instead of timing it."""
    spec = MATMUL.spec
    a, b = spec.make_inputs((256, 256, 1024), "float32", seed=11, device="cuda")
    baseline = MATMUL.rung("v00_torch").build()
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert spec.invariants((a, b), baseline(a, b)) == []
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        assert spec.invariants((a, b), baseline(a, b)), "TF32 on: the float32 bound should reject the result"
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
