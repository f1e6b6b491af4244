"""Two baselines of the attention ladder that failed its edge checks on the H200 (records at 89ae604), fixed:

- peer_compiled_expression computed Q K^T in the input dtype: on "large" inputs the 16-bit scores moved the
  softmax out of tolerance (112 of 2112 outputs at 1x1x1x33x31x64x1 bfloat16). It now casts Q and K to
  float32 first; the CPU tier checks the eager expression (torch.compile's graph is checked on the GPU).
- peer_sdpa_cudnn raised "No available kernel" at 1x2x1x1x1x128: cuDNN has no kernel for S_kv = 1. That
  edge shape now runs on the math backend; no benchmark shape may (it would time another backend).

On the CPU, check_rung skips peers ("checked and timed on the GPU"); these tests lift that skip to run the
same checker (poisoned output, float64 reference, probe, layouts, bitwise repeat) on what does run here.
"""

from __future__ import annotations

import math

import pytest
import torch

from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.attention import peer_compiled_expression, peer_sdpa_cudnn, spec
from hello_gpu.ops.attention.sdpa import repeat_heads, sdpa
from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.rung import BuiltRung, Rung
from hello_gpu.runtime.device import gpu_vendor

HAS_GPU = gpu_vendor() is not None
SIXTEEN_BIT = ("bfloat16", "float16")
# The edge shape that failed on the H200, with CPU seeds whose "large" inputs fail 16-bit scores (bfloat16: 30
# of 2112 outputs out of tolerance, float16: 117).
FAILED_SHAPE = (1, 1, 1, 33, 31, 64, 1)
DISCRIMINATING_SEEDS = {"bfloat16": 1862481516, "float16": 223083101}


def sixteen_bit_scores(q, k, v, causal):
    """The expression 66ae205 removed: Q K^T rounded to the input dtype, then cast to float32."""
    k, v = repeat_heads(q, k), repeat_heads(q, v)
    scores = (q @ k.transpose(-2, -1)).float() * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        visible = spec.visible_mask(q.shape[2], k.shape[2], q.device)
        scores = scores.masked_fill(~visible, float("-inf"))
        weights = torch.where(visible.any(dim=-1, keepdim=True), torch.softmax(scores, dim=-1), 0.0)
    else:
        weights = torch.softmax(scores, dim=-1)
    return weights.to(q.dtype) @ v


@pytest.mark.parametrize("dtype", SIXTEEN_BIT)
def test_float32_scores_pass_where_16_bit_scores_fail(dtype):
    inputs = spec.make_inputs(FAILED_SHAPE, dtype, seed=DISCRIMINATING_SEEDS[dtype], distribution="large")
    assert "elements outside" in (output_failure(spec, inputs, sixteen_bit_scores(*inputs), dtype) or "")
    assert output_failure(spec, inputs, peer_compiled_expression.expression(*inputs), dtype) is None


def _check_on_cpu(monkeypatch, rung_id: str, function, shapes, seeds=(3, 4)):
    """check_rung on the CPU for a peer (its GPU-only skip lifted), bfloat16 and float16."""
    monkeypatch.setattr(Rung, "skip_reason", lambda self: None)
    rung = load_op("attention").rung(rung_id)
    built = BuiltRung(rung, function, accepts_out=False)
    return check_rung(rung, shapes=shapes, dtypes=SIXTEEN_BIT, seeds=seeds, built=built, device="cpu")


def test_the_expression_passes_the_checker_at_every_edge_shape(monkeypatch):
    report = _check_on_cpu(monkeypatch, "peer_compiled_expression", peer_compiled_expression.expression,
                           spec.EDGE_SHAPES)
    assert report.passed, [f"{case.shape} {case.dtype} {case.distribution}: {case.reason}" for case in report.failures]
    assert {case.distribution for case in report.ran} >= {"normal", "large"}
    assert (report.worst_error_over_allowed or 0) < 1


def _runs_on_math(d) -> bool:
    """Whether the cuDNN peer sends a shape to the math backend: sdpa.py's bottom-right mask route, or one key."""
    return (d.causal and d.q_len != d.kv_len) or not peer_sdpa_cudnn.has_cudnn_kernel(d.kv_len)


def test_no_benchmark_shape_leaves_the_cudnn_backend():
    """A baseline timed on another backend than its name says would be a false figure: every benchmark shape
    runs on cuDNN (or raises), only edge shapes (correctness, never timed) may take the math backend."""
    assert not [shape for shape in spec.BENCH_SHAPES if _runs_on_math(spec.dims(shape))]
    assert (1, 2, 1, 1, 1, 128) in [shape for shape in spec.EDGE_SHAPES if _runs_on_math(spec.dims(shape))]


def test_the_cudnn_peer_answers_one_key_on_math_and_falls_back_nowhere_else(monkeypatch):
    """On the CPU, cuDNN runs nothing: the shapes routed to math pass the checker, every other one raises."""
    built = load_op("attention").rung("peer_sdpa_cudnn").build()
    routed = [shape for shape in spec.EDGE_SHAPES if _runs_on_math(spec.dims(shape))]
    report = _check_on_cpu(monkeypatch, "peer_sdpa_cudnn", built.function, routed)
    assert report.passed, [f"{case.shape} {case.dtype} {case.distribution}: {case.reason}" for case in report.failures]
    for shape in [shape for shape in spec.EDGE_SHAPES if shape not in routed]:
        with pytest.raises(RuntimeError):
            built(*spec.make_inputs(shape, "bfloat16", seed=0))


# ------------------------------------------------------------------------------------------ GPU tier


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("rung_id", ["peer_compiled_expression", "peer_sdpa_cudnn"])
def test_the_fixed_peers_pass_every_edge_shape_on_the_gpu(rung_id):
    """What the ladder's edge checks do, with every failure listed (the ladder prints only the first)."""
    report = check_rung(load_op("attention").rung(rung_id), dtypes=SIXTEEN_BIT)
    assert report.passed, [f"{case.shape} {case.dtype} {case.distribution} seed {case.seed}: {case.reason}"
                           for case in report.failures] or report.reason


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", SIXTEEN_BIT)
def test_cudnn_has_no_kernel_for_one_key_and_the_peer_answers_it(dtype):
    """At 1x2x1x1x1x128, where the H200 raised "No available kernel": the cuDNN backend still refuses (if this
    fails, cuDNN gained the kernel and has_cudnn_kernel's route can go), and the peer answers within tolerance."""
    inputs = spec.make_inputs((1, 2, 1, 1, 1, 128), dtype, seed=5, distribution="large", device="cuda")
    with pytest.raises(RuntimeError, match="No available kernel"):
        sdpa(*inputs, "cudnn")
    output = load_op("attention").rung("peer_sdpa_cudnn").build()(*inputs)
    assert output_failure(spec, inputs, output, dtype) is None


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_pytorchs_cudnn_gate_agrees_with_the_route():
    """torch.backends.cuda.can_use_cudnn_attention, PyTorch's own test, says yes exactly where the peer calls
    cuDNN: at every benchmark shape and every edge shape sdpa.py does not send to math, except S_kv = 1."""
    from torch.backends.cuda import SDPAParams, can_use_cudnn_attention
    disagreements = []
    for shape in (*spec.BENCH_SHAPES, *spec.EDGE_SHAPES):
        d = spec.dims(shape)
        if d.causal and d.q_len != d.kv_len:
            continue
        q = torch.empty((d.batch, d.heads, d.q_len, d.head_dim), dtype=torch.bfloat16, device="cuda")
        k = torch.empty((d.batch, d.kv_heads, d.kv_len, d.head_dim), dtype=torch.bfloat16, device="cuda")
        usable = can_use_cudnn_attention(SDPAParams(q, k, k, None, 0.0, d.causal, d.heads != d.kv_heads))
        if usable != peer_sdpa_cudnn.has_cudnn_kernel(d.kv_len):
            disagreements.append((d.label, usable))
    assert disagreements == []
