"""AMD compile gate (CPU tier): kernels must compile for AMD targets with a stock clang, no GPU.

Needs clang-19 and the HIP headers (scripts/install_amd_compile_tools.sh). Skipped without them,
unless HG_REQUIRE_AMD_GATE=1, where a missing toolchain is a failure (CI sets it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hello_gpu.runtime.clang_hip import compile_for_amd, find_clang

_missing = []
if find_clang() is None:
    _missing.append("no clang (set HG_CLANG, or install clang-19)")
if not os.path.isfile("/usr/include/hip/hip_runtime.h"):
    _missing.append("no /usr/include/hip/hip_runtime.h (install libamdhip64-dev)")
if _missing:
    reason = "AMD compile gate: " + "; ".join(_missing) + "; run scripts/install_amd_compile_tools.sh"
    if os.environ.get("HG_REQUIRE_AMD_GATE") == "1":
        pytest.fail(reason + " (HG_REQUIRE_AMD_GATE=1)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def _compiled(result):
    assert result.ok, f"compile for {result.arch} failed:\n{result.log}\n{' '.join(result.command)}"
    return result


VECTOR_ADD = """\
extern "C" __global__ void hg_vadd(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""


def test_hip_vector_add_with_int64_compiles_for_gfx1201():
    result = _compiled(compile_for_amd(VECTOR_ADD, name="vadd.hip", arch="gfx1201"))
    assert result.arch == "gfx1201"
    assert "hg_vadd" in result.assembly
    assert "global_load" in result.assembly
    assert result.seconds > 0


WARP_SUM = """\
__global__ void hg_warp_sum(const float* x, float* out) {
  float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) v += __shfl_down(v, offset);
  if (threadIdx.x % HG_WARP_SIZE == 0) atomicAdd(out, v);
}
"""


@pytest.mark.parametrize("arch", ["gfx1201", "gfx942"])
def test_hip_shuffle_reduction_compiles(arch):
    result = _compiled(compile_for_amd(WARP_SUM, arch=arch))
    assert "hg_warp_sum" in result.assembly


@pytest.mark.parametrize("arch, wave", [("gfx1201", 32), ("gfx942", 64)])
def test_warp_size_is_the_targets_wavefront(arch, wave):
    # RDNA (gfx12) runs wave32, CDNA (gfx9) wave64; HG_WARP_SIZE must be a constant expression.
    source = "static_assert(HG_WARP_SIZE == {}, \"wave size\");\n"
    _compiled(compile_for_amd(source.format(wave), arch=arch))
    wrong = compile_for_amd(source.format(96 - wave), arch=arch)
    assert not wrong.ok
    assert "static assertion failed" in wrong.log


CUDA_BF16_SUM = """\
__global__ void hg_bf16_sum(const __nv_bfloat16* x, float* out) {
  float v = static_cast<float>(x[threadIdx.x]);
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffff, v, o);
  __syncwarp();
  if (threadIdx.x == 0) *out = v;
}
"""


def test_cuda_dialect_compiles_through_reverse_prelude():
    result = _compiled(
        compile_for_amd(CUDA_BF16_SUM, name="bf16_sum.cu", dialect="cuda", arch="gfx1201")
    )
    assert "hg_bf16_sum" in result.assembly


def test_error_reports_users_file_and_line():
    source = "__global__ void hg_broken(float* p) {\n  float x = 1.0f;\n  p[0] = x + not_declared;\n}\n"
    result = compile_for_amd(source, name="broken.hip")
    assert not result.ok
    assert result.assembly == ""
    assert "broken.hip:3:" in result.log
    assert "not_declared" in result.log
    assert "hg_amd_" not in result.log  # no temp dir paths leak into the log


def test_defines_and_fast_math():
    source = """\
static_assert(BLOCK == 128, "BLOCK comes from defines");
__global__ void hg_scale(float* p) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  p[i] = __expf(p[i]) / SCALE;
}
"""
    result = _compiled(
        compile_for_amd(source, defines={"BLOCK": "128", "SCALE": "3.0f"}, fast_math=True)
    )
    assert "-ffast-math" in result.command
    assert "-DBLOCK=128" in result.command
    assert "hg_scale" in result.assembly
    # IEEE float division expands to v_div_scale/v_div_fixup; fast math turns it into a multiply.
    assert "v_div_scale" not in result.assembly
    precise = _compiled(compile_for_amd(source, defines={"BLOCK": "128", "SCALE": "3.0f"}))
    assert "v_div_scale" in precise.assembly
    assert not compile_for_amd(source, defines={"BLOCK": "64", "SCALE": "3.0f"}).ok


STANDARD_NAMES = (Path(__file__).parent / "fixtures" / "runtime" / "standard_names.hip").read_text()


@pytest.mark.parametrize("arch, dialect", [("gfx1201", "hip"), ("gfx942", "hip"), ("gfx1201", "cuda")])
def test_standard_names_compile_for_amd_with_their_values(arch, dialect):
    # The same static_asserts as on NVIDIA (tests/test_compiler.py): the values of INFINITY, FLT_MAX,
    # std::numeric_limits... from the real C/C++ headers agree with the NVIDIA prelude's.
    name = "standard_names.hip" if dialect == "hip" else "standard_names.cu"
    result = _compiled(compile_for_amd(STANDARD_NAMES, name=name, dialect=dialect, arch=arch))
    # size_t is unsigned long (m), ptrdiff_t and <cstdint>'s int64_t are long (l), uint32_t unsigned (j).
    assert ".amdhsa_kernel _Z1kPKfPfmllj" in result.assembly


def test_kernels_in_namespaces_are_emitted():
    source = """\
namespace { __global__ void hidden(float* x) { x[threadIdx.x] = 1.0f; } }
namespace course { __global__ void named(float* x) { x[threadIdx.x] = 2.0f; } }
"""
    result = _compiled(compile_for_amd(source, name="spaces.hip"))
    assert ".amdhsa_kernel _ZN12_GLOBAL__N_16hiddenEPf" in result.assembly
    assert ".amdhsa_kernel _ZN6course5namedEPf" in result.assembly


ROCM6_BFLOAT16 = """\
#include <hip/hip_runtime.h>
#include <hip/hip_bf16.h>
__global__ void hg_bf16_scale(__hip_bfloat16* y, const __hip_bfloat16* x, const __hip_bfloat16* w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    __hip_bfloat162 pair = __floats2bfloat162_rn(__bfloat162float(x[i]), __low2float(__bfloat162bfloat162(w[i])));
    float2 both = __bfloat1622float2(pair);
    y[i] = __hfma(__float2bfloat16(both.x), __hmul(w[i], x[i]), __hmax(x[i], __hneg(w[i])));
  }
}
"""


def test_rocm6_bfloat16_names_compile_on_the_gates_older_headers():
    """The gate's HIP 5.2 headers have no <hip/hip_bf16.h> (ROCm 6's bfloat16 API, which a kernel written for an
    RX 9070 XT uses): before the gate served one, this failed with "'hip/hip_bf16.h' file not found"."""
    result = _compiled(compile_for_amd(ROCM6_BFLOAT16, name="bf16.hip", arch="gfx1201"))
    assert "hg_bf16_scale" in result.assembly
    cuda = ROCM6_BFLOAT16.replace("hip/hip_runtime.h", "cuda_runtime.h").replace("hip/hip_bf16.h", "cuda_bf16.h")
    cuda = cuda.replace("__hip_bfloat162", "__nv_bfloat162").replace("__hip_bfloat16", "__nv_bfloat16")
    assert "hg_bf16_scale" in _compiled(compile_for_amd(cuda, name="bf16.cu", dialect="cuda", arch="gfx1201")).assembly
