"""The command line (CPU tier): ``hello-gpu doctor``, ``compile-check`` and ``version``.

The doctor tests here expect a machine without a GPU (they are skipped on one); the ``gpu``-marked
test at the end expects all three gates to pass on a GPU machine (run with ``-m gpu``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hello_gpu.cli import main
from hello_gpu.runtime.clang_hip import find_clang
from hello_gpu.runtime.doctor import GATE_NAMES, gate_platform

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
HAS_GPU = gate_platform().status == "PASS"
AMD = find_clang() is not None and os.path.isfile("/usr/include/hip/hip_runtime.h")
AMD_FLAGS = [] if AMD or os.environ.get("HG_REQUIRE_AMD_GATE") == "1" else ["--no-amd"]

no_gpu_here = pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU; the no-GPU doctor is tested on CPU machines")


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("HG_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "hg-cache"))


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_version(capsys):
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == "hello-gpu 0.1.0"


def test_no_subcommand_prints_help(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert "doctor" in out and "compile-check" in out


# ------------------------------------------------------------------------------------------ doctor


@no_gpu_here
def test_doctor_without_gpu_fails_at_gate_1_and_lists_what_works(capsys):
    assert main(["doctor"]) == 2
    out = capsys.readouterr().out
    assert "No GPU on this machine" in out
    assert "What still works here" in out
    assert "NVRTC compiles for sm_90" in out
    assert "Triton interpreter (TRITON_INTERPRET=1)" in out
    assert _last_line(out).startswith(f"doctor: FAIL at gate 1 ({GATE_NAMES[0]})")
    assert "no GPU" in _last_line(out)


@no_gpu_here
def test_doctor_json_without_gpu(capsys):
    assert main(["doctor", "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["gpu_visible"] is False
    assert [g["status"] for g in report["gates"]] == ["FAIL", "SKIP", "SKIP"]
    assert "no GPU" in report["gates"][0]["detail"]
    assert report["gates"][0]["hint"]
    assert report["exit_code"] == 2
    assert "gate 1" in report["summary"]


@no_gpu_here
def test_doctor_cpu_ok_passes_when_the_cpu_side_checks_pass(capsys):
    assert main(["doctor", "--json", "--cpu-ok"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [g["status"] for g in report["gates"]] == ["SKIP", "SKIP", "SKIP"]
    checks = {c["name"]: c for c in report["cpu_checks"]}
    nvrtc = checks["NVRTC compiles for sm_90"]
    assert nvrtc["status"] == "PASS" and "sm_90" in nvrtc["detail"] and "registers" in nvrtc["detail"]
    assert checks["clang compiles for AMD gfx1201"]["status"] == ("PASS" if find_clang() else "SKIP")
    assert all(c["status"] != "FAIL" for c in report["cpu_checks"])
    for key in ("GPU", "driver", "torch", "triton", "python", "NVRTC", "clang (AMD gate)"):
        assert key in report["environment"]
    assert report["environment"]["NVRTC"].startswith("nvrtc-")


@no_gpu_here
def test_python_dash_m_doctor(tmp_path):
    environment = dict(os.environ, PYTHONPATH=str(REPO / "src"), HG_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "hello_gpu", "doctor", "--json", "--cpu-ok"], cwd=REPO,
                          env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["gpu_visible"] is False and report["exit_code"] == 0


@pytest.mark.gpu
def test_doctor_on_a_gpu_machine_passes_all_gates(capsys):
    assert main(["doctor", "--json"]) == 0, capsys.readouterr().out
    report = json.loads(capsys.readouterr().out)
    assert [g["status"] for g in report["gates"]] == ["PASS", "PASS", "PASS"]
    assert report["environment"]["arch"].startswith(("sm_", "gfx"))


# ----------------------------------------------------------------------------------- compile-check

EXAMPLE_KERNELS = {"vector_add", "block_sum", "saxpy", "scale<float, 256>", "scale<double, 128>", "multiply_add",
                   # examples/course_kernels.hip, a whole program in the original course's style
                   "block_sum_shared", "row_max_finite", "row_softmax", "scale_clamp", "tiled<16>", "vector_add_v1",
                   "vector_add_v2_grid_stride", "vector_add_v3_float4"}


def test_compile_check_examples_passes_with_registers_in_report(tmp_path, capsys):
    report_path = tmp_path / "report.json"
    assert main(["compile-check", str(EXAMPLES), "--report", str(report_path), *AMD_FLAGS]) == 0, \
        capsys.readouterr().out
    out = capsys.readouterr().out
    assert _last_line(out).startswith("compile-check: ok: 14 kernel(s) in 6 file(s)")
    report = json.loads(report_path.read_text())
    assert report["ok"] is True and report["arch"] == "sm_90"
    assert {k["kernel"] for k in report["kernels"]} == EXAMPLE_KERNELS
    for kernel in report["kernels"]:
        assert kernel["nvidia"]["status"] == "ok"
        assert kernel["nvidia"]["registers"] > 0
        assert kernel["nvidia"]["spill_stores"] == 0 and kernel["nvidia"]["spill_loads"] == 0
        assert kernel["nvidia"]["seconds"] >= 0
        if not AMD_FLAGS:
            assert kernel["amd"]["status"] == "ok"


BROKEN = """\
__global__ void fine(float* p) { p[0] = 1.0f; }

__global__ void broken(float* p) {
  p[0] = not_declared;
}
"""


def test_compile_check_broken_file_fails_with_file_and_line(tmp_path, capsys):
    (tmp_path / "broken.hip").write_text(BROKEN)
    assert main(["compile-check", str(tmp_path), *AMD_FLAGS]) == 1
    out = capsys.readouterr().out
    assert "broken.hip:4:" in out                            # NVRTC's error, at the user's line
    assert 'identifier "not_declared" is undefined' in out
    if not AMD_FLAGS:
        assert "use of undeclared identifier 'not_declared'" in out   # clang's
    assert _last_line(out).startswith("compile-check: FAIL")


def test_compile_check_template_without_instantiation_is_skipped(tmp_path, capsys):
    (tmp_path / "tmpl.cu").write_text("template <typename T>\n__global__ void fill(T* p) { p[0] = T(1); }\n")
    report_path = tmp_path / "report.json"
    assert main(["compile-check", str(tmp_path), "--report", str(report_path), *AMD_FLAGS]) == 0
    out = capsys.readouterr().out
    assert "skipped" in out and "hello-gpu: instantiate fill<" in out
    [kernel] = json.loads(report_path.read_text())["kernels"]
    assert kernel["kernel"] == "fill" and kernel["template"] is True
    assert kernel["nvidia"]["status"] == "skip" and "instantiate" in kernel["nvidia"]["error"]


def test_compile_check_without_clang_fails_with_install_hint(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HG_CLANG", str(tmp_path / "no-such-clang"))
    assert main(["compile-check", str(EXAMPLES / "vector_add.hip")]) == 1
    assert "scripts/install_amd_compile_tools.sh" in capsys.readouterr().out
    assert main(["compile-check", str(EXAMPLES / "vector_add.hip"), "--no-amd"]) == 0


def test_compile_check_missing_path_is_a_usage_error(tmp_path, capsys):
    assert main(["compile-check", str(tmp_path / "nowhere")]) == 2
    assert "no such file or directory" in capsys.readouterr().out


def test_console_width_in_a_pipe_follows_columns(monkeypatch):
    # In a pipe or a log (not a TTY) the width is COLUMNS when set, else 140: a ladder table of nine
    # columns folds its rung names at 140, so logs ask for more (scripts/gpu_session.sh sets 200-220).
    from hello_gpu.cli import make_console
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    monkeypatch.setenv("COLUMNS", "230")
    assert make_console().width == 230
    for unusable in ("", "wide", "0"):
        monkeypatch.setenv("COLUMNS", unusable)
        assert make_console().width == 140


# ------------------------------------------------------------------------------------------ ladder


def test_ladder_refuses_a_negative_shape_with_argparse_usage_not_a_traceback(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["ladder", "vector_add", "--check-only", "--shapes", "-5"])
    assert exit_info.value.code == 2
    assert "argument --shapes: not a shape: '-5' (every size must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("alias, dtype", [("fp32", "float32"), ("F32", "float32"), ("float", "float32"),
                                          ("bf16", "bfloat16"), ("half", "float16"), ("fp16", "float16"),
                                          ("torch.float16", "float16"), ("float16", "float16")])
def test_dtype_aliases_resolve_to_the_spec_names(alias, dtype):
    from rich.console import Console

    from hello_gpu.cli import resolve_dtype
    from hello_gpu.ops import load_op
    assert resolve_dtype("ladder", load_op("softmax"), alias, Console()) == (True, dtype)


def test_ladder_unknown_dtype_fails_listing_the_valid_names(capsys):
    """`--dtype fp32` used to exit 0 with every rung skipped; an unknown name is now a usage error."""
    assert main(["ladder", "vector_add", "--check-only", "--dtype", "fp64"]) == 2
    out = capsys.readouterr().out
    assert "vector_add is defined for float32, bfloat16, not 'fp64'" in out and "bf16=bfloat16" in out


@pytest.mark.skipif(HAS_GPU, reason="the interpreter path of --check-only")
def test_ladder_check_only_shows_error_over_allowed_and_exits_0_with_fp32(capsys, monkeypatch):
    """reduce_sum's 2^60-scaled inputs err by ~1e30 in absolute terms and pass: the table shows the error
    over what the tolerance allows (<= 1), not a bare huge number beside "pass"."""
    monkeypatch.setenv("COLUMNS", "220")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert main(["ladder", "reduce_sum", "--check-only", "--dtype", "fp32", "--route", "triton",
                 "--shapes", "1000", "4097"]) == 0
    out = capsys.readouterr().out
    assert "error / allowed" in out and "max abs err" not in out
    rows = [line for line in out.splitlines() if "t01_two_stage" in line]
    assert rows and "pass" in rows[0] and "refused x[..., ::2]" in rows[0]
    ratio = float(rows[0].split("│")[5])
    assert 0 <= ratio <= 1
    assert "RuntimeWarning" not in out
