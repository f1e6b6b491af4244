"""hello_gpu.models.linear_add_rms_norm_kernel: a layer half's output projection, the residual add and the next
RMSNorm in one launch at batch-1 decode (``ModelOps.linear_add_rms_norm``), the norm by the last program to arrive.
Triton's interpreter on a machine without a GPU, compiled on a GPU."""

from __future__ import annotations

import pytest
import torch

from hello_gpu.models import arrival_counters
from hello_gpu.models.backends import (REPLACEMENTS, Choice, _check_case, captured_call, choose_replacements,
                                       ops_with)
from hello_gpu.models.linear_add_rms_norm_kernel import BLOCK_K, BLOCK_N, CHUNK, linear_add_rms_norm, refusal
from hello_gpu.models.llama import CONFIGS, linear_add_rms_norm as eager_linear_add_rms_norm, rms_norm
from hello_gpu.runtime.device import gpu_vendor
from model_checks import always_faster, assert_forced_decode_gives_eagers_logits

DEVICE = "cuda" if gpu_vendor() is not None else "cpu"
EPS = 1e-5
# (N hidden values, K): one value, odd, a K of one tile and one past it, more programs than the last one holds
# partials of at once (2 x CHUNK + 1 values: 2049 programs, the norm in 3 chunks), several K tiles and a tail
SHAPES = [(1, 1), (3, 31), (5, BLOCK_K), (BLOCK_N * CHUNK + 1, 33), (2049, BLOCK_K + 1), (7, 3 * BLOCK_K + 5)]


def _inputs(n: int, k: int, dtype: torch.dtype, seed: int, rows: int = 1):
    """x and the weight as an activation and a projection (outputs ~ N(0, 1)); a residual of small values with a
    few spikes, so that each spike's program holds most of the sum of squares (a lost partial moves the norm by
    far more than a rounding); a norm weight near 1. Never zeros."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(rows, 1, k, device=DEVICE, generator=generator) + 0.25
    weight = torch.randn(n, k, device=DEVICE, generator=generator) / k ** 0.5
    residual = 0.05 * torch.randn(rows, 1, n, device=DEVICE, generator=generator) + 0.01
    spikes = torch.randint(0, n, (3,), device=DEVICE, generator=generator)
    residual[..., spikes] = 20.0
    norm_weight = 1 + 0.1 * torch.randn(n, device=DEVICE, generator=generator)
    return tuple(t.to(dtype) for t in (x, weight, residual, norm_weight))


def _problem(got, arguments) -> str | None:
    """The backend's own check of the replacement (float64, its bound) on a result already computed."""
    x = arguments[0]
    return _check_case(REPLACEMENTS["linear_add_rms_norm"], lambda *_: got, (*arguments, EPS), x.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n,k", SHAPES)
def test_one_row_matches_float64_linear_then_add_rms_norm(n, k, dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())              # fresh inputs each run, named on failure
    arguments = _inputs(n, k, dtype, seed)
    got = linear_add_rms_norm(*arguments, EPS)
    assert all(t.is_contiguous() and t.shape == arguments[2].shape for t in got)
    problem = _problem(got, arguments)
    assert problem is None, f"seed {seed}: {problem}"


def test_the_check_fails_a_lost_partial_a_lost_tile_or_an_unrounded_delta():
    """What the bound must catch, in float32: the norm without the first program's sum of squares (a spike
    there), the first K tile left out of every output; in bf16: the delta added without its rounding where a sum
    cancels is within it (one unit), but the residual left out of the sum is not."""
    x, weight, residual, norm_weight = _inputs(300, 2 * BLOCK_K, torch.float32, seed=4)
    residual[..., 0] = 30.0
    total, normed = linear_add_rms_norm(x, weight, residual, norm_weight, EPS)
    assert _problem((total, normed), (x, weight, residual, norm_weight)) is None
    wide = total.double()
    squares = wide.square().sum(-1, keepdim=True) - wide[..., :BLOCK_N].square().sum(-1, keepdim=True)
    lost = (wide * torch.rsqrt(squares / wide.shape[-1] + EPS) * norm_weight.double()).float()
    assert _problem((total, lost), (x, weight, residual, norm_weight))
    short = linear_add_rms_norm(x[..., BLOCK_K:].contiguous(), weight[:, BLOCK_K:].contiguous(), residual,
                                norm_weight, EPS)
    assert _problem(short, (x, weight, residual, norm_weight))
    arguments = _inputs(64, 100, torch.bfloat16, seed=5)
    no_residual = linear_add_rms_norm(arguments[0], arguments[1], torch.zeros_like(arguments[2]), arguments[3], EPS)
    assert _problem(no_residual, arguments)


def test_each_call_takes_one_counter_and_leaves_it_at_zero(monkeypatch):
    monkeypatch.setattr(arrival_counters, "_rings", {})
    for call in range(3):
        arguments = _inputs(BLOCK_N * CHUNK + 5, 40, torch.float32, seed=call)
        assert _problem(linear_add_rms_norm(*arguments, EPS), arguments) is None
    counters, next_free = arrival_counters.ring(arguments[0].device)
    assert next_free == 3 and int(counters.count_nonzero()) == 0


def test_what_it_does_not_take_is_refused_by_name():
    x, weight, residual, norm_weight = _inputs(8, 64, torch.bfloat16, seed=3)
    assert refusal(x, weight, residual, norm_weight, EPS) is None
    assert "one row only (x has 2)" in refusal(torch.cat([x, x]), weight, torch.cat([residual, residual]),
                                               norm_weight, EPS)
    assert "float64 is not supported" in refusal(*(t.double() for t in (x, weight, residual, norm_weight)), EPS)
    assert "they must match" in refusal(x, weight.float(), residual, norm_weight, EPS)
    assert "do not multiply" in refusal(x, weight[:, :32], residual, norm_weight, EPS)
    assert "residual (1, 1, 7)" in refusal(x, weight, residual[..., :7], norm_weight, EPS)
    assert "norm_weight must have shape (8,)" in refusal(x, weight, residual, norm_weight[:4], EPS)
    assert "unit column stride" in refusal(x, weight.t().contiguous().t(), residual, norm_weight, EPS)
    assert "eps must be a number >= 0" in refusal(x, weight, residual, norm_weight, -1.0)
    assert "must be a torch.Tensor" in refusal(x, weight, residual.tolist(), norm_weight, EPS)
    with pytest.raises(ValueError, match="linear_add_rms_norm: one row only"):
        linear_add_rms_norm(torch.cat([x, x]), weight, torch.cat([residual, residual]), norm_weight, EPS)


def test_an_empty_projection_gives_the_residuals_norm():
    """K = 0: the delta is 0, so the sum is the residual and the norm is its norm (add_rms_norm's kernel)."""
    _, _, residual, norm_weight = _inputs(40, 1, torch.float32, seed=7)
    x, weight = torch.empty(1, 1, 0, device=DEVICE), torch.empty(40, 0, device=DEVICE)
    total, normed = linear_add_rms_norm(x, weight, residual, norm_weight, EPS)
    assert torch.equal(total, residual)
    torch.testing.assert_close(normed, rms_norm(residual, norm_weight, EPS), rtol=1e-5, atol=1e-6)


def test_the_backend_runs_it_for_one_row_and_linear_then_add_rms_norm_for_a_prompt():
    """ops_with's linear_add_rms_norm: the kernel for a decode row, the run's own linear and add_rms_norm for a
    prompt's rows (here eager's: equal to the eager composition bit for bit)."""
    ops = ops_with([Choice("linear_add_rms_norm", "GEMM/GEMV", True, "forced")])
    arguments = _inputs(24, 40, torch.bfloat16, seed=6)
    assert _problem(ops.linear_add_rms_norm(*arguments, EPS), arguments) is None
    x, weight, residual, norm_weight = _inputs(24, 40, torch.bfloat16, seed=7, rows=3)
    prompt = (x.view(1, 3, 40), weight, residual.view(1, 3, 24), norm_weight, EPS)
    for got, expected in zip(ops.linear_add_rms_norm(*prompt), eager_linear_add_rms_norm(*prompt)):
        assert torch.equal(got, expected)


def test_it_is_timed_against_the_linear_and_add_rms_norm_the_run_chose():
    """Decided after linear and add_rms_norm, timed against them as swapped in; both still run (the other
    projections, prompts)."""
    registry = {name: REPLACEMENTS[name] for name in ("linear", "add_rms_norm", "linear_add_rms_norm")}
    choices = {c.name: c for c in choose_replacements(CONFIGS["tiny"], batch=1, device=DEVICE, dtype=torch.bfloat16,
                                                      timer=always_faster, replacements=registry)}
    fused = choices["linear_add_rms_norm"]
    assert fused.used and "1.50x linear (swapped in) then add_rms_norm (swapped in) [" in fused.reason, fused.reason
    assert choices["linear"].used and choices["add_rms_norm"].used


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_greedy_decode_with_it_forced_in_gives_eagers_logits(dtype):
    """Prefill (a prompt's rows: linear then add_rms_norm) and decode (one row: the kernel, twice a layer) at
    batch 1."""
    assert_forced_decode_gives_eagers_logits("linear_add_rms_norm", dtype, DEVICE)


_COMPILE_SCRIPT = r"""
import json, re
from hopper_ptx import PATTERNS, counts, hopper_ptx
from hello_gpu.models import linear_add_rms_norm_kernel as module
kinds = {"partial_ptr": "*fp32", "arrivals_ptr": "*i32", "eps": "fp32"}
results = {}
for dtype in ("bf16", "fp16"):
    for pdl in (False, True):
        constants = {"BLOCK_N": module.BLOCK_N, "BLOCK_K": module.BLOCK_K, "CHUNK": module.CHUNK, "PDL": pdl}
        ptx = hopper_ptx(module.gemv_add_rms_norm_kernel, constants,
                         lambda n: kinds.get(n, "*" + dtype if n.endswith("_ptr") else "i32"),
                         {"num_warps": module.WARPS, "num_stages": 1})
        arrival = re.search(PATTERNS["arrival"], ptx)
        results[f"{dtype}{' pdl' if pdl else ''}"] = {
            **counts(ptx, "local", "arrival", "l2_loads", "evict_first", "waits"),
            "barrier_before_arrival": bool(arrival) and "bar.sync" in ptx[max(0, arrival.start() - 2000):arrival.start()],
        }
print(json.dumps(results))
"""


def test_it_compiles_for_sm_90_with_its_arrival_after_a_barrier_and_no_spills(compiled_mode):
    """What the interpreter cannot show: the kernel compiles for the H100/H200 in bf16 and fp16, with and without
    PDL; one acquire-release arrival at GPU scope after a barrier; the last program's reads past L1 (.cg); the
    weight read evict-first; nothing spilled to local memory."""
    for name, found in compiled_mode(_COMPILE_SCRIPT).items():
        assert found["local"] == 0 and found["arrival"] == 1 and found["barrier_before_arrival"], (name, found)
        assert found["l2_loads"] > 0 and found["evict_first"] > 0, (name, found)
        assert found["waits"] == (1 if name.endswith(" pdl") else 0), (name, found)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE == "cpu", reason="the 8B's shapes compiled and a CUDA graph: no GPU here")
@pytest.mark.parametrize("pdl", [False, True])
def test_a_graph_of_a_steps_calls_at_the_8bs_shapes_replays_right(pdl):
    """A decode step's 64 calls (o_proj 4096x4096 and down_proj 4096x14336, 32 layers, each its own weight, each
    call's residual the previous call's sum) captured in one CUDA graph, with and without programmatic dependent
    launch; replayed twice on new inputs, every output within the bound, every counter back at 0."""
    from hello_gpu.models import dependent_launch
    if pdl and dependent_launch.usable(torch.device(DEVICE)):
        pytest.skip(dependent_launch.usable(torch.device(DEVICE)))
    generator = torch.Generator(device=DEVICE).manual_seed(int(torch.randint(0, 2**31 - 1, ()).item()))
    weights = [torch.randn(4096, k, device=DEVICE, generator=generator).div_(k ** 0.5).to(torch.bfloat16)
               for _ in range(32) for k in (4096, 14336)]
    norm_weight = (1 + 0.1 * torch.randn(4096, device=DEVICE, generator=generator)).to(torch.bfloat16)
    xs = {k: torch.empty(1, 1, k, device=DEVICE, dtype=torch.bfloat16) for k in (4096, 14336)}
    start = torch.empty(1, 1, 4096, device=DEVICE, dtype=torch.bfloat16)

    def step():
        residual, outputs = start, []
        for weight in weights:
            outputs.append((residual, *linear_add_rms_norm(xs[weight.shape[1]], weight, residual, norm_weight, EPS,
                                                             pdl=pdl)))
            residual = outputs[-1][1]
        return outputs

    def fill():
        for tensor in (*xs.values(), start):
            tensor.copy_(torch.randn(tensor.shape, device=DEVICE, generator=generator))
    fill()
    graph, outputs = captured_call(step, warmups=1)
    for _ in range(2):
        fill()
        graph.replay()
        for index in (0, 1, 31, 62, 63):
            residual, total, normed = outputs[index]
            weight = weights[index]
            problem = _problem((total, normed), (xs[weight.shape[1]], weight, residual, norm_weight))
            assert problem is None, f"call {index}: {problem}"
    counters, _ = arrival_counters.ring(start.device)
    assert int(counters.count_nonzero()) == 0
