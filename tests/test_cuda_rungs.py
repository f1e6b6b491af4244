"""CUDA-dialect rungs (``vNN_name.cu``) and target headers (``vendor:``, ``arch:``), CPU tier.

The fixture operator ``tests/fixtures/ops/toy_scale`` holds a .hip rung (both vendors), a plain .cu
rung (NVIDIA, any arch) and a .cu rung that declares ``arch: sm_90a`` and executes ``wgmma.fence``, an
instruction ptxas accepts for sm_90a only. NVRTC compiles without a GPU, so every compile here is real;
what needs a GPU (launching the .cu rungs) is in the GPU tier at the end.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from hello_gpu.bench.records import validate_record
from hello_gpu.cli import main
from hello_gpu.ops import HeaderError, SpecError, load_op
from hello_gpu.ops.header import declared_target, is_rung_file, measured_bytes, rung_instantiations
from hello_gpu.ops.ladder import (LadderResult, _time_shape, check_ladder, checks_table, ladder_record,
                                  not_timed_after_checks)
from hello_gpu.ops.rung import INCLUDE_DIR, requirement_unmet
from hello_gpu.runtime import compile_gate
from hello_gpu.runtime.clang_hip import find_clang
from hello_gpu.runtime.device import gpu_vendor
from hello_gpu.runtime.errors import CompileError

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "ops"
TOY = FIXTURES / "toy_scale"
HAS_GPU = gpu_vendor() is not None
no_gpu_here = pytest.mark.skipif(HAS_GPU, reason="tests the no-GPU behaviour")
# ptxas's own words for an sm_90a-only instruction compiled for plain sm_90 (NVRTC 13.5).
NOT_ON_SM_90 = "Instruction 'wgmma.fence' not supported on .target 'sm_90'"


@pytest.fixture
def op():
    return load_op("toy_scale", FIXTURES)


@pytest.fixture
def op_copy(tmp_path):
    """A private copy of the fixture operator, for tests that change its files."""
    shutil.copytree(TOY, tmp_path / "toy_scale")
    return tmp_path


def _rewrite(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


# ------------------------------------------------------------------------------------------ discovery


def test_the_registry_finds_cu_rungs_with_their_target_and_companion(op):
    assert [(rung.id, rung.route) for rung in op.rungs] == [
        ("v00_torch", "torch"), ("v00_torch_compile", "torch"), ("v01_thread_per_element", "hip"),
        ("v02_cuda_read_only", "cuda"), ("v03_hopper_fence", "cuda"), ("t01_block_per_program", "triton")]
    plain, hopper, hip_rung = op.rung("v02_cuda_read_only"), op.rung("v03_hopper_fence"), op.rung("v01_thread_per_element")
    assert plain.metadata.target == ("nvidia", None) and plain.companion is None
    assert hopper.metadata.target == ("nvidia", "sm_90a") and hopper.metadata.requires == "nvidia sm_90a"
    assert hopper.companion == TOY / "v03_hopper_fence.py"
    assert hip_rung.metadata.target is None and hip_rung.metadata.requires is None
    assert [path.name for path in hopper.sources] == ["v03_hopper_fence.cu", "v03_hopper_fence.py"]
    assert is_rung_file(hopper.path) and rung_instantiations(hopper.path) == []


def test_a_cu_rungs_header_prose_is_not_hashed_but_its_target_is(op_copy):
    rung = op_copy / "toy_scale" / "v03_hopper_fence.cu"
    before = measured_bytes(rung)
    _rewrite(rung, "hypothesis: the fence orders nothing here", "hypothesis: the fence still orders nothing here")
    assert measured_bytes(rung) == before
    _rewrite(rung, "arch: sm_90a", "arch: sm_100a")
    assert measured_bytes(rung) != before


def test_a_cu_and_a_hip_rung_cannot_share_an_id(op_copy):
    shutil.copy(op_copy / "toy_scale" / "v01_thread_per_element.hip", op_copy / "toy_scale" / "v02_cuda_read_only.hip")
    with pytest.raises(SpecError, match=r"rung id 'v02_cuda_read_only' appears twice in toy_scale \(also v02_"):
        load_op("toy_scale", op_copy)


def test_a_launcher_beside_a_cu_rung_is_its_companion_and_a_stray_one_an_error(op_copy):
    (op_copy / "toy_scale" / "v03_hopper_fence.cu").unlink()
    with pytest.raises(SpecError, match=r"v03_hopper_fence\.py: a vNN_name\.py must sit beside its vNN_name\.hip or \.cu"):
        load_op("toy_scale", op_copy)


# ------------------------------------------------------------------------------------------ target headers


@pytest.mark.parametrize("file, old, new, message", [
    ("v02_cuda_read_only.cu", "block: 256", "vendor: amd\nblock: 256",
     r"the \.cu suffix \(CUDA dialect, NVIDIA only\) and vendor: amd contradict each other"),
    ("v02_cuda_read_only.cu", "block: 256", "arch: gfx1201\nblock: 256",
     r"the \.cu suffix .* and arch: gfx1201 contradict each other: one says nvidia, the other amd"),
    ("v02_cuda_read_only.cu", "block: 256", "requires: amd\nblock: 256", r"requires: amd contradict each other"),
    ("v01_thread_per_element.hip", "block: 256", "vendor: amd\narch: sm_90a\nblock: 256",
     r"vendor: amd and arch: sm_90a contradict each other"),
    ("v03_hopper_fence.cu", "arch: sm_90a", "arch: hopper", r"arch 'hopper' is not an arch this framework knows"),
    ("v03_hopper_fence.cu", "arch: sm_90a", "arch: sm_90x", r"arch 'sm_90x' is not an arch"),
    ("v03_hopper_fence.cu", "vendor: nvidia", "vendor: intel", r"vendor 'intel' is not one of nvidia, amd"),
    ("v03_hopper_fence.cu", "vendor: nvidia", "requires: nvidia sm_100a",
     r"arch: sm_90a and requires: nvidia sm_100a name different archs"),
])
def test_contradicting_or_unknown_targets_are_header_errors_naming_the_file(op_copy, file, old, new, message):
    path = op_copy / "toy_scale" / file
    _rewrite(path, old, new)
    with pytest.raises(HeaderError, match=message) as raised:
        load_op("toy_scale", op_copy)
    assert str(raised.value).startswith(str(path))
    with pytest.raises(HeaderError, match=message):
        declared_target(path)                          # what the compile gate reads: the same rule


def test_targets_that_agree_become_one_requirement(op_copy):
    folder = op_copy / "toy_scale"
    _rewrite(folder / "v01_thread_per_element.hip", "block: 256", "vendor: amd\nblock: 256")
    _rewrite(folder / "v03_hopper_fence.cu", "vendor: nvidia", "requires: nvidia sm_90a (wgmma)")
    op = load_op("toy_scale", op_copy)
    assert op.rung("v01_thread_per_element").metadata.requires == "amd"
    assert op.rung("v03_hopper_fence").metadata.requires == "nvidia sm_90a (wgmma)"     # as written, note kept
    assert declared_target(folder / "v01_thread_per_element.hip") == ("amd", None)
    assert declared_target(REPO / "examples" / "saxpy.cu") is None      # not a rung: both vendors, as before


def test_who_runs_which_rung(op):
    """The rule a skip reason comes from, for the machines this one is not (the GPU tier runs an H200)."""
    plain, hopper = op.rung("v02_cuda_read_only").metadata.requires, op.rung("v03_hopper_fence").metadata.requires
    assert requirement_unmet(plain, "nvidia", "sm_80") is None and requirement_unmet(hopper, "nvidia", "sm_90") is None
    assert requirement_unmet(hopper, "nvidia", "sm_100") == "requires nvidia sm_90a; this GPU is sm_100"
    assert requirement_unmet(plain, "amd", "gfx1201") == ("requires nvidia (a .cu rung: CUDA dialect); "
                                                          "this GPU is amd gfx1201")


# ------------------------------------------------------------------------------------------ compiling


def test_the_sm_90a_rung_compiles_for_sm_90a_and_not_for_sm_90(op):
    rung = op.rung("v03_hopper_fence")
    binary = rung.kernel().compile()                   # no arch given: the header's
    assert binary.arch == "sm_90a" and binary.image and "wgmma.fence" in binary.ptx
    with pytest.raises(CompileError, match=NOT_ON_SM_90):
        rung.kernel(arch="sm_90").compile()


def test_the_plain_cu_rung_compiles_in_the_cuda_dialect(op):
    binary = op.rung("v02_cuda_read_only").kernel(arch="sm_90").compile()
    assert binary.arch == "sm_90" and binary.image and binary.entry == "toy_scale_ldg"


# ------------------------------------------------------------------------------------------ the compile gate


def _gate(paths, **options):
    return compile_gate.check([str(path) for path in paths], arch="sm_90", amd_arch="gfx1201",
                              amd=find_clang() is not None, instantiations=rung_instantiations,
                              targets=declared_target, include_dirs=[INCLUDE_DIR], **options)


def test_the_gate_compiles_each_rung_for_its_declared_target(op):
    report = _gate([TOY])
    rows = {Path(row.file).name: row for row in report.kernels}
    assert set(rows) == {"v01_thread_per_element.hip", "v02_cuda_read_only.cu", "v03_hopper_fence.cu"}
    assert report.ok, [(row.file, row.nvidia.error) for row in report.failures]
    hopper, plain, hip_row = rows["v03_hopper_fence.cu"], rows["v02_cuda_read_only.cu"], rows["v01_thread_per_element.hip"]
    assert hopper.nvidia.status == "ok" and hopper.nvidia.arch == "sm_90a" and hopper.nvidia.registers
    assert plain.nvidia.status == "ok" and plain.nvidia.arch is None                   # the gate's sm_90
    if find_clang() is not None:
        assert hip_row.amd.status == "ok"              # .hip rungs keep both vendors
        for row in (hopper, plain):
            assert row.amd.status == "n/a" and "not compiled for AMD" in row.amd.error
        assert "its target is nvidia sm_90a" in hopper.amd.error
        assert report.to_dict()["summary"]["not_applicable"] == 2


def test_the_same_rung_without_its_arch_fails_the_gate_with_ptxas_words(op_copy):
    path = op_copy / "toy_scale" / "v03_hopper_fence.cu"
    _rewrite(path, "arch: sm_90a\n", "")
    report = _gate([path])
    (row,) = report.kernels
    assert row.nvidia.status == "fail" and NOT_ON_SM_90 in row.nvidia.error and not report.ok


def test_a_contradicting_header_fails_its_file_in_the_gate(op_copy):
    path = op_copy / "toy_scale" / "v02_cuda_read_only.cu"
    _rewrite(path, "block: 256", "vendor: amd\nblock: 256")
    (row,) = _gate([path]).kernels
    assert row.nvidia.status == "fail" and row.nvidia.error.startswith(str(path)) and "contradict" in row.nvidia.error


def test_cli_compile_check_shows_the_arch_and_what_does_not_apply(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "240")
    report_path = tmp_path / "gate.json"
    assert main(["compile-check", str(TOY), "--report", str(report_path)]) == 0
    out = capsys.readouterr().out
    assert "ok sm_90a" in out and "compile-check: ok: 3 kernel(s) in 3 file(s)" in out
    data = json.loads(report_path.read_text())
    hopper = next(k for k in data["kernels"] if k["file"].endswith("v03_hopper_fence.cu"))
    assert hopper["nvidia"]["status"] == "ok" and hopper["nvidia"]["arch"] == "sm_90a"
    if find_clang() is not None:
        assert "not applicable on AMD: " in out and "v03_hopper_fence.cu: its target is nvidia sm_90a" in out
        assert hopper["amd"] == {"status": "n/a", "seconds": 0.0,
                                 "error": "its target is nvidia sm_90a (rung header, or a .cu rung): "
                                          "not compiled for AMD"}


# ------------------------------------------------------------------------------------------ skipped, with the reason


@no_gpu_here
def test_cli_list_says_which_rungs_this_machine_skips(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "240")                # one line a rung
    assert main(["list", "toy_scale", "--root", str(FIXTURES)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "v03_hopper_fence [cuda] a wgmma.fence" in out
    assert "(requires nvidia sm_90a; no GPU here: skipped)" in out


@no_gpu_here
def test_cli_check_only_skips_the_cu_rungs_with_the_reason_and_checks_the_rest(capsys, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("COLUMNS", "240")
    assert main(["ladder", "toy_scale", "--check-only", "--shapes", "1000", "37x29", "--root", str(FIXTURES)]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "pass" in rows["t01_block_per_program"] and "pass" in rows["v00_torch"]
    assert "skipped" in rows["v03_hopper_fence"] and "requires nvidia sm_90a; no GPU here" in rows["v03_hopper_fence"]
    assert "skipped" in rows["v02_cuda_read_only"] and "requires nvidia (a .cu rung: CUDA dialect); no GPU here" in rows[
        "v02_cuda_read_only"]
    assert main(["ladder", "toy_scale", "--check-only", "--route", "cuda", "--shapes", "31",
                 "--root", str(FIXTURES)]) == 0                       # the baselines still run; cuda rungs skip
    rows = {line.split("│")[1].strip() for line in capsys.readouterr().out.splitlines() if line.count("│") > 3}
    assert {"v02_cuda_read_only", "v03_hopper_fence", "v00_torch"} <= rows and "t01_block_per_program" not in rows


@no_gpu_here
def test_a_record_carries_the_skipped_rungs_with_their_reasons(op, monkeypatch):
    """The timing path on the CPU (wall clock): the .cu rungs are not timed, and the record says why."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    rungs = [op.rung(rung_id) for rung_id in ("v00_torch", "v02_cuda_read_only", "v03_hopper_fence",
                                              "t01_block_per_program")]
    built = {rung.id: rung.build() for rung in rungs if rung.skip_reason() is None}
    assert set(built) == {"v00_torch", "t01_block_per_program"}
    checks = check_ladder(op, rungs=rungs, shapes=[31], dtypes=["float32"], built=built)
    result = LadderResult(op, "float32", [1024], checks)
    result.not_timed += not_timed_after_checks(checks)
    _time_shape(op, "float32", 1024, [r for r in rungs if checks[r.id].passed], built, result, lambda: None,
                device="cpu", seconds=0.1)
    record = ladder_record(result, device={"slug": "cpu-test", "name": "CPU (test)", "arch": "x86_64"},
                           name="toy_scale.float32")
    assert validate_record(record) == []
    assert [entry["variant"] for entry in record["entries"]] == ["v00_torch", "t01_block_per_program"]
    skipped = {entry["variant"]: entry["reason"] for entry in record["extra"]["not_timed"]}
    assert skipped == {"v02_cuda_read_only": "skipped: requires nvidia (a .cu rung: CUDA dialect); no GPU here",
                       "v03_hopper_fence": "skipped: requires nvidia sm_90a; no GPU here"}
    console = Console(record=True, width=240)
    console.print(checks_table(op, checks))
    assert "requires nvidia sm_90a; no GPU here" in console.export_text()


# ------------------------------------------------------------------------------------------ GPU tier


@pytest.mark.gpu
def test_cu_rungs_run_on_hopper_and_are_skipped_elsewhere_with_the_reason(op, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from hello_gpu.ops import run_ladder
    from hello_gpu.runtime.device import device_info
    result = run_ladder(op, shapes=[2**20], progress=False)
    info = device_info()
    for rung_id in ("v02_cuda_read_only", "v03_hopper_fence"):
        report = result.checks[rung_id]
        if info.vendor == "amd" or (rung_id == "v03_hopper_fence" and info.arch != "sm_90"):
            assert report.status == "skipped" and report.reason.startswith("requires nvidia")
            assert any(entry["variant"] == rung_id for entry in result.record["extra"]["not_timed"])
        else:
            assert report.passed, report.reason
            assert rung_id in {entry.rung.id for entry in result.timed}
    assert validate_record(result.record) == []
