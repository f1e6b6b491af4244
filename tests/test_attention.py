"""The attention ladder (issue 22): the spec's definitions against PyTorch's, its exact FLOP count, its probe,
and what tests/test_ops_ladders.py cannot reach on the CPU tier (every autotune configuration, shapes past
the interpreter's size limit, the refusal of scores that would not fit).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.probes import probe_inputs
from hello_gpu.runtime.device import gpu_vendor

HAS_GPU = gpu_vendor() is not None
spec = load_op("attention").spec


def _inputs(shape, seed=0, dtype="float32"):
    return spec.make_inputs(shape, dtype, seed=seed, device="cpu")


@pytest.mark.parametrize("shape", [(1, 4, 2, 9, 9, 64, 1), (2, 4, 1, 5, 13, 64, 1), (1, 2, 2, 13, 5, 64, 1),
                                   (1, 4, 4, 7, 11, 128), (2, 8, 2, 1, 17, 64, 1)])
def test_reference_agrees_with_sdpa_bottom_right(shape):
    """float64 on the CPU: the reference is SDPA with a bottom-right mask (causal_lower_right or the same
    boolean mask), GQA through enable_gqa; with S_q == S_kv also SDPA's own is_causal."""
    from torch.nn.attention.bias import causal_lower_right
    q, k, v, causal = _inputs(shape)
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    ours = spec.reference(q, k, v, causal)
    d = spec.dims(shape)
    mask = spec.visible_mask(d.q_len, d.kv_len, "cpu") if d.causal else None
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=d.heads != d.kv_heads)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    if d.causal and d.q_len <= d.kv_len:        # LOWER_RIGHT gives NaN rows past S_kv; none here
        bias = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(d.q_len, d.kv_len),
                                              enable_gqa=d.heads != d.kv_heads)
        torch.testing.assert_close(ours, bias, rtol=1e-12, atol=1e-12)
    if d.causal and d.q_len == d.kv_len:
        square = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=d.heads != d.kv_heads)
        torch.testing.assert_close(ours, square, rtol=1e-12, atol=1e-12)


def test_fully_masked_rows_are_zero_and_the_rest_is_not():
    q, k, v, causal = _inputs((1, 2, 1, 12, 5, 64, 1))
    out = spec.reference(q, k, v, causal)
    assert bool((out[:, :, :7] == 0).all())                  # rows 0..6 see no key (12 - 5 = 7)
    torch.testing.assert_close(out[:, :, 7], v[:, :, 0].expand(1, 2, 64).to(torch.float64))   # row 7 sees key 0
    assert bool((out[:, :, 8:] != 0).any())
    assert spec.invariants((q, k, v, causal), out.to(q.dtype)) == []
    broken = out.to(q.dtype).clone()
    broken[0, 0, 3, 5] = 1e-3
    assert "exactly 0" in spec.invariants((q, k, v, causal), broken)[0]


@pytest.mark.parametrize("shape", [(1, 1, 1, 7, 7, 64, 1), (1, 1, 1, 7, 12, 64, 1), (1, 1, 1, 12, 7, 64, 1),
                                   (1, 1, 1, 1, 4096, 64, 1), (1, 1, 1, 33, 31, 64)])
def test_flops_count_every_visible_pair_exactly(shape):
    d = spec.dims(shape)
    pairs = int(spec.visible_mask(d.q_len, d.kv_len, "cpu").sum()) if d.causal else d.q_len * d.kv_len
    assert spec.visible_keys(d) == pairs
    assert spec.work(shape, "bfloat16").flops == 4 * d.batch * d.heads * d.head_dim * pairs


def test_bench_flops_match_the_issue():
    full = spec.work((4, 32, 32, 4096, 4096, 128), "bfloat16")
    causal = spec.work((4, 32, 32, 4096, 4096, 128, 1), "bfloat16")
    assert full.flops == 4 * 4 * 32 * 4096 * 4096 * 128
    assert causal.flops == 4 * 4 * 32 * 128 * (4096 * 4097 // 2)          # the lower triangle with its diagonal
    decode = spec.work((1, 32, 8, 1, 32768, 128), "bfloat16")
    assert decode.read_bytes == 2 * (32 * 128) + 2 * 2 * 8 * 32768 * 128    # q + the KV cache (~32 MiB)


@pytest.mark.parametrize("bad, words", [((1, 3, 2, 4, 4, 64), "multiple"), ((1, 2, 1, 4, 4, 96), "D=96"),
                                        ((1, 2, 1, 4, 4, 64, 2), "causal flag"), ((4, 4), "takes a shape")])
def test_shapes_are_checked_with_clear_errors(bad, words):
    with pytest.raises(ValueError, match=words):
        spec.dims(bad)


def test_probe_rejects_a_dropped_key_tile_by_a_wide_margin():
    """The reference with one 16-key tile's keys removed misses the probe's tolerance at every shape,
    in bfloat16 (the loosest dtype); the full reference passes."""
    from hello_gpu.ops.checking import compare_outputs
    for shape in [(1, 2, 1, 127, 127, 64, 1), (2, 4, 2, 40, 1000, 128), (1, 2, 1, 1, 33, 64)]:
        (q, k, v, causal), (rtol, atol) = probe_inputs(spec, shape, "bfloat16", seed=5, device="cpu")
        expected = spec.reference(q, k, v, causal)
        assert compare_outputs(expected.to(q.dtype), expected, rtol, atol)[2] is None
        d = spec.dims(shape)
        tile = (d.kv_len // 16 // 2) * 16
        keep = torch.ones(d.kv_len, dtype=torch.bool)
        keep[tile:tile + 16] = False
        dropped = spec.reference(q, k[:, :, keep].contiguous(), v[:, :, keep].contiguous(), False)
        if d.causal:
            continue        # the causal shapes' masks need the keys' positions: covered by the known-wrong rung
        assert compare_outputs(dropped, expected, rtol, atol)[2] is not None, shape


def _probe_structure_problems(shape, dtype: str, device: str) -> list[str]:
    """What is wrong with the attention probe at ``shape``: every query 128 e_0 (plus noise), keys 1 (live) or
    -3 (dead) times e_0, one live key in each aligned block of 16 plus the first and the last, live values
    +-1 or +-2 and dead ones +-1/8 (hello_gpu.ops.probes); [] when it holds that."""
    (q, k, v, causal), _ = probe_inputs(spec, shape, dtype, seed=11, device=device)
    d = spec.dims(shape)
    problems = []
    if not all(t.device.type == torch.device(device).type and t.dtype == getattr(torch, dtype) for t in (q, k, v)):
        problems.append(f"drawn as {q.device} {q.dtype}, not {device} {dtype}")
    if causal is not d.causal or not bool((q[..., 0] == 128).all()) or bool((k[..., 1:] != 0).any()):
        problems.append("queries are not 128 e_0, or keys not multiples of e_0, or the causal flag is wrong")
    live = k[..., 0] == 1
    if not bool((live | (k[..., 0] == -3)).all()) or not bool((live[..., 0] & live[..., -1]).all()):
        problems.append("a key is neither live (1) nor dead (-3), or the first or last key is not live")
    blocks = -(-d.kv_len // 16)
    padded = torch.zeros((d.batch, d.kv_heads, blocks * 16), dtype=torch.int32, device=live.device)
    padded[..., :d.kv_len] = live.int()
    per_block = padded.reshape(d.batch, d.kv_heads, blocks, 16).sum(-1)
    if not bool((per_block >= 1).all()) or int(per_block.sum(-1).max()) > blocks + 2:
        problems.append(f"live keys per block of 16: {per_block.min()} to {per_block.max()}; one each (+ ends) expected")
    magnitude = v.abs().float()
    if not bool(torch.where(live[..., None], (magnitude == 1) | (magnitude == 2), magnitude == 0.125).all()):
        problems.append("live values are not +-1 or +-2, or dead ones not +-1/8")
    return problems


@pytest.mark.parametrize("shape", [(1, 2, 1, 3, 1, 64), (2, 4, 2, 5, 33, 128, 1), (1, 2, 2, 1, 127, 64),
                                   (2, 2, 1, 4, 1000, 64)])
def test_the_probe_is_drawn_on_the_device_with_one_live_key_per_block_of_16(shape):
    assert _probe_structure_problems(shape, "float32", "cpu") == []
    first, again = (probe_inputs(spec, shape, "float32", seed=11, device="cpu")[0] for _ in range(2))
    assert all(torch.equal(a, b) for a, b in zip(first[:3], again[:3]))           # a seed replays its probe


def test_materialising_rungs_refuse_scores_that_cannot_fit():
    from hello_gpu.ops.attention.launch import check_scores_fit
    with pytest.raises(ValueError, match="scores would take 4096.0 GiB"):
        check_scores_fit(2**42, torch.device("cpu"))
    check_scores_fit(2**30, torch.device("cpu"))       # the CPU has no free-memory query: only the bound applies


def test_launch_checks_refuse_what_the_kernels_cannot_read():
    from hello_gpu.ops.attention.launch import prepare
    q, k, v, causal = _inputs((1, 4, 2, 5, 7, 64))
    with pytest.raises(ValueError, match="must be contiguous"):
        prepare(q.transpose(1, 2).contiguous().transpose(1, 2), k, v, causal)
    with pytest.raises(ValueError, match="multiple of H_kv"):
        prepare(q[:, :3].contiguous(), k, v, causal)
    with pytest.raises(ValueError, match="same shape"):
        prepare(q, k, v[:, :, :3].contiguous(), causal)
    with pytest.raises(ValueError, match="share one dtype"):
        prepare(q, k.half(), v, causal)
    with pytest.raises(ValueError, match="out must be"):
        prepare(q, k, v, causal, out=torch.empty(1, 4, 5, 32))
    with pytest.raises(TypeError, match="causal must be True or False .* pass bool"):
        prepare(q, k, v, torch.tensor(True))


def test_causal_travels_as_a_plain_bool_option_through_the_checker():
    """make_inputs gives causal as a Python bool (an option: hello_gpu.ops.checking), which the checker passes
    through every case as it is (the strided layout re-lays out q, k and v only), and the flag matters:
    the same inputs with it flipped miss the reference."""
    from hello_gpu.ops.checking import STRIDED, output_failure
    q, k, v, causal = _inputs((1, 4, 2, 9, 13, 64, 1))
    assert causal is True and _inputs((1, 4, 2, 9, 13, 64))[3] is False
    op = load_op("attention")
    report = check_rung(op.rung("v00_torch"), op, shapes=[(1, 4, 2, 9, 13, 64, 1), (1, 2, 1, 5, 3, 64, 1)],
                        dtypes=["float32"])
    assert report.passed, report.reason
    assert STRIDED in {case.distribution for case in report.ran}
    flipped = op.rung("v00_torch").build()(q, k, v, False)
    assert output_failure(spec, (q, k, v, causal), flipped, "float32") is not None


# ------------------------------------------------------------------------------------------ compile cost

# Each Triton kernel of the ladder; the autotuned rungs t03-t05 wrap t02's and t04's kernels and t05's own.
TRITON_KERNELS = {"t01_materialised_scores": ("scores_kernel", "softmax_kernel", "weighted_values_kernel"),
                  "t02_fused_online_softmax": ("attention_kernel",), "t04_causal_block_skipping": ("attention_kernel",),
                  "t05_gqa_shared_kv_tiles": ("grouped_kernel",),
                  "t06_flash_decoding": ("chunk_kernel", "merge_kernel")}


def test_no_triton_kernel_is_compiled_again_for_other_lengths(monkeypatch):
    """Issue 22: Triton specialises an int argument on 1 and on multiples of 16, each combination a compile of its
    own (~0.8 s); the bfloat16 ladder's shapes make 12 combinations, and t03-t05 compiled their 8 configurations
    for each. Every integer argument of every kernel (all but pointers, the scale and constexprs) is left
    unspecialised. Read from the kernels as decorated for the GPU (the interpreter keeps no such setting)."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    from hello_gpu.ops.rung import load_module
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    op = load_op("attention")
    assert set(TRITON_KERNELS) | {"t03_autotuned_tiles"} == {rung.id for rung in op.rungs if rung.route == "triton"}
    for rung_id, names in TRITON_KERNELS.items():
        module = load_module(op.rung(rung_id).path, f"test_compile_cost_{rung_id}")
        for name in names:
            kernel = getattr(module, name)
            assert isinstance(kernel, JITFunction), (rung_id, name)
            lengths = [arg for arg, parameter in zip(kernel.arg_names, kernel.params)
                       if not parameter.is_constexpr and not arg.endswith("_ptr") and arg != "scale_log2"]
            # Triton keeps the names, or their positions (some versions): either way, these arguments.
            unspecialised = {kernel.arg_names[item] if isinstance(item, int) else item
                             for item in kernel.do_not_specialize}
            assert lengths and set(lengths) <= unspecialised, (rung_id, name, lengths)
    for rung_id, name in (("t03_autotuned_tiles", "attention_kernel"), ("t04_causal_block_skipping", "tuned_kernel"),
                          ("t05_gqa_shared_kv_tiles", "tuned_kernel")):
        tuned = getattr(load_module(op.rung(rung_id).path, f"test_compile_cost_{rung_id}_tuned"), name)
        assert isinstance(tuned, Autotuner) and tuned.early_config_prune.__name__ == "worth_tuning", rung_id


def test_only_problems_where_the_tiles_matter_are_autotuned():
    """The ladder's edge shapes (1000 x 1000 at most) and decode (1 x 32768) run the first configuration untimed;
    the prefill benchmark shapes (4096 x 4096) time all eight."""
    from hello_gpu.ops.attention import tuning
    configurations = tuning.configs()
    for shape in (*spec.EDGE_SHAPES, *spec.BENCH_SHAPES):
        d = spec.dims(shape)
        kept = tuning.worth_tuning(configurations, {"q_len": d.q_len, "kv_len": d.kv_len})
        assert kept == (configurations if d.q_len == d.kv_len == 4096 else configurations[:1]), shape
    assert tuning.POINTS[0][0] == min(point[0] for point in tuning.POINTS)     # decode's tile: the smallest BLOCK_M


# ------------------------------------------------------------------------------------------ interpreter

# One child process for every interpreter check of this file (the interpreter must be chosen before triton is
# imported; see tests/test_ops_ladders.py), on float32 ("normal" inputs and the block probe, one fresh seed:
# the spec's "large" inputs and the layouts are checked on the edge shapes by test_ops_ladders). Each call
# in the interpreter costs ~10 ms a program and key tile, so the shapes below are the smallest that cross
# every boundary in question; the whole child takes ~15 s on a loaded 2-core machine (it took 100 s with every
# rung at every shape, float16 and all distributions).
_SCRIPT = """
import json, sys
from pathlib import Path
from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.header import parse_header
from hello_gpu.ops.rung import Rung
from hello_gpu.ops.shapes import shape_label
op = load_op("attention")
job = json.loads(sys.argv[1])
seed = job["seed"]
options = dict(op=op, dtypes=["float32"], device="cpu", seeds=[seed], distributions=["normal"], layouts=False)

def summary(report):
    failed = sorted({case.shape for case in report.failures})
    return [report.status, report.reason[:300], len(report.ran), failed]

out = {"configs": {}, "rungs": {}}
from hello_gpu.ops.attention import tuning
points = tuning.POINTS
for point in points:
    tuning.POINTS = (point,) + tuple(p for p in points if p != point)
    report = check_rung(op.rung("t04_causal_block_skipping"), shapes=[tuple(s) for s in job["config_shapes"]], **options)
    out["configs"][str(point)] = summary(report)
tuning.POINTS = points
shapes = [tuple(s) for s in job["shapes"]]
for rung_id, indices in job["rungs"].items():
    out["rungs"][rung_id] = summary(check_rung(op.rung(rung_id), shapes=[shapes[i] for i in indices], **options))
path = Path(job["known_wrong"])
wrong = Rung(op, path.stem, "triton", path, parse_header(path))
out["known_wrong"] = summary(check_rung(wrong, shapes=shapes, **options))
out["shapes"] = [shape_label(s) for s in shapes]
print(json.dumps(out))
"""
# Past INTERPRETER_MAX_ELEMENTS (which test_ops_ladders leaves to the GPU), each with two 64-key tiles or more,
# the last partial: causal square with two query blocks; S_q > S_kv (30 fully masked rows, GQA 4); S_q < S_kv (a
# bottom-right offset of +80: the diagonal cuts the third key tile); flash-decoding's split (4 tiles in 4
# chunks, the last 8 keys) with a group of 4. D = 128 is in the edge shapes (every rung) and the GPU tier: in the
# interpreter it costs twice D = 64 (the interpreter works element by element on each tile).
PAST_THE_LIMIT = [(1, 2, 2, 127, 127, 64, 1), (1, 4, 1, 100, 70, 64, 1), (1, 2, 1, 70, 150, 64, 1),
                  (1, 4, 1, 1, 200, 64)]
# Every autotune point as t04's first (the only one the interpreter runs): with 32- to 128-key tiles and 64- or
# 128-row query blocks, 140 x 131 causal has two query blocks and a partial last key tile under every point,
# 9 fully masked rows, tiles every row sees whole (the unmasked loop) and a diagonal that cuts tiles.
CONFIG_SHAPES = [(1, 2, 1, 140, 131, 64, 1)]
# The shapes of PAST_THE_LIMIT (by index) each rung runs a code path of its own at. In the interpreter t03 is t02
# (t02's kernel at the first autotune point, t02's own 64 x 64 tiles); t06 hands every prefill shape (more than
# 64 rows a KV head) to t05 unchanged: its own kernels run at the decode shape only.
RUNG_SHAPES = {"t01_materialised_scores": [0, 1, 2, 3], "t02_fused_online_softmax": [0, 1, 2, 3],
               "t03_autotuned_tiles": [], "t04_causal_block_skipping": [0, 1, 2, 3],
               "t05_gqa_shared_kv_tiles": [0, 1, 2, 3], "t06_flash_decoding": [3]}


@pytest.fixture(scope="module")
def interpreted():
    """The child's results: every autotune point, every Triton rung and the known-wrong rung past the limit."""
    from pathlib import Path
    job = {"seed": random.randrange(2**31), "config_shapes": CONFIG_SHAPES, "shapes": PAST_THE_LIMIT,
           "rungs": {rung_id: indices for rung_id, indices in RUNG_SHAPES.items() if indices},
           "known_wrong": str(Path(__file__).parent / "known_wrong" / "attention" / "t90_skips_one_key_tile.py")}
    done = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(job)], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(HAS_GPU, reason="the interpreter tier; on a GPU test_ops_ladders checks every edge shape")
def test_every_autotune_configuration_is_correct_in_the_interpreter(interpreted):
    """The interpreter cannot time, so t03-t05 run the first configuration there; each configuration
    in turn is made the first and checked (t04's kernel: masks, skipping and tiles together)."""
    from hello_gpu.ops.attention.tuning import POINTS
    assert len(interpreted["configs"]) == len(POINTS) == 8
    for point, (status, reason, cases, _) in interpreted["configs"].items():
        assert status == "pass" and cases == 2 * len(CONFIG_SHAPES), f"{point}: {reason}"


@pytest.mark.skipif(HAS_GPU, reason="the interpreter tier; on a GPU test_ops_ladders checks every edge shape")
@pytest.mark.parametrize("rung_id", [rung_id for rung_id, indices in RUNG_SHAPES.items() if indices])
def test_triton_rungs_are_correct_past_the_interpreter_size_limit(interpreted, rung_id):
    status, reason, cases, _ = interpreted["rungs"][rung_id]
    assert status == "pass" and cases == 2 * len(RUNG_SHAPES[rung_id]), f"{rung_id}: {reason}"


def test_every_triton_rung_is_accounted_for_past_the_limit():
    """A new Triton rung must say which of these shapes run a code path of its own (RUNG_SHAPES)."""
    assert set(RUNG_SHAPES) == {rung.id for rung in load_op("attention").rungs if rung.route == "triton"}


@pytest.mark.skipif(HAS_GPU, reason="the interpreter tier; the GPU tier runs test_known_wrong_rungs_fail_on_the_gpu")
def test_the_dropped_key_tile_is_rejected_at_every_shape_past_the_limit(interpreted):
    """The known-wrong rung (t02 without its middle key tile) fails at each of these shapes (two key tiles
    or more each): the checks that pass the rungs above would catch a dropped tile there."""
    status, _, _, failed = interpreted["known_wrong"]
    assert status == "FAIL" and sorted(failed) == sorted(interpreted["shapes"])


# ------------------------------------------------------------------------------------------ GPU tier


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_every_sdpa_backend_peer_runs_its_own_backend_at_the_bench_shapes():
    """Each peer_sdpa_* answers at a prefill and a decode benchmark shape within tolerance, and with only
    its backend enabled (a backend that cannot run the shape raises instead of falling back silently)."""
    from hello_gpu.ops.checking import output_failure
    op = load_op("attention")
    for shape in [(4, 32, 8, 4096, 4096, 128, 1), (16, 32, 8, 1, 4096, 128)]:
        inputs = spec.make_inputs(shape, "bfloat16", seed=3, device="cuda")
        for rung in op.rungs:
            if rung.id.startswith("peer_sdpa_") and rung.id != "peer_sdpa_math":
                output = rung.build()(*inputs)
                assert output_failure(spec, inputs, output, "bfloat16") is None, (rung.id, shape)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_materialising_rungs_refuse_before_allocating_on_the_gpu():
    """t01 and v01 at 4x32x32x32768x32768x128 would need 512 GiB of scores: a ValueError naming the sizes,
    not an out-of-memory crash (the inputs are only 2 GiB)."""
    op = load_op("attention")
    q = torch.empty((4, 32, 32768, 128), dtype=torch.bfloat16, device="cuda")
    for rung_id in ("t01_materialised_scores", "v01_materialised_three_kernels"):
        with pytest.raises(ValueError, match="would take 512.0 GiB"):
            op.rung(rung_id).build()(q, q, q, True)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("shape", [(4, 32, 32, 4096, 4096, 128), (16, 32, 8, 1, 32768, 128)])
def test_the_probe_is_drawn_on_the_gpu_at_the_bench_shapes(shape):
    """Issue 22: built on the CPU, these probes took 6.5 s and 46 s (2-core box) for every rung of the ladder."""
    assert _probe_structure_problems(shape, "bfloat16", "cuda") == []


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_a_shared_case_at_a_bench_shape_keeps_its_reference_and_serves_every_rung():
    """What the ladder does at 4x32x32x4096x4096x128: the normal case and the probe made once on the GPU,
    their float64 reference (512 MiB each, in batch-entry chunks) kept, and each rung checked against them
    with its own poisoned output, the inputs unchanged after it."""
    from hello_gpu.ops.checking import PROBE, CaseCache, run_case
    op = load_op("attention")
    shape = (4, 32, 32, 4096, 4096, 128)
    cases = CaseCache(spec)
    for distribution in ("normal", PROBE):
        case = cases.case(shape, "bfloat16", 5, distribution, "cuda")
        assert case is cases.case(shape, "bfloat16", 5, distribution, "cuda")
        assert case.expected is not None and case.chunked is not None        # kept: the H200 has the room
        kept = [chunk for _, _, chunk in case.chunked.chunks()]
        assert all(a is b for a, b in zip(kept, (chunk for _, _, chunk in case.chunked.chunks())))
        for rung_id in ("v00_torch", "t02_fused_online_softmax"):
            result = run_case(op.rung(rung_id).build(), case, True)
            assert result.passed, (rung_id, distribution, result.reason)
            assert case.changed_inputs() == []
