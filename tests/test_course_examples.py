"""The course's example files (examples/course/): each runs what runs without a GPU (CPU tier).

One function per example, named test_chNN_<what>, next to the chapter that includes the file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COURSE_EXAMPLES = REPO / "examples" / "course"


def _run_without_gpu(script: Path, *args: str) -> subprocess.CompletedProcess:
    """Run a course script as a learner would, with every GPU hidden, so its CPU path runs on any machine."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, str(script), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_ch04_first_kernel_cpu_path():
    """Chapter 4's script without a GPU: compiles vector_add for sm_90, the checker passes torch.add and
    catches a grid rounded down, and the script says what it skipped."""
    done = _run_without_gpu(COURSE_EXAMPLES / "ch04_first_kernel.py")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "compiled for sm_90" in out
    assert "registers_per_thread=" in out and "blocks/SM of 256 threads" in out
    right, wrong = out.split("torch.add:\n", 1)[1].split("grid = n // 256 (rounded down):\n", 1)
    assert right.count("pass") == 6 and "FAIL" not in right
    assert "FAIL" in wrong
    assert "skipped (needs a GPU)" in out


def _load(name: str):
    """An examples/course/NAME.py as a module (its folder on sys.path, for the files that import each other)."""
    if str(COURSE_EXAMPLES) not in sys.path:
        sys.path.insert(0, str(COURSE_EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, COURSE_EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------- part 1: chapters 5-7


def test_ch05_timing_says_what_it_skips_without_a_gpu(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("the GPU path is the chapter's exercise; this test is the CPU path")
    _load("ch05_timing").main(n=4096, max_seconds=0.2)
    out = capsys.readouterr().out
    assert "compiled for sm_90 as a check" in out            # the kernel still compiles (NVRTC, no GPU)
    assert "没有 GPU：跳过 event 计时" in out
    assert re.search(r"measure : median [\d.]+ us .*wall", out)
    assert re.search(r"compare : speedup [\d.]+x \[[\d.]+, [\d.]+\] over \d+ ABBA rounds", out)


def test_ch06_profile_table_has_a_row_per_kernel_of_every_profile_record():
    table = _load("ch06_profile_table")
    for path in sorted((REPO / "records" / "nvidia-h200").glob("*.profile.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        rows = [line for line in table.render(record).splitlines() if line.startswith("| ") and "---" not in line]
        assert len(rows) - 1 == sum(len(e["extra"]["kernels"]) for e in record["entries"]), path.name
    record = json.loads((REPO / "records/nvidia-h200/vector_add.float32.profile.json").read_text(encoding="utf-8"))
    v01 = next(table.kernel_rows(e) for e in record["entries"] if e["variant"] == "v01_thread_per_element")[0]
    assert v01[6] == "4.0"                                     # coalesced float32: 4 sectors per request
    dram_mb = record["entries"][0]["extra"]["bytes"]["measured_dram_bytes"] / 1e6
    assert v01[4] == f"{dram_mb:.1f}"                          # per call = counter total / calls


def test_ch07_roofline_bound_from_the_committed_ceilings():
    bound = _load("ch07_roofline_bound")
    ceilings = json.loads(bound.RECORD.read_text(encoding="utf-8"))
    measured = ceilings["ceilings"]
    add = bound.bound(bound.CASES["vector_add 2^28 float32"], measured["copy_bytes_per_s"],
                      measured["matmul_flops_per_s"]["float32"])
    assert add["I"] == pytest.approx(1 / 12) and add["bound"] == "memory"
    assert add["floor_s"] == pytest.approx(12 * 2**28 / measured["copy_bytes_per_s"])
    matmul = bound.bound(bound.CASES["matmul 4096^3 float16"], measured["copy_bytes_per_s"],
                         measured["matmul_flops_per_s"]["float16"])
    assert matmul["I"] == pytest.approx(4096 / 3) and matmul["bound"] == "compute"
    assert "| matmul 4096^3 float16 |" in bound.render(ceilings)


def test_ch05_07_generated_tables_are_fresh():
    tables = _load("ch05_07_tables")
    assert tables.PAGES, "no pages in docs/course/part1"
    assert tables.stale_pages(write=False) == [], "run: python examples/course/ch05_07_tables.py"
    kinds = {m["kind"] for page in tables.PAGES for m in tables.REGION.finditer(page.read_text(encoding="utf-8"))}
    assert kinds == set(tables.RENDERERS)                      # every renderer is used by some page


def test_ch05_07_pages_include_and_show_files_that_exist():
    for page in sorted((REPO / "docs" / "course" / "part1").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for path in re.findall(r"^<<< @/(\S+?)(?:\{\w+\})?$", text, re.M):
            assert (REPO / "docs" / path).resolve().is_file(), f"{page.name}: {path}"
        for path in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
            assert (page.parent / path).resolve().is_file(), f"{page.name}: {path}"


def test_ch11_gemm_bounds_from_the_committed_ceilings():
    """Chapter 11's tables: square matmuls are compute-bound, decode GEMVs memory-bound with the weight as nearly
    every byte; each rung's block tile is read from its file and gives 2 BM BN / ((BM + BN) x itemsize)."""
    bounds = _load("ch11_gemm_bounds")
    ceilings = json.loads(bounds.RECORD.read_text(encoding="utf-8"))
    copy = ceilings["ceilings"]["copy_bytes_per_s"]
    rows = {row["shape"] + " " + row["dtype"]: row for row in bounds.shape_bounds(ceilings)}
    square = rows["4096x4096x4096 float32"]
    assert square["I"] == pytest.approx(2 * 4096 / 12) and square["bound"] == "compute"
    decode = rows["1x14336x4096 bfloat16"]
    assert decode["bound"] == "memory" and decode["weight_share"] > 0.999
    assert decode["floor_s"] == pytest.approx((14336 * 4096 + 4096 + 14336) * 2 / copy)
    tiles = {row["rung"]: row for row in bounds.tile_intensities(ceilings)}
    assert (tiles["v03_shared_tiles"]["tile"], tiles["v03_shared_tiles"]["I"]) == ("32x32", 8)
    assert (tiles["v08_tuned_tiles"]["tile"], tiles["v08_tuned_tiles"]["I"]) == ("128x128", 32)
    assert tiles["v13_warp_specialized"]["tile"] == "128x256"
    assert tiles["v13_warp_specialized"]["I"] == pytest.approx(2 * 128 * 256 / (384 * 2))
    assert tiles["t03_stages_and_warps"]["tile"] == "128x256" and tiles["t01_block_tile"]["tile"] == "64x64"
    assert "v01_naive" not in tiles and "t04_autotuned" not in tiles and "t05_persistent_tma" not in tiles


def test_ch12_attention_bounds_count_causal_pairs_exactly():
    bounds = _load("ch12_attention_bounds")
    ceilings = json.loads(bounds.RECORD.read_text(encoding="utf-8"))
    rows = {row["shape"]: row for row in bounds.rows(ceilings)}
    full, causal = rows["4x32x32x4096x4096x128"], rows["4x32x32x4096x4096x128x1"]
    assert full["flops"] == 4 * 4 * 32 * 4096 * 4096 * 128 and full["bound"] == "compute"
    assert causal["visible"] == pytest.approx(4097 / (2 * 4096))
    assert causal["flops"] == pytest.approx(full["flops"] * 4097 / 8192)
    decode = rows["1x32x8x1x32768x128"]
    assert decode["bound"] == "memory" and decode["I"] == pytest.approx(4, rel=1e-3)    # GQA 4: 2 x 4 / 2 bytes
    assert decode["score_bytes"] == 4 * 32 * 32768


def test_ch11_tensor_core_sass_finds_each_routes_instructions():
    """Chapter 11's script compiles the C++ rungs for their declared targets (no GPU) and counts SASS
    instructions: FFMA on the SIMT route, HMMA + LDSM with mma.sync, LDGSTS with cp.async, HGMMA + UTMALDG +
    SYNCS on Hopper."""
    sass = _load("ch11_tensor_core_sass")
    from hello_gpu.ops import load_op
    op = load_op("matmul")
    counts = {name: sass.instruction_counts(op.rung(name).kernel(dtype=dtype).asm("sass"))
              for name, dtype in (("v05_register_blocking_2d", "float32"), ("v09_mma_sync", "bfloat16"),
                                  ("v10_cp_async_pipeline", "bfloat16"), ("v12_wgmma_tma", "bfloat16"))}
    assert counts["v05_register_blocking_2d"]["FFMA"] > 0 and counts["v05_register_blocking_2d"]["HMMA"] == 0
    assert counts["v09_mma_sync"]["HMMA"] > 0 and counts["v09_mma_sync"]["LDSM"] > 0
    assert counts["v09_mma_sync"]["LDGSTS"] == 0 and counts["v10_cp_async_pipeline"]["LDGSTS"] > 0
    hopper = counts["v12_wgmma_tma"]
    assert hopper["HGMMA"] > 0 and hopper["UTMALDG"] > 0 and hopper["SYNCS"] > 0 and hopper["HMMA"] == 0
    assert sass.instruction_counts("@!PT LDS RZ, [RZ] ;\n LDS.128 R4, [R2] ;")["LDS"] == 1     # never-true padding


def test_ch14_one_round_by_hand_accepts_a_checked_faster_edit():
    """Chapter 14's script: one edit of toy_add through compile, check, compare and accept, in the interpreter."""
    done = _run_without_gpu(COURSE_EXAMPLES / "ch14_one_round_by_hand.py")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "compile: True []" in out
    assert "check:   True" in out and "cheats = []" in out
    assert "clock wall" in out
    assert re.search(r"accept:  (True|False) - speedup [0-9.]+x, lower 95% bound", out)


def test_ch15_tool_results_are_results_not_exceptions():
    """Chapter 15's script: a right, a wrong and a broken candidate give structured results; the accept rule's
    threshold moves with the noise."""
    done = _run_without_gpu(COURSE_EXAMPLES / "ch15_tool_results.py")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "t01: check passed=True correct=True" in out
    assert "t02_drops_last: check passed=False correct=False" in out and "never written" in out
    assert "syntax error: compile ok=False" in out and '"line": 19' in out
    assert "noise=None: accepted=True" in out and "noise unknown" in out
    assert "noise=0.02: accepted=False" in out and "margin 6.0%" in out


def test_ch16_cheats_are_caught_and_the_honest_control_is_not():
    """Chapter 16's script: the chosen cheats are refused with their tags, t99 passes clean, and the stop rules
    name the first rule that fires."""
    done = _run_without_gpu(COURSE_EXAMPLES / "ch16_catch_a_cheat.py")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("t9")}
    assert "passed=False correct=True" in lines["t90_calls_torch.py"] and "library fallback" in lines["t90_calls_torch.py"]
    assert "passed=False" in lines["t92_caches_result.py"] and "cached result" in lines["t92_caches_result.py"]
    assert "passed=False" in lines["t93_partial_write.py"] and "partial write" in lines["t93_partial_write.py"]
    assert "passed=True  correct=True  tags=[]" in lines["t99_honest.py"]
    out = done.stdout
    assert "): None" in out and "): patience:" in out and "): time budget:" in out and "): target reached:" in out


def test_ch17_toy_run_leaves_a_store_and_a_report(tmp_path):
    """Chapter 17's script: two scripted rounds on toy_add, every candidate in the store, a report written."""
    run_dir = tmp_path / "run"
    done = _run_without_gpu(COURSE_EXAMPLES / "ch17_toy_run.py", str(run_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "stop reason: max rounds: 2 of 2 done" in out
    assert "row: (1, None, 0, 'accepted', 'start')" in out
    assert "(1, 'compile check bench analyze')" in out
    assert (run_dir / "report.md").is_file() and (run_dir / "candidates.sqlite").is_file()
    assert "final re-measurement (fresh process, start vs best)" in out
