"""Whole course-style programs (CPU tier): host code left out with every line kept, every kernel of a
file loaded by ``hg.load``, compiled for sm_90 (NVRTC) and gfx1201 (clang), no GPU needed."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import hello_gpu as hg
from hello_gpu.runtime import compile_gate
from hello_gpu.runtime.clang_hip import INSTALL_HINT, find_clang
from hello_gpu.runtime.compiler import hip_python_available
from hello_gpu.runtime.program import ProgramError, device_source

REPO = Path(__file__).resolve().parents[1]
COURSE = REPO / "examples" / "course_kernels.hip"
AMD_TOOLS = find_clang() is not None and os.path.isfile("/usr/include/hip/hip_runtime.h")
KERNELS = ["vector_add_v1", "vector_add_v2_grid_stride", "vector_add_v3_float4", "block_sum_shared",
           "row_max_finite", "row_softmax", "course::scale_clamp", "tiled"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def course_sm90():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HG_CACHE_DIR", os.environ.get("HG_CACHE_DIR", "/tmp/hg-test-program-cache"))
        return hg.load(COURSE, arch="sm_90")


def test_host_code_is_blanked_and_every_line_keeps_its_number():
    source = COURSE.read_text()
    device = device_source(source, COURSE.name)
    assert len(device.text) == len(source)
    original, kept = source.splitlines(), device.text.splitlines()
    assert len(kept) == len(original)
    for number, (before, after) in enumerate(zip(original, kept), start=1):
        assert after == before or after.strip() == "", f"line {number} changed instead of being blanked"
    main_line = next(i for i, line in enumerate(original) if line.startswith("int main()"))
    assert kept[main_line].strip() == "" and "hipMalloc(&" not in device.text and "std::vector" not in device.text
    assert [str(part) for part in device.left_out] == [
        "line 17: #include <cstdlib>", "line 19: #include <vector>", f"line {main_line - 5}: function fill_random()",
        f"line {main_line + 1}: function main()"]
    # What device code uses stays: the kernels, the helper in the anonymous namespace, the constant, the macro.
    for needed in ("constexpr int kBlockSize = 256;", "__device__ float block_max", "#include <cstdio>",
                   "#define HIP_CHECK(call)", "namespace course {"):
        assert needed in device.text
    assert [kernel.qualified_name for kernel in device.kernels] == KERNELS


def test_every_rung_and_example_without_host_code_compiles_unchanged():
    """Kernel files with no host code must reach the compiler byte for byte (their records hash them)."""
    files = [*REPO.glob("src/hello_gpu/ops/**/*.hip"), *REPO.glob("src/hello_gpu/ops/include/*.h"),
             *REPO.glob("examples/*.hip"), *REPO.glob("examples/*.cu")]
    assert len(files) > 20
    for path in files:
        source = path.read_text()
        device = device_source(source, path.name)
        if path != COURSE:
            assert not device.has_host_code and device.text == source, f"{path}: {device.left_out}"


def test_load_gives_every_kernel_by_name(course_sm90):
    module = course_sm90
    assert module.kernels == KERNELS and module.templates == ["tiled"]
    v3 = module.vector_add_v3_float4
    assert isinstance(v3, hg.Kernel) and v3.binary.arch == "sm_90"
    assert [(p.name, p.c_type, p.dtype) for p in v3.signature.parameters] == [
        ("a", "const float*", "float32"), ("b", "const float*", "float32"), ("c", "float*", "float32"),
        ("n", "std::size_t", "uint64")]
    assert v3.signature.parameters[3].is_size                   # n defaults to the first input's numel
    # One NVRTC program for all of them; each kernel's symbol comes from NVRTC's name expressions.
    binaries = [module[name].binary for name in KERNELS[:-1]]
    assert len({binary.image for binary in binaries}) == 1
    assert module.scale_clamp is module["course::scale_clamp"]
    assert module.scale_clamp.binary.lowered_name == "_ZN6course11scale_clampEPKfPffffl"
    softmax = module.row_softmax.binary.lowered_name
    assert "_GLOBAL__N_" in softmax and softmax.endswith("11row_softmaxEPKfPfii")
    for binary in binaries:
        assert f".entry {binary.lowered_name}(" in binary.ptx
        assert binary.log.count("Compiling entry function") == 1   # its own ptxas report only
    assert module.row_softmax.resources.static_shared_bytes == 256 * 4
    assert "vector_add_v1" in dir(module) and "tiled" in module


def test_a_template_is_instantiated_by_name(course_sm90):
    tiled = course_sm90["tiled<16>"]
    assert tiled.binary.lowered_name == "_Z5tiledILi16EEvPKfS1_Pfiii"
    assert course_sm90["tiled< 16 >"] is tiled
    assert tiled.resources.static_shared_bytes == 2 * 16 * 16 * 4
    with pytest.raises(AttributeError, match=r"'tiled' is a template kernel; instantiate it by name: "
                                             r"module\["):
        course_sm90.tiled
    with pytest.raises(AttributeError, match=r"has no kernel 'vector_add_v9'; kernels: vector_add_v1, "):
        course_sm90.vector_add_v9


@pytest.mark.skipif(not AMD_TOOLS, reason=f"AMD compile gate: no clang-19 or HIP headers; {INSTALL_HINT}")
def test_load_for_gfx1201_through_clang():
    if hip_python_available():
        pytest.skip("hip-python is installed: gfx targets compile through hipRTC here")
    module = hg.load(COURSE, arch="gfx1201")
    assembly = module.vector_add_v1.asm("isa")
    assert '.amdgcn_target "amdgcn-amd-amdhsa--gfx1201"' in assembly
    symbols = re.findall(r"^\s*\.amdhsa_kernel\s+(\S+)", assembly, flags=re.M)
    assert {module[name].binary.lowered_name for name in KERNELS[:-1]} == set(symbols)
    assert module["tiled<16>"].binary.lowered_name == "_Z5tiledILi16EEvPKfS1_Pfiii"


def test_hip_takes_a_whole_program_with_an_entry():
    kernel = hg.hip(COURSE.read_text(), entry="vector_add_v2_grid_stride", arch="sm_90", name=COURSE.name)
    assert kernel.binary.lowered_name == "_Z25vector_add_v2_grid_stridePKfS0_Pfm"
    assert [part.what for part in kernel.left_out][-1] == "function main()"


def test_a_compile_error_points_at_the_files_own_line(tmp_path):
    source = COURSE.read_text().replace("c[i] = a[i] + b[i];\n  }\n}", "c[i] = a[i] + b[i] + oops;\n  }\n}", 1)
    path = tmp_path / "broken_course.hip"
    path.write_text(source)
    line = next(number for number, text in enumerate(source.splitlines(), start=1) if "oops" in text)
    with pytest.raises(hg.CompileError) as caught:
        hg.load(path, arch="sm_90")
    assert f"broken_course.hip:{line}:" in str(caught.value) and "oops" in str(caught.value)


def test_a_file_with_no_kernel_says_so(tmp_path):
    path = tmp_path / "host_only.hip"
    path.write_text("#include <cstdio>\nint main() { std::printf(\"hi\\n\"); return 0; }\n")
    with pytest.raises(ProgramError, match=r"host_only.hip: no __global__ kernel found"):
        hg.load(path, arch="sm_90")


MACRO_KERNELS = """\
#include <hip/hip_runtime.h>
#define MAKE_SCALE(NAME, FACTOR) \\
  __global__ void NAME(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= FACTOR; }
MAKE_SCALE(twice, 2.0f)
MAKE_SCALE(thrice, 3.0f)
int main() { return 0; }
"""


def test_kernels_hidden_behind_macros_are_refused_by_name(tmp_path):
    path = tmp_path / "macros.hip"
    path.write_text(MACRO_KERNELS)
    with pytest.raises(ProgramError, match=r"the macro MAKE_SCALE \(line 2\) expands to a __global__ kernel"):
        hg.load(path, arch="sm_90")
    report = compile_gate.check([path], arch="sm_90", amd=False)
    (row,) = report.kernels
    assert row.nvidia.status == "fail" and "MAKE_SCALE" in row.nvidia.error and not report.ok


def test_a_kernel_that_cannot_be_called_does_not_stop_the_others():
    source = ("struct Pair { float a, b; };\n"
              "__global__ void takes_pair(Pair p, float* out) { out[0] = p.a + p.b; }\n"
              "__global__ void plain(float* out) { out[threadIdx.x] = 1.0f; }\n")
    with pytest.warns(UserWarning, match="1 kernel\\(s\\) cannot be called from Python"):
        module = hg.load(source, arch="sm_90", name="pairs.hip")
    assert module.plain.binary.lowered_name == "_Z5plainPf"
    with pytest.raises(hg.SignatureError, match="'Pair' is a struct or class"):
        module.takes_pair


def test_the_gate_instantiates_what_main_launches(tmp_path):
    source = COURSE.read_text()
    assert compile_gate.launched_instantiations(source, ["tiled"]) == ["tiled<16>"]
    launches = "tiled<32><<<grid, block>>>(a, b, c, m, n, k);\nhipLaunchKernelGGL(tiled<8>, grid, block, 0, 0);\n"
    assert compile_gate.launched_instantiations(launches, ["tiled"]) == ["tiled<32>", "tiled<8>"]
    plan = compile_gate.plan_file(source)
    assert [(entry, status) for _, entry, status, _ in plan][-1] == ("tiled<16>", "compile")


def test_the_gate_lists_a_file_without_kernels_as_skipped(tmp_path):
    path = tmp_path / "host.hip"
    path.write_text("int main() { return 0; }\n")
    report = compile_gate.check([path], arch="sm_90", amd=False)
    (row,) = report.kernels
    assert row.skipped and row.nvidia.error == "no __global__ kernel in this file"


def test_text_the_reader_cannot_place_is_left_to_the_compiler():
    # Braces behind macros: the reader keeps what it cannot classify, and the kernel compiles as written.
    source = "#define OPEN {\n#define CLOSE }\n__global__ void k(float* x) OPEN x[0] = 1.0f; CLOSE\n"
    assert device_source(source).text == source
    assert hg.hip(source, arch="sm_90").binary.lowered_name == "_Z1kPf"


def test_a_vector_typedef_that_a_kernel_names_is_kept():
    """The name of `typedef T Name __attribute__((ext_vector_type(8)))` is Name, not the attribute's word:
    the typedefs of matmul v15_rdna4_wmma (gfx12 WMMA fragments) are device types, kept."""
    source = ("typedef short Short8 __attribute__((ext_vector_type(8)));\n"
              "typedef float Unused4 __attribute__((ext_vector_type(4)));\n"
              "__global__ void k(Short8* x) { x[0] = x[1]; }\n")
    device = device_source(source)
    assert device.text.splitlines()[0] == source.splitlines()[0]
    assert [str(part) for part in device.left_out] == ["line 2: type Unused4"]


def test_namespace_aliases_and_using_declarations_are_kept():
    """`namespace cg = cooperative_groups;` was read as a host variable and blanked, so every cg:: name in the
    kernels failed ("use of undeclared identifier 'cg'") in a file that also held main()."""
    source = ("#include <hip/hip_runtime.h>\n#include <hip/hip_cooperative_groups.h>\n#include <vector>\n"
              "namespace cg = cooperative_groups;\nusing std::min;\n"
              "__global__ void k(float* x) { cg::this_thread_block().sync(); x[0] = min(x[0], 1.0f); }\n"
              "int main() { std::vector<float> h(4); return 0; }\n")
    device = device_source(source)
    kept = device.text.splitlines()
    assert kept[3] == "namespace cg = cooperative_groups;" and kept[4] == "using std::min;"
    assert [str(part) for part in device.left_out] == ["line 3: #include <vector>", "line 7: function main()"]


def test_a_constant_that_main_launches_a_template_with_is_kept(tmp_path):
    """`tiled_copy<kThreads><<<...>>>` in main(), kThreads named by no kernel: the constant was left out with
    the host code, and the instantiation failed ("identifier kThreads is undefined")."""
    source = ("#include <hip/hip_runtime.h>\n#include <vector>\nconstexpr int kThreads = 128;\nconstexpr int kUnused = 3;\n"
              "template <int BLOCK> __global__ void tiled_copy(const float* x, float* y, int n) {\n"
              "  __shared__ float tile[BLOCK]; int i = blockIdx.x * BLOCK + threadIdx.x;\n"
              "  tile[threadIdx.x] = i < n ? x[i] : 0.0f; __syncthreads(); if (i < n) y[i] = tile[threadIdx.x]; }\n"
              "int main() { std::vector<float> h(4); tiled_copy<kThreads><<<1, kThreads>>>(nullptr, nullptr, 0); }\n")
    device = device_source(source)
    assert "constexpr int kThreads = 128;" in device.text and "kUnused" not in device.text
    path = tmp_path / "launch.hip"
    path.write_text(source)
    report = compile_gate.check([path], arch="sm_90", amd=AMD_TOOLS)
    (row,) = report.kernels
    assert row.kernel == "tiled_copy<kThreads>" and row.nvidia.status == "ok", row.nvidia.error
    if AMD_TOOLS:
        assert row.amd.status == "ok", row.amd.error
