"""GPU tier for runtime.triton_replay: repeated call signatures replay the recorded Triton launches,
and anything the replay could get wrong is refused (the launcher then runs as written).

Every check is on fresh random inputs against a float64 reference, with the result compared after
each of several calls (the first records, the later ones replay)."""

import pytest
import torch
import triton
import triton.language as tl

from hello_gpu.ops import load_op
from hello_gpu.runtime.triton_replay import _Plan, launch_hooks_set, plan_of, replayable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]


@triton.jit
def _scaled_add(x_ptr, y_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * scale + y, mask=mask)


@triton.jit
def _accumulate(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), axis=0))


def scaled_add(x, y, scale):
    out = torch.empty_like(x)
    _scaled_add[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), scale, BLOCK=1024)
    return out


def summed(x):
    out = torch.zeros(1, device=x.device, dtype=torch.float32)      # a fill the replay cannot repeat
    _accumulate[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


def summed_with_scratch(x):
    scratch = torch.empty_like(x)                                    # neither an input nor the result
    _scaled_add[(triton.cdiv(x.numel(), 1024),)](x, x, scratch, x.numel(), 1.0, BLOCK=1024)
    out = torch.empty_like(x)
    _scaled_add[(triton.cdiv(x.numel(), 1024),)](scratch, x, out, x.numel(), 0.5, BLOCK=1024)
    return out


@pytest.mark.parametrize("n", [1, 31, 4097, 1 << 20])
def test_repeated_signatures_replay_and_stay_right(n):
    fast = replayable(scaled_add)
    results = []
    for call in range(4):
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        out = fast(x, y, 0.75)
        results.append(out.data_ptr())
        assert torch.allclose(out.double(), 0.75 * x.double() + y.double(), rtol=1e-6, atol=1e-6), f"call {call}"
    assert [type(plan) for plan in fast.plans.values()] == [_Plan], list(fast.plans.values())
    # another scalar value is another signature, recorded afresh and right
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    assert torch.allclose(fast(x, y, -2.0).double(), -2.0 * x.double() + y.double(), rtol=1e-6, atol=1e-6)
    assert len(fast.plans) == 2


def test_misaligned_input_is_another_signature():
    fast = replayable(scaled_add)
    storage, y = torch.randn(4097, device="cuda"), torch.randn(4096, device="cuda")
    for x in (storage[:4096], storage[1:], storage[:4096], storage[1:]):
        assert torch.allclose(fast(x, y, 1.5).double(), 1.5 * x.double() + y.double(), rtol=1e-6, atol=1e-6)
    assert len(fast.plans) == 2


@pytest.mark.parametrize("launcher, reason", [(summed, "zeros"), (summed_with_scratch, "neither an input nor the result")])
def test_what_a_replay_would_skip_is_refused(launcher, reason):
    fast = replayable(launcher)
    for _ in range(3):
        x = torch.randn(4097, device="cuda")
        got = fast(x)
        want = x.double().sum() if launcher is summed else 2 * x.double()
        assert torch.allclose(got.double().reshape(want.shape), want, rtol=1e-5, atol=1e-4)
    (plan,) = fast.plans.values()
    assert isinstance(plan, str) and reason in plan, plan


@pytest.mark.parametrize("op_name, rung_id", [("softmax", "t10_one_warp_per_row"), ("rms_norm", "t07_static_width"),
                                              ("softmax", "t05_dispatch_by_width")])
@pytest.mark.parametrize("shape", [(16, 4096), (1823, 781), (4, 70000)])
def test_built_triton_rungs_replay_right_on_fresh_inputs(op_name, rung_id, shape):
    op = load_op(op_name)
    built = op.rung(rung_id).build()
    rtol, atol = op.spec.TOLERANCE["float32"]
    for _ in range(3):
        inputs = op.spec.make_inputs(shape, "float32", seed=int(torch.randint(0, 2**31, ()).item()), device="cuda")
        got = built(*inputs)
        assert torch.allclose(got.double(), op.spec.reference(*inputs).double(), rtol=rtol, atol=atol)
    plans = list(built.function.plans.values())
    assert plans and all(type(plan) is _Plan for plan in plans), plans


def test_plan_of_finds_the_plan_of_a_seen_signature_only():
    fast = replayable(scaled_add)
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    assert plan_of(fast, x, y, 0.5) is None                      # not called yet
    fast(x, y, 0.5)
    plan = plan_of(fast, x, y, 0.5)
    assert type(plan) is _Plan and plan.result_shape == (4096,)
    assert plan_of(fast, x, y, 2.0) is None                      # another scalar: another signature
    assert plan_of(fast, x.double(), y.double(), 0.5) is None
    assert plan_of(scaled_add, x, y, 0.5) is None                # not a replayable launcher
    not_replayable = replayable(summed)
    not_replayable(x)
    assert plan_of(not_replayable, x) is None
    assert not launch_hooks_set()
    # the plan alone, on new tensors of the signature: the launcher's result
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    assert torch.allclose(plan((x, y, 0.5)).double(), 0.5 * x.double() + y.double(), rtol=1e-6, atol=1e-6)


def test_a_reshaped_plan_returns_the_callers_shape_with_the_same_values():
    fast = replayable(scaled_add)
    x, y = torch.randn(4, 4, 64, device="cuda"), torch.randn(4, 4, 64, device="cuda")
    fast(x.view(-1), y.view(-1), 1.5)
    reshaped = plan_of(fast, x.view(-1), y.view(-1), 1.5).reshaped((4, 4, 64))
    for _ in range(3):
        x, y = torch.randn(4, 4, 64, device="cuda"), torch.randn(4, 4, 64, device="cuda")
        got = reshaped((x, y, 1.5))                               # the N-D tensors themselves: pointers only
        assert got.shape == (4, 4, 64) and got.is_contiguous()
        assert torch.allclose(got.double(), 1.5 * x.double() + y.double(), rtol=1e-6, atol=1e-6)
    assert plan_of(fast, x.view(-1), y.view(-1), 1.5).result_shape == (1024,)   # the original is unchanged
    with pytest.raises(ValueError, match="same element count"):
        reshaped.reshaped((4, 4, 65))


def widened_add(x, y, scale):
    """float16 in, float32 out: a result laid out like no input."""
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    _scaled_add[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), scale, BLOCK=1024)
    return out


@pytest.mark.parametrize("launcher, dtype, like", [(scaled_add, torch.float32, 0), (widened_add, torch.float16, None)])
def test_a_replay_allocates_like_an_input_only_where_one_is_laid_out_as_the_result(launcher, dtype, like):
    fast = replayable(launcher)
    for call in range(4):                       # the first records, the second learns the allocation, the rest reuse it
        x, y = torch.randn(4097, device="cuda", dtype=dtype), torch.randn(4097, device="cuda", dtype=dtype)
        got = fast(x, y, 0.5)
        assert got.dtype == torch.float32 and got.shape == (4097,) and got.data_ptr() not in (x.data_ptr(), y.data_ptr())
        assert torch.allclose(got.double(), 0.5 * x.double() + y.double(), rtol=2e-3, atol=2e-3), f"call {call}"
    (plan,) = fast.plans.values()
    assert plan._like == like
    assert all(as_pointers for _, _, _, as_pointers in plan.launches), "the C entry point is replayed with int pointers"


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})], key=["n"])
@triton.jit
def _tuned_scaled_add(x_ptr, y_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * scale + tl.load(y_ptr + offsets, mask=mask),
             mask=mask)


def tuned_scaled_add(x, y, scale):
    out = torch.empty_like(x)
    _tuned_scaled_add[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, out, x.numel(), scale)
    return out


def test_an_autotuned_launch_is_recorded_again_after_its_tuning_call():
    """The first call of a key times every configuration (launches and a cache flush the replay must not
    repeat): that recording is refused, the second call's (the chosen configuration alone) replays."""
    fast = replayable(tuned_scaled_add)
    n = 4097 + int(torch.randint(0, 1000, ()).item())        # a key no other test tuned in this process
    for call in range(4):
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        got = fast(x, y, 0.5)
        assert torch.allclose(got.double(), 0.5 * x.double() + y.double(), rtol=1e-6, atol=1e-6), f"call {call}"
        plan = plan_of(fast, x, y, 0.5)
        if call == 0:
            assert plan is None, "the tuning call's launches must not be replayed"
        else:
            assert type(plan) is _Plan and len(plan.launches) == 1, (call, fast.plans)
