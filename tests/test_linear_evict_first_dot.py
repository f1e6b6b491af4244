"""linear t06_evict_first_dot (9 to 16 rows of x in 16 bits: tl.dot tiles, the weight evict-first) on the CPU tier:
the project's checker in the Triton interpreter at row counts on both sides of its range and at weights that cut
its row blocks and steps; the tile each weight gets; the sm_90 compile (tensor-core dots, evict-first loads, no
spill) at both of its tiles."""

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
# 9 to 16 rows (its kernel), with N and K that cut the 32- and 64-row blocks and the 256- and 512-column steps;
# 1, 8 and 17 rows (t05's path), K = 1 and a single row of weight
SHAPES = [(9, 7, 300), (16, 70, 1100), (12, 33, 517), (16, 1, 1), (13, 65, 257), (1, 5, 4100), (8, 9, 40),
          (17, 9, 40)]

_SCRIPT = """
import json, sys, torch
from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.rung import load_module
op = load_op("linear")
shapes = [tuple(shape) for shape in json.loads(sys.argv[1])]
results = {}
for dtype in ("float16", "float32"):
    report = check_rung(op.rung("t06_evict_first_dot"), op, shapes=shapes, dtypes=[dtype], device="cpu")
    results[dtype] = {"status": report.status, "reason": report.reason,
                      "shapes": sorted({case.shape for case in report.ran})}
rung = load_module(op.rung("t06_evict_first_dot").path, "t06_counted")
grids = []
original = rung.evict_first_dot_kernel
class Counting:
    def __getitem__(self, grid):
        grids.append(list(grid))
        return original[grid]
rung.evict_first_dot_kernel = Counting()
for m in (1, 8, 9, 16, 17):
    a, weight = op.spec.make_inputs((m, 70, 300), "float16", seed=m)
    rung.run(a, weight)
results["grids"] = grids
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def checked():
    return _interpreted(_SCRIPT, json.dumps(SHAPES))


def test_the_checker_passes_t06_in_and_around_its_rows(checked):
    from hello_gpu.ops.shapes import shape_label
    for dtype in ("float16", "float32"):
        assert checked[dtype]["status"] == "pass", f"{dtype}: {checked[dtype]['reason']}"
        assert checked[dtype]["shapes"] == sorted(shape_label(shape) for shape in SHAPES)


def test_only_9_to_16_rows_launch_its_kernel_one_program_a_row_block(checked):
    # 70 weight rows: below 8192, so 32 a program: 3 programs, for the 9 and the 16 rows only
    assert checked["grids"] == [[3], [3]]


def test_each_weight_gets_the_tile_its_header_gives():
    from hello_gpu.ops import load_op
    from hello_gpu.ops.rung import load_module
    t06 = load_module(load_op("linear").rung("t06_evict_first_dot").path, "t06_tiles")
    assert t06.tile_for(14336, 132) == (64, 256, 1)         # 224 programs: no pipeline
    assert t06.tile_for(16384, 132) == (64, 256, 1)
    assert t06.tile_for(4096, 132) == (32, 512, 3)          # 128 programs: 3 stages
    assert t06.tile_for(2048, 132) == (32, 512, 3)
    assert t06.tile_for(14336, 160) == (64, 256, 3)         # more SMs than 224 / 1.5


_COMPILE_SCRIPT = r"""
import json, re
from hello_gpu.ops import load_op
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.kernel import triton_for_sm90
rung = load_module(load_op("linear").rung("t06_evict_first_dot").path, "t06_sm90")
results = {}
for n in (14336, 4096):
    block_n, block_k, stages = rung.tile_for(n, 132)
    ops, ptx = triton_for_sm90(rung.evict_first_dot_kernel, {"BLOCK_N": block_n, "BLOCK_K": block_k, "STAGES": stages},
                               "bf16", num_warps=rung.WARPS, num_stages=stages)
    results[n] = {"mma": sum(op.startswith(("HMMA", "HGMMA")) for op in ops),
                  "local": sum(op.startswith(("LDL", "STL")) for op in ops),
                  "ldgsts": sum(op.startswith("LDGSTS") for op in ops),
                  "evict_first_loads": len(re.findall(r"ld\.global[.\w:]*evict_first", ptx))}
print(json.dumps(results))
"""


def test_it_compiles_for_sm_90_with_tensor_core_dots_and_evict_first_loads():
    from hello_gpu.runtime.kernel import _tool
    if _tool("cuobjdump") is None and _tool("nvdisasm") is None:
        pytest.skip("no cuobjdump or nvdisasm here to read the SASS")
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    environment.update(PYTHONPATH=str(SRC))
    done = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], capture_output=True, text=True, timeout=600,
                          env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for n, counts in found.items():
        assert counts["mma"] >= 1 and counts["local"] == 0, (n, counts)
    # one stage: plain loads carrying the hint; three stages: cp.async, which drops it (t04's header)
    assert found["14336"]["ldgsts"] == 0 and found["14336"]["evict_first_loads"] >= 1, found
    assert found["4096"]["ldgsts"] >= 1, found
