"""linear t02_streaming_gemv (the FMA decode GEMV) on the CPU tier, and what the GPU session runs.

CPU: the project's checker in the Triton interpreter at every M from 1 to 16, K odd and not a multiple of
a 16-byte pack, K a multiple of a whole step (the unmasked loop), N = 1 and N not a multiple of a
program's rows, float32 and float16 (the interpreter's bfloat16 arithmetic is wrong: checked on a GPU);
every autotuning configuration forced in turn; where t01's kernel takes over (16-bit M > 8, any M > 16);
which configurations each M keeps; and the kernel compiled for sm_90 without a GPU: 16-byte cp.async
copies of the weight, no register spills. GPU (-m gpu): the checker at the edge and decode shapes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.device import gpu_vendor

pytest.importorskip("triton")

SRC = Path(__file__).resolve().parents[1] / "src"
LINEAR = load_op("linear")
RUNG = LINEAR.rung("t02_streaming_gemv")

# (M, N, K): M = 1 .. 16; K = 1, odd, not a multiple of 8, one step (256 in 16 bits, 128 in float32),
# past it and many steps (a dropped step errs by ~sqrt(step / K), far above the bounds); N = 1 and N
# not a multiple of 4 x ROWS. M = 9 and 16 run t01's kernel in float16 and this one in float32; M = 17
# runs t01's kernel in both.
SHAPES = [(1, 1, 1), (1, 1, 9), (2, 3, 17), (3, 5, 31), (4, 1, 127), (5, 7, 8), (6, 2, 128), (7, 9, 300),
          (8, 33, 257), (9, 5, 40), (11, 3, 100), (13, 6, 64), (15, 4, 33), (16, 9, 129), (16, 17, 256),
          (1, 65, 512), (2, 5, 1500), (1, 3, 4097), (17, 5, 33)]

_CHECKER_SCRIPT = """
import json, sys
from hello_gpu.ops import check_rung, load_op
op = load_op("linear")
shapes = [tuple(shape) for shape in json.loads(sys.argv[1])]
results = {}
for dtype in ("float32", "float16"):
    report = check_rung(op.rung("t02_streaming_gemv"), op, shapes=shapes, dtypes=[dtype], device="cpu")
    results[dtype] = {"status": report.status, "reason": report.reason, "cases": len(report.ran),
                      "shapes": sorted({case.shape for case in report.ran}),
                      "distributions": sorted({case.distribution for case in report.ran})}
print(json.dumps(results))
"""

# Every configuration forced, on shapes whose K is and is not a multiple of a step: the interpreter runs
# only the first one through run(), the GPU's autotuner may pick any of them.
_CONFIG_SCRIPT = """
import json, torch
from hello_gpu.ops import load_op
from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.rung import load_module
op = load_op("linear")
t02 = load_module(op.rung("t02_streaming_gemv").path, "t02_configs")
results = {}
for dtype, shape in (("float32", (3, 37, 300)), ("float32", (16, 20, 256)), ("float16", (8, 70, 512)),
                     ("float16", (5, 9, 77))):
    m, n, k = shape
    for seed, config in enumerate(t02.CONFIGS):
        a, weight = op.spec.make_inputs(shape, dtype, seed=seed)
        pack = 16 // a.element_size()
        constants = {"BLOCK_M": t02.block_m(m), "PACK": pack, "EVEN_K": k % (32 * pack) == 0}
        if config not in t02.fitting(t02.CONFIGS, None, **constants):
            continue
        out = torch.full((m, n), float("nan"), dtype=a.dtype)
        rows = config.kwargs["ROWS"] * config.kwargs["WARPS"]
        t02.streaming_gemv_kernel[((n + rows - 1) // rows,)](
            a, weight, out, m, n, k, a.stride(0), weight.stride(0), out.stride(0), **constants, **config.kwargs,
            num_warps=config.num_warps, num_stages=config.num_stages)
        problems = [output_failure(op.spec, (a, weight), out, dtype), *op.spec.invariants((a, weight), out)]
        results[f"{dtype} {shape} {config}"] = next((problem for problem in problems if problem), None)
print(json.dumps(results))
"""

# Which kernel ran, seen by wrapping t01's run as t02 holds it; both paths checked against float64.
_DELEGATION_SCRIPT = """
import json
from hello_gpu.ops import load_op
from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.rung import load_module
op = load_op("linear")
t02 = load_module(op.rung("t02_streaming_gemv").path, "t02_delegation")
calls, t01_run = [], t02._row_block.run
t02._row_block.run = lambda *args: calls.append(args[0].shape[0]) or t01_run(*args)
results = {}
for dtype, m in (("float16", 8), ("float16", 9), ("float16", 16), ("float32", 16), ("float32", 17)):
    a, weight = op.spec.make_inputs((m, 21, 70), dtype, seed=m)
    calls.clear()
    out = t02.run(a, weight)
    results[f"{dtype} M={m}"] = ["t01" if calls else "t02", output_failure(op.spec, (a, weight), out, dtype)]
print(json.dumps(results))
"""


def _interpreted(script: str, *arguments: str) -> dict:
    """``script`` run in a child under TRITON_INTERPRET=1 (Triton's mode is fixed per process at import)."""
    environment = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", script, *arguments], capture_output=True, text=True,
                          env=environment, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def checked(side_by_side):
    return side_by_side(_interpreted, _CHECKER_SCRIPT, json.dumps(SHAPES))


def test_the_checker_passes_t02_at_every_m_up_to_16_in_the_interpreter(checked):
    from hello_gpu.ops.checking import STRIDED
    from hello_gpu.ops.probes import PROBE
    from hello_gpu.ops.shapes import shape_label
    for dtype, result in checked.result().items():
        assert result["status"] == "pass", f"{dtype}: {result['reason']}"
        assert result["shapes"] == sorted(shape_label(shape) for shape in SHAPES)
        assert {"normal", "large", PROBE, STRIDED} <= set(result["distributions"])


def test_every_configuration_is_correct_in_the_interpreter():
    results = _interpreted(_CONFIG_SCRIPT)
    t02 = load_module(RUNG.path, "t02_config_count")
    # Each configuration ran on at least one of the four shapes (those that fit M = 16 too).
    for config in t02.CONFIGS:
        assert any(key.endswith(str(config)) for key in results), f"{config} never ran"
    assert not {key: problem for key, problem in results.items() if problem}


def test_t01_takes_16_bit_m_over_8_and_every_m_over_16():
    assert _interpreted(_DELEGATION_SCRIPT) == {
        "float16 M=8": ["t02", None], "float16 M=9": ["t01", None], "float16 M=16": ["t01", None],
        "float32 M=16": ["t02", None], "float32 M=17": ["t01", None]}


def test_each_m_keeps_only_configurations_whose_sums_fit_in_registers():
    t02 = load_module(RUNG.path, "t02_pruning")
    assert len(t02.CONFIGS) <= 6                      # the autotuner times each on the device, per shape
    for m in range(1, 17):
        kept = t02.fitting(t02.CONFIGS, None, BLOCK_M=t02.block_m(m))
        assert kept, f"M = {m}: no configuration left"
        assert all(t02.block_m(m) * config.kwargs["ROWS"] <= t02.MAX_SUMS for config in kept)
        assert all(config.num_warps == config.kwargs["WARPS"] == t02.WARPS for config in kept)
    assert {config.kwargs["ROWS"] for config in t02.fitting(t02.CONFIGS, None, BLOCK_M=16)} == {1, 2, 4}


def test_layouts_it_cannot_read_are_refused_by_name():
    import torch
    t02 = load_module(RUNG.path, "t02_refusals")
    with pytest.raises(ValueError, match=r"weight must be contiguous row-major.*weight\.contiguous"):
        t02.run(torch.randn(1, 8), torch.randn(8, 6).t())
    with pytest.raises(ValueError, match=r"both need K = 8 columns"):
        t02.run(torch.randn(1, 8), torch.randn(6, 5))
    with pytest.raises(ValueError, match=r"float64"):
        t02.run(torch.randn(1, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64))


# (dtype, BLOCK_M, ROWS, stages): the base configuration at M = 1, the most float32 sums a thread keeps in
# each dtype (M x ROWS = 64) with the deepest pipeline, and float16's conversion.
COMPILED = (("bf16", 1, 4, 3), ("bf16", 8, 8, 5), ("fp32", 16, 4, 5), ("fp16", 8, 8, 3))

_COMPILE_SCRIPT = r"""
import json, sys
from hello_gpu.ops import load_op
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.kernel import triton_for_sm90
t02 = load_module(load_op("linear").rung("t02_streaming_gemv").path, "t02_sm90")
results = {}
for dtype, block_m, rows, stages in json.loads(sys.argv[1]):
    constants = {"BLOCK_M": block_m, "PACK": 4 if dtype == "fp32" else 8, "EVEN_K": True, "ROWS": rows,
                 "WARPS": t02.WARPS, "STAGES": stages}
    ops, ptx = triton_for_sm90(t02.streaming_gemv_kernel, constants, dtype, num_warps=t02.WARPS, num_stages=stages)
    results[f"{dtype} M={block_m} ROWS={rows} stages={stages}"] = {
        "cp_async_16": sum(op == "LDGSTS.E.BYPASS.128" for op in ops),
        "ptx_cp_async_16": ptx.count("cp.async.cg.shared.global"),
        "local": sum(op.startswith(("LDL", "STL")) for op in ops), "ffma": sum(op == "FFMA" for op in ops)}
print(json.dumps(results))
"""


def test_the_kernel_compiles_for_sm_90_with_16_byte_weight_copies_and_no_spills():
    from hello_gpu.runtime.kernel import _tool
    if _tool("cuobjdump") is None and _tool("nvdisasm") is None:
        pytest.skip("no cuobjdump or nvdisasm here to read the SASS")
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    environment.update(PYTHONPATH=str(SRC), TRITON_DEFAULT_FP_FUSION="1")
    done = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT, json.dumps(COMPILED)], capture_output=True,
                          text=True, timeout=600, env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for (dtype, block_m, rows, stages), (name, found) in zip(COMPILED, results.items()):
        # The weight's packs: ROWS 16-byte copies a thread per step, in the prologue and the loop.
        assert found["cp_async_16"] >= rows * stages and found["ptx_cp_async_16"] >= rows, f"{name}: {found}"
        assert found["local"] == 0, f"{name} spills: {found}"
        # Every product is one FFMA: M x ROWS x PACK a step in the loop, more in the peeled iterations.
        assert found["ffma"] >= block_m * rows * (4 if dtype == "fp32" else 8), f"{name}: {found}"


HAS_GPU = gpu_vendor() is not None


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_t02_is_correct_on_the_gpu_at_the_edge_and_decode_shapes(dtype, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    shapes = list(LINEAR.spec.EDGE_SHAPES) + SHAPES + [(1, 4096, 4096), (16, 4096, 4096), (1, 14336, 4096),
                                                       (8, 14336, 4096), (1, 4096, 14336)]
    report = check_rung(RUNG, LINEAR, shapes=shapes, dtypes=[dtype])
    assert report.status == "pass", report.reason
