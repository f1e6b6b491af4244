"""The model's flash-decoding attention kernel (hello_gpu.models.decode_attention_kernel) against float64 SDPA.

On a machine without a GPU it runs in Triton's interpreter (tests/conftest.py sets it before the first
import); on a GPU, compiled. Fresh random inputs per case, odd cache lengths and positions, grouped and
ungrouped heads, the strided q views the model makes, garbage (and NaN) beyond the mask, rows that see no
key, refusals; through the model: a greedy decode of the tiny model with the kernel forced in gives eager's
logits. The GPU tier: the 8B- and 1B-sized shapes compiled in bf16/fp16, one CUDA graph replayed at several
positions, and which of SDPA's kernels take the model's decode arguments.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hello_gpu.models.backends import (ATTENTION_TOLERANCE, REPLACEMENTS, RunShape, captured_call,
                                       check_replacement, make_runner)
from hello_gpu.models.llama import CONFIGS, attention, build_model
from hello_gpu.ops.checking import INTERPRETER_BFLOAT16
from hello_gpu.ops.rung import triton_interpreter_on
from hello_gpu.runtime.device import gpu_vendor

DEVICE = "cuda" if gpu_vendor() is not None else "cpu"
runs_here = pytest.mark.skipif(DEVICE == "cpu" and not triton_interpreter_on(),
                               reason="no GPU and TRITON_INTERPRET is not 1: the kernel cannot run here")
gpu = pytest.mark.skipif(gpu_vendor() is None, reason="needs a GPU")
TINY = CONFIGS["tiny"]


def decode_inputs(batch, heads, kv_heads, seq, dim, position, dtype, seed, garbage=5.0):
    """q (B, H, 1, D) as a view of a (B, 1, H + 2 H_kv, D) projection output, a cache (B, H_kv, S, D) written up
    to ``position`` with ``garbage`` added beyond it, and the model's mask row (1, S) at that position."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    qkv = torch.randn(batch, 1, (heads + 2 * kv_heads) * dim, device=DEVICE, dtype=torch.float32, generator=generator)
    q = qkv.to(dtype)[..., :heads * dim].view(batch, 1, heads, dim).transpose(1, 2)
    keys, values = (torch.randn(batch, kv_heads, seq, dim, device=DEVICE, generator=generator) for _ in range(2))
    keys[:, :, position + 1:] += garbage
    values[:, :, position + 1:] += 2 * garbage
    mask = torch.arange(seq, device=DEVICE)[None, :] <= position
    return q, keys.to(dtype), values.to(dtype), mask


def expected(q, keys, values, mask):
    return attention(q.double(), keys.double(), values.double(), mask)


def assert_matches(got, q, keys, values, mask, reference=None):
    """Within the registry's bound: rtol of the result, atol from the softmax-weighted mean of |v|."""
    reference = expected(q, keys, values, mask) if reference is None else reference
    rtol, atol = REPLACEMENTS["attention"].tolerance_of((q, keys, values, mask), q.dtype)
    assert got.dtype == q.dtype and got.shape == reference.shape and got.is_contiguous()
    error = (got.double() - reference).abs()
    assert torch.isfinite(got).all() and (error <= atol + rtol * reference.abs()).all(), \
        f"max error {float(error.max()):.3g}, atol {atol:.3g}"


def skip_interpreter_bfloat16(dtype):
    if DEVICE == "cpu" and dtype == torch.bfloat16:
        pytest.skip(INTERPRETER_BFLOAT16)


@runs_here
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("batch, heads, kv_heads, seq, dim, position", [
    (1, 4, 1, 1, 8, 0), (2, 4, 4, 31, 8, 0), (1, 8, 2, 31, 64, 1), (1, 4, 1, 31, 8, 30), (2, 6, 2, 127, 8, 63),
    (1, 4, 1, 127, 128, 126), (1, 8, 2, 1000, 64, 1), (1, 4, 1, 1000, 128, 640), (3, 4, 4, 1000, 8, 999),
    (1, 6, 2, 256, 8, 170), (1, 2, 1, 33, 6, 20)])
@pytest.mark.parametrize("programs", [None, 64])
def test_the_kernel_matches_float64_sdpa_over_a_partly_written_cache(batch, heads, kv_heads, seq, dim, position,
                                                                     dtype, programs):
    """programs=64 forces up to one 64-key split a program: many partials for the merge."""
    from hello_gpu.models.decode_attention_kernel import decode_attention
    inputs = decode_inputs(batch, heads, kv_heads, seq, dim, position, dtype, seed=seq * 31 + dim + position)
    assert_matches(decode_attention(*inputs, programs=programs), *inputs)


@runs_here
@pytest.mark.parametrize("merge_elements, programs", [(1, 64), (512, 64), (512, 6)])
def test_the_merge_in_several_steps_matches_float64(monkeypatch, merge_elements, programs):
    """Partials held at once cut to one or two splits (8192 float32 values on the GPU): 16 splits merged in
    16 or 8 steps, and 3 splits in steps of 2, the last step half masked."""
    import hello_gpu.models.decode_attention_kernel as kernel
    monkeypatch.setattr(kernel, "MERGE_ELEMENTS", merge_elements)
    inputs = decode_inputs(1, 8, 2, 1000, 64, 640, torch.float32, seed=merge_elements + programs)
    assert_matches(kernel.decode_attention(*inputs, programs=programs), *inputs)


@runs_here
@pytest.mark.parametrize("batch, heads, kv_heads, seq, dim, position, programs", [
    (1, 8, 2, 1000, 64, 640, 64), (2, 4, 4, 127, 8, 63, None), (1, 4, 1, 31, 8, 30, 64)])
def test_the_merge_done_by_the_last_split_matches_float64(batch, heads, kv_heads, seq, dim, position, programs):
    """fused_merge=True (the merge by the last program of each KV head; measured slower than the merge kernel on
    the H100, so not the default) gives the same answer."""
    from hello_gpu.models.decode_attention_kernel import decode_attention
    inputs = decode_inputs(batch, heads, kv_heads, seq, dim, position, torch.float32, seed=seq + position)
    assert_matches(decode_attention(*inputs, programs=programs, fused_merge=True), *inputs)


@runs_here
def test_the_fused_merges_counters_are_left_at_zero_and_taken_round_the_ring(monkeypatch):
    """Each call takes the ring's next batch x kv_heads counters and its last programs set them back to 0: after
    calls that wrap a 20-counter ring (6 a call), every counter is 0 and every result right; a call wanting
    more counters than the ring holds runs the two-launch path, also right."""
    import hello_gpu.models.decode_attention_kernel as kernel
    from hello_gpu.models import arrival_counters
    monkeypatch.setattr(arrival_counters, "RING", 20)
    monkeypatch.setattr(arrival_counters, "_rings", {})
    for call in range(5):
        inputs = decode_inputs(3, 4, 2, 200, 16, 150 - call, torch.float32, seed=call)
        assert_matches(kernel.decode_attention(*inputs, programs=24, fused_merge=True), *inputs)
    counters, next_free = arrival_counters.ring(inputs[0].device)
    assert next_free == 12 and torch.equal(counters.cpu(), torch.zeros(20, dtype=torch.int32))   # 0 6 12 0 6
    inputs = decode_inputs(6, 8, 4, 100, 16, 70, torch.float32, seed=9)            # 24 counters > 20
    assert_matches(kernel.decode_attention(*inputs, programs=48, fused_merge=True), *inputs)
    assert arrival_counters.ring(inputs[0].device)[1] == 12


def test_the_merge_loads_every_split_at_once_where_the_partials_fit():
    from hello_gpu.models.decode_attention_kernel import merge_splits_a_step
    assert merge_splits_a_step(12, 4, 128) == 16          # the 8B and the 1B: 12 splits in one step
    assert merge_splits_a_step(33, 4, 128) == 16          # a long cache: 33 splits in 3 steps of 16
    assert merge_splits_a_step(3, 1, 8) == 4
    assert merge_splits_a_step(5, 64, 256) == 1           # one split's partials are 16384 values: one a step


@runs_here
@pytest.mark.parametrize("position", [0, 40, 63, 64, 200])
def test_keys_beyond_the_mask_are_never_read(position):
    """NaN in every K and V position beyond the mask (in the visible keys' own tile, and whole tiles after it):
    the result is finite and equals the one over a cache of zeros there. A masked load reads nothing."""
    from hello_gpu.models.decode_attention_kernel import decode_attention
    q, keys, values, mask = decode_inputs(2, 8, 2, 300, 16, position, torch.float32, seed=position)
    clean = expected(q, keys.masked_fill(~mask[0, :, None], 0), values.masked_fill(~mask[0, :, None], 0), mask)
    poisoned = [t.masked_fill(~mask[0, :, None], float("nan")) for t in (keys, values)]
    got = decode_attention(q, *poisoned, mask, programs=32)
    assert_matches(got, q, keys.masked_fill(~mask[0, :, None], 0), values.masked_fill(~mask[0, :, None], 0), mask,
                   reference=clean)


@runs_here
def test_a_mask_with_holes_is_followed_key_by_key():
    """Any boolean row, not only a prefix: every third key hidden, and a whole 64-key tile in the middle."""
    from hello_gpu.models.decode_attention_kernel import decode_attention
    q, keys, values, _ = decode_inputs(1, 4, 1, 333, 32, 332, torch.float32, seed=5)
    mask = (torch.arange(333, device=DEVICE) % 3 != 0)[None, :]
    mask[:, 128:192] = False
    assert_matches(decode_attention(q, keys, values, mask, programs=16), q, keys, values, mask)


@runs_here
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_row_that_sees_no_key_gets_what_sdpa_gives_on_the_cpu(dtype):
    """SDPA's CPU kernel (a safe softmax) gives 0 for a query that sees no key; the kernel gives the same."""
    from hello_gpu.models.decode_attention_kernel import decode_attention
    q, keys, values, mask = decode_inputs(2, 4, 2, 100, 16, 50, dtype, seed=3)
    nothing = torch.zeros_like(mask)
    sdpa = F.scaled_dot_product_attention(q.cpu().float(), keys.cpu().float(), values.cpu().float(),
                                          attn_mask=nothing.cpu(), enable_gqa=True)
    got = decode_attention(q, keys, values, nothing, programs=8)
    assert torch.equal(sdpa, torch.zeros_like(sdpa)) and torch.equal(got.cpu().float(), sdpa)


@runs_here
def test_prefill_is_eagers_own_sdpa_and_decode_is_the_kernel():
    from hello_gpu.models.decode_attention_kernel import attention as replacement
    generator = torch.Generator(device=DEVICE).manual_seed(2)
    q = torch.randn(2, 6, 5, 8, device=DEVICE, generator=generator)
    keys, values = (torch.randn(2, 2, 11, 8, device=DEVICE, generator=generator) for _ in range(2))
    mask = torch.arange(11, device=DEVICE)[None, :] <= torch.arange(3, 8, device=DEVICE)[:, None]
    assert torch.equal(replacement(q, keys, values, mask), attention(q, keys, values, mask))
    one = q[:, :, 2:3]
    got = replacement(one, keys, values, mask[2:3])
    assert_matches(got, one, keys, values, mask[2:3])
    assert not torch.equal(got, attention(one, keys, values, mask[2:3]))      # not SDPA itself: the kernel ran


@runs_here
def test_the_kernel_refuses_what_it_would_read_wrongly():
    from hello_gpu.models.decode_attention_kernel import attention as replacement
    from hello_gpu.models.decode_attention_kernel import decode_attention
    q, keys, values, mask = decode_inputs(1, 4, 2, 31, 16, 10, torch.float32, seed=1)
    with pytest.raises(ValueError, match="keys's head_dim has stride 31"):
        replacement(q, keys.transpose(2, 3).contiguous().transpose(2, 3), values, mask)
    with pytest.raises(ValueError, match="4 query heads is not a multiple of 3 key/value heads"):
        replacement(q, keys[:, :1].expand(1, 3, 31, 16), values[:, :1].expand(1, 3, 31, 16), mask)
    with pytest.raises(ValueError, match=r"mask must be a boolean \(1, 31\) row"):
        replacement(q, keys, values, mask[0])
    with pytest.raises(ValueError, match=r"mask must be a boolean \(1, 31\) row"):
        replacement(q, keys, values, mask.float())
    with pytest.raises(ValueError, match="must have the keys' shape"):
        replacement(q, keys, values[:, :, :30], mask)
    with pytest.raises(ValueError, match="one of float16, bfloat16, float32"):
        replacement(q.double(), keys.double(), values.double(), mask)
    with pytest.raises(ValueError, match="one of float16, bfloat16, float32"):
        replacement(q, keys.half(), values, mask)
    with pytest.raises(ValueError, match="do not match q"):
        replacement(q, keys[..., :8], values[..., :8], mask)
    with pytest.raises(ValueError, match="takes one \\(decode\\)"):
        decode_attention(q.expand(1, 4, 2, 16), keys, values, mask.expand(2, 31)[:1])


def test_the_split_covers_the_keys_in_whole_tiles_with_no_empty_split():
    from hello_gpu.models.decode_attention_kernel import BLOCK_N, split_keys
    for seq in (1, 31, 64, 65, 127, 768, 1000, 4097):
        for heads_in_flight, programs in ((8, 264), (1, 8), (128, 264), (2, 10_000)):
            chunk, splits = split_keys(seq, heads_in_flight, programs)
            assert chunk % BLOCK_N == 0 and (splits - 1) * chunk < seq <= splits * chunk, (seq, chunk, splits)
    assert split_keys(768, 8, 264) == (64, 12)        # the header's 8B case: 12 splits x 8 KV heads


@runs_here
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_backend_checks_the_kernel_on_the_models_decode_shapes_and_refuses_one_that_ignores_the_mask(dtype):
    replacement = REPLACEMENTS["attention"]
    kernel = replacement.load()
    assert check_replacement(replacement, kernel, CONFIGS["tiny"], 2, torch.device(DEVICE), dtype) is None
    shape = RunShape.of(CONFIGS["tiny"], 2)
    q, keys, values, mask = replacement.example(CONFIGS["tiny"], shape, torch.device(DEVICE), dtype)
    assert mask.shape[1] == shape.max_seq and q.stride(0) == TINY.q_size + 2 * TINY.kv_size
    assert mask.sum() == shape.prompt + (shape.max_seq - shape.prompt) // 2 + 1      # the decode's middle step

    def ignores_the_mask(q, keys, values, mask):
        return kernel(q, keys, values, torch.ones_like(mask))
    problem = check_replacement(replacement, ignores_the_mask, CONFIGS["tiny"], 2, torch.device(DEVICE), dtype)
    assert problem and problem.startswith("wrong result: element"), problem

    def drops_the_first_tile(q, keys, values, mask):
        return kernel(q, keys, values, mask & (torch.arange(mask.shape[1], device=mask.device) >= 64))
    problem = check_replacement(replacement, drops_the_first_tile, CONFIGS["tiny"], 2, torch.device(DEVICE), dtype)
    assert problem and problem.startswith("wrong result: element"), problem


@runs_here
def test_a_greedy_decode_with_the_kernel_forced_in_gives_eagers_logits():
    from hello_gpu.models.logits import compare_greedy
    model = build_model(CONFIGS["tiny"], dtype=torch.float32, seed=10, device=DEVICE)
    prompt = torch.randint(0, CONFIGS["tiny"].vocab_size, (2, 5), generator=torch.Generator().manual_seed(11))
    eager = make_runner(model, "eager", batch=2, max_seq=80)
    ours = make_runner(model, "hello-gpu", batch=2, max_seq=80, force=["attention"])
    assert ours.used() == ["attention"]
    result = compare_greedy(eager, ours, prompt.to(DEVICE), 6)
    assert result.ok and result.first_divergence is None, result.summary()
    assert 0 < max(result.gaps) < 1e-4 * max(result.scales)        # the kernel ran: not bit-identical


def test_the_tolerance_grows_with_the_weight_rounding_of_each_dtype():
    """bf16's weights round to 8 bits, fp16's to 11, float32's not at all: the bounds in that order."""
    assert ATTENTION_TOLERANCE[torch.bfloat16][1] > ATTENTION_TOLERANCE[torch.float16][1] > \
        ATTENTION_TOLERANCE[torch.float32][1]


_COMPILE_SCRIPT = r"""
import json
import triton
from hopper_ptx import counts, hopper_ptx
from hello_gpu.models.decode_attention_kernel import split_kernel, merge_kernel, merge_splits_a_step, BLOCK_N
results = {}
for dtype, group, dim in (("bf16", 4, 128), ("fp16", 4, 64), ("fp32", 3, 8), ("bf16", 1, 128)):
    block_g, block_d = max(16, triton.next_power_of_2(group)), max(16, triton.next_power_of_2(dim))
    pdl = dtype == "bf16" and group == 4            # the 8B's shape also as a programmatic dependent launch
    merge = {"GROUP": group, "HEAD_DIM": dim, "BLOCK_D": block_d}
    merge_g, merge_s = triton.next_power_of_2(group), merge_splits_a_step(12, triton.next_power_of_2(group), block_d)
    split = {"GROUP": group, "HEAD_DIM": dim, "BLOCK_G": block_g, "BLOCK_D": block_d, "BLOCK_N": BLOCK_N,
             "PRECISION": "ieee" if dtype == "fp32" else "tf32", "PDL": pdl, "MERGE_G": merge_g, "MERGE_S": merge_s}
    for kernel, constants in ((split_kernel, {**split, "FUSED_MERGE": True}),
                              (split_kernel, {**split, "FUSED_MERGE": False}),
                              (merge_kernel, {**merge, "BLOCK_G": merge_g, "BLOCK_S": merge_s, "PDL": pdl})):
        def kind(n):
            if n in constants: return "constexpr"
            if n == "mask_ptr": return "*u8"
            if n == "arrivals_ptr": return "*i32"
            if n.startswith("part_"): return "*fp32"
            if n.endswith("_ptr"): return "*" + dtype
            if n == "scale_log2": return "fp32"
            return "i32"
        ptx = hopper_ptx(kernel, constants, kind, {"num_warps": 4})
        fused = {True: " fused", False: " unfused"}.get(constants.get("FUSED_MERGE"), "")
        results[f"{kernel.__name__}{fused} {dtype} G{group} D{dim}{' pdl' if pdl else ''}"] = counts(
            ptx, "waits", "releases", "local", "mma", "truncating", "round_to_nearest", "arrival", "barrier", "l2_loads")
print(json.dumps(results))
"""


def test_the_kernels_compile_for_sm_90_on_tensor_cores_rounding_to_nearest_without_spills(compiled_mode):
    """What the interpreter cannot show: both kernels compile for the H100/H200 (the tile skip's branch inside
    the key loop included) at the 8B's (GROUP 4, D 128), the 1B's (D 64), MHA's (GROUP 1) and an odd tiny
    shape; the 16-bit dots run on tensor cores (mma), results round to nearest, nothing spills to local memory.
    The fused merge: one arrival a program, an acquire-release atomic at GPU scope after a barrier (every
    thread's partial stored before it is counted), and the partials read back past L1 (ld.global.cg)."""
    for name, found in compiled_mode(_COMPILE_SCRIPT).items():
        assert found["local"] == 0 and found["truncating"] == 0, (name, found)
        assert found["arrival"] == (1 if " fused " in name else 0), (name, found)
        assert (found["barrier"] > 0 and found["l2_loads"] > 0) or " fused " not in name, (name, found)
        # PDL (models.dependent_launch): the wait and the release where asked for, neither elsewhere
        assert (found["waits"], found["releases"]) == ((1, 1) if name.endswith(" pdl") else (0, 0)), (name, found)
        if "fp32" not in name:
            assert found["round_to_nearest"] > 0, (name, found)
            assert ("split_kernel" not in name) or found["mma"] > 0, (name, found)


# ------------------------------------------------------------------------------------------ GPU tier

@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("batch, heads, kv_heads, seq, dim, position", [
    (1, 32, 8, 768, 128, 512), (1, 32, 8, 768, 64, 512), (16, 32, 8, 768, 128, 700), (1, 32, 8, 8192, 128, 7935),
    (1, 32, 8, 768, 128, 0), (4, 32, 32, 1000, 128, 999), (1, 6, 2, 256, 8, 170)])
def test_the_kernel_compiled_at_the_models_sizes(batch, heads, kv_heads, seq, dim, position, dtype):
    from hello_gpu.models.decode_attention_kernel import decode_attention
    inputs = decode_inputs(batch, heads, kv_heads, seq, dim, position, dtype, seed=position + seq)
    assert_matches(decode_attention(*inputs), *inputs)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_one_cuda_graph_replays_the_kernel_at_every_position(dtype):
    """Captured once at position 0 with the mask computed from a position tensor, as the model does; replayed
    after writing new keys and values at positions 1, 63, 64, 500 and 767, each giving eager's result."""
    from hello_gpu.models.decode_attention_kernel import attention as replacement
    q, keys, values, _ = decode_inputs(1, 32, 8, 768, 128, 767, dtype, seed=7, garbage=0.0)
    cache_k, cache_v = torch.zeros_like(keys), torch.zeros_like(values)
    key_positions = torch.arange(768, device="cuda")
    position = torch.zeros(1, dtype=torch.long, device="cuda")

    def step():
        return replacement(q, cache_k, cache_v, key_positions[None, :] <= position[:, None])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for at in (1, 63, 64, 500, 767):
        cache_k[:, :, :at + 1], cache_v[:, :, :at + 1] = keys[:, :, :at + 1], values[:, :, :at + 1]
        position.fill_(at)
        graph.replay()
        mask = key_positions[None, :] <= at
        assert_matches(out.clone(), q, cache_k, cache_v, mask)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [False, True])
def test_a_graph_of_a_steps_fused_merges_replays_right_and_leaves_its_counters_at_zero(pdl):
    """A decode step's 16 attention calls (the 1B's layers) captured in one CUDA graph, back to back, each on its
    own cache, replayed at three positions: every call's fused merge counts its own counters (the ring's), with
    and without programmatic dependent launch (a call may start while the one before ends); every output right,
    every counter back at 0."""
    import hello_gpu.models.decode_attention_kernel as kernel
    layers = [decode_inputs(1, 32, 8, 768, 64, 767, torch.bfloat16, seed=layer, garbage=0.0) for layer in range(16)]
    key_positions = torch.arange(768, device="cuda")
    position = torch.zeros(1, dtype=torch.long, device="cuda")

    def step():
        mask = key_positions[None, :] <= position[:, None]
        return [kernel.decode_attention(q, keys, values, mask, pdl=pdl, fused_merge=True) for q, keys, values, _ in layers]
    graph, outs = captured_call(step, warmups=1)
    for at in (700, 3, 511):
        position.fill_(at)
        graph.replay()
        mask = key_positions[None, :] <= at
        for out, (q, keys, values, _) in zip(outs, layers):
            assert_matches(out.clone(), q, keys, values, mask)
    from hello_gpu.models import arrival_counters
    counters, _ = arrival_counters.ring(torch.device("cuda", torch.cuda.current_device()))
    assert int(counters.count_nonzero()) == 0


@pytest.mark.gpu
@gpu
def test_which_sdpa_kernels_take_the_models_decode_arguments():
    """The header's prediction names SDPA's kernel for a boolean mask with grouped heads: flash takes no
    arbitrary mask; the math kernel takes anything. Prints which accept the 8B's decode arguments."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, keys, values, mask = decode_inputs(1, 32, 8, 768, 128, 512, torch.bfloat16, seed=1)
    accepted = []
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                    SDPBackend.MATH):
        try:
            with sdpa_kernel(backend):
                attention(q, keys, values, mask)
            accepted.append(backend.name)
        except RuntimeError:
            pass
    print("SDPA kernels taking the 8B's decode arguments (bool mask, 32 over 8 heads):", accepted)
    assert "MATH" in accepted and "FLASH_ATTENTION" not in accepted, accepted
