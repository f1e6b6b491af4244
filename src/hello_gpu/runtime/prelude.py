"""Preludes: the few lines that let one kernel source compile on both vendors.

A HIP-dialect kernel compiled on NVIDIA gets a header mapping HIP names onto CUDA ones (the
unsynchronised ``__shfl_down`` family, ``hip_bfloat16``, ``HIP_DYNAMIC_SHARED``...). A CUDA-dialect
kernel compiled on AMD gets the reverse. The header is handed to the compiler as an in-memory file
and pre-included (``-include``), never pasted in front of the source, so the compiler's line numbers
are the user's own line numbers.

Every prelude defines ``HG_WARP_SIZE`` as a compile-time constant (32 on NVIDIA; the wavefront size
of the target on AMD: 32 on RDNA, 64 on CDNA) and the C and C++ standard names kernels use, so
course code compiles as written on both vendors: ``size_t``/``std::size_t``, ``ptrdiff_t``,
``int64_t``/``std::uint32_t`` and friends, ``INFINITY``, ``NAN``, ``FLT_MAX``/``INT_MAX`` and friends,
``std::numeric_limits<T>`` for the arithmetic types, ``std::min``/``std::max`` and the ``<cmath>``
functions in ``std::``. NVRTC ships no libc or C++ library headers, so on NVIDIA (and under hipRTC,
which has none either) the prelude defines them itself; clang for AMD has the real headers and
includes them. ``#include <cstdint>``, ``<cfloat>``, ``<limits>``... then need no file: on NVIDIA they
are served as empty headers, since the prelude already holds what the kernel may use from them.
"""

from __future__ import annotations

PRELUDE_NAME = "hello_gpu_prelude.h"
# Bump when a prelude's text changes: it is part of the compile-cache key.
PRELUDE_VERSION = 6   # 4: the C/C++ standard names (issue 19); 5: HIP-only atomics, clocks, nontemporal; 6: cooperative groups

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

# The standard names NVRTC and hipRTC lack. Types first: size_t and ptrdiff_t are the compiler's own
# (re-declaring a typedef as the same type is legal, so this is safe where they already exist).
# Floating-point constants are bit patterns through __builtin_bit_cast, the one way to spell infinity
# and NaN as constant expressions that NVRTC accepts (it has no __builtin_huge_valf or __builtin_nanf).
# Every function is __host__ __device__: an unannotated function is host-only under NVRTC.
_STANDARD_NAMES = """\
typedef decltype(sizeof(0)) size_t;
typedef decltype((char*)0 - (char*)0) ptrdiff_t;
#ifndef CHAR_BIT
#define CHAR_BIT 8
#endif
#ifndef SCHAR_MIN
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define CHAR_MIN SCHAR_MIN
#define CHAR_MAX SCHAR_MAX
#define SHRT_MIN (-32767 - 1)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MIN (-9223372036854775807L - 1)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MIN (-9223372036854775807LL - 1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
#endif
#ifndef INT8_MIN
#define INT8_MIN (-128)
#define INT8_MAX 127
#define UINT8_MAX 255
#define INT16_MIN (-32767 - 1)
#define INT16_MAX 32767
#define UINT16_MAX 65535
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define UINT32_MAX 4294967295U
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL
#define UINT64_MAX 18446744073709551615ULL
#endif
#ifndef SIZE_MAX
#define SIZE_MAX 18446744073709551615UL
#define PTRDIFF_MIN (-9223372036854775807L - 1)
#define PTRDIFF_MAX 9223372036854775807L
#endif
#ifndef FLT_MAX
#define FLT_RADIX 2
#define FLT_MANT_DIG 24
#define DBL_MANT_DIG 53
#define FLT_DIG 6
#define DBL_DIG 15
#define FLT_MAX 3.40282347e+38F
#define FLT_MIN 1.17549435e-38F
#define FLT_EPSILON 1.19209290e-07F
#define FLT_TRUE_MIN 1.40129846e-45F
#define DBL_MAX 1.7976931348623157e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-16
#define DBL_TRUE_MIN 4.9406564584124654e-324
#endif
#ifndef INFINITY
#define INFINITY (__builtin_bit_cast(float, 0x7f800000u))
#endif
#ifndef NAN
#define NAN (__builtin_bit_cast(float, 0x7fc00000u))
#endif
#ifndef HUGE_VALF
#define HUGE_VALF INFINITY
#endif
#ifndef HUGE_VAL
#define HUGE_VAL (__builtin_bit_cast(double, 0x7ff0000000000000ull))
#endif
namespace std {
using ::size_t;
using ::ptrdiff_t;
typedef decltype(nullptr) nullptr_t;
using ::int8_t;
using ::uint8_t;
using ::int16_t;
using ::uint16_t;
using ::int32_t;
using ::uint32_t;
using ::int64_t;
using ::uint64_t;
using ::intptr_t;
using ::uintptr_t;
template <class T>
__host__ __device__ constexpr const T& min(const T& a, const T& b) { return b < a ? b : a; }
template <class T>
__host__ __device__ constexpr const T& max(const T& a, const T& b) { return a < b ? b : a; }
template <class T, class Less>
__host__ __device__ constexpr const T& min(const T& a, const T& b, Less less) { return less(b, a) ? b : a; }
template <class T, class Less>
__host__ __device__ constexpr const T& max(const T& a, const T& b, Less less) { return less(a, b) ? b : a; }
using ::abs; using ::fabs; using ::fmax; using ::fmin; using ::fmod; using ::fma; using ::copysign;
using ::sqrt; using ::cbrt; using ::hypot; using ::pow;
using ::exp; using ::exp2; using ::expm1; using ::log; using ::log2; using ::log10; using ::log1p;
using ::sin; using ::cos; using ::tan; using ::asin; using ::acos; using ::atan; using ::atan2;
using ::sinh; using ::cosh; using ::tanh; using ::erf; using ::erfc;
using ::floor; using ::ceil; using ::round; using ::trunc; using ::lround; using ::llround;
using ::isinf; using ::isnan; using ::isfinite; using ::signbit;
enum float_round_style { round_indeterminate = -1, round_toward_zero = 0, round_to_nearest = 1 };
template <class T> struct numeric_limits {
  static constexpr bool is_specialized = false;
};
template <class T> struct numeric_limits<const T> : numeric_limits<T> {};
template <class T> struct numeric_limits<volatile T> : numeric_limits<T> {};
template <class T> struct numeric_limits<const volatile T> : numeric_limits<T> {};
#define HG_INTEGER_LIMITS(T, SIGNED, BITS, LOW, HIGH)                                        \\
  template <> struct numeric_limits<T> {                                                     \\
    static constexpr bool is_specialized = true;                                             \\
    static constexpr bool is_signed = SIGNED;                                                \\
    static constexpr bool is_integer = true;                                                 \\
    static constexpr bool is_exact = true;                                                   \\
    static constexpr bool is_bounded = true;                                                 \\
    static constexpr bool is_modulo = !SIGNED;                                               \\
    static constexpr bool is_iec559 = false;                                                 \\
    static constexpr bool has_infinity = false;                                              \\
    static constexpr bool has_quiet_NaN = false;                                             \\
    static constexpr bool has_signaling_NaN = false;                                         \\
    static constexpr int radix = 2;                                                          \\
    static constexpr int digits = BITS - (SIGNED ? 1 : 0);                                   \\
    static constexpr int digits10 = digits * 3 / 10;                                         \\
    static constexpr float_round_style round_style = round_toward_zero;                      \\
    __host__ __device__ static constexpr T min() noexcept { return LOW; }                    \\
    __host__ __device__ static constexpr T max() noexcept { return HIGH; }                   \\
    __host__ __device__ static constexpr T lowest() noexcept { return LOW; }                 \\
    __host__ __device__ static constexpr T epsilon() noexcept { return 0; }                  \\
    __host__ __device__ static constexpr T round_error() noexcept { return 0; }              \\
    __host__ __device__ static constexpr T infinity() noexcept { return 0; }                 \\
    __host__ __device__ static constexpr T quiet_NaN() noexcept { return 0; }                \\
    __host__ __device__ static constexpr T signaling_NaN() noexcept { return 0; }            \\
    __host__ __device__ static constexpr T denorm_min() noexcept { return 0; }               \\
  };
HG_INTEGER_LIMITS(bool, false, 1, false, true)
HG_INTEGER_LIMITS(char, true, 8, CHAR_MIN, CHAR_MAX)
HG_INTEGER_LIMITS(signed char, true, 8, SCHAR_MIN, SCHAR_MAX)
HG_INTEGER_LIMITS(unsigned char, false, 8, 0, UCHAR_MAX)
HG_INTEGER_LIMITS(short, true, 16, SHRT_MIN, SHRT_MAX)
HG_INTEGER_LIMITS(unsigned short, false, 16, 0, USHRT_MAX)
HG_INTEGER_LIMITS(int, true, 32, INT_MIN, INT_MAX)
HG_INTEGER_LIMITS(unsigned int, false, 32, 0, UINT_MAX)
HG_INTEGER_LIMITS(long, true, 64, LONG_MIN, LONG_MAX)
HG_INTEGER_LIMITS(unsigned long, false, 64, 0, ULONG_MAX)
HG_INTEGER_LIMITS(long long, true, 64, LLONG_MIN, LLONG_MAX)
HG_INTEGER_LIMITS(unsigned long long, false, 64, 0, ULLONG_MAX)
#undef HG_INTEGER_LIMITS
#define HG_FLOAT_LIMITS(T, BITS, MANT, DIG, EXP_MIN, EXP_MAX, MIN, MAX, EPS, INF, QNAN, SNAN, DENORM)  \\
  template <> struct numeric_limits<T> {                                                     \\
    static constexpr bool is_specialized = true;                                             \\
    static constexpr bool is_signed = true;                                                  \\
    static constexpr bool is_integer = false;                                                \\
    static constexpr bool is_exact = false;                                                  \\
    static constexpr bool is_bounded = true;                                                 \\
    static constexpr bool is_modulo = false;                                                 \\
    static constexpr bool is_iec559 = true;                                                  \\
    static constexpr bool has_infinity = true;                                               \\
    static constexpr bool has_quiet_NaN = true;                                              \\
    static constexpr bool has_signaling_NaN = true;                                          \\
    static constexpr int radix = 2;                                                          \\
    static constexpr int digits = MANT;                                                      \\
    static constexpr int digits10 = DIG;                                                     \\
    static constexpr int min_exponent = EXP_MIN;                                             \\
    static constexpr int max_exponent = EXP_MAX;                                             \\
    static constexpr float_round_style round_style = round_to_nearest;                       \\
    __host__ __device__ static constexpr T min() noexcept { return MIN; }                    \\
    __host__ __device__ static constexpr T max() noexcept { return MAX; }                    \\
    __host__ __device__ static constexpr T lowest() noexcept { return -MAX; }                \\
    __host__ __device__ static constexpr T epsilon() noexcept { return EPS; }                \\
    __host__ __device__ static constexpr T round_error() noexcept { return T(0.5); }         \\
    __host__ __device__ static constexpr T infinity() noexcept { return __builtin_bit_cast(T, INF); }      \\
    __host__ __device__ static constexpr T quiet_NaN() noexcept { return __builtin_bit_cast(T, QNAN); }    \\
    __host__ __device__ static constexpr T signaling_NaN() noexcept { return __builtin_bit_cast(T, SNAN); } \\
    __host__ __device__ static constexpr T denorm_min() noexcept { return DENORM; }          \\
  };
HG_FLOAT_LIMITS(float, 32, 24, 6, -125, 128, FLT_MIN, FLT_MAX, FLT_EPSILON, 0x7f800000u, 0x7fc00000u,
                0x7fa00000u, FLT_TRUE_MIN)
HG_FLOAT_LIMITS(double, 64, 53, 15, -1021, 1024, DBL_MIN, DBL_MAX, DBL_EPSILON, 0x7ff0000000000000ull,
                0x7ff8000000000000ull, 0x7ff4000000000000ull, DBL_TRUE_MIN)
#undef HG_FLOAT_LIMITS
}  // namespace std
"""

_COMMON_NVIDIA = """\
#pragma once
#define HG_WARP_SIZE 32
#define HG_PLATFORM_NVIDIA 1
#include <cuda_fp16.h>
#include <cuda_bf16.h>
""" + _NVRTC_INTEGER_TYPES + _STANDARD_NAMES

# HIP spellings on CUDA. The *_sync shuffles need a mask; HIP's versions act on the whole
# wavefront, so the full mask is the faithful translation.
_HIP_ON_NVIDIA = """\
#define __HIP_PLATFORM_NVIDIA__ 1
// What hipcc defines: __HIPCC__ always, __HIP_DEVICE_COMPILE__ in the device pass, which is all NVRTC
// compiles. Without them, `#ifdef __HIP_DEVICE_COMPILE__ ... #else` took the host branch on NVIDIA.
#define __HIPCC__ 1
#define __HIP_DEVICE_COMPILE__ 1
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
// HIP's floating-point atomicMax/atomicMin (CUDA has integer ones alone), with fmax/fmin's answer (a NaN
// argument loses to a number): a compare-and-swap loop that stops without writing where the stored value
// already is the answer, so an uncontended call costs one load and at most one CAS. Returns the old value.
#define HG_ATOMIC_FLOAT_EXTREMUM(NAME, T, BITS, PICK, TO_BITS, FROM_BITS)                      \
  __device__ __forceinline__ T NAME(T* address, T value) {                                     \
    BITS* word = reinterpret_cast<BITS*>(address);                                             \
    BITS old = *reinterpret_cast<volatile BITS*>(word), assumed;                               \
    do {                                                                                       \
      assumed = old;                                                                           \
      BITS wanted = TO_BITS(PICK(FROM_BITS(assumed), value));                                  \
      if (wanted == assumed) break;                                                            \
      old = atomicCAS(word, assumed, wanted);                                                  \
    } while (old != assumed);                                                                  \
    return FROM_BITS(old);                                                                     \
  }
HG_ATOMIC_FLOAT_EXTREMUM(atomicMax, float, unsigned int, fmaxf, __float_as_uint, __uint_as_float)
HG_ATOMIC_FLOAT_EXTREMUM(atomicMin, float, unsigned int, fminf, __float_as_uint, __uint_as_float)
HG_ATOMIC_FLOAT_EXTREMUM(atomicMax, double, unsigned long long, fmax, (unsigned long long)__double_as_longlong,
                         __longlong_as_double)
HG_ATOMIC_FLOAT_EXTREMUM(atomicMin, double, unsigned long long, fmin, (unsigned long long)__double_as_longlong,
                         __longlong_as_double)
#undef HG_ATOMIC_FLOAT_EXTREMUM
// HIP's unsafe/safe atomics choose between AMD's hardware float atomics and a CAS loop; NVIDIA's are one
// instruction either way.
template <typename T> __device__ __forceinline__ T unsafeAtomicAdd(T* address, T value) { return atomicAdd(address, value); }
template <typename T> __device__ __forceinline__ T safeAtomicAdd(T* address, T value) { return atomicAdd(address, value); }
template <typename T> __device__ __forceinline__ T unsafeAtomicMax(T* address, T value) { return atomicMax(address, value); }
template <typename T> __device__ __forceinline__ T unsafeAtomicMin(T* address, T value) { return atomicMin(address, value); }
// HIP's constant-rate clock: here the global timer, in nanoseconds (a 1 GHz rate; AMD's runs at the rate
// hipDeviceAttributeWallClockRate gives, 100 MHz on RDNA).
__device__ __forceinline__ long long wall_clock64() {
  unsigned long long time;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(time));
  return static_cast<long long>(time);
}
// clang's streaming (non-temporal) accesses, which HIP code uses for data read or written once: the
// evict-first cache hints (ld.global.cs / st.global.cs) are NVIDIA's spelling of the same intent.
template <typename T> __device__ __forceinline__ T __builtin_nontemporal_load(const T* address) {
  return __ldcs(address);
}
template <typename T> __device__ __forceinline__ void __builtin_nontemporal_store(T value, T* address) {
  __stcs(address, value);
}
"""

# On AMD, clang (hipcc, the compile gate) has the C and C++ library headers: the runtime header brings
# <cstdint>, <cmath>, <limits> and <algorithm>, and <cfloat>/<climits> give FLT_MAX and INT_MAX. hipRTC
# (__HIPCC_RTC__) has no library headers: there the prelude defines the names as on NVIDIA.
# __AMDGCN_WAVEFRONT_SIZE is set by the compiler for the target (32 on gfx10+/RDNA unless wave64 is
# forced, 64 on gfx9/CDNA).
_COMMON_AMD = """\
#pragma once
#include <hip/hip_runtime.h>
#if defined(__HIPCC_RTC__)
""" + _NVRTC_INTEGER_TYPES + _STANDARD_NAMES + """\
#else
#include <cstddef>
#include <cstdint>
#include <cfloat>
#include <climits>
#include <cmath>
#include <limits>
#include <algorithm>
#endif
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
// The lanes that run this instruction (HIP 6 declares __activemask; the gate's HIP 5.2 headers do not): a
// macro, so it stands in for a declaration wherever one is missing and is the same ballot where one is not.
#ifndef __activemask
#define __activemask() __ballot(1)
#endif
"""

# The *_sync warp functions and __syncwarp, which CUDA-dialect source uses and HIP-dialect source for ROCm 7
# may: ROCm 7 (and 6.2+ with HIP_ENABLE_WARP_SYNC_BUILTINS) ships them itself; older headers (Debian's
# HIP 5.2, the gate's) do not, so they are defined only there, for both dialects.
_SYNC_ON_OLDER_HIP = """\
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

# CUDA spellings on HIP.
_CUDA_ON_AMD = """\
#if __has_include(<hip/hip_bf16.h>)
typedef __hip_bfloat16 __nv_bfloat16;
typedef __hip_bfloat162 __nv_bfloat162;
#else
typedef hip_bfloat16 __nv_bfloat16;
#endif
"""


# Headers a HIP-dialect source may include on NVIDIA (and CUDA-dialect ones on AMD): the prelude
# already provides what they would, so they are served as empty files.
_BRIDGED_INCLUDES = {
    ("hip", "nvidia"): ("hip/hip_runtime.h", "hip/hip_runtime_api.h", "hip/hip_fp16.h", "hip/hip_bf16.h",
                        "hip/hip_bfloat16.h"),
    ("cuda", "amd"): ("cuda_runtime.h", "cuda.h", "cuda_fp16.h", "cuda_bf16.h", "device_launch_parameters.h"),
}

# The C and C++ library headers whose device-usable names the NVIDIA prelude defines (see
# _STANDARD_NAMES); NVRTC has none of them, so both dialects get them as empty files there. <cstdio>
# is here because device printf needs no declaration under NVRTC. A header not listed (<vector>,
# <type_traits>) stays missing, and NVRTC says so by name.
STANDARD_HEADERS = ("cstddef", "stddef.h", "cstdint", "stdint.h", "cfloat", "float.h", "climits", "limits.h",
                    "cmath", "math.h", "limits", "algorithm", "cstdio", "stdio.h")


# Headers one dialect's source includes that the other vendor has under another name: served as an include of
# it, with the prelude's mask-less vote macros set aside meanwhile (CCCL, which cooperative_groups.h
# includes, declares a struct __any whose constructor the __any macro would expand).
_VOTE_MACROS = ("__any", "__all", "__ballot")
_RENAMED_INCLUDES = {
    ("hip", "nvidia"): {"hip/hip_cooperative_groups.h": "cooperative_groups.h"},
    ("cuda", "amd"): {"cooperative_groups.h": "hip/hip_cooperative_groups.h"},
}


def _renamed_include(target: str) -> str:
    aside = "".join(f'#pragma push_macro("{name}")\n#undef {name}\n' for name in _VOTE_MACROS)
    back = "".join(f'#pragma pop_macro("{name}")\n' for name in _VOTE_MACROS)
    return f"#pragma once\n{aside}#include <{target}>\n{back}"


def compiler_headers(dialect: str, vendor: str) -> dict[str, str]:
    """Every in-memory header for this dialect on this vendor: the prelude and the bridged includes."""
    headers = {PRELUDE_NAME: prelude_source(dialect, vendor)}
    bridged = _BRIDGED_INCLUDES.get((dialect, vendor), ()) + (STANDARD_HEADERS if vendor == "nvidia" else ())
    headers.update({name: "#pragma once\n" for name in bridged})
    headers.update({name: _renamed_include(target) for name, target in _RENAMED_INCLUDES.get((dialect, vendor), {}).items()})
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
        return _COMMON_AMD + _SYNC_ON_OLDER_HIP + (_CUDA_ON_AMD if dialect == "cuda" else "")
    raise ValueError(f"vendor must be 'nvidia' or 'amd', got {vendor!r}")
