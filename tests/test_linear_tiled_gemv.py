"""linear t03_tiled_gemv ([8, 512] tiles of whole weight rows at M = 1) on the CPU tier: the project's checker in
the Triton interpreter at one-row shapes that cut a tile anywhere (N not a multiple of 8, K not a multiple of 512,
K below one tile) and at two rows (t02's kernel); the kernel the one-row calls launch counted; the sm_90 compile
of the kernel: a cp.async pipeline, no spills."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_linear_gemv import _interpreted

pytest.importorskip("triton")

SRC = Path(__file__).resolve().parents[1] / "src"

# one row: N = 1, 7, 9, 40 (partial and whole 8-row blocks), K = 1, 300, 512, 1100 (below, at and past one
# 512-column tile); then two and three rows (t02's kernel)
SHAPES = [(1, 1, 1), (1, 7, 300), (1, 9, 512), (1, 40, 1100), (1, 17, 1537), (2, 9, 700), (3, 5, 33)]

_SCRIPT = """
import json, sys, torch
from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.rung import load_module
op = load_op("linear")
shapes = [tuple(shape) for shape in json.loads(sys.argv[1])]
results = {}
for dtype in ("float32", "float16"):
    report = check_rung(op.rung("t03_tiled_gemv"), op, shapes=shapes, dtypes=[dtype], device="cpu")
    results[dtype] = {"status": report.status, "reason": report.reason,
                      "shapes": sorted({case.shape for case in report.ran})}
t03 = load_module(op.rung("t03_tiled_gemv").path, "t03_counted")
grids = []
original = t03.tiled_gemv_kernel
class Counting:
    def __getitem__(self, grid):
        grids.append(list(grid))
        return original[grid]
t03.tiled_gemv_kernel = Counting()
failures = []
for shape in ((1, 17, 1537), (2, 17, 1537)):
    a, weight = op.spec.make_inputs(shape, "float32", seed=len(grids))
    failures.append(output_failure(op.spec, (a, weight), t03.run(a, weight), "float32"))
results["failures"] = failures
results["no rows"] = list(t03.run(torch.randn(1, 64), torch.randn(0, 64)).shape)
results["grids"] = grids
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def checked():
    return _interpreted(_SCRIPT, json.dumps(SHAPES))


def test_the_checker_passes_t03_at_one_row_and_where_t02_runs(checked):
    from hello_gpu.ops.shapes import shape_label
    for dtype in ("float32", "float16"):
        assert checked[dtype]["status"] == "pass", f"{dtype}: {checked[dtype]['reason']}"
        assert checked[dtype]["shapes"] == sorted(shape_label(shape) for shape in SHAPES)


def test_only_one_row_launches_the_tiled_kernel_one_program_per_8_rows(checked):
    assert checked["failures"] == [None, None] and checked["no rows"] == [1, 0]
    assert checked["grids"] == [[3]]          # 17 rows: 3 blocks of 8; two rows run t02, no rows launch nothing


_COMPILE_SCRIPT = r"""
import json, re
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from hello_gpu.ops import load_op
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.kernel import _disassemble_cubin
t03 = load_module(load_op("linear").rung("t03_tiled_gemv").path, "t03_sm90")
kernel = t03.tiled_gemv_kernel
results = {}
for dtype in ("bf16", "fp32"):
    constants = {"BLOCK_N": t03.BLOCK_N, "BLOCK_K": t03.BLOCK_K, "EVEN_K": True, "STAGES": t03.STAGES}
    names = kernel.arg_names
    signature = {n: "constexpr" if n in constants else ("*" + dtype if n.endswith("_ptr") else "i32") for n in names}
    divisible = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if signature[n] != "constexpr"}
    compiled = triton.compile(ASTSource(kernel, signature=signature, constexprs=constants, attrs=divisible),
                              target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": t03.WARPS, "num_stages": t03.STAGES})
    sass = _disassemble_cubin(compiled.asm["cubin"])
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)", sass)
    results[dtype] = {"ldgsts": sum(op.startswith("LDGSTS") for op in ops),
                      "local": sum(op.startswith(("LDL", "STL")) for op in ops)}
print(json.dumps(results))
"""


def test_the_kernel_compiles_for_sm_90_with_a_cp_async_pipeline_and_no_spills():
    from hello_gpu.runtime.kernel import _tool
    if _tool("cuobjdump") is None and _tool("nvdisasm") is None:
        pytest.skip("no cuobjdump or nvdisasm here to read the SASS")
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    environment.update(PYTHONPATH=str(SRC))
    done = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], capture_output=True, text=True, timeout=600,
                          env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    for dtype, found in json.loads(done.stdout.strip().splitlines()[-1]).items():
        # the tiles stream through shared memory (cp.async: LDGSTS in SASS), the 32 sums a thread stay in registers
        assert found["ldgsts"] >= 1, f"{dtype}: {found}"
        assert found["local"] == 0, f"{dtype} spills: {found}"
