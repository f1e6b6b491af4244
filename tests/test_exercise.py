"""hello_gpu.exercise(): a learner's kernel through the ladders' checker, with hints (CPU tier, then GPU tier).

On the CPU, Triton kernels run in the interpreter (tests/conftest.py sets TRITON_INTERPRET=1 before
anything imports triton) and HIP kernels are compiled only. The known-wrong kernels are the ladder's own
rung files with one thing removed, so each test says exactly what the mistake is.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hello_gpu
from hello_gpu.exercises import HINTS, ExerciseError, exercise
from hello_gpu.exercises.detect import shared_bank_strides, strided_thread_index
from hello_gpu.runtime.device import gpu_vendor

OPS = Path(hello_gpu.__file__).parent / "ops"
HAS_GPU = gpu_vendor() is not None
T01 = OPS / "vector_add" / "t01_tile_1024.py"
V01 = OPS / "vector_add" / "v01_thread_per_element.hip"


def _copy(tmp_path: Path, source: Path, name: str | None = None, *, replace: tuple[str, str] | None = None) -> Path:
    text = source.read_text(encoding="utf-8")
    if replace is not None:
        assert replace[0] in text, f"{source.name} no longer contains {replace[0]!r}"
        text = text.replace(*replace)
    target = tmp_path / (name or source.name)
    target.write_text(text, encoding="utf-8")
    return target


# ------------------------------------------------------------------------------------------ CPU tier

cpu_only = pytest.mark.skipif(HAS_GPU, reason="the CPU tier (interpreter, compile only); the GPU tier is below")


@cpu_only
def test_a_correct_triton_rung_from_the_ladder_passes_in_the_interpreter(tmp_path):
    report = exercise("vector_add", _copy(tmp_path, T01, "my_add.py"))
    assert report.passed is True, str(report)
    assert report.kernel == "my_add.py" and report.device == "cpu" and not report.findings
    assert {"poisoned output", "float64 reference", "guard bytes around the output"} <= set(report.checks)
    assert {case.shape for case in report.passed_cases} == {"1", "31", "1000", "4097"}
    not_checked = dict(report.not_checked)
    assert "no GPU" in not_checked["timing"] and "1823x781" in not_checked["large shapes"]
    assert not report.timings and "PASS" in str(report)


@cpu_only
def test_source_text_is_accepted_as_well_as_a_path():
    report = exercise("vector_add", T01.read_text(encoding="utf-8"), shapes=[31])
    assert report.passed is True and report.route == "triton"


@cpu_only
def test_a_dropped_bounds_mask_fails_with_the_bounds_hint(tmp_path):
    path = _copy(tmp_path, T01, "no_mask.py", replace=("    mask = offsets < n\n", "    mask = None\n"))
    report = exercise("vector_add", path)
    assert report.passed is False
    assert {case.distribution for case in report.failures} == {"guard bytes"}
    bounds = [finding for finding in report.findings if finding.key == "bounds"]
    assert bounds and bounds[0].confidence == "observed" and "after a (1,) float32 buffer changed" in bounds[0].evidence
    assert "the checker's cases" in dict(report.not_checked)        # not run: it would write into this process's memory


@cpu_only
def test_a_dropped_block_fails_with_the_unwritten_hint(tmp_path):
    path = _copy(tmp_path, T01, "floor_grid.py", replace=("(triton.cdiv(n, TILE),)", "(n // TILE,)"))
    report = exercise("vector_add", path)
    assert report.passed is False
    unwritten = [finding for finding in report.findings if finding.key == "unwritten"]
    assert unwritten and unwritten[0].confidence == "observed" and "never written" in unwritten[0].evidence
    # The tail only: sizes that are multiples of 4096 pass, which the bounds row reads as "likely".
    assert [f.confidence for f in report.findings if f.key == "bounds"] == ["likely"]


@cpu_only
def test_a_matmul_that_skips_its_last_k_tile_fails_and_passes_once_whole(tmp_path):
    """Chapter 11's exercise: t01 as a learner's file passes the matmul checker; the same file with the K loop
    stopped one tile early fails on every shape (the aligned re-check too, so no tail hint is given)."""
    t01 = OPS / "matmul" / "t01_block_tile.py"
    report = exercise("matmul", _copy(tmp_path, t01, "my_matmul.py"), dtype="float32")
    assert report.passed is True, str(report)
    assert {"1x1x1", "3x5x517", "39x41x37"} <= {case.shape for case in report.passed_cases}
    short = _copy(tmp_path, t01, "short_k.py", replace=("range(0, K, BLOCK_K)", "range(0, K - BLOCK_K, BLOCK_K)"))
    report = exercise("matmul", short, dtype="float32")
    assert report.passed is False and report.failures
    assert "bounds" not in report.hint_keys()


_HANDED_TO_TORCH = {   # run()'s last lines: each hands the product to torch or numpy after the kernel did nothing
    "a computed name": ('    op = getattr(torch, "m" + "m")\n    out.copy_(op(a, b))\n', "aten::mm"),
    "torch.functional": ('    import importlib\n    f = importlib.import_module("torch.functional")\n'
                         '    out.copy_(f.einsum("ij,jk->ik", a, b))\n', "torch.functional.einsum"),
    "numpy": ('    import numpy\n    out.copy_(torch.from_numpy(numpy.matmul(a.double().numpy(), b.double().numpy())))\n',
              "torch.from_numpy"),
}


@cpu_only
@pytest.mark.parametrize("way", sorted(_HANDED_TO_TORCH))
def test_a_run_that_hands_the_work_to_torch_fails_as_not_its_own(tmp_path, way):
    """Found from outside: t01 with its launch skipped and the product computed by torch (through a computed
    name, torch.functional or numpy) passed every case and read PASS. The source scan or the watch on the
    checked calls (a dispatch mode: every computing ATen op) now fails it; t01 itself still passes."""
    t01 = OPS / "matmul" / "t01_block_tile.py"
    code, named = _HANDED_TO_TORCH[way]
    text = t01.read_text(encoding="utf-8").replace("    if out.numel():\n", "    if out.numel() and m < 0:\n")
    assert text.count("    return out\n") == 1
    path = tmp_path / "handed.py"
    path.write_text(text.replace("    return out\n", code + "    return out\n"), encoding="utf-8")
    report = exercise("matmul", path, dtype="float32", shapes=[(5, 7, 3), (1, 33, 9)])
    assert report.passed is False and not report.failures, str(report)       # every case right: not its own
    assert any(named in reason for reason in report.library_calls), report.library_calls
    assert "own work" in str(report)
    honest = exercise("matmul", _copy(tmp_path, t01, "mine.py"), dtype="float32", shapes=[(5, 7, 3), (1, 33, 9)])
    assert honest.passed is True and not honest.library_calls, str(honest)


@cpu_only
def test_attention_without_the_rescale_fails_where_a_row_spans_two_key_tiles(tmp_path):
    """Chapter 12's exercise: t02 without `acc * alpha` (the online-softmax correction) is right while a row's
    keys fit one 64-key tile and wrong at 127 keys."""
    t02 = OPS / "attention" / "t02_fused_online_softmax.py"
    broken = _copy(tmp_path, t02, "no_rescale.py",
                   replace=("acc = acc * alpha[:, None] + tl.dot(", "acc = acc + tl.dot("))
    report = exercise("attention", broken, dtype="float32")
    assert report.passed is False
    assert {case.shape for case in report.failures} == {"2x2x1x1x127x64"}
    assert {"1x2x1x1x1x128", "1x1x1x33x31x64x1"} <= {case.shape for case in report.passed_cases}
    assert "bounds" not in report.hint_keys()


@cpu_only
def test_a_hip_syntax_error_gives_the_compilers_message_at_the_files_line(tmp_path):
    path = _copy(tmp_path, V01, "my_add.hip", replace=("if (i < n) out[i] =", "if (i < n) out[i] = ="))
    line = next(number for number, text in enumerate(path.read_text().splitlines(), 1) if "= =" in text)
    report = exercise("vector_add", path)
    assert report.passed is False and report.hint_keys() == ["compile-error"]
    assert f"my_add.hip:{line}:" in report.compile_errors[0] and "error" in report.compile_errors[0]
    assert "v90_agent" not in str(report)


@cpu_only
def test_a_hip_rung_compiles_on_the_cpu_and_the_report_says_what_was_not_run(tmp_path):
    report = exercise("vector_add", _copy(tmp_path, OPS / "vector_add" / "v02_strided_chunks.hip", "chunks.hip"))
    assert report.passed is None and report.status == "COMPILED ONLY"
    assert report.stages[0][:2] == ("compile", "pass") and "sm_90" in report.stages[0][2]
    not_checked = dict(report.not_checked)
    assert "no GPU" in not_checked["timing"] and "compiled here, not run" in not_checked["correctness"]
    # The chunk-per-thread index is in the source: the uncoalesced hint, marked as resting on the source only.
    [finding] = [f for f in report.findings if f.key == "uncoalesced"]
    assert finding.confidence == "possible" and "thread * kChunk" in finding.evidence and "not timed" in finding.evidence


@cpu_only
def test_a_triton_syntax_error_is_reported_at_its_line(tmp_path):
    path = _copy(tmp_path, T01, "broken.py", replace=("    mask = offsets < n\n", "    mask = offsets <\n"))
    report = exercise("vector_add", path)
    assert report.passed is False and report.hint_keys() == ["compile-error"]
    assert report.compile_errors[0].startswith("broken.py:")


def test_clear_errors_for_a_bad_operator_a_missing_file_and_a_wrong_route(tmp_path):
    with pytest.raises(ExerciseError, match="unknown operator 'conv2d'; operators: .*matmul.*rms_norm"):
        exercise("conv2d", T01)
    with pytest.raises(ExerciseError, match="no file .*nowhere.py"):
        exercise("vector_add", tmp_path / "nowhere.py")
    with pytest.raises(ExerciseError, match="route='hip', but t01_tile_1024.py is a Triton module"):
        exercise("vector_add", T01, route="hip")
    with pytest.raises(ExerciseError, match="route must be 'hip' or 'triton'"):
        exercise("vector_add", T01, route="cuda")
    with pytest.raises(ExerciseError, match="defined for float32, bfloat16, not 'float16'"):
        exercise("vector_add", T01, dtype="float16")


def test_a_file_without_a_rung_header_fails_with_the_registrys_message(tmp_path):
    path = tmp_path / "bare.py"
    path.write_text('"""just a kernel"""\ndef run(a, b):\n    return a + b\n', encoding="utf-8")
    report = exercise("vector_add", path)
    assert report.passed is False and report.stages[0][:2] == ("format", "FAIL")
    assert "header is missing parent, change, hypothesis" in report.compile_errors[0]


def test_the_source_patterns_flag_exactly_the_ladders_uncoalesced_rungs():
    flagged = {path.relative_to(OPS).as_posix() for path in sorted(OPS.glob("*/v*.hip"))
               if strided_thread_index(path.read_text(encoding="utf-8"))}
    assert flagged == {"vector_add/v02_strided_chunks.hip", "softmax/v01_thread_per_row.hip",
                       "rms_norm/v01_thread_per_row.hip"}
    assert not any(shared_bank_strides(path.read_text(encoding="utf-8")) for path in OPS.glob("*/v*.hip"))
    source = "__shared__ float tile[32][32];\nx = tile[threadIdx.x][k];\ncache[2 * s * tid] += cache[tid];\n"
    assert [line for line, _ in shared_bank_strides(source)] == [2, 3]


def test_the_hint_table_has_one_row_per_key_and_says_how_each_is_detected():
    keys = [rule.key for rule in HINTS]
    assert len(keys) == len(set(keys))
    assert {"compile-error", "bounds", "unwritten", "race", "uncoalesced", "bank-conflict"} == set(keys)
    assert all(rule.symptom and rule.cause and rule.advice and rule.detected_by for rule in HINTS)


@cpu_only
def test_the_report_renders_as_text_html_and_markdown(tmp_path):
    report = exercise("vector_add", _copy(tmp_path, T01, "no_mask.py", replace=("    mask = offsets < n\n",
                                                                                 "    mask = None\n")), shapes=[31])
    assert "FAIL" in str(report) and "bounds" in str(report)
    assert report._repr_html_().lstrip().startswith("<") and "bounds" in report._repr_html_()
    markdown = report._repr_markdown_()
    assert "| bounds | observed |" in markdown and "**exercise vector_add (triton)" in markdown


def test_the_command_line_exits_2_on_a_bad_operator_and_1_on_a_failure(tmp_path):
    command = [sys.executable, "-m", "hello_gpu", "exercise"]
    done = subprocess.run(command + ["nope", str(T01)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "unknown operator 'nope'" in done.stdout
    broken = _copy(tmp_path, T01, "broken.py", replace=("    mask = offsets < n\n", "    mask = offsets <\n"))
    done = subprocess.run(command + ["vector_add", str(broken)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "compile-error" in done.stdout, done.stdout + done.stderr


def test_the_hip_magic_runs_a_cell_through_exercise(tmp_path):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "hello_gpu")
    cell = V01.read_text(encoding="utf-8").replace("if (i < n) out[i] =", "if (i < n) out[i] = =")
    shell.run_cell_magic("hip", "--exercise vector_add result", cell)
    report = shell.user_ns["result"]
    assert report.passed is False and report.hint_keys() == ["compile-error"]
    line = next(number for number, text in enumerate(cell.splitlines(), 2) if "= =" in text)   # %%hip is line 1
    assert f"kernel.hip:{line}:" in report.compile_errors[0]


# ------------------------------------------------------------------------------------------ GPU tier



@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU (the H200 tier)")
def test_gpu_a_correct_hip_rung_passes_and_gets_paired_ratios(tmp_path):
    report = exercise("vector_add", _copy(tmp_path, V01, "my_add.hip"), dtype="float32", max_seconds=0.5)
    assert report.passed is True, str(report)
    against = {timing.against for timing in report.timings}
    assert {"v00_torch", "v01_thread_per_element", "v02_strided_chunks"} <= against
    mine = report.ratio("v01_thread_per_element")          # the same kernel: about 1x
    assert 0.8 < mine.speedup < 1.25 and mine.ci95[0] <= mine.speedup <= mine.ci95[1]
    assert RACE_RUNS_TEXT in report.checks and not report.findings


RACE_RUNS_TEXT = "8 runs on the same inputs"


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU (the H200 tier)")
def test_gpu_a_reduction_without_its_barrier_gets_the_race_hint(tmp_path):
    rung = OPS / "reduce_sum" / "v03_sequential_addressing.hip"
    racy = _copy(tmp_path, rung, replace=("    __syncthreads();   // outside the if: every thread of the block reaches it\n",
                                          "\n"))
    shutil.copy(rung.with_suffix(".py"), tmp_path / rung.with_suffix(".py").name)      # its launcher, beside it
    report = exercise("reduce_sum", racy, max_seconds=0.5)
    assert report.passed is False, str(report)
    assert "race" in report.hint_keys(), str(report)
    [race] = [finding for finding in report.findings if finding.key == "race"]
    assert race.confidence == "observed" and "different outputs" in race.evidence


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU (the H200 tier)")
def test_gpu_a_kernel_without_its_bounds_check_gets_the_bounds_hint(tmp_path):
    path = _copy(tmp_path, V01, "no_check.hip", replace=("if (i < n) out[i]", "out[i]"))
    report = exercise("vector_add", path, max_seconds=0.5)
    assert report.passed is False, str(report)
    bounds = [finding for finding in report.findings if finding.key == "bounds"]
    assert bounds and bounds[0].confidence == "observed", str(report)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU (the H200 tier)")
def test_gpu_a_grid_that_is_not_whole_fails_in_the_report_not_with_an_exception(tmp_path):
    """Chapter 2's notebook: a header grid `n / 256` compiles, and every launch at a size that is no multiple of
    256 raises. On the H200 (session 21) the race probe let that escape from exercise(); it is a case failure."""
    path = _copy(tmp_path, V01, "float_grid.hip", replace=("grid: ceil(n / 256)", "grid: n / 256"))
    report = exercise("vector_add", path, route="hip", max_seconds=0.5)
    assert report.passed is False, str(report)
    assert any("whole numbers" in case.reason for case in report.failures), str(report)
    assert "races" in dict(report.not_checked), str(report)   # the probe's launch raised too, and says so


@cpu_only
def test_the_course_example_runs_in_the_interpreter():
    example = Path(__file__).resolve().parents[1] / "examples" / "course" / "exercise_softmax.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "hints: none | passed: True" in done.stdout
