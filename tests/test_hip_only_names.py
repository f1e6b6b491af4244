"""HIP names that CUDA lacks, in HIP-dialect source on NVIDIA, and ROCm 6 names the AMD gate's HIP 5.2 headers lack.

Found by compiling AMD-style kernels from outside the course's files: on sm_90, float/double atomicMax and
atomicMin ("no instance of overloaded function"), unsafeAtomicAdd, wall_clock64 and clang's
__builtin_nontemporal_load/store were undefined; on gfx1201 with the gate's headers, __activemask. The prelude
now defines each (runtime/prelude.py says how); the CPU tier compiles them for both vendors and reads the
instructions they became, the GPU tier checks their values.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

import hello_gpu as hg
from hello_gpu.runtime.clang_hip import compile_for_amd, find_clang

EXTREMA = r"""
template <typename T>
__global__ void extrema(const T* x, T* largest, T* smallest, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { atomicMax(largest, x[i]); atomicMin(smallest, x[i]); }
}
template __global__ void extrema<float>(const float*, float*, float*, int);
template __global__ void extrema<double>(const double*, double*, double*, int);
"""

HIP_ONLY = r"""
#include <hip/hip_runtime.h>
__global__ void unsafe_sum(const float* x, float* total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) unsafeAtomicAdd(total, x[i]);
}
__global__ void streamed_twice(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) __builtin_nontemporal_store(2.0f * __builtin_nontemporal_load(x + i), y + i);
}
__global__ void elapsed(long long* ticks, int spins) {
  long long start = wall_clock64();
  float sink = 0.0f;
  for (int s = 0; s < spins; ++s) sink += __sinf(sink + s);
  long long end = wall_clock64();
  ticks[threadIdx.x] = end - start + (sink == 12345.0f);
  ticks[blockDim.x + threadIdx.x] = __popcll(__activemask());
}
"""


def test_each_name_compiles_for_sm90_to_the_instruction_it_stands_for():
    extrema = hg.hip(EXTREMA, entry="extrema<float>", arch="sm_90").asm("ptx")
    assert "atom.global.cas.b32" in extrema                    # the compare-and-swap loop
    double = hg.hip(EXTREMA, entry="extrema<double>", arch="sm_90").asm("ptx")
    assert "atom.global.cas.b64" in double
    def ptx(entry):
        return hg.hip(HIP_ONLY, entry=entry, arch="sm_90").asm("ptx")
    assert "atom.global.add.f32" in ptx("unsafe_sum") or "red.global.add.f32" in ptx("unsafe_sum")
    assert "ld.global.cs.f32" in ptx("streamed_twice") and "st.global.cs.f32" in ptx("streamed_twice")
    assert "%globaltimer" in ptx("elapsed")


@pytest.mark.skipif(find_clang() is None and os.environ.get("HG_REQUIRE_AMD_GATE") != "1",
                    reason="no clang for the AMD gate (scripts/install_amd_compile_tools.sh)")
def test_the_same_source_compiles_for_gfx1201():
    """(HIP 5.2's wall_clock64 returns -1 on gfx12, which lacks s_memrealtime; ROCm 6 reads the constant-rate
    counter there: the header's business, not the prelude's.)"""
    for name, source in (("extrema.hip", EXTREMA), ("hip_only.hip", HIP_ONLY)):
        result = compile_for_amd(source, name=name, arch="gfx1201")
        assert result.ok, result.log
        assert all(f"_Z{len(kernel)}{kernel}" in result.assembly for kernel in (
            ("extrema",) if name == "extrema.hip" else ("unsafe_sum", "streamed_twice", "elapsed")))



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1, 31, 4097, 1 << 20])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_float_atomic_extrema_are_fmax_and_fmin(dtype, n):
    """Fresh values of both signs (a few NaN, which fmax/fmin pass over); the start values poison: +inf for the
    smallest, -inf for the largest, so an element never compared leaves them standing."""
    kernel = hg.hip(EXTREMA, entry="extrema<float>" if dtype == torch.float32 else "extrema<double>")
    x = torch.randn(n, device="cuda", dtype=dtype) * 1e3
    if n > 4:
        x[torch.randperm(n, device="cuda")[:3]] = float("nan")
    largest = torch.full((1,), -math.inf, device="cuda", dtype=dtype)
    smallest = torch.full((1,), math.inf, device="cuda", dtype=dtype)
    kernel(x, largest, smallest, n, block=256, grid=(n + 255) // 256)
    numbers = x[~x.isnan()]
    assert largest.item() == numbers.max().item() and smallest.item() == numbers.min().item()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_unsafe_add_nontemporal_and_the_wall_clock_on_the_gpu():
    program = hg.load(HIP_ONLY)
    n = 1 << 20
    x = torch.rand(n, device="cuda") + 0.5
    total = torch.zeros(1, device="cuda")
    program.unsafe_sum(x, total, n, block=256, grid=n // 256)
    exact = x.double().sum().item()
    assert abs(total.item() - exact) <= 1e-4 * exact        # float32 atomics in any order: ~1e-6 relative
    y = torch.full_like(x, float("nan"))
    program.streamed_twice(x, y, n, block=256, grid=n // 256)
    assert torch.equal(y, 2 * x)
    ticks = torch.zeros(64, device="cuda", dtype=torch.int64)
    program.elapsed(ticks, 100_000, block=32, grid=1)
    assert bool((ticks[:32] > 0).all()), ticks[:32]       # nanoseconds: 100k dependent __sinf take > 10 us
    assert bool((ticks[32:] == 32).all()), ticks[32:]     # every lane of the warp active


COOPERATIVE_SUM = r"""
#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void tile_sum(const float* x, float* total, int n) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  int i = blockIdx.x * blockDim.x + block.thread_rank();
  float v = i < n ? x[i] : 0.0f;
  for (int offset = tile.size() / 2; offset > 0; offset /= 2) v += tile.shfl_down(v, offset);
  if (tile.thread_rank() == 0) atomicAdd(total, v);
  block.sync();
}
"""


def _cuda_dialect(source: str) -> str:
    return (source.replace("hip/hip_runtime.h", "cuda_runtime.h")
            .replace("hip/hip_cooperative_groups.h", "cooperative_groups.h"))


def _cccl_found() -> bool:
    from hello_gpu.runtime.compiler import _nvrtc_include_dirs
    return any(Path(directory, "cuda", "std", "type_traits").is_file() for directory in _nvrtc_include_dirs())


def test_cooperative_groups_compile_for_sm90_in_both_dialects():
    """cooperative_groups.h includes CCCL (libcu++); NVRTC finds it where cuda.pathfinder does."""
    if not _cccl_found():
        pytest.skip("no CCCL headers (cuda/std/type_traits) for NVRTC here: cooperative groups cannot compile")
    assert "shfl.sync.down" in hg.hip(COOPERATIVE_SUM, arch="sm_90").asm("ptx")
    assert "shfl.sync.down" in hg.cuda(_cuda_dialect(COOPERATIVE_SUM), arch="sm_90").asm("ptx")


WARP_SYNC_HIP = r"""
#include <hip/hip_runtime.h>
__global__ void warp_sync_sum(float* x) {
  float v = x[threadIdx.x];
  __syncwarp();
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (__all_sync(0xffffffffu, v == v)) x[threadIdx.x] = v;
}
"""


@pytest.mark.skipif(find_clang() is None and os.environ.get("HG_REQUIRE_AMD_GATE") != "1",
                    reason="no clang for the AMD gate (scripts/install_amd_compile_tools.sh)")
def test_cooperative_groups_and_warp_sync_names_compile_for_gfx1201_in_both_dialects():
    """HIP-dialect __syncwarp and *_sync (ROCm 7's, absent from the gate's HIP 5.2) failed; CUDA-dialect
    <cooperative_groups.h> was not found on AMD."""
    for name, source, dialect in (("cg.hip", COOPERATIVE_SUM, "hip"), ("cg.cu", _cuda_dialect(COOPERATIVE_SUM), "cuda"),
                                  ("sync.hip", WARP_SYNC_HIP, "hip")):
        result = compile_for_amd(source, name=name, dialect=dialect, arch="gfx1201")
        assert result.ok, f"{name}:\n{result.log}"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_cooperative_groups_sum_on_the_gpu():
    if not _cccl_found():
        pytest.skip("no CCCL headers (cuda/std/type_traits) for NVRTC on this GPU machine: cooperative groups "
                    "cannot compile here (the CPU tier compiles them where CCCL is installed)")
    kernel = hg.hip(COOPERATIVE_SUM)
    n = 4097
    x = torch.rand(n, device="cuda") + 0.5
    total = torch.zeros(1, device="cuda")
    kernel(x, total, n, block=256, grid=(n + 255) // 256)
    exact = x.double().sum().item()
    assert abs(total.item() - exact) <= 1e-5 * exact


DEVICE_PASS = r"""
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#if !defined(__HIPCC__) || !defined(__HIP_DEVICE_COMPILE__)
#error "not hipcc's device pass"
#endif
__global__ void half_extrema(__half* y, const __half* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    __half2 pair = __halves2half2(x[i], __hneg(x[i]));
    y[i] = __hadd(__hmax(x[i], __float2half_rn(0.0f)), __low2half(__hmin2(pair, __hmax2(pair, pair))));
  }
}
"""


def test_the_device_pass_macros_and_half_extrema_compile_on_both_vendors():
    """hipcc defines __HIPCC__ and, in the device pass, __HIP_DEVICE_COMPILE__; NVRTC had neither, so
    `#ifdef __HIP_DEVICE_COMPILE__` took the host branch on NVIDIA. __hmax/__hmin (and their half2 forms) are
    missing from the gate's HIP 5.2 <hip/hip_fp16.h>."""
    assert "max.f16" in hg.hip(DEVICE_PASS, arch="sm_90").asm("ptx")
    if find_clang() is None and os.environ.get("HG_REQUIRE_AMD_GATE") != "1":
        pytest.skip("no clang for the AMD gate (scripts/install_amd_compile_tools.sh)")
    result = compile_for_amd(DEVICE_PASS, name="device_pass.hip", arch="gfx1201")
    assert result.ok, result.log
