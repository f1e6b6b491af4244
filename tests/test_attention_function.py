"""hello_gpu.ops.attention: the attention rung a rule picks per case, as a function and a torch custom op.

CPU tier: the argument checks, the rule (decode -> flash-decoding, prefill -> the GQA prefill rung), the
rule against the committed records once they exist, and in the Triton interpreter: results against the
float64 reference, the named rung being the one that ran, fullgraph torch.compile. GPU tier: the same on
the device at the issue's head counts and sizes.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import hello_gpu.ops as ops
from hello_gpu.ops import load_op
from hello_gpu.ops.functions import ATTENTION_DECODE_ROWS, ATTENTION_RULE, _attention_candidates
from hello_gpu.ops.matmul_functions import INTERPRETER, Machine
from hello_gpu.runtime.device import gpu_vendor

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "records" / "nvidia-h200"
spec = load_op("attention").spec


def test_the_name_is_the_function_even_after_the_op_folder_is_imported():
    import hello_gpu.ops.attention.spec  # noqa: F401 - the folder of the same name
    assert ops.attention.__module__ == "hello_gpu.ops.functions" and callable(ops.attention_rung)
    assert hasattr(torch.ops.hello_gpu, "attention")


def test_the_rule_names_candidates_ending_in_a_triton_rung_and_agrees_with_t06():
    from hello_gpu.ops.rung import load_module
    op = load_op("attention")
    for candidates in ATTENTION_RULE.values():
        assert all(not op.rung(rung_id).is_baseline for rung_id in candidates)
        assert op.rung(candidates[-1]).route == "triton", "the last candidate must run wherever Triton does"
    t06 = load_module(op.rung("t06_flash_decoding").path, "attention_t06_for_the_rule")
    assert t06.DECODE_ROWS == ATTENTION_DECODE_ROWS


H200 = Machine("nvidia", "sm_90", 232448)                  # 227 KiB of shared memory a block (opt-in)
A100 = Machine("nvidia", "sm_80", 166912)
RDNA4 = Machine("amd", "gfx1201", 65536)


@pytest.mark.parametrize("shape, dtype, machine, rung_id", [
    ((1, 32, 8, 1, 4096, 128), torch.bfloat16, H200, "t06_flash_decoding"),      # Llama 3 decode: 4 rows a KV head
    ((16, 32, 8, 16, 4096, 128), torch.bfloat16, H200, "t06_flash_decoding"),    # 16 draft tokens x 4 heads: 64 rows
    ((16, 32, 8, 17, 4096, 128), torch.bfloat16, H200, "v07_wgmma_tma"),         # 68 rows: prefill
    ((1, 32, 32, 1, 4096, 128), torch.float16, H200, "t06_flash_decoding"),      # no GQA: 1 row a head
    ((4, 32, 8, 4096, 4096, 128, 1), torch.bfloat16, H200, "v07_wgmma_tma"),
    ((4, 32, 8, 4096, 4096, 128, 1), torch.float32, H200, "t05_gqa_shared_kv_tiles"),   # wgmma takes 16-bit inputs
    ((4, 32, 8, 4096, 4096, 128, 1), torch.bfloat16, A100, "t05_gqa_shared_kv_tiles"),  # no sm_90a
    ((4, 32, 8, 4096, 4096, 128, 1), torch.bfloat16, RDNA4, "t05_gqa_shared_kv_tiles"),
    ((4, 32, 8, 4096, 4096, 128, 1), torch.bfloat16, INTERPRETER, "t05_gqa_shared_kv_tiles"),
])
def test_the_rule_picks_flash_decoding_for_few_rows_a_kv_head_and_what_the_machine_runs(shape, dtype, machine, rung_id):
    d = spec.dims(shape)
    q = torch.empty((d.batch, d.heads, d.q_len, d.head_dim), device="meta", dtype=dtype)
    kv = torch.empty((d.batch, d.kv_heads, d.kv_len, d.head_dim), device="meta", dtype=dtype)
    assert ops.attention_rung(q, kv, kv, d.causal, machine=machine) == rung_id


def test_the_tma_rung_carries_its_launchers_alignment_and_the_rule_ends_with_any_address():
    from hello_gpu.ops.rung import load_module
    v07 = load_module(load_op("attention").rung("v07_wgmma_tma").companion, "attention_v07_alignment")
    assert _attention_candidates("prefill", torch.bfloat16, H200) == (
        ("v07_wgmma_tma", v07.TMA_ALIGNMENT), ("t05_gqa_shared_kv_tiles", 1))
    assert _attention_candidates("decode", torch.float16, H200) == (("t06_flash_decoding", 1),)
    assert _attention_candidates("prefill", torch.float32, H200) == (("t05_gqa_shared_kv_tiles", 1),)


def test_bad_arguments_are_refused_with_the_problem_named():
    q, k, v = torch.randn(1, 4, 5, 64), torch.randn(1, 2, 7, 64), torch.randn(1, 2, 7, 64)
    with pytest.raises(TypeError, match=r"attention: k must be a torch.Tensor, got list"):
        ops.attention(q, [1.0], v)
    with pytest.raises(TypeError, match=r"attention: q is float64; supported: float32, bfloat16, float16"):
        ops.attention(q.double(), k.double(), v.double())
    with pytest.raises(TypeError, match=r"causal must be True or False, got Tensor"):
        ops.attention(q, k, v, torch.tensor(True))
    with pytest.raises(ValueError, match=r"hello_gpu.ops.attention: q has 3 heads and k 2: H must be a multiple"):
        ops.attention(q[:, :3], k, v)
    with pytest.raises(ValueError, match=r"head size D=96"):
        ops.attention(torch.randn(1, 4, 5, 96), torch.randn(1, 2, 7, 96), torch.randn(1, 2, 7, 96))
    with pytest.raises(ValueError, match=r"they must share one dtype"):
        ops.attention(q, k.half(), v)
    with pytest.raises(ValueError, match=r"must have the same shape"):
        ops.attention(q, k, v[:, :, :6])
    with pytest.raises(ValueError, match=r"q must be a 4-D tensor"):
        ops.attention(q[0], k, v)
    with pytest.raises(RuntimeError, match=r"attention is forward only .* torch.no_grad\(\)"):
        ops.attention(q.requires_grad_(), k, v)
    if os.environ.get("TRITON_INTERPRET") != "1":
        with pytest.raises(ValueError, match=r"q is on cpu; the kernels run on a GPU"):
            ops.attention(q.detach(), k, v)


def test_the_rule_is_the_fastest_candidate_in_the_committed_records():
    """Once the H200 records of issue 22 exist: at every shape, the rung the rule picks is within noise of
    the fastest candidate (its interval reaches 98% of the fastest one's paired speedup over torch), as
    tests/test_functions.py holds BEST for softmax and rms_norm."""
    paths = [RECORDS / f"attention.{dtype}.json" for dtype in ("bfloat16", "float16")]
    if not any(path.is_file() for path in paths):
        pytest.skip("no attention record is committed yet (records/nvidia-h200/attention.bfloat16.json): the rule "
                    "stands unmeasured")
    for path in (p for p in paths if p.is_file()):
        entries = [e for e in json.loads(path.read_text())["entries"]
                   if e["role"] == "candidate" and "v00_torch" in (e.get("speedups") or {})]
        for shape in sorted({e["shape"] for e in entries}):
            here = [e for e in entries if e["shape"] == shape]
            fastest = max(here, key=lambda e: e["speedups"]["v00_torch"]["value"])
            d = spec.dims(tuple(int(x) for x in shape.split("x")))
            picked = _attention_candidates("decode" if d.group * d.q_len <= ATTENTION_DECODE_ROWS else "prefill",
                                           getattr(torch, path.name.split(".")[1]), H200)[0][0]
            chosen = next(e for e in here if e["variant"] == picked)
            assert chosen["speedups"]["v00_torch"]["ci95"][1] >= fastest["speedups"]["v00_torch"]["value"] * 0.98, (
                f"the rule picks {picked}, but {fastest['variant']} is faster at {shape} in {path.name}")


_INTERPRETER_SCRIPT = """
import json, sys, torch
import hello_gpu.ops as ops
from hello_gpu.ops import load_op
from hello_gpu.ops.checking import output_failure
op = load_op("attention")
spec = op.spec
seed = int(sys.argv[1])
out = {}
for shape in [(2, 4, 2, 1, 70, 64), (1, 2, 1, 70, 45, 64, 1), (1, 4, 2, 9, 130, 128, 1)]:
    for dtype in ("float32", "float16"):
        q, k, v, causal = spec.make_inputs(shape, dtype, seed=seed)
        # q as a (B, S, H, D) projection's transpose: not contiguous, copied by the function
        strided_q = q.transpose(1, 2).contiguous().transpose(1, 2)
        got = ops.attention(strided_q, k, v, causal=causal)
        rung = ops.attention_rung(q, k, v, causal)
        ran = op.rung(rung).build()(q, k, v, causal)
        out[f"{shape}/{dtype}"] = [rung, output_failure(spec, (q, k, v, causal), got, dtype), bool(torch.equal(got, ran))]
q, k, v, causal = spec.make_inputs((1, 4, 2, 20, 33, 64, 1), "float32", seed=seed)
compiled = torch.compile(lambda q, k, v: ops.attention(q, k, v, causal=True) * 2, fullgraph=True, backend="aot_eager")
out["compiled"] = output_failure(spec, (q, k, v, causal), compiled(q, k, v) / 2, "float32")
print(json.dumps(out))
"""


@pytest.mark.skipif(gpu_vendor() is not None, reason="the interpreter tier; the GPU tier runs on the device")
def test_results_the_rung_that_ran_and_fullgraph_compile_in_the_interpreter():
    environment = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", _INTERPRETER_SCRIPT, str(random.randrange(2**31))], env=environment,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results.pop("compiled") is None
    rungs = {case: rung for case, (rung, _, _) in results.items()}
    assert rungs["(2, 4, 2, 1, 70, 64)/float32"] == "t06_flash_decoding"
    assert rungs["(1, 2, 1, 70, 45, 64, 1)/float32"] == "t05_gqa_shared_kv_tiles"
    for case, (rung, failure, same_as_the_rung) in results.items():
        assert failure is None, f"{case} ({rung}): {failure}"
        assert same_as_the_rung, f"{case}: the output is not {rung}'s, bit for bit"


# ------------------------------------------------------------------------------------------ GPU tier

gpu = pytest.mark.skipif(gpu_vendor() is None, reason="needs a GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("shape", [(1, 32, 8, 1, 4096, 128), (16, 32, 8, 1, 1000, 128), (2, 32, 8, 16, 777, 64, 1),
                                   (1, 32, 8, 1000, 1000, 128, 1), (2, 8, 8, 300, 127, 64, 1),
                                   (1, 16, 4, 127, 1000, 128)])
def test_attention_matches_the_reference_and_runs_the_named_rung_on_the_gpu(shape, dtype):
    from hello_gpu.ops.checking import output_failure
    # The function's own built rung: another build of an autotuned rung (t05) may tune to another configuration,
    # whose bits differ. The interpreter test compares with a separate build (no autotuning there).
    from hello_gpu.ops.functions import _attention_built
    for seed in (random.randrange(2**31), random.randrange(2**31)):
        q, k, v, causal = spec.make_inputs(shape, dtype, seed=seed, device="cuda")
        got = ops.attention(q, k, v, causal=causal)
        torch.cuda.synchronize()
        assert output_failure(spec, (q, k, v, causal), got, dtype) is None
        rung = ops.attention_rung(q, k, v, causal)
        assert torch.equal(got, _attention_built(rung)(q, k, v, causal)), f"the output is not {rung}'s"


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_prefill_at_an_address_tma_cannot_read_runs_the_next_candidate(dtype):
    """q, k and v contiguous but starting 2 bytes into their storage (a view at an odd offset): the TMA rung is
    passed over for the next candidate, whose result is still right; the aligned tensors run the first
    candidate this machine runs."""
    from hello_gpu.ops.checking import output_failure
    from hello_gpu.ops.functions import _attention_machine
    shape = (1, 8, 2, 200, 300, 64, 1)
    q, k, v, causal = spec.make_inputs(shape, dtype, seed=random.randrange(2**31), device="cuda")
    shifted = [torch.empty(t.numel() + 1, dtype=t.dtype, device="cuda")[1:].view(t.shape) for t in (q, k, v)]
    for view, t in zip(shifted, (q, k, v)):
        view.copy_(t)
    assert all(view.is_contiguous() and view.data_ptr() % 16 for view in shifted)
    candidates = _attention_candidates("prefill", q.dtype, _attention_machine(q))
    assert ops.attention_rung(q, k, v, causal) == candidates[0][0]
    assert ops.attention_rung(*shifted, causal) == next(rung for rung, alignment in candidates if alignment == 1)
    got = ops.attention(*shifted, causal=causal)
    torch.cuda.synchronize()
    assert output_failure(spec, (q, k, v, causal), got, dtype) is None


@pytest.mark.gpu
@gpu
def test_fullgraph_compile_and_a_layout_copy_on_the_gpu():
    from hello_gpu.ops.checking import output_failure
    q, k, v, causal = spec.make_inputs((2, 32, 8, 129, 129, 128, 1), "bfloat16", seed=random.randrange(2**31),
                                       device="cuda")
    compiled = torch.compile(lambda q, k, v: ops.attention(q, k, v, causal=True) + 1, fullgraph=True)
    with torch.no_grad():
        assert output_failure(spec, (q, k, v, causal), compiled(q, k, v) - 1, "bfloat16") is None
    strided = q.transpose(1, 2).contiguous().transpose(1, 2)           # (B, S, H, D) seen as (B, H, S, D)
    assert output_failure(spec, (q, k, v, causal), ops.attention(strided, k, v, causal=True), "bfloat16") is None
