/*
Threads per row matched to the row: the launcher sizes each block so every thread has work to hold.
parent: v04_vector_128bit
change: the block size comes from the row length instead of a fixed 256: each thread holds up to 4
  packs, so a row of P packs gets ceil(P / 4) threads rounded up to whole warps, at most 1024
  (bfloat16: 8192 columns -> 256 threads, 4096 -> 128; float32: 4096 -> 256; 127 columns -> 32).
  Rows that are not whole aligned packs get ceil(columns / 16) threads holding 16 elements each;
  rows beyond 1024 threads' worth stream twice as in v02. So that registers follow the data held,
  bfloat16 lanes are read from their pack as 32-bit pairs (see lane_as_float)
hypothesis: v04 reserves registers for 32 elements a thread whatever the row and leaves unused
  slots idle: at 4096 columns half of them (float32: 4 of 8 packs at 58 registers, 4 blocks per
  SM), and for a 127-wide row 224 of 256 threads. Sized to the row, every thread holds full packs,
  and the kernel needs 40 registers in bfloat16 and 42 in float32 (compile-check; v04: 48 and 58).
  x in flight per SM when every resident block is loading: bfloat16 8192x4096 (8 KiB rows) goes
  from 5 blocks of 256 (40 KiB) to 12 blocks of 128 (96 KiB); float32 8192x4096 (16 KiB rows) from
  4 to 5 blocks of 256 (64 to 80 KiB); bfloat16 16384x8192 from 5 to 6 blocks of 256 (80 to 96
  KiB). Against the ~16-32 KiB a 132-SM GPU needs at ~2 TB/s of reads, the 40 KiB case is the one
  at risk, as only part of the blocks are loading at any moment. DRAM bytes are unchanged (134 MB
  at 8192x4096 bfloat16, 268 MB in float32, 536 MB at 16384x8192 bfloat16). Expect the plain
  Triton kernel's figures (a reference run before this ladder: 3570, 3834 and 4007 GB/s): 1.25x, 1.3x and
  1.5x F.rms_norm (2772, 2934 and 2642 GB/s)
prediction: 1.1x v04 at 8192x4096 bfloat16, 1.05x at 8192x4096 float32, 1.02x at 16384x8192
  bfloat16; 0.95x to 1.0x the best Triton rung on each of the three
outcome: 1.005x v04 [1.002, 1.009] at 16384x8192 bfloat16 (predicted 1.02x), 1.064x v04 at 8192x4096 bfloat16 (predicted 1.1x) (records rms_norm.bfloat16, run of 152c451)
deterministic: yes, the block size is a function of the shape and alignment, and each thread's
  packs, the butterfly and the per-warp order are fixed by it
entry: rms_norm_threads_match_row<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record rms_norm.float32
// hello-gpu: record rms_norm.bfloat16

// The largest block the launcher asks for; the kernel reads blockDim.x (any whole number of warps up
// to this). __launch_bounds__(1024) caps ptxas at 64 registers a thread; it uses 38-42.
constexpr int kMaxBlock = 1024;
// 16-byte packs of x a thread holds: 4 x 8 bfloat16 (32 elements, as v04 and the plain Triton
// kernel at 8192 columns) or 4 x 4 float32.
constexpr int kPacksPerThread = 4;
// Elements a thread holds on the element-wise path (odd widths, unaligned tensors). Fewer than 4
// packs' worth of bfloat16 on purpose: 32 floats would make this path, and so the whole kernel
// (one register count for all its paths), the most expensive in registers.
constexpr int kHeldPerThread = 16;

// Pack<T> (see v04) and lane_as_float: a lane of a pack as float32, bfloat16 pairs read as one
// 32-bit word (in bfloat16, 40 registers a thread instead of 50 when converted lane by lane).
#include "hg_pack.h"
// warp_sum and block_sum: v03's butterflies and one shared slot per warp, for any blockDim.x that is
// a whole number of warps up to 1024.
#include "hg_reduce.h"

// The sum over the block, in every thread. Called once per kernel, so the slots are never rewritten.
__device__ __forceinline__ float block_sum_all(float value) {
  __shared__ float warp_sums[kMaxBlock / HG_WARP_SIZE];
  return block_sum(value, warp_sums);
}

// Aligned rows of whole packs, at most 4 x blockDim.x packs: pack p goes to thread p % blockDim.x.
template <typename T>
__device__ __forceinline__ void normalise_packed_row(const T* __restrict__ x_row, const T* __restrict__ weight,
                                                     T* __restrict__ out_row, int columns, float eps) {
  constexpr int kLanes = 16 / sizeof(T);
  const int packs = columns / kLanes;                  // exact: columns % kLanes == 0 here
  const int threads = blockDim.x;
  const Pack<T>* x_packs = reinterpret_cast<const Pack<T>*>(x_row);
  const Pack<T>* weight_packs = reinterpret_cast<const Pack<T>*>(weight);
  Pack<T>* out_packs = reinterpret_cast<Pack<T>*>(out_row);

  Pack<T> held[kPacksPerThread];
#pragma unroll
  for (int k = 0; k < kPacksPerThread; ++k) {          // every load issued before any is used
    const int pack = threadIdx.x + k * threads;        // < 4 x 1024
    if (pack < packs) held[k] = x_packs[pack];
  }
  float sum_of_squares = 0.0f;
#pragma unroll
  for (int k = 0; k < kPacksPerThread; ++k) {
    if (threadIdx.x + k * threads < packs) {
#pragma unroll
      for (int lane = 0; lane < kLanes; ++lane) {
        const float value = lane_as_float(held[k], lane);
        sum_of_squares += value * value;
      }
    }
  }
  const float rstd = rsqrtf(block_sum_all(sum_of_squares) / static_cast<float>(columns) + eps);
#pragma unroll
  for (int k = 0; k < kPacksPerThread; ++k) {
    const int pack = threadIdx.x + k * threads;
    if (pack < packs) {
      const Pack<T> w = weight_packs[pack];            // from L1/L2, as in v04
      Pack<T> result;
#pragma unroll
      for (int lane = 0; lane < kLanes; ++lane) {
        result.lane[lane] = static_cast<T>(lane_as_float(held[k], lane) * rstd * lane_as_float(w, lane));
      }
      out_packs[pack] = result;
    }
  }
}

// Odd widths and unaligned tensors: up to 16 elements a thread, one at a time, held as floats.
template <typename T>
__device__ __forceinline__ void normalise_held_row(const T* __restrict__ x_row, const T* __restrict__ weight,
                                                   T* __restrict__ out_row, int columns, float eps) {
  const int threads = blockDim.x;
  float held[kHeldPerThread];
#pragma unroll
  for (int k = 0; k < kHeldPerThread; ++k) {
    const int column = threadIdx.x + k * threads;      // < 16 x 1024
    held[k] = column < columns ? static_cast<float>(x_row[column]) : 0.0f;
  }
  float sum_of_squares = 0.0f;
#pragma unroll
  for (int k = 0; k < kHeldPerThread; ++k) sum_of_squares += held[k] * held[k];
  const float rstd = rsqrtf(block_sum_all(sum_of_squares) / static_cast<float>(columns) + eps);
#pragma unroll
  for (int k = 0; k < kHeldPerThread; ++k) {
    const int column = threadIdx.x + k * threads;
    if (column < columns) out_row[column] = static_cast<T>(held[k] * rstd * static_cast<float>(weight[column]));
  }
}

// Rows too long to hold with 1024 threads: v02's two passes, the second from L2.
template <typename T>
__device__ __forceinline__ void normalise_long_row(const T* __restrict__ x_row, const T* __restrict__ weight,
                                                   T* __restrict__ out_row, int columns, float eps) {
  const int threads = blockDim.x;
  float sum_of_squares = 0.0f;
  for (int column = threadIdx.x; column < columns; column += threads) {   // columns < 2^31 - 1024
    const float value = static_cast<float>(x_row[column]);
    sum_of_squares += value * value;
  }
  const float rstd = rsqrtf(block_sum_all(sum_of_squares) / static_cast<float>(columns) + eps);
  for (int column = threadIdx.x; column < columns; column += threads) {
    out_row[column] = static_cast<T>(static_cast<float>(x_row[column]) * rstd * static_cast<float>(weight[column]));
  }
}

// One block per row. The path depends on columns, blockDim.x and the base addresses, the same for
// every thread, so all of them reach the one barrier. Any block size works (whole warps, <= 1024);
// the launcher's choice only decides which path is taken and how fast it is.
template <typename T>
__global__ void __launch_bounds__(kMaxBlock)
rms_norm_threads_match_row(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out,
                           int rows, int columns, float eps) {
  constexpr int kLanes = 16 / sizeof(T);
  if (static_cast<int>(blockIdx.x) >= rows) return;   // whole block, before any barrier
  const int64_t start = static_cast<int64_t>(blockIdx.x) * columns;   // 64-bit row offset
  const int threads = blockDim.x;
  const bool packed = columns % kLanes == 0 &&
                      ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(weight) |
                        reinterpret_cast<uintptr_t>(out)) % 16) == 0;
  if (packed && columns <= kPacksPerThread * kLanes * threads) {
    normalise_packed_row(x + start, weight, out + start, columns, eps);
  } else if (!packed && columns <= kHeldPerThread * threads) {
    normalise_held_row(x + start, weight, out + start, columns, eps);
  } else {
    normalise_long_row(x + start, weight, out + start, columns, eps);
  }
}
