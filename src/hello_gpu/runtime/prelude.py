"""Preludes: the few lines that let one kernel source compile on both vendors.

A HIP-dialect kernel compiled on NVIDIA gets a header mapping HIP names onto CUDA ones (the
unsynchronised ``__shfl_down`` family, ``hip_bfloat16``, ``HIP_DYNAMIC_SHARED``...). A CUDA-dialect
kernel compiled on AMD gets the reverse. The header is handed to the compiler as an in-memory file
and pre-included (``-include``), never pasted in front of the source, so the compiler's line numbers
are the user's own line numbers.

Every prelude defines ``HG_WARP_SIZE`` as a compile-time constant (32 on NVIDIA; the wavefront size
of the target on AMD: 32 on RDNA, 64 on CDNA) and the fixed-width integer types, so ``int64_t``
works without an include (NVRTC has no ``<cstdint>``).
"""

from __future__ import annotations

PRELUDE_NAME = "hello_gpu_prelude.h"
# Bump when a prelude's text changes: it is part of the compile-cache key.
PRELUDE_VERSION = 3

DIALECTS = ("hip", "cuda")

# NVRTC ships no <cstdint>; these match the LP64 layout both vendors use for device code.
_NVRTC_INTEGER_TYPES = """\
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef long long intptr_t;
typedef unsigned long long uintptr_t;
"""

_COMMON_NVIDIA = """\
#pragma once
#define HG_WARP_SIZE 32
#define HG_PLATFORM_NVIDIA 1
#include <cuda_fp16.h>
#include <cuda_bf16.h>
""" + _NVRTC_INTEGER_TYPES

# HIP spellings on CUDA. The *_sync shuffles need a mask; HIP's versions act on the whole
# wavefront, so the full mask is the faithful translation.
_HIP_ON_NVIDIA = """\
#define __HIP_PLATFORM_NVIDIA__ 1
#define HIP_DYNAMIC_SHARED(type, name) extern __shared__ type name[];
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z
typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat16 hip_bfloat16;
typedef __nv_bfloat162 __hip_bfloat162;
template <typename T>
__device__ __forceinline__ T __shfl(T value, int source_lane, int width = 32) {
  return __shfl_sync(0xffffffffu, value, source_lane, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_up(T value, unsigned int delta, int width = 32) {
  return __shfl_up_sync(0xffffffffu, value, delta, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_down(T value, unsigned int delta, int width = 32) {
  return __shfl_down_sync(0xffffffffu, value, delta, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_xor(T value, int lane_mask, int width = 32) {
  return __shfl_xor_sync(0xffffffffu, value, lane_mask, width);
}
// CUDA still declares the mask-less __ballot/__any/__all (unusable on sm_70+), so these are macros.
#define __ballot(predicate) __ballot_sync(0xffffffffu, (predicate))
#define __any(predicate) __any_sync(0xffffffffu, (predicate))
#define __all(predicate) __all_sync(0xffffffffu, (predicate))
__device__ __forceinline__ unsigned int __lane_id() {
  unsigned int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}
"""

# On AMD the runtime header brings <stdint.h>; __AMDGCN_WAVEFRONT_SIZE is set by the compiler
# for the target (32 on gfx10+/RDNA unless wave64 is forced, 64 on gfx9/CDNA).
_COMMON_AMD = """\
#pragma once
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h>
#elif __has_include(<hip/hip_bfloat16.h>)
#include <hip/hip_bfloat16.h>
#endif
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define HG_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define HG_WARP_SIZE 64
#endif
#define HG_PLATFORM_AMD 1
"""

# CUDA spellings on HIP. ROCm 7 (and 6.2+ with HIP_ENABLE_WARP_SYNC_BUILTINS) ships the *_sync
# shuffles itself; older headers (Debian's HIP 5.2) do not, so they are defined only there.
_CUDA_ON_AMD = """\
#if __has_include(<hip/hip_bf16.h>)
typedef __hip_bfloat16 __nv_bfloat16;
#else
typedef hip_bfloat16 __nv_bfloat16;
#endif
#if !defined(HIP_ENABLE_WARP_SYNC_BUILTINS) && (!defined(HIP_VERSION_MAJOR) || HIP_VERSION_MAJOR < 7)
template <typename T>
__device__ __forceinline__ T __shfl_sync(unsigned long long mask, T value, int source_lane,
                                         int width = warpSize) {
  return __shfl(value, source_lane, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_up_sync(unsigned long long mask, T value, unsigned int delta,
                                            int width = warpSize) {
  return __shfl_up(value, delta, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_down_sync(unsigned long long mask, T value,
                                              unsigned int delta, int width = warpSize) {
  return __shfl_down(value, delta, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_xor_sync(unsigned long long mask, T value, int lane_mask,
                                             int width = warpSize) {
  return __shfl_xor(value, lane_mask, width);
}
__device__ __forceinline__ unsigned long long __ballot_sync(unsigned long long mask, int p) {
  return __ballot(p);
}
__device__ __forceinline__ int __any_sync(unsigned long long mask, int p) { return __any(p); }
__device__ __forceinline__ int __all_sync(unsigned long long mask, int p) { return __all(p); }
// A wavefront executes in lockstep on these targets; a compiler barrier keeps the ordering.
__device__ __forceinline__ void __syncwarp(unsigned long long mask = 0) { __builtin_amdgcn_wave_barrier(); }
#endif
"""


# Headers a HIP-dialect source may include on NVIDIA (and CUDA-dialect ones on AMD): the prelude
# already provides what they would, so they are served as empty files.
_BRIDGED_INCLUDES = {
    ("hip", "nvidia"): ("hip/hip_runtime.h", "hip/hip_runtime_api.h", "hip/hip_fp16.h", "hip/hip_bf16.h",
                        "hip/hip_bfloat16.h"),
    ("cuda", "amd"): ("cuda_runtime.h", "cuda.h", "cuda_fp16.h", "cuda_bf16.h", "device_launch_parameters.h"),
}


def compiler_headers(dialect: str, vendor: str) -> dict[str, str]:
    """Every in-memory header for this dialect on this vendor: the prelude and the bridged includes."""
    headers = {PRELUDE_NAME: prelude_source(dialect, vendor)}
    headers.update({name: "#pragma once\n" for name in _BRIDGED_INCLUDES.get((dialect, vendor), ())})
    return headers


def prelude_source(dialect: str, vendor: str) -> str:
    """The header pre-included when ``dialect`` source is compiled for ``vendor``.

    ``vendor`` is ``"nvidia"`` or ``"amd"``; ``dialect`` is ``"hip"`` or ``"cuda"``.
    """
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {DIALECTS}, got {dialect!r}")
    if vendor == "nvidia":
        return _COMMON_NVIDIA + (_HIP_ON_NVIDIA if dialect == "hip" else "")
    if vendor == "amd":
        return _COMMON_AMD + (_CUDA_ON_AMD if dialect == "cuda" else "")
    raise ValueError(f"vendor must be 'nvidia' or 'amd', got {vendor!r}")
