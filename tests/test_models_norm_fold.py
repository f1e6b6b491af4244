"""hello_gpu.models.norm_fold: the RMSNorm folded into the projection after it (norm_qkv_rope_cache_write,
norm_gate_up_swiglu) and the layer half's end without a norm (linear_add). Triton's interpreter on a machine
without a GPU, compiled on a GPU."""

from __future__ import annotations

import pytest
import torch

from hello_gpu.models.backends import REPLACEMENTS, Choice, _check_case, choose_replacements, ops_with
from hello_gpu.models.gate_up_swiglu_kernel import BLOCK_K, norm_gate_up_swiglu
from hello_gpu.models.linear_add_rms_norm_kernel import linear_add
from hello_gpu.models.llama import CONFIGS, EAGER_OPS, build_model
from hello_gpu.models.qkv_rope_cache_write_kernel import norm_qkv_rope_cache_write
from hello_gpu.runtime.device import gpu_vendor
from model_checks import always_faster, assert_forced_decode_gives_eagers_logits

DEVICE = "cuda" if gpu_vendor() is not None else "cpu"
# K: below a tile, odd, at a tile, one past it, several tiles and a tail
WIDTHS = [31, BLOCK_K, BLOCK_K + 1, 3 * BLOCK_K + 5]


def _seed() -> int:
    return int(torch.randint(0, 2**31 - 1, ()).item())      # fresh inputs each run, named on failure


def _residual(k: int, dtype, generator) -> torch.Tensor:
    """A residual with spikes (one column in 7 ten times larger) and never zero: a norm that drops part of the sum
    of squares errs by the dropped share."""
    residual = torch.randn(1, 1, k, device=DEVICE, generator=generator) + 0.25
    residual[..., ::7] *= 10
    return residual.to(dtype)


def _norm(k: int, dtype, generator) -> torch.Tensor:
    return (1 + 0.1 * torch.randn(k, device=DEVICE, generator=generator)).to(dtype)


def _gate_up_arguments(width: int, k: int, dtype, seed: int) -> tuple:
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    residual, norm_weight = _residual(k, dtype, generator), _norm(k, dtype, generator)
    weight = (torch.randn(2 * width, k, device=DEVICE, generator=generator) / k ** 0.5).to(dtype)
    return residual, norm_weight, 1e-5, weight


def _qkv_arguments(k: int, dtype, seed: int, q_heads=4, kv_heads=2, dim=8, positions=12) -> tuple:
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    residual, norm_weight = _residual(k, dtype, generator), _norm(k, dtype, generator)
    weight = (torch.randn((q_heads + 2 * kv_heads) * dim, k, device=DEVICE, generator=generator) / k ** 0.5).to(dtype)
    angles = 100 * torch.rand(1, dim // 2, device=DEVICE, generator=generator, dtype=torch.float64)
    keys, values = (torch.randn(1, kv_heads, positions, dim, device=DEVICE, generator=generator).to(dtype)
                    for _ in range(2))
    position = torch.tensor([5], device=DEVICE)
    return (residual, norm_weight, 1e-5, weight, torch.cos(angles).float(), torch.sin(angles).float(), keys, values,
            position)


def _problem(name: str, got, arguments: tuple, dtype) -> str | None:
    """The backend's own check of the replacement (its float64 reference and bound) on a result computed already."""
    return _check_case(REPLACEMENTS[name], lambda *_: got, arguments, dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("k", WIDTHS)
def test_norm_gate_up_swiglu_matches_the_float64_norm_then_projection(k, dtype):
    seed = _seed()
    arguments = _gate_up_arguments(5, k, dtype, seed)
    problem = _problem("norm_gate_up_swiglu", norm_gate_up_swiglu(*arguments), arguments, dtype)
    assert problem is None, f"seed {seed}: {problem}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("k", WIDTHS)
def test_norm_qkv_rope_cache_write_matches_the_float64_norm_then_projection(k, dtype):
    seed = _seed()
    arguments = _qkv_arguments(k, dtype, seed)
    reference_arguments = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in arguments)
    got = norm_qkv_rope_cache_write(*arguments)
    problem = _problem("norm_qkv_rope_cache_write", got, reference_arguments, dtype)
    assert problem is None, f"seed {seed}: {problem}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("n,k", [(1, 1), (3, 31), (2049, BLOCK_K + 1), (7, 3 * BLOCK_K + 5)])
def test_linear_add_matches_the_float64_residual_plus_projection(n, k, dtype):
    seed = _seed()
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    x = (torch.randn(1, 1, k, device=DEVICE, generator=generator) + 0.25).to(dtype)
    weight = (torch.randn(n, k, device=DEVICE, generator=generator) / k ** 0.5).to(dtype)
    residual = _residual(n, dtype, generator)
    poisoned_before = residual.clone()
    problem = _problem("linear_add", linear_add(x, weight, residual), (x, weight, residual), dtype)
    assert problem is None, f"seed {seed}: {problem}"
    assert torch.equal(residual, poisoned_before), "linear_add wrote into its residual argument"


def test_the_checks_fail_a_fold_that_drops_a_tile_of_the_norm_or_of_the_projection():
    """What the bounds must catch: the norm's sum of squares over the first K tile only (the residual's later
    columns scaled to 0 in the squares: a kernel whose NORM loop stops after one step), and a projection whose
    weight rows are read one tile short."""
    arguments = _gate_up_arguments(6, 2 * BLOCK_K, torch.bfloat16, seed=4)
    residual, norm_weight, eps, weight = arguments
    # The same kernel on a residual whose second tile is 0 for the norm only: emulated by scaling the result
    # with the wrong norm scale (the first tile's sum of squares).
    wide = residual.float()
    full, first = wide.square().mean(-1), wide[..., :BLOCK_K].square().sum(-1) / wide.shape[-1]
    wrong_scale = torch.rsqrt(first + eps) / torch.rsqrt(full + eps)
    right = norm_gate_up_swiglu(*arguments)
    assert _problem("norm_gate_up_swiglu", right, arguments, torch.bfloat16) is None
    wrong = norm_gate_up_swiglu(residual, (norm_weight.float() * wrong_scale.item()).to(torch.bfloat16), eps, weight)
    assert _problem("norm_gate_up_swiglu", wrong, arguments, torch.bfloat16)
    short = norm_gate_up_swiglu(residual, norm_weight, eps, torch.cat([weight[:, :BLOCK_K],
                                                                        torch.zeros_like(weight[:, BLOCK_K:])], 1))
    assert _problem("norm_gate_up_swiglu", short, arguments, torch.bfloat16)


def test_what_they_do_not_take_is_refused_by_name():
    residual, norm_weight, eps, weight = _gate_up_arguments(4, 64, torch.bfloat16, seed=3)
    with pytest.raises(ValueError, match=r"norm_gate_up_swiglu: norm_weight must have shape \(64,\)"):
        norm_gate_up_swiglu(residual, norm_weight[:32], eps, weight)
    with pytest.raises(ValueError, match="norm_gate_up_swiglu: eps must be a number >= 0"):
        norm_gate_up_swiglu(residual, norm_weight, -1.0, weight)
    with pytest.raises(ValueError, match="norm_gate_up_swiglu: norm_weight is torch.float32"):
        norm_gate_up_swiglu(residual, norm_weight.float(), eps, weight)
    with pytest.raises(ValueError, match="norm_gate_up_swiglu: one row only"):
        norm_gate_up_swiglu(torch.cat([residual, residual]), norm_weight, eps, weight)
    qkv = _qkv_arguments(64, torch.bfloat16, seed=5)
    with pytest.raises(ValueError, match="norm_qkv_rope_cache_write: norm_weight must be a torch.Tensor"):
        norm_qkv_rope_cache_write(qkv[0], None, *qkv[2:])
    with pytest.raises(ValueError, match="linear_add: residual"):
        linear_add(residual, weight, residual)
    with pytest.raises(ValueError, match="linear_add: one row only"):
        linear_add(torch.cat([residual, residual]), weight, torch.cat([residual, residual]))


def test_a_tiny_model_folds_only_one_token_of_one_row():
    """With the two norm kernels in ops, a decode step at batch 1 calls them and linear_add instead of the norms
    (all but the last layer's end, whose norm the head reads); a prompt calls the unfolded operations."""
    model = build_model(CONFIGS["tiny"], dtype=torch.bfloat16, seed=2, device=DEVICE)
    calls = []

    def counting(name, function):
        def counted(*args, **kwargs):
            calls.append(name)
            return function(*args, **kwargs)
        return counted
    from dataclasses import fields, replace
    from hello_gpu.models.llama import norm_gate_up_swiglu as eager_gate, norm_qkv_rope_cache_write as eager_qkv
    ops = replace(EAGER_OPS, norm_qkv_rope_cache_write=eager_qkv, norm_gate_up_swiglu=eager_gate)
    ops = replace(ops, **{f.name: counting(f.name, getattr(ops, f.name)) for f in fields(ops)
                          if getattr(ops, f.name) is not None})
    layers = CONFIGS["tiny"].num_layers
    cache = model.new_cache(1, 8)
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]], device=DEVICE), torch.arange(3, device=DEVICE), cache, ops=ops)
        assert "norm_qkv_rope_cache_write" not in calls and "linear_add" not in calls
        calls.clear()
        folded = model(torch.tensor([[4]], device=DEVICE), torch.tensor([3], device=DEVICE), cache, ops=ops)
    assert calls.count("norm_qkv_rope_cache_write") == layers and calls.count("norm_gate_up_swiglu") == layers
    assert calls.count("linear_add") == 2 * layers - 1 and calls.count("add_rms_norm") == 1
    assert "rms_norm" not in calls
    cache = model.new_cache(1, 8)
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]], device=DEVICE), torch.arange(3, device=DEVICE), cache)
        unfolded = model(torch.tensor([[4]], device=DEVICE), torch.tensor([3], device=DEVICE), cache)
    assert torch.equal(folded, unfolded), "eager's folded step must be eager's step: the same operations in order"


def test_linear_add_is_used_only_where_a_projection_folds_the_norm():
    registry = {name: REPLACEMENTS[name] for name in ("linear", "rms_norm", "gate_up_swiglu", "norm_gate_up_swiglu",
                                                      "linear_add")}
    choices = {c.name: c for c in choose_replacements(CONFIGS["tiny"], batch=1, device=DEVICE, dtype=torch.bfloat16,
                                                      timer=always_faster, replacements=registry)}
    assert choices["norm_gate_up_swiglu"].used and choices["linear_add"].used
    assert not choices["gate_up_swiglu"].used and "not called: norm_gate_up_swiglu does its work" in \
        choices["gate_up_swiglu"].reason
    assert "rms_norm (swapped in) then gate_up_swiglu (swapped in)" in choices["norm_gate_up_swiglu"].reason
    registry.pop("norm_gate_up_swiglu")
    choices = {c.name: c for c in choose_replacements(CONFIGS["tiny"], batch=1, device=DEVICE, dtype=torch.bfloat16,
                                                      timer=always_faster, replacements=registry)}
    assert not choices["linear_add"].used and "not called: none of" in choices["linear_add"].reason


def test_without_the_linear_add_kernel_the_fold_adds_after_the_runs_own_gemv():
    ops = ops_with([Choice("linear", "GEMM/GEMV", True, "forced")])
    assert ops.linear_add is not EAGER_OPS.linear_add
    generator = torch.Generator(device=DEVICE).manual_seed(3)
    x = torch.randn(1, 1, 40, device=DEVICE, generator=generator).bfloat16()
    weight = torch.randn(24, 40, device=DEVICE, generator=generator).bfloat16()
    residual = torch.randn(1, 1, 24, device=DEVICE, generator=generator).bfloat16()
    assert torch.equal(ops.linear_add(x, weight, residual), residual + ops.linear(x, weight))


@pytest.mark.parametrize("names", [("norm_gate_up_swiglu",), ("norm_qkv_rope_cache_write",),
                                   ("norm_qkv_rope_cache_write", "norm_gate_up_swiglu", "linear_add")])
def test_a_greedy_bf16_decode_with_the_fold_forced_in_gives_eagers_logits(names):
    """Prefill (a prompt: unfolded) and decode (one row: folded) of a bf16 model at batch 1, the kernels forced in."""
    assert_forced_decode_gives_eagers_logits(names, torch.bfloat16, DEVICE)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE == "cpu", reason="programmatic dependent launch is a CUDA feature: no GPU here")
def test_with_pdl_the_folded_kernels_give_the_same_bits():
    """At the 8B's shapes: each kernel with pdl=True (the first weight tile loaded before the wait) is bitwise the
    kernel without it, and both pass the backend's check."""
    from hello_gpu.models import dependent_launch
    why_not = dependent_launch.usable(torch.device(DEVICE))
    if why_not:
        pytest.skip(why_not)
    seed = _seed()
    gate_up = _gate_up_arguments(14336, 4096, torch.bfloat16, seed)
    plain = norm_gate_up_swiglu(*gate_up)
    assert _problem("norm_gate_up_swiglu", plain, gate_up, torch.bfloat16) is None, f"seed {seed}"
    assert torch.equal(norm_gate_up_swiglu(*gate_up, pdl=True), plain)
    qkv = _qkv_arguments(4096, torch.bfloat16, seed, q_heads=32, kv_heads=8, dim=128, positions=768)
    fresh = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in qkv)
    plain = norm_qkv_rope_cache_write(*qkv)
    assert _problem("norm_qkv_rope_cache_write", plain, fresh, torch.bfloat16) is None, f"seed {seed}"
    again = norm_qkv_rope_cache_write(*fresh, pdl=True)
    assert all(torch.equal(a, b) for a, b in zip(again, plain))
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(1, 1, 14336, device=DEVICE, generator=generator).bfloat16()
    weight = (torch.randn(4096, 14336, device=DEVICE, generator=generator) / 120).bfloat16()
    residual = _residual(4096, torch.bfloat16, generator)
    total = linear_add(x, weight, residual)
    assert _problem("linear_add", total, (x, weight, residual), torch.bfloat16) is None, f"seed {seed}"
    assert torch.equal(linear_add(x, weight, residual, pdl=True), total)


_COMPILE_SCRIPT = r"""
import json, re
from hopper_ptx import counts, hopper_ptx
from hello_gpu.models import gate_up_swiglu_kernel, linear_add_rms_norm_kernel, qkv_rope_cache_write_kernel
kernels = {
    "norm_gate_up_swiglu": (gate_up_swiglu_kernel.norm_gate_up_swiglu_kernel, gate_up_swiglu_kernel.WARPS,
                            {"BLOCK_N": gate_up_swiglu_kernel.BLOCK_N, "BLOCK_K": gate_up_swiglu_kernel.BLOCK_K}),
    "norm_qkv_rope_cache_write": (qkv_rope_cache_write_kernel.norm_qkv_rope_write_kernel,
                                  qkv_rope_cache_write_kernel.WARPS,
                                  {"Q_HEADS": 32, "KV_HEADS": 8, "HALF": 64,
                                   "BLOCK_K": qkv_rope_cache_write_kernel.BLOCK_K}),
    "linear_add": (linear_add_rms_norm_kernel.gemv_add_kernel, linear_add_rms_norm_kernel.WARPS,
                   {"BLOCK_N": linear_add_rms_norm_kernel.BLOCK_N, "BLOCK_K": linear_add_rms_norm_kernel.BLOCK_K}),
}
kinds = {"cos_ptr": "*fp32", "sin_ptr": "*fp32", "positions_ptr": "*i64", "eps": "fp32"}
results = {}
for name, (kernel, warps, constants) in kernels.items():
    for pdl in (False, True):
        ptx = hopper_ptx(kernel, {**constants, "PDL": pdl}, lambda n: kinds.get(n, "*bf16" if n.endswith("_ptr") else "i32"),
                         {"num_warps": warps, "num_stages": 1})
        wait = ptx.find("griddepcontrol.wait")
        first_evict = re.search(r"ld\.global[.\w:]*evict_first", ptx)
        results[f"{name}{' pdl' if pdl else ''}"] = {
            **counts(ptx, "local", "waits", "evict_first", "round_to_nearest"),
            "weight_before_wait": bool(first_evict) and (wait < 0 or first_evict.start() < wait),
            "square_root": len(re.findall(r"sqrt|rsqrt", ptx)),
        }
print(json.dumps(results))
"""


def test_they_compile_for_sm_90_without_spills(compiled_mode):
    """What the interpreter cannot show: the three kernels compile for the H100/H200 at the 8B's shapes, with and
    without PDL; the weight read evict-first, its first tile before the wait; nothing spilled; the folded two take
    a square root (the norm's scale), linear_add none."""
    for name, found in compiled_mode(_COMPILE_SCRIPT).items():
        assert found["local"] == 0 and found["evict_first"] > 0 and found["weight_before_wait"], (name, found)
        assert found["waits"] == (1 if name.endswith(" pdl") else 0), (name, found)
        assert (found["square_root"] > 0) == name.startswith("norm_"), (name, found)


def test_the_unfolded_backend_keeps_every_decision_but_the_folds():
    """hello-gpu-unfolded: the folds left out, the kernels they stood in for used again with their own reasons,
    everything else as decided; its decode step (eager-timed on the CPU) calls no fold, hello-gpu's does."""
    from hello_gpu.models.backends import make_runner
    from hello_gpu.models.norm_fold import FOLDS, without_folds
    registry = {name: REPLACEMENTS[name] for name in ("linear", "rms_norm", "gate_up_swiglu", "norm_gate_up_swiglu",
                                                      "qkv_rope_cache_write", "norm_qkv_rope_cache_write",
                                                      "linear_add")}
    decided = choose_replacements(CONFIGS["tiny"], batch=1, device=DEVICE, dtype=torch.bfloat16,
                                  timer=always_faster, replacements=registry)
    by_name = {c.name: c for c in decided}
    assert by_name["gate_up_swiglu"].superseded_by == "norm_gate_up_swiglu" and not by_name["gate_up_swiglu"].used
    unfolded = {c.name: c for c in without_folds(decided)}
    assert not any(unfolded[name].used for name in FOLDS)
    assert unfolded["gate_up_swiglu"].used and unfolded["qkv_rope_cache_write"].used
    assert unfolded["gate_up_swiglu"].reason.startswith("faster: 1.50x"), unfolded["gate_up_swiglu"].reason
    assert unfolded["linear"] == by_name["linear"] and by_name["norm_gate_up_swiglu"].used       # nothing else moved
    model = build_model(CONFIGS["tiny"], dtype=torch.bfloat16, seed=2, device=DEVICE)
    runner = make_runner(model, "hello-gpu-unfolded", batch=1, max_seq=8, choices=decided, replacements=registry)
    assert runner.ops.norm_gate_up_swiglu is None and runner.ops.norm_qkv_rope_cache_write is None
    assert runner.ops.gate_up_swiglu is not None and any("norm folds left out" in note for note in runner.notes)
    folded = make_runner(model, "hello-gpu", batch=1, max_seq=8, choices=decided, replacements=registry)
    assert folded.ops.norm_gate_up_swiglu is not None and folded.ops.gate_up_swiglu is None


@pytest.mark.parametrize("verdict", ["faster", "within noise", "slower"])
def test_the_folds_stay_only_where_the_whole_decode_step_is_faster_with_them(verdict):
    """Each fold alone was timed faster, yet the H100's 1B step ran 0.973x with them: the backend times the whole
    step with and without them (the timer gets the unfolded step first) and keeps them only where it is faster,
    saying so in a note and in each left-out fold's reason. A batch of 16 never folds: nothing is timed."""
    from dataclasses import replace
    from types import SimpleNamespace

    from hello_gpu.models.backends import make_runner
    names = ("linear", "rms_norm", "gate_up_swiglu", "norm_gate_up_swiglu", "qkv_rope_cache_write",
             "norm_qkv_rope_cache_write", "linear_add")
    calls = []

    def counted(name):
        load = REPLACEMENTS[name].load

        def loaded():
            function = load()

            def call(*args, **kwargs):
                calls.append(name)
                return function(*args, **kwargs)
            return call
        return loaded
    registry = {name: replace(REPLACEMENTS[name], load=counted(name)) for name in names}
    decided = choose_replacements(CONFIGS["tiny"], batch=1, device=DEVICE, dtype=torch.bfloat16,
                                  timer=always_faster, replacements=registry)
    model = build_model(CONFIGS["tiny"], dtype=torch.bfloat16, seed=2, device=DEVICE)
    ran = {}

    def step_timer(baseline, candidate):
        for role, step in (("baseline", baseline), ("candidate", candidate)):
            calls.clear()
            ran[role] = (step().float(), set(calls))
        return SimpleNamespace(verdict=verdict, speedup=SimpleNamespace(value=0.97, ci95=(0.96, 0.98)))
    runner = make_runner(model, "hello-gpu", batch=1, max_seq=8, choices=decided, replacements=registry,
                         timer=step_timer)
    assert ran["baseline"][1].isdisjoint({"norm_gate_up_swiglu", "norm_qkv_rope_cache_write", "linear_add"})
    assert {"norm_gate_up_swiglu", "norm_qkv_rope_cache_write", "linear_add"} <= ran["candidate"][1]
    baseline, candidate = ran["baseline"][0], ran["candidate"][0]
    assert baseline.shape == (1, 1, CONFIGS["tiny"].vocab_size) and torch.isfinite(candidate).all()
    assert (candidate - baseline).abs().max() <= 0.05 * baseline.abs().max(), "the two steps compute one step"
    by_name = {choice.name: choice for choice in runner.choices}
    if verdict == "faster":
        assert runner.ops.norm_gate_up_swiglu is not None and runner.ops.gate_up_swiglu is None
        assert any(note.startswith("the norm folds kept: the decode step with them 0.970x") for note in runner.notes)
        assert by_name["linear_add"].used
    else:
        assert runner.ops.norm_gate_up_swiglu is None and runner.ops.norm_qkv_rope_cache_write is None
        assert runner.ops.gate_up_swiglu is not None and runner.ops.qkv_rope_cache_write is not None
        assert not by_name["linear_add"].used and by_name["gate_up_swiglu"].used
        assert by_name["norm_gate_up_swiglu"].reason.startswith(
            f"not swapped in: the decode step with them 0.970x the step without them [0.960, 0.980], {verdict} ("), \
            by_name["norm_gate_up_swiglu"].reason
        assert f"the norm folds left out: the decode step with them 0.970x the step without them [0.960, 0.980], " \
               f"{verdict}" in runner.notes
    ran.clear()
    batched = make_runner(model, "hello-gpu", batch=16, max_seq=8, choices=decided, replacements=registry,
                          timer=step_timer)
    assert not ran and not any("norm folds" in note for note in batched.notes)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE == "cpu", reason="the step decision times two CUDA graphs: no GPU here")
def test_on_the_gpu_the_step_decision_times_two_graphs_and_the_runner_decodes():
    """The real decision: both steps captured in CUDA graphs and paired on device time; whichever it keeps, the
    runner's greedy decode gives eager's logits within the bf16 bound, and the note says what was decided."""
    from hello_gpu.models.backends import make_runner
    registry = {name: REPLACEMENTS[name] for name in ("linear", "rms_norm", "gate_up_swiglu", "norm_gate_up_swiglu",
                                                      "qkv_rope_cache_write", "norm_qkv_rope_cache_write",
                                                      "linear_add", "add_rms_norm", "rope_cache_write")}
    decided = choose_replacements(CONFIGS["tiny"], batch=1, device=DEVICE, dtype=torch.bfloat16,
                                  timer=always_faster, replacements=registry)
    model = build_model(CONFIGS["tiny"], dtype=torch.bfloat16, seed=2, device=DEVICE)
    runner = make_runner(model, "hello-gpu", batch=1, max_seq=16, choices=decided, replacements=registry)
    notes = [note for note in runner.notes if note.startswith("the norm folds")]
    assert len(notes) == 1 and "the decode step with them" in notes[0], runner.notes
    kept = notes[0].startswith("the norm folds kept")
    assert (runner.ops.norm_gate_up_swiglu is not None) == kept
    eager = make_runner(model, "eager", batch=1, max_seq=16)
    prompt = torch.tensor([[3, 1, 4, 1, 5]], device=DEVICE)
    with torch.no_grad():
        ours, theirs = runner.prefill(prompt, torch.arange(5, device=DEVICE)), eager.prefill(
            prompt, torch.arange(5, device=DEVICE))
        for position in range(5, 12):
            token = theirs.argmax(-1)
            ours = runner.decode(token, torch.tensor([position], device=DEVICE)).clone()
            theirs = eager.decode(token, torch.tensor([position], device=DEVICE))
            assert (ours.float() - theirs.float()).abs().max() <= 0.05 * theirs.float().abs().max(), position
