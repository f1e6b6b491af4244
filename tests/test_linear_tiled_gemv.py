"""linear t03_tiled_gemv ([8, 512] tiles of whole weight rows at M = 1) and t04_evict_first_gemv ([2, 2048]
tiles, no pipeline, the weight's loads evict-first) on the CPU tier: the project's checker in the Triton
interpreter at one-row shapes that cut a tile anywhere (N not a multiple of the rows a program, K not a multiple
of the tile's columns, K below one tile) and at two rows (t02's kernel); the kernel the one-row calls launch
counted; the sm_90 compile of each kernel: t03 a cp.async pipeline, t04 plain loads carrying the evict-first
hint, neither spilling."""

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

# one row: N = 1, 7, 9, 40 (partial and whole 8-row and 2-row blocks), K = 1, 300, 512, 1100, 1537, 4100 (below,
# at and past one 512- or 2048-column tile); then two and three rows (t02's kernel)
SHAPES = [(1, 1, 1), (1, 7, 300), (1, 9, 512), (1, 40, 1100), (1, 17, 1537), (1, 5, 4100), (2, 9, 700), (3, 5, 33)]
# rung id: (its kernel's name in the file, rows a program)
RUNGS = {"t03_tiled_gemv": ("tiled_gemv_kernel", 8), "t04_evict_first_gemv": ("evict_first_gemv_kernel", 2)}

_SCRIPT = """
import json, sys, torch
from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.rung import load_module
op = load_op("linear")
shapes = [tuple(shape) for shape in json.loads(sys.argv[1])]
rung_id, kernel_name = sys.argv[2], sys.argv[3]
results = {}
for dtype in ("float32", "float16"):
    report = check_rung(op.rung(rung_id), op, shapes=shapes, dtypes=[dtype], device="cpu")
    results[dtype] = {"status": report.status, "reason": report.reason,
                      "shapes": sorted({case.shape for case in report.ran})}
rung = load_module(op.rung(rung_id).path, rung_id + "_counted")
grids = []
original = getattr(rung, kernel_name)
class Counting:
    def __getitem__(self, grid):
        grids.append(list(grid))
        return original[grid]
setattr(rung, kernel_name, Counting())
failures = []
for shape in ((1, 17, 1537), (2, 17, 1537)):
    a, weight = op.spec.make_inputs(shape, "float32", seed=len(grids))
    failures.append(output_failure(op.spec, (a, weight), rung.run(a, weight), "float32"))
results["failures"] = failures
results["no rows"] = list(rung.run(torch.randn(1, 64), torch.randn(0, 64)).shape)
results["grids"] = grids
print(json.dumps(results))
"""


@pytest.fixture(scope="module", params=sorted(RUNGS))
def checked(request):
    kernel_name, rows = RUNGS[request.param]
    return request.param, rows, _interpreted(_SCRIPT, json.dumps(SHAPES), request.param, kernel_name)


def test_the_checker_passes_the_rung_at_one_row_and_where_t02_runs(checked):
    from hello_gpu.ops.shapes import shape_label
    rung_id, _, results = checked
    for dtype in ("float32", "float16"):
        assert results[dtype]["status"] == "pass", f"{rung_id} {dtype}: {results[dtype]['reason']}"
        assert results[dtype]["shapes"] == sorted(shape_label(shape) for shape in SHAPES)


def test_only_one_row_launches_the_tiled_kernel_one_program_per_block_of_rows(checked):
    rung_id, rows, results = checked
    assert results["failures"] == [None, None] and results["no rows"] == [1, 0]
    # 17 rows: 3 blocks of 8 or 9 blocks of 2; two rows run t02, no rows launch nothing
    assert results["grids"] == [[-(-17 // rows)]], rung_id


_COMPILE_SCRIPT = r"""
import json, re, sys
from hello_gpu.ops import load_op
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.kernel import triton_for_sm90
rung_id, kernel_name = sys.argv[1], sys.argv[2]
rung = load_module(load_op("linear").rung(rung_id).path, rung_id + "_sm90")
kernel = getattr(rung, kernel_name)
stages = getattr(rung, "STAGES", 1)
results = {}
for dtype in ("bf16", "fp32"):
    constants = {"BLOCK_N": rung.BLOCK_N, "BLOCK_K": rung.BLOCK_K, "EVEN_K": True}
    if "STAGES" in kernel.arg_names:
        constants["STAGES"] = stages
    ops, ptx = triton_for_sm90(kernel, constants, dtype, num_warps=rung.WARPS, num_stages=stages)
    results[dtype] = {"ldgsts": sum(op.startswith("LDGSTS") for op in ops),
                      "local": sum(op.startswith(("LDL", "STL")) for op in ops),
                      "evict_first_loads": len(re.findall(r"ld\.global[.\w:]*evict_first", ptx))}
print(json.dumps(results))
"""


@pytest.mark.parametrize("rung_id", sorted(RUNGS))
def test_the_kernel_compiles_for_sm_90_as_its_header_says_and_without_spills(rung_id):
    from hello_gpu.runtime.kernel import _tool
    if _tool("cuobjdump") is None and _tool("nvdisasm") is None:
        pytest.skip("no cuobjdump or nvdisasm here to read the SASS")
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    environment.update(PYTHONPATH=str(SRC))
    done = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT, rung_id, RUNGS[rung_id][0]], capture_output=True,
                          text=True, timeout=600, env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    for dtype, found in json.loads(done.stdout.strip().splitlines()[-1]).items():
        assert found["local"] == 0, f"{rung_id} {dtype} spills: {found}"
        if rung_id == "t03_tiled_gemv":
            # the tiles stream through shared memory (cp.async: LDGSTS in SASS), the 32 sums a thread in registers
            assert found["ldgsts"] >= 1 and found["evict_first_loads"] == 0, f"{dtype}: {found}"
        else:
            # plain loads to registers, the weight's marked evict-first in the PTX
            assert found["ldgsts"] == 0 and found["evict_first_loads"] >= 1, f"{dtype}: {found}"
