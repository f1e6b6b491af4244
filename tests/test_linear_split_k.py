"""linear t03_split_k (split-K in one launch, the last program of a row block adds the splits) on the CPU
tier: the project's checker in the Triton interpreter at M = 1 shapes that split (K past 2 x 512, N not a
multiple of the 16 rows a block) and at shapes that go to t02; the counters back at zero after every call,
so the next call is right too; the split count the rule picks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hello_gpu.ops import load_op
from hello_gpu.ops.rung import load_module
from test_linear_gemv import _interpreted

pytest.importorskip("triton")

SRC = Path(__file__).resolve().parents[1] / "src"
LINEAR = load_op("linear")
RUNG = LINEAR.rung("t03_split_k")

# M = 1 with K of 2-5 tiles (split), N = 1, 17 (a partial block) and 40; K not a multiple of a tile (the last
# share runs past K); then M = 2 and K = 300 (t02's kernel).
SHAPES = [(1, 1, 1024), (1, 17, 1100), (1, 40, 2560), (1, 5, 1537), (2, 9, 1500), (1, 7, 300)]

_SCRIPT = """
import json, sys, torch
from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.rung import load_module
op = load_op("linear")
shapes = [tuple(shape) for shape in json.loads(sys.argv[1])]
results = {}
for dtype in ("float32", "float16"):
    report = check_rung(op.rung("t03_split_k"), op, shapes=shapes, dtypes=[dtype], device="cpu")
    results[dtype] = {"status": report.status, "reason": report.reason,
                      "shapes": sorted({case.shape for case in report.ran})}
t03 = load_module(op.rung("t03_split_k").path, "t03_counters")
calls = []
original = t03.split_k_gemv_kernel
class Counting:
    def __getitem__(self, grid):
        calls.append(grid)
        return original[grid]
t03.split_k_gemv_kernel = Counting()
repeats = []
for seed in range(3):                          # the same shape again: the counters must start from zero
    a, weight = op.spec.make_inputs((1, 33, 2048), "float32", seed=seed)
    repeats.append(output_failure(op.spec, (a, weight), t03.run(a, weight), "float32"))
results["repeats"] = repeats
results["grids"] = [list(grid) for grid in calls]
results["counters_left"] = int(sum(int(c.abs().sum()) for c in t03._COUNTERS.values()))
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def checked():
    return _interpreted(_SCRIPT, json.dumps(SHAPES))


def test_the_checker_passes_t03_where_it_splits_and_where_t02_runs(checked):
    from hello_gpu.ops.shapes import shape_label
    for dtype in ("float32", "float16"):
        assert checked[dtype]["status"] == "pass", f"{dtype}: {checked[dtype]['reason']}"
        assert checked[dtype]["shapes"] == sorted(shape_label(shape) for shape in SHAPES)


def test_repeated_calls_split_and_leave_every_counter_at_zero(checked):
    assert checked["repeats"] == [None, None, None]
    # 33 rows: 3 blocks of 16; 4 interpreter SMs x 2 blocks an SM asks for 3 splits, but 2048 / 3 rounds up to
    # shares of 1024 (whole 512-column tiles), so 2 shares cover K
    assert checked["grids"] == [[3, 2]] * 3
    assert checked["counters_left"] == 0


def test_the_split_rule_fills_the_sms_and_keeps_a_tile_a_share():
    t03 = load_module(RUNG.path, "t03_rule")
    assert t03.splits_for(4096, 14336, 132) == 2          # 256 blocks of 16 for 264 wanted
    assert t03.splits_for(2048, 8192, 132) == 3           # 128 blocks
    assert t03.splits_for(14336, 4096, 132) == 1          # 896 blocks: t02's kernel
    assert t03.splits_for(16, 100_000, 132) == 8          # the most
    assert t03.splits_for(16, 1000, 132) == 1             # one tile of K: nothing to split


_COMPILE_SCRIPT = r"""
import json, re
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from hello_gpu.ops import load_op
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.kernel import _disassemble_cubin
t03 = load_module(load_op("linear").rung("t03_split_k").path, "t03_sm90")
kernel = t03.split_k_gemv_kernel
results = {}
for dtype in ("bf16", "fp32"):
    constants = {"SPLITS": 4, "BLOCK_N": t03.BLOCK_N, "BLOCK_K": t03.BLOCK_K, "STAGES": t03.STAGES}
    names = kernel.arg_names
    kinds = {"partials_ptr": "*fp32", "counters_ptr": "*i32"}
    signature = {n: "constexpr" if n in constants else kinds.get(n, "*" + dtype if n.endswith("_ptr") else "i32")
                 for n in names}
    divisible = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if signature[n] != "constexpr"}
    compiled = triton.compile(ASTSource(kernel, signature=signature, constexprs=constants, attrs=divisible),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": t03.WARPS, "num_stages": t03.STAGES})
    ptx, sass = compiled.asm["ptx"], _disassemble_cubin(compiled.asm["cubin"])
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)", sass)
    results[dtype] = {"acq_rel_add": len(re.findall(r"atom\.global\.(?:gpu\.)?acq_rel\.(?:gpu\.)?add", ptx)),
                      "cg_loads": len(re.findall(r"ld\.global\.cg", ptx)),
                      "bar_sync": ptx.count("bar.sync"), "local": sum(op.startswith(("LDL", "STL")) for op in ops)}
print(json.dumps(results))
"""


def test_the_kernel_compiles_for_sm_90_with_an_acquire_release_count_and_l2_reads_of_the_partials():
    from hello_gpu.runtime.kernel import _tool
    if _tool("cuobjdump") is None and _tool("nvdisasm") is None:
        pytest.skip("no cuobjdump or nvdisasm here to read the SASS")
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    environment.update(PYTHONPATH=str(SRC))
    done = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], capture_output=True, text=True, timeout=600,
                          env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    for dtype, found in json.loads(done.stdout.strip().splitlines()[-1]).items():
        # one counter update a program, ordered after a barrier; the fix-up reads the other SMs' partials via L2
        assert found["acq_rel_add"] >= 1 and found["bar_sync"] >= 1, f"{dtype}: {found}"
        assert found["cg_loads"] >= 1, f"{dtype}: {found}"
        assert found["local"] == 0, f"{dtype} spills: {found}"
