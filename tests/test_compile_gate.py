"""Compile gate (CPU tier): every kernel in the repository compiles for sm_90 (NVRTC) and gfx1201 (clang).

The AMD half needs clang-19 and the HIP headers (scripts/install_amd_compile_tools.sh). It is skipped
without them, unless HG_REQUIRE_AMD_GATE=1, where a missing toolchain is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hello_gpu.ops.header import declared_target, rung_instantiations
from hello_gpu.ops.rung import INCLUDE_DIR
from hello_gpu.runtime import compile_gate
from hello_gpu.runtime.clang_hip import INSTALL_HINT, find_clang
from hello_gpu.runtime.doctor import VECTOR_ADD

REPO = Path(__file__).resolve().parents[1]
AMD_TOOLS = find_clang() is not None and os.path.isfile("/usr/include/hip/hip_runtime.h")


@pytest.fixture(scope="module")
def report():
    # Into the session's private kernel cache (tests/conftest.py), not one of its own: the NVIDIA half
    # compiles every rung for sm_90 (~17 s of one core here), and test_ops_ladders' 68 rung x dtype
    # compiles for sm_90 are then cache hits with the same ptxas report (a binary is keyed by its source,
    # headers, options and compiler version, so a hit is the binary a fresh compile would give).
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        return compile_gate.check(["."], arch="sm_90", amd_arch="gfx1201", amd=AMD_TOOLS,
                                  instantiations=rung_instantiations, targets=declared_target,
                                  include_dirs=[INCLUDE_DIR])


def _problems(report, vendor: str) -> str:
    """Kernels that did not compile for ``vendor``; "n/a" (a rung whose header or .cu suffix declares the other
    vendor, e.g. tests/fixtures/ops/toy_scale's .cu rungs on AMD) is no problem when it says why."""
    def fine(outcome) -> bool:
        return outcome is not None and (outcome.status == "ok" or outcome.status == "n/a" and bool(outcome.error))

    return "\n\n".join(f"{k.file} :: {k.kernel}: {getattr(k, vendor).status}\n{getattr(k, vendor).error}"
                       for k in report.kernels if not fine(getattr(k, vendor)))


def test_the_gate_sees_the_examples(report):
    assert {"examples/vector_add.hip", "examples/reduce_warp_shuffle.hip", "examples/saxpy.cu",
            "examples/scale_template.hip", "examples/course_style.hip", "examples/course_kernels.hip",
            "tests/fixtures/runtime/standard_names.hip"} <= set(report.files)
    assert not any(part.startswith(".") for f in report.files for part in Path(f).parts)


def test_a_whole_course_program_compiles_kernel_by_kernel_on_both_vendors(report):
    """The course-style file (kernels plus main() with hipMalloc and <vector>) is compiled as its device
    half on both vendors, so the gates agree; main() instantiates tiled<16>, and that is checked too."""
    rows = {row.kernel: row for row in report.kernels if row.file == "examples/course_kernels.hip"}
    assert list(rows) == ["vector_add_v1", "vector_add_v2_grid_stride", "vector_add_v3_float4", "block_sum_shared",
                          "row_max_finite", "row_softmax", "scale_clamp", "tiled<16>"]
    assert all(row.nvidia.status == "ok" and row.nvidia.registers for row in rows.values())
    if AMD_TOOLS:
        assert all(row.amd.status == "ok" for row in rows.values())


def test_every_kernel_compiles_for_sm_90(report):
    assert report.kernels
    assert not _problems(report, "nvidia"), _problems(report, "nvidia")
    # every kernel built for NVIDIA reports its registers; an AMD-only rung (matmul v15_rdna4_wmma) reads n/a
    assert all(k.nvidia.registers for k in report.kernels if k.nvidia.status != "n/a")
    assert all(k.amd.status != "n/a" for k in report.kernels if k.nvidia.status == "n/a")


def test_rungs_compile_for_their_declared_target_only(report):
    """The .cu rungs of the fixture are NVIDIA's: the sm_90a one compiles for sm_90a, AMD does not apply."""
    rows = {Path(k.file).name: k for k in report.kernels if k.file.startswith("tests/fixtures/ops/toy_scale/")}
    assert rows["v03_hopper_fence.cu"].nvidia.arch == "sm_90a" and rows["v03_hopper_fence.cu"].nvidia.status == "ok"
    if AMD_TOOLS:
        assert [name for name, k in rows.items() if k.amd.status == "n/a"] == ["v02_cuda_read_only.cu",
                                                                               "v03_hopper_fence.cu"]
        assert rows["v01_thread_per_element.hip"].amd.status == "ok"


def test_every_kernel_compiles_for_gfx1201(report):
    if not AMD_TOOLS:
        reason = f"AMD compile gate: no clang-19 or HIP headers; {INSTALL_HINT}"
        if os.environ.get("HG_REQUIRE_AMD_GATE") == "1":
            pytest.fail(reason + " (HG_REQUIRE_AMD_GATE=1)", pytrace=False)
        pytest.skip(reason)
    assert not _problems(report, "amd"), _problems(report, "amd")


def test_find_kernels_reads_names_lines_and_templates():
    source = """\
// __global__ void in_a_comment(float* p);
extern "C" __global__ void plain(float* p) {}
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) scaled(const T* x, T* y) {}
__global__ __attribute__((used)) void attributed(int* p) {}
"""
    kernels = compile_gate.find_kernels(source)
    assert [(k.name, k.line, k.template) for k in kernels] == [
        ("plain", 2, False), ("scaled", 4, True), ("attributed", 5, False)]


def test_doctor_kernel_is_the_example():
    assert VECTOR_ADD in (REPO / "examples" / "vector_add.hip").read_text()
