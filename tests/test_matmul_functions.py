"""hello_gpu.ops.matmul / linear: the rung a rule picks per machine, dtype and layout, as functions and
torch custom ops.

CPU tier: the rule on described machines (meta tensors), the refusals, the rule against the committed
records once they exist, and in the Triton interpreter: results against the float64 reference in every
accepted layout, the named rung being the one that ran, sizes of 0, fullgraph torch.compile. GPU tier:
the same on the device at the issue's edge and decode shapes, the replayed fast path, fullgraph compile.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import hello_gpu.ops as ops
from hello_gpu.ops import load_op
from hello_gpu.ops.matmul_functions import (GEMV_ROWS, LINEAR_DECODE, LINEAR_ONE_ROW, MATMUL_RULE, Machine,
                                            _shared_bytes, rule, unrunnable)
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.device import gpu_vendor

REPO = Path(__file__).resolve().parents[1]
SM_90_DEVICES = ("nvidia-h200", "nvidia-h100-80gb-hbm3")      # the GPUs this project measures on, both sm_90
MATMUL, LINEAR = load_op("matmul"), load_op("linear")

H200 = Machine("nvidia", "sm_90", 232448)                  # 227 KiB a block with opt-in
A100 = Machine("nvidia", "sm_80", 166912)                  # 163 KiB
RTX_4090 = Machine("nvidia", "sm_89", 101376)              # 99 KiB: v11's 106 KiB do not fit
T4 = Machine("nvidia", "sm_75", 65536)                     # no bf16 mma.sync, no cp.async
RX_9070_XT = Machine("amd", "gfx1201", 65536)
INTERPRETER = Machine(None, None, 0, interpreted=True)


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, device="meta", dtype=dtype)


def test_the_names_are_the_functions_even_after_the_op_folders_are_imported():
    from hello_gpu.ops.linear import spec as linear_spec      # imports the folders of the same names
    from hello_gpu.ops.matmul import spec as matmul_spec
    assert matmul_spec.NAME == "matmul" and linear_spec.NAME == "linear"
    assert ops.matmul.__module__ == ops.linear.__module__ == "hello_gpu.ops.matmul_functions"
    assert callable(ops.matmul_rung) and callable(ops.linear_rung)
    assert hasattr(torch.ops.hello_gpu, "matmul") and hasattr(torch.ops.hello_gpu, "linear")


def test_the_rule_names_candidates_of_the_stated_routes():
    """Every list holds a Triton rung (what runs anywhere Triton does); the rest are the routes the rule
    states, and GEMV_ROWS is the rows one pass over the weight serves in both decode rungs."""
    linear_lists = (*LINEAR_DECODE.values(), *LINEAR_ONE_ROW.values())
    for candidates in (*MATMUL_RULE.values(), *linear_lists):
        op = LINEAR if candidates in linear_lists else MATMUL
        rungs = [op.rung(rung_id) for rung_id in candidates]
        assert not any(rung.is_baseline for rung in rungs) and "triton" in [rung.route for rung in rungs]
    assert [MATMUL.rung(r).route for r in MATMUL_RULE["16-bit"]] == ["cuda", "cuda", "cuda", "triton"]
    assert [MATMUL.rung(r).route for r in MATMUL_RULE["float32"]] == ["hip", "triton"]
    assert [LINEAR.rung(r).route for r in LINEAR_DECODE["16-bit"]] == ["triton", "triton", "hip"]
    assert [LINEAR.rung(r).route for r in LINEAR_DECODE["float32"]] == ["triton", "hip", "triton"]
    # one row in 16 bits: t04, then t03, ahead of the same list; float32 one row as more rows
    assert LINEAR_ONE_ROW["16-bit"] == ("t04_evict_first_gemv", "t03_tiled_gemv", *LINEAR_DECODE["16-bit"])
    assert LINEAR_ONE_ROW["float32"] == LINEAR_DECODE["float32"]
    rows = re.search(r"constexpr int kRows = (\d+);", LINEAR.rung("v01_warp_per_row").path.read_text())
    t01 = load_module(LINEAR.rung("t01_row_block").path, "linear_t01_for_the_rule")
    assert int(rows.group(1)) == t01.BLOCK_M == GEMV_ROWS


@pytest.mark.parametrize("machine, bf16, fp32", [
    (H200, "v18_tma_store_epilogue", "v19_thread_tile_8x16"),
    (A100, "v11_large_warp_tiles", "v19_thread_tile_8x16"),
    (RTX_4090, "v10_cp_async_pipeline", "v19_thread_tile_8x16"),
    (T4, "t04_autotuned", "v19_thread_tile_8x16"),
    (RX_9070_XT, "t04_autotuned", "v19_thread_tile_8x16"),
    (INTERPRETER, "t04_autotuned", "t04_autotuned"),
], ids=["h200", "a100", "rtx4090", "t4", "rx9070xt", "interpreter"])
def test_the_rule_picks_by_machine_and_dtype(machine, bf16, fp32):
    a, b = meta(4096, 4096), meta(4096, 14336)
    assert ops.matmul_rung(a, b, machine) == f"matmul/{bf16}"
    assert ops.matmul_rung(a.half(), b.half(), machine) == f"matmul/{bf16}"
    assert ops.matmul_rung(a.float(), b.float(), machine) == f"matmul/{fp32}"
    decode = "t02_streaming_gemv"                           # decode, 16-bit and float32: Triton's first, everywhere
    assert ops.linear_rung(meta(1, 4096).float(), meta(14336, 4096).float(), machine) == f"linear/{decode}"
    weight = meta(14336, 4096)
    for rows, rung in ((1, "t04_evict_first_gemv"), (2, decode), (16, decode)):   # a decode step: the GEMV rungs,
        assert ops.linear_rung(meta(rows, 4096), weight, machine) == f"linear/{rung}"         # either layout
        assert ops.matmul_rung(meta(rows, 4096), weight.t(), machine) == f"linear/{rung}"
        assert ops.linear_rung(meta(rows, 4096).half(), weight.half(), machine) == f"linear/{rung}"
    assert ops.linear_rung(meta(17, 4096), weight, machine) == f"matmul/{bf16}"       # prefill: matmul's rungs
    assert ops.linear_rung(meta(1, 4096), b.t(), machine) == f"matmul/{bf16}"         # B (K, N) in linear
    # x of (..., K): M counts every row
    assert ops.linear_rung(meta(2, 8, 4096), weight, machine) == f"linear/{decode}"
    assert ops.linear_rung(meta(2, 9, 4096), weight, machine) == f"matmul/{bf16}"


def test_a_candidate_is_passed_over_with_its_reason():
    v11, v14 = MATMUL.rung("v11_large_warp_tiles"), MATMUL.rung("v14_persistent_grouped")
    assert 99 * 1024 < _shared_bytes(v11) <= 163 * 1024            # fits an A100's block, not an RTX 4090's
    assert "shared memory" in unrunnable(v11, "bfloat16", RTX_4090)
    assert unrunnable(v11, "bfloat16", A100) is None
    assert "sm_90a" in unrunnable(v14, "bfloat16", A100)
    assert unrunnable(v14, "bfloat16", H200) is None
    assert "float32" in unrunnable(v14, "float32", H200)
    assert "interpreter" in unrunnable(MATMUL.rung("v19_thread_tile_8x16"), "float32", INTERPRETER)
    with pytest.raises(RuntimeError, match=r"no matmul rung runs bfloat16 here .*v18_tma_store_epilogue: no GPU"):
        rule("b", 4096, torch.bfloat16, Machine(None, None))


def test_bad_arguments_are_refused_with_the_problem_named():
    a, b, w = torch.randn(3, 4), torch.randn(4, 6), torch.randn(6, 4)
    with pytest.raises(TypeError, match=r"matmul: b must be a torch.Tensor, got list"):
        ops.matmul(a, [1.0])
    with pytest.raises(TypeError, match=r"matmul: a is float64; supported: float32, bfloat16, float16"):
        ops.matmul(a.double(), b.double())
    with pytest.raises(ValueError, match=r"matmul: a is float32 on cpu and b float16 on cpu; they must match"):
        ops.matmul(a, b.half())
    with pytest.raises(ValueError, match=r"matmul takes 2-D a \(M, K\) and b \(K, N\), as torch.mm; got a of "
                                         r"shape \(2, 3, 4\)"):
        ops.matmul(a.expand(2, 3, 4), b)
    with pytest.raises(ValueError, match=r"matmul: a is \(3, 4\) and b \(5, 6\): b needs K = 4 rows"):
        ops.matmul(a, torch.randn(5, 6))
    with pytest.raises(ValueError, match=r"matmul: a has shape \(3, 4\) and strides \(1, 3\); the kernels read a "
                                         r"contiguous \(M, K\) A.*a.contiguous\(\)"):
        ops.matmul(torch.randn(4, 3).t(), b)
    with pytest.raises(ValueError, match=r"matmul: b has shape \(4, 3\) and strides \(6, 2\);.*b.contiguous\(\)"):
        ops.matmul(a, b[:, ::2])
    with pytest.raises(ValueError, match=r"linear: x has shape \(3, 4\) and strides \(8, 2\)"):
        ops.linear(torch.randn(3, 8)[:, ::2], w)
    with pytest.raises(ValueError, match=r"linear: weight has shape \(3, 4\) and strides \(16, 1\).*"
                                         r"contiguous \(N, K\) weight"):
        ops.linear(a, torch.randn(6, 8)[::2, :4])
    with pytest.raises(ValueError, match=r"linear: x is \(3, 4\) and weight \(6, 5\): the weight needs K = 4 "
                                         r"columns"):
        ops.linear(a, torch.randn(6, 5))
    with pytest.raises(ValueError, match=r"linear takes x of \(..., K\) and a 2-D weight \(N, K\)"):
        ops.linear(a, w[None])
    with pytest.raises(RuntimeError, match=r"matmul is forward only .* torch.no_grad\(\)"):
        ops.matmul(a.requires_grad_(), b)
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"b needs K = 4 rows"):      # no_grad passes the grad check
            ops.matmul(a, torch.randn(5, 6))


def test_cpu_tensors_are_refused_outside_the_interpreter(monkeypatch):
    """The CPU tier runs with TRITON_INTERPRET=1 (tests/conftest.py), where CPU tensors are the interpreter's."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    a, b, w = torch.randn(3, 4), torch.randn(4, 6), torch.randn(6, 4)
    with pytest.raises(ValueError, match=r"matmul: a is on cpu; the kernels run on a GPU \(move the tensors"):
        ops.matmul(a, b)
    with pytest.raises(ValueError, match=r"linear: x is on cpu; the kernels run on a GPU"):
        ops.linear(a, w)
    with pytest.raises(ValueError, match=r"linear: x is on cpu"):
        ops.linear(a, b.t())
    with pytest.raises(ValueError, match=r"matmul: a is on cpu"):
        ops.matmul_rung(a, b)


def _rule_on_the_h200(op_name: str, shape: str, dtype: str) -> str | None:
    """The rung id the rule picks on the H200 (and the H100: both sm_90, 227 KiB of shared memory a block)
    for a record's shape, where it is a rung of ``op_name``."""
    m, n, k = (int(size) for size in shape.split("x"))
    layout = "b" if op_name == "matmul" else "weight"
    picked_op, rung_id = rule(layout, m, getattr(torch, dtype), H200)
    return rung_id if picked_op == op_name else None


@pytest.mark.parametrize("name", ["matmul.bfloat16", "matmul.float32", "linear.bfloat16", "linear.float32"])
def test_the_rule_is_the_fastest_candidate_in_the_committed_records(name):
    """Once the sm_90 records of issue 21 exist (the H200's, the H100's): at every shape of each, the rung
    the rule picks is within noise of the fastest candidate (its interval reaches 98% of the fastest one's
    paired speedup over torch), as tests/test_functions.py holds BEST for softmax and rms_norm. A rung newer
    than one GPU's record (t03_tiled_gemv and t04_evict_first_gemv, timed on the H100 only) must be timed at that shape in another
    sm_90 record, where it is held to the same test. Linear's prefill shapes run matmul's rungs on a
    transposed copy, which the linear record does not time: those shapes are left out."""
    op_name, dtype = name.split(".")
    paths = [REPO / "records" / device / f"{name}.json" for device in SM_90_DEVICES]
    # one route's ladder records too (e.g. matmul.hip.float32, the H100's SIMT rungs): the rule is held to them
    paths += [path for device in SM_90_DEVICES
              for path in sorted((REPO / "records" / device).glob(f"{op_name}.*.{dtype}.json"))]
    paths = [path for path in paths if path.is_file()]
    if not paths:
        pytest.skip(f"no {name} record is committed yet (records/*/{name}.json): the rule stands unmeasured")
    records = {path: [e for e in json.loads(path.read_text())["entries"]
                      if e["role"] == "candidate" and "v00_torch" in (e.get("speedups") or {})] for path in paths}
    for path, entries in records.items():
        where = path.relative_to(REPO)
        for shape in sorted({e["shape"] for e in entries}):
            picked = _rule_on_the_h200(op_name, shape, dtype)
            if picked is None:
                continue
            here = [e for e in entries if e["shape"] == shape]
            fastest = max(here, key=lambda e: e["speedups"]["v00_torch"]["value"])
            chosen = next((e for e in here if e["variant"] == picked), None)
            if chosen is None:
                elsewhere = [other.relative_to(REPO) for other, timed in records.items() if other != path
                             and any(e["shape"] == shape and e["variant"] == picked for e in timed)]
                assert elsewhere, f"the rule picks {picked} at {shape}, which no sm_90 record of {name} timed"
                continue
            assert chosen["speedups"]["v00_torch"]["ci95"][1] >= fastest["speedups"]["v00_torch"]["value"] * 0.98, (
                f"the rule picks {picked}, but {fastest['variant']} is faster at {shape} in {where}")


_INTERPRETER_SCRIPT = """
import json, sys, torch
import hello_gpu.ops as ops
from hello_gpu.ops import load_op
from hello_gpu.ops.checking import output_failure
matmul, linear = load_op("matmul"), load_op("linear")
seed = int(sys.argv[1])
out = {}

def failure(spec, inputs, got, dtype):
    return output_failure(spec, inputs, got, dtype) or (spec.invariants(inputs, got) or [None])[0]

for shape in [(1, 1, 1), (3, 5, 517), (16, 33, 70), (39, 41, 37)]:
    for dtype in ("float32", "float16"):
        a, b = matmul.spec.make_inputs(shape, dtype, seed=seed)
        weight = b.t().contiguous()                       # the same numbers as nn.Linear stores them
        cases = {"matmul": (ops.matmul(a, b), ops.matmul_rung(a, b)),
                 "matmul(a, weight.t())": (ops.matmul(a, weight.t()), ops.matmul_rung(a, weight.t())),
                 "linear": (ops.linear(a, weight), ops.linear_rung(a, weight)),
                 "linear(a, b.t())": (ops.linear(a, b.t()), ops.linear_rung(a, b.t()))}
        for case, (got, rung) in cases.items():
            op_name, rung_id = rung.split("/")
            built = load_op(op_name).rung(rung_id).build()
            ran = built(a, b) if op_name == "matmul" else built(a, weight)
            problem = failure(matmul.spec, (a, b), got, dtype)
            out[f"{shape}/{dtype}/{case}"] = [rung, problem, bool(torch.equal(got, ran))]
x = torch.randn(2, 3, 40)
weight = torch.randn(7, 40)
want = x.double() @ weight.double().t()
out["x of (2, 3, K)"] = float((ops.linear(x, weight).double() - want).abs().max())
out["x of (K,)"] = float((ops.linear(x[0, 0], weight).double() - want[0, 0]).abs().max())
out["empty"] = [list(ops.matmul(torch.randn(0, 4), torch.randn(4, 3)).shape),
                list(ops.linear(torch.randn(2, 0, 4), torch.randn(3, 4)).shape),
                ops.matmul(torch.randn(2, 0), torch.randn(0, 3)).tolist()]
a, b = matmul.spec.make_inputs((20, 24, 40), "float32", seed=seed)
compiled = torch.compile(lambda a, b, w, x: ops.matmul(a, b) * 2 + ops.matmul(a, w.t()) + ops.linear(x, w)[0],
                         fullgraph=True, backend="aot_eager")
w = b.t().contiguous()
got = compiled(a, b, w, a[None])
want = 4 * (a.double() @ b.double())
out["compiled"] = float(((got.double() - want).norm() / want.norm()))
print(json.dumps(out))
"""


@pytest.mark.skipif(gpu_vendor() is not None, reason="the interpreter tier; the GPU tier runs on the device")
def test_results_layouts_the_rung_that_ran_and_fullgraph_compile_in_the_interpreter():
    environment = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", _INTERPRETER_SCRIPT, str(random.randrange(2**31))], env=environment,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results.pop("x of (2, 3, K)") < 1e-4 and results.pop("x of (K,)") < 1e-4
    assert results.pop("empty") == [[0, 3], [2, 0, 3], [[0.0] * 3] * 2]
    assert results.pop("compiled") < 1e-5
    rungs = {case: rung for case, (rung, _, _) in results.items()}
    assert rungs["(16, 33, 70)/float32/linear"] == "linear/t02_streaming_gemv"
    assert rungs["(16, 33, 70)/float32/matmul(a, weight.t())"] == "linear/t02_streaming_gemv"
    assert rungs["(39, 41, 37)/float32/linear"] == "matmul/t04_autotuned"
    assert rungs["(39, 41, 37)/float16/linear(a, b.t())"] == "matmul/t04_autotuned"
    for case, (rung, failure, same_as_the_rung) in results.items():
        assert failure is None, f"{case} ({rung}): {failure}"
        assert same_as_the_rung, f"{case}: the output is not {rung}'s, bit for bit"


# ------------------------------------------------------------------------------------------ GPU tier

gpu = pytest.mark.skipif(gpu_vendor() is None, reason="needs a GPU")
# The edge shapes (1x1x1, 1000^3, 4095 in each place, 1823x781x517), the decode steps through a
# 14336x4096 weight and its transpose, and one row past the GEMV rungs.
GPU_SHAPES = ((1, 1, 1), (1000, 1000, 1000), (4095, 4095, 4095), (1, 4095, 17), (4095, 7, 3), (3, 7, 4095),
              (1823, 781, 517), (1, 14336, 4096), (16, 4096, 14336), (17, 1000, 4095))
LAYOUTS = ("matmul", "matmul(a, weight.t())", "linear", "linear(a, b.t())")


def _call(layout, a, b, weight):
    if layout == "matmul":
        return ops.matmul(a, b), ops.matmul_rung(a, b)
    if layout == "matmul(a, weight.t())":
        return ops.matmul(a, weight.t()), ops.matmul_rung(a, weight.t())
    if layout == "linear":
        return ops.linear(a, weight), ops.linear_rung(a, weight)
    return ops.linear(a, b.t()), ops.linear_rung(a, b.t())


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_results_match_float64_and_come_from_the_named_rung_on_the_gpu(shape, dtype, layout):
    from hello_gpu.ops.checking import output_failure
    from hello_gpu.ops.matmul_functions import _built
    spec = MATMUL.spec
    for seed in (random.randrange(2**31), random.randrange(2**31)):    # the second call of a signature replays
        a, b = spec.make_inputs(shape, dtype, seed=seed, device="cuda")
        weight = b.t().contiguous()
        got, rung = _call(layout, a, b, weight)
        torch.cuda.synchronize()
        assert output_failure(spec, (a, b), got, dtype) is None, rung
        assert spec.invariants((a, b), got) == [], rung
        op_name, rung_id = rung.split("/")
        again = _built(op_name, rung_id)(a, b) if op_name == "matmul" else _built(op_name, rung_id)(a, weight)
        assert torch.equal(got, again), f"the output is not {rung}'s"


@pytest.mark.gpu
@gpu
def test_the_rule_on_this_gpu_names_runnable_rungs():
    from hello_gpu.ops.matmul_functions import machine_of
    a = torch.empty(8, 8, device="cuda")
    machine = machine_of(a)
    for dtype in ("float32", "bfloat16", "float16"):
        for layout, m in (("b", 4096), ("weight", 1), ("weight", 4096)):
            op_name, rung_id = rule(layout, m, getattr(torch, dtype), machine)
            assert load_op(op_name).rung(rung_id).skip_reason() is None, (dtype, layout, rung_id)
    if machine.arch == "sm_90":
        assert rule("b", 4096, torch.bfloat16, machine) == ("matmul", "v18_tma_store_epilogue")


@pytest.mark.gpu
@gpu
def test_fullgraph_compile_and_no_grad_on_the_gpu():
    spec = MATMUL.spec
    a, b = spec.make_inputs((257, 384, 520), "bfloat16", seed=random.randrange(2**31), device="cuda")
    weight = b.t().contiguous()
    x = a.view(1, 257, 520)
    compiled = torch.compile(lambda a, b, x, w: ops.matmul(a, b) + ops.linear(x, w)[0] + ops.matmul(a, w.t()),
                             fullgraph=True)
    got = compiled(a, b, x, weight)
    want = 3 * (a.double() @ b.double())
    assert float((got.double() - want).norm() / want.norm()) < 1e-2
    with pytest.raises(RuntimeError, match="forward only"):
        ops.matmul(a.float().requires_grad_(), b.float())
    with torch.no_grad():
        assert ops.linear(x.float().requires_grad_(), weight.float()).shape == (1, 257, 384)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("shape", [(1, 4096, 4095), (33, 65, 77), (300, 520, 1000)],
                         ids=lambda s: "x".join(map(str, s)))
def test_views_at_an_odd_offset_are_correct_on_the_gpu(shape, dtype):
    """Contiguous views that start 2 or 4 bytes into their storage (not 16-byte aligned): the rungs take the
    unaligned path or padded copies, never a wrong answer."""
    from hello_gpu.ops.checking import output_failure
    spec = MATMUL.spec
    a, b = spec.make_inputs(shape, dtype, seed=random.randrange(2**31), device="cuda")

    def shifted(t):
        storage = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
        view = storage[1:].view(t.shape)
        view.copy_(t)
        return view

    weight = b.t().contiguous()
    for got in (ops.matmul(shifted(a), shifted(b)), ops.linear(shifted(a), shifted(weight)),
                ops.matmul(shifted(a), shifted(weight).t())):
        assert output_failure(spec, (a, b), got, dtype) is None
