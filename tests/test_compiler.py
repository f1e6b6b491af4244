"""Compiling without a GPU: NVRTC to sm_90 cubin, the HIP prelude, options, cache, errors, resources."""

import os
from pathlib import Path

import pytest

import hello_gpu as hg
from hello_gpu.runtime import compiler
from hello_gpu.runtime.clang_hip import INSTALL_HINT, find_clang
from hello_gpu.runtime.device import gpu_vendor

VECTOR_ADD = r"""
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""

WARP_SUM = r"""
__global__ void warp_sum(const float* x, float* out, int n) {
  static_assert(HG_WARP_SIZE == 32, "NVIDIA warps are 32 wide");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) v += __shfl_down(v, offset);
  if ((threadIdx.x & (HG_WARP_SIZE - 1)) == 0) atomicAdd(out, v);
  unsigned long long lanes = __ballot(v > 0.0f);
  if (lanes == 0 && __lane_id() == 99) out[1] = __shfl_xor(v, 1) + __shfl(v, 0) + __shfl_up(v, 1);
}
"""


def test_readme_kernel_compiles_to_sm90_cubin():
    kernel = hg.hip(VECTOR_ADD, entry="vector_add", arch="sm_90")
    binary = kernel.binary
    assert binary.image[:4] == b"\x7fELF"                      # a cubin is an ELF file
    assert binary.arch == "sm_90" and binary.lowered_name == "_Z10vector_addPKfS0_Pfi"
    assert ".target sm_90" in kernel.asm("ptx")
    assert "ld.global" in binary.ptx


def test_hip_shuffles_without_sync_compile_on_nvidia():
    kernel = hg.hip(WARP_SUM, arch="sm_90")
    assert "shfl.sync.down" in kernel.asm("ptx") and "vote.sync.ballot" in kernel.asm("ptx")


def test_course_style_hip_include_and_names():
    source = "#include <hip/hip_runtime.h>\n" + VECTOR_ADD.replace("blockIdx.x", "hipBlockIdx_x")
    assert hg.hip(source, arch="sm_90").binary.image


def test_cuda_dialect_and_sm90a():
    source = r"""
    #include <cuda_bf16.h>
    __global__ void to_bf16(const float* x, __nv_bfloat16* y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] = __float2bfloat16(__shfl_down_sync(0xffffffffu, x[i], 0));
    }"""
    kernel = hg.cuda(source, arch="sm_90a")
    assert kernel.binary.arch == "sm_90a" and kernel.signature.parameters[1].dtype == "bfloat16"


def test_template_instantiated_by_name():
    source = "template <typename T, int BLOCK>\n__global__ void scale(const T* x, T* y, T alpha, int n) {\n" \
             "  int i = blockIdx.x * BLOCK + threadIdx.x; if (i < n) y[i] = alpha * x[i];\n}"
    kernel = hg.hip(source, entry="scale<double, 128>", arch="sm_90")
    assert kernel.binary.lowered_name == "_Z5scaleIdLi128EEvPKT_PS0_S0_i"


def test_compile_error_points_at_the_users_line():
    broken = VECTOR_ADD.replace("a[i] + b[i]", "a[i] + missing_value")
    with pytest.raises(hg.CompileError) as caught:
        hg.hip(broken, arch="sm_90")
    text = str(caught.value)
    assert "vector_add.hip:4:" in text and 'identifier "missing_value" is undefined' in text
    lines = text.splitlines()
    code_line = next(line for line in lines if "missing_value;" in line)
    caret_line = lines[lines.index(code_line) + 1]
    assert code_line.lstrip().startswith("4 |")
    assert caret_line.index("^") == code_line.index("missing_value")    # the caret sits under the name
    assert "hello_gpu_prelude" not in text


def test_defines_std_include_dirs_and_optimisation(tmp_path):
    (tmp_path / "scale.h").write_text("#define SCALE 3.0f\n")
    source = r"""
    #include "scale.h"
    __global__ void k(float* x) {
      static_assert(BLOCK == 128, "BLOCK comes from -D");
      if constexpr (BLOCK > 64) x[threadIdx.x] *= SCALE;
    }"""
    kernel = hg.hip(source, arch="sm_90", defines={"BLOCK": 128}, std="c++17", include_dirs=[tmp_path],
                    optimization="-O2")
    assert kernel.binary.image
    with pytest.raises(hg.CompileError, match="BLOCK comes from -D"):
        hg.hip(source, arch="sm_90", defines=["BLOCK=64"], include_dirs=[tmp_path])
    with pytest.raises(hg.CompileError):          # `if constexpr` needs C++17
        hg.hip(source, arch="sm_90", defines=["BLOCK=128"], std="c++14", include_dirs=[tmp_path])
    with pytest.raises(ValueError, match="optimization must be one of"):
        hg.hip(source, arch="sm_90", optimization="-O9")


def test_fast_math_changes_the_code():
    source = "__global__ void k(const float* x, float* y) { y[threadIdx.x] = expf(x[threadIdx.x]) / x[0]; }"
    exact = hg.hip(source, arch="sm_90").asm("ptx")
    fast = hg.hip(source, arch="sm_90", fast_math=True).asm("ptx")
    assert "div.approx" in fast and "div.rn" in exact


def test_disk_cache_hits_and_misses():
    first = hg.hip(VECTOR_ADD + "// cache probe 1\n", arch="sm_90").binary
    again = hg.hip(VECTOR_ADD + "// cache probe 1\n", arch="sm_90").binary
    other = hg.hip(VECTOR_ADD + "// cache probe 1\n", arch="sm_90", defines={"X": 1}).binary
    assert not first.cache_hit and again.cache_hit and not other.cache_hit
    assert again.image == first.image and again.lowered_name == first.lowered_name
    assert first.key != other.key


def test_editing_an_included_header_never_serves_a_stale_binary(tmp_path, monkeypatch):
    """The cache key holds the bytes of every header the source includes from its include dirs,
    also through another header, the nested one found beside the header that includes it."""
    monkeypatch.setenv("HG_CACHE_DIR", str(tmp_path / "cache"))
    shared, nested = tmp_path / "shared", tmp_path / "shared" / "deeper"
    nested.mkdir(parents=True)
    (shared / "outer.h").write_text('#include "deeper/inner.h"\n')
    (nested / "inner.h").write_text("#define SCALE 2.0f\n")
    source = '#include "outer.h"\n__global__ void k(float* x) { x[threadIdx.x] *= SCALE; }\n'

    def compiled():
        return hg.hip(source, arch="sm_90", include_dirs=[shared]).binary

    first, again = compiled(), compiled()
    assert not first.cache_hit and again.cache_hit
    assert compiler.included_headers(source, [shared]) == [(shared / "outer.h").resolve(),
                                                           (nested / "inner.h").resolve()]
    (nested / "inner.h").write_text("#define SCALE 3.0f\n")
    edited = compiled()
    assert not edited.cache_hit and edited.key != first.key
    assert "0f40400000" in edited.ptx                        # 3.0f, in the binary compiled anew
    assert "0f40400000" not in first.ptx


def test_torn_cache_entry_is_recompiled():
    binary = hg.hip(VECTOR_ADD + "// cache probe 2\n", arch="sm_90").binary
    image_path = compiler.cache_dir() / f"{binary.key}.bin"
    image_path.write_bytes(binary.image[:100])          # as if a writer died half-way
    rebuilt = hg.hip(VECTOR_ADD + "// cache probe 2\n", arch="sm_90").binary
    assert not rebuilt.cache_hit and rebuilt.image == binary.image


def test_cache_key_covers_compiler_and_arch():
    options = compiler.CompileOptions.make()
    keys = {compiler.cache_key("s", "k", "hip", "nvidia", arch, options, version)
            for arch in ("sm_90", "sm_90a") for version in ("nvrtc-13.0", "nvrtc-13.5")}
    assert len(keys) == 4


def test_resources_report_registers_and_spills():
    spilling = r"""
    __global__ void k(const float* x, float* y, int index) {
      float local[256];
      for (int i = 0; i < 256; ++i) local[i] = x[i * threadIdx.x];
      y[threadIdx.x] = local[index & 255];      // a run-time index sends the array to local memory
    }"""
    resources = hg.hip(spilling, arch="sm_90").resources
    assert resources.registers_per_thread > 0 and resources.local_bytes >= 1024
    plain = hg.hip(VECTOR_ADD, arch="sm_90")
    assert plain.resources.local_bytes == 0 and plain.resources.spill_store_bytes == 0
    occupancy = plain.occupancy(256)
    assert occupancy.blocks_per_sm == 8 and occupancy.fraction == 1.0


def test_sass_when_a_disassembler_is_present():
    kernel = hg.hip(VECTOR_ADD, arch="sm_90")
    try:
        sass = kernel.asm("sass")
    except FileNotFoundError:
        pytest.skip("no cuobjdump/nvdisasm here (install triton or the CUDA toolkit)")
    assert "LDG.E" in sass and "vector_add" in sass


@pytest.mark.skipif(gpu_vendor() is not None, reason="checks the no-GPU behaviour")
def test_without_gpu_or_arch_the_kernel_is_compiled_for_a_check_target():
    kernel = hg.hip(VECTOR_ADD)
    assert kernel.binary.arch == "sm_90" and kernel.checked_only
    assert "compiled for sm_90 as a check (no GPU visible)" in repr(kernel)
    broken = VECTOR_ADD.replace("a[i] + b[i]", "a[i] + missing_value")
    with pytest.raises(hg.CompileError) as caught:         # at definition, not at the first call
        hg.hip(broken)
    assert "vector_add.hip:4:" in str(caught.value)
    assert "compiled for sm_90 as a check, since no GPU is visible" in str(caught.value)


@pytest.mark.skipif(find_clang() is None, reason=f"no clang for the AMD path ({INSTALL_HINT})")
def test_amd_arch_without_hip_python_compiles_through_clang():
    if compiler.hip_python_available():
        pytest.skip("hip-python is installed: gfx targets compile through hipRTC here")
    kernel = hg.hip(VECTOR_ADD, arch="gfx1201")
    assert (kernel.binary.vendor, kernel.binary.arch) == ("amd", "gfx1201")
    assert kernel.binary.lowered_name == "_Z10vector_addPKfS0_Pfi"
    assert ".amdhsa_kernel _Z10vector_addPKfS0_Pfi" in kernel.asm("isa")
    broken = VECTOR_ADD.replace("a[i] + b[i]", "a[i] + missing_value")
    with pytest.raises(hg.CompileError, match=r"vector_add.hip:4:\d+: error: use of undeclared identifier"):
        hg.hip(broken, arch="gfx1201")


# Every standard name the course's kernels use, with its value checked by static_asserts.
STANDARD_NAMES = (Path(__file__).parent / "fixtures" / "runtime" / "standard_names.hip").read_text()


@pytest.mark.parametrize("dialect", ["hip", "cuda"])
def test_standard_names_compile_for_sm90_with_their_values(dialect):
    kernel = hg.Kernel(STANDARD_NAMES, dialect=dialect, arch="sm_90")
    assert kernel.binary.image
    # Packed as their real widths: size_t 8 bytes unsigned, ptrdiff_t 8 signed, uint32_t 4.
    assert [p.dtype for p in kernel.signature.parameters[2:]] == ["uint64", "int64", "int64", "uint32"]
    assert kernel.binary.lowered_name == "_Z1kPKfPfmlxj"      # m: unsigned long, l: long, x: long long


def test_a_wrong_value_fails_the_standard_names_check():
    # The static_asserts above can fail: one wrong value is a compile error.
    with pytest.raises(hg.CompileError, match="float max"):
        hg.hip(STANDARD_NAMES.replace("FLT_MAX == 3.40282347e+38F", "FLT_MAX == 3.4e+38F"), arch="sm_90")


def test_the_prelude_does_not_shift_line_numbers():
    # Every standard header included, then an error on line 9.
    lines = STANDARD_NAMES.splitlines()
    source = lines[:lines.index("#include <algorithm>") + 1] + ["__global__ void k(float* x) { x[0] = undeclared; }"]
    with pytest.raises(hg.CompileError) as caught:
        hg.hip("\n".join(source), arch="sm_90")
    assert f"k.hip:{len(source)}:" in str(caught.value) and len(source) == 10


NAMESPACED = r"""
namespace {
__global__ void hidden(float* x) { x[threadIdx.x] = 1.0f; }
}
namespace course { namespace v2 {
__global__ void named(float* x) { x[threadIdx.x] = 2.0f; }
template <int K> __global__ void scaled(float* x) { x[threadIdx.x] *= K; }
} }
"""


def test_kernels_in_namespaces_get_the_symbol_nvrtc_names():
    hidden = hg.hip(NAMESPACED, entry="hidden", arch="sm_90", name="spaces.hip")
    # An anonymous namespace's mangling hashes the file name: only the compiler can say it.
    assert hidden.binary.lowered_name.startswith("_ZN") and "_GLOBAL__N_" in hidden.binary.lowered_name
    assert hidden.binary.lowered_name.endswith("6hiddenEPf")
    assert f".entry {hidden.binary.lowered_name}(" in hidden.binary.ptx
    named = hg.hip(NAMESPACED, entry="named", arch="sm_90")
    assert named.binary.lowered_name == "_ZN6course2v25namedEPf"
    scaled = hg.hip(NAMESPACED, entry="course::v2::scaled<3>", arch="sm_90")
    assert scaled.binary.lowered_name == "_ZN6course2v26scaledILi3EEEvPf"


def test_one_program_many_entries():
    source = VECTOR_ADD + NAMESPACED
    binary = compiler.compile_source(source, ("vector_add", "course::v2::named"), file_name="two.hip", dialect="hip",
                                     vendor="nvidia", arch="sm_90", options=compiler.CompileOptions.make(),
                                     use_cache=False)
    assert binary.lowered_names == {"vector_add": "_Z10vector_addPKfS0_Pfi",
                                    "course::v2::named": "_ZN6course2v25namedEPf"}
    named = binary.for_entry("course::v2::named")
    assert named.lowered_name == "_ZN6course2v25namedEPf" and named.image == binary.image
    # Each view's log holds its own kernel's ptxas report only.
    assert "_ZN6course2v25namedEPf" in named.log and "_Z10vector_addPKfS0_Pfi" not in named.log
    with pytest.raises(KeyError, match="was not compiled here"):
        binary.for_entry("hidden")


def test_cache_dir_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HG_CACHE_DIR", str(tmp_path))
    hg.hip(VECTOR_ADD + "// cache probe 3\n", arch="sm_90").compile()
    assert any(Path(tmp_path).glob("*.bin")) and os.listdir(tmp_path)


def test_arguments_are_packed_in_eight_byte_slots_as_their_c_types():
    import numpy as np
    import torch
    kernel = hg.hip("__global__ void k(const float* x, float alpha, double beta, int n, bool flag) {}", arch="sm_90")
    x = torch.randn(4)
    slots, addresses = kernel._pack({"x": x, "alpha": 0.1, "beta": 0.1, "n": -7, "flag": True})
    raw = slots.view(np.uint8)
    assert slots[0] == x.data_ptr()
    assert raw[8:12].view(np.float32)[0] == np.float32(0.1)       # a float, not a double's first half
    assert raw[16:24].view(np.float64)[0] == 0.1
    assert raw[24:28].view(np.int32)[0] == -7 and raw[32] == 1
    assert list(addresses - slots.ctypes.data) == [0, 8, 16, 24, 32]
