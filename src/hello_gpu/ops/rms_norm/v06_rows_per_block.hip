/*
Several rows per block for short rows: a row gets a few threads (or a few warps), a block many rows.
parent: v05_threads_match_row
change: the block is 2-D: blockDim.x threads per row (v05's count, rounded up to a power of two when
  it is under a warp, so a row's lanes sit together inside one warp) and blockDim.y = 256 /
  blockDim.x rows, so a short row no longer costs a whole block. Under a warp per row the sum needs
  only log2(threads per row) shuffles and no shared memory or barrier; from a warp up it is v05's
  block sum, per row. Rows that need 256 threads or more get a block of their own, as in v05
hypothesis: v05 gives each row its own block, at least one warp. A row of 64 bfloat16 (8 packs)
  then runs 2 useful lanes of 32 in a 32-thread block, and an SM holds at most 32 blocks: 32 rows,
  4 KiB of x in flight per SM, ~0.5 TB/s of reads over 132 SMs by Little's law (~1 us). Packed 128
  rows to a 256-thread block, the 5 blocks an SM holds at this kernel's 48 registers (compile-check)
  carry 640 rows, 80 KiB: copy-like bandwidth again. The cost is those registers: 44-48 a thread
  against v05's 38-42 (2-D indexing and two kinds of sum in one kernel), so where v05 already fills
  the SM nothing is gained and a little may be lost. At the benchmark shapes 16384x8192 bfloat16
  and 8192x4096 float32 launch as v05 (one row of 256 threads per block) but with 5 blocks per SM
  instead of 6 and 5; 8192x4096 bfloat16 goes from 128-thread blocks (12 per SM, 96 KiB) to
  256-thread blocks of 2 rows (5 per SM, 80 KiB). Still well above the ~16-32 KiB per SM needed
prediction: 0.97x to 1.0x v05 on the three benchmark shapes; 3x v05 or more at 262144x64 bfloat16;
  ~1.0x at 4096x1024 float32 (run with --shapes)
outcome: 0.995x v05 [0.990, 0.998] at 16384x8192 bfloat16, 0.982x at 8192x4096 bfloat16, 1.006x at 8192x4096 float32 (predicted 0.97-1.0x) (records rms_norm.bfloat16 and rms_norm.float32, run of 152c451)
deterministic: yes, the block shape is a function of the shape and alignment; each row's lanes add
  in a fixed order, and within a warp the butterfly gives every lane the same bits
entry: rms_norm_rows_per_block<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record rms_norm.float32
// hello-gpu: record rms_norm.bfloat16

// The largest block the launcher asks for (threads per row x rows per block). __launch_bounds__(1024)
// caps ptxas at 64 registers a thread; it uses 44-48.
constexpr int kMaxBlock = 1024;
// 16-byte packs of x a thread holds, and elements on the element-wise path: as in v05.
constexpr int kPacksPerThread = 4;
constexpr int kHeldPerThread = 16;

// Pack<T> and lane_as_float, bfloat16 pairs read as one 32-bit word (see v05).
#include "hg_pack.h"

// The sum over one row's threads, in every one of them. Row y of the block is threads
// (0..blockDim.x-1, y); the launcher makes blockDim.x a power of two up to HG_WARP_SIZE, or a
// multiple of it, and the block a whole number of warps.
//  - blockDim.x <= HG_WARP_SIZE: the row's lanes are blockDim.x consecutive lanes of one warp,
//    starting at a multiple of blockDim.x, so XOR offsets below blockDim.x never leave them. All 32
//    lanes run the same steps (each group adds its own values); no shared memory, no barrier.
//  - otherwise: v05's block sum, with a shared slot per warp and each row adding its own warps' slots.
// Called once per kernel, by every thread of the block (rows past the end included: see below).
__device__ __forceinline__ float row_sum_all(float value) {
  __shared__ float warp_sums[kMaxBlock / HG_WARP_SIZE];
  const int threads_per_row = blockDim.x;
  if (threads_per_row <= HG_WARP_SIZE) {
    for (int offset = threads_per_row / 2; offset > 0; offset /= 2) value += __shfl_xor(value, offset);
    return value;
  }
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value += __shfl_xor(value, offset);
  const int warps_per_row = threads_per_row / HG_WARP_SIZE;
  const int lane = threadIdx.x % HG_WARP_SIZE;
  const int warp_in_row = threadIdx.x / HG_WARP_SIZE;
  if (lane == 0) warp_sums[threadIdx.y * warps_per_row + warp_in_row] = value;
  __syncthreads();                                     // the same branch for the whole block
  value = lane < warps_per_row ? warp_sums[threadIdx.y * warps_per_row + lane] : 0.0f;
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value += __shfl_xor(value, offset);
  return value;
}

// In the three paths below, `row_exists` is false for a row past the end of x in the last block:
// its threads read the last real row again (a valid address, from cache) so that they can take
// part in the shuffles and the barrier, and store nothing. The thread's place in its row is
// threadIdx.x of blockDim.x.

// Aligned rows of whole packs, at most 4 x blockDim.x packs: pack p goes to thread p % blockDim.x.
template <typename T>
__device__ __forceinline__ void normalise_packed_row(const T* __restrict__ x_row, const T* __restrict__ weight,
                                                     T* __restrict__ out_row, bool row_exists, int columns, float eps) {
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
  const float rstd = rsqrtf(row_sum_all(sum_of_squares) / static_cast<float>(columns) + eps);
#pragma unroll
  for (int k = 0; k < kPacksPerThread; ++k) {
    const int pack = threadIdx.x + k * threads;
    if (row_exists && pack < packs) {
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
                                                   T* __restrict__ out_row, bool row_exists, int columns, float eps) {
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
  const float rstd = rsqrtf(row_sum_all(sum_of_squares) / static_cast<float>(columns) + eps);
#pragma unroll
  for (int k = 0; k < kHeldPerThread; ++k) {
    const int column = threadIdx.x + k * threads;
    if (row_exists && column < columns) {
      out_row[column] = static_cast<T>(held[k] * rstd * static_cast<float>(weight[column]));
    }
  }
}

// Rows too long to hold with 1024 threads: v02's two passes, the second from L2.
template <typename T>
__device__ __forceinline__ void normalise_long_row(const T* __restrict__ x_row, const T* __restrict__ weight,
                                                   T* __restrict__ out_row, bool row_exists, int columns, float eps) {
  const int threads = blockDim.x;
  float sum_of_squares = 0.0f;
  for (int column = threadIdx.x; column < columns; column += threads) {   // columns < 2^31 - 1024
    const float value = static_cast<float>(x_row[column]);
    sum_of_squares += value * value;
  }
  const float rstd = rsqrtf(row_sum_all(sum_of_squares) / static_cast<float>(columns) + eps);
  for (int column = threadIdx.x; row_exists && column < columns; column += threads) {
    out_row[column] = static_cast<T>(static_cast<float>(x_row[column]) * rstd * static_cast<float>(weight[column]));
  }
}

// blockDim.y rows per block, blockDim.x threads per row. No thread returns early: a row past the
// end still takes part in the shuffles and the barrier. The path depends on columns, blockDim.x and
// the base addresses, the same for every thread of the block.
template <typename T>
__global__ void __launch_bounds__(kMaxBlock)
rms_norm_rows_per_block(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out,
                        int rows, int columns, float eps) {
  constexpr int kLanes = 16 / sizeof(T);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool row_exists = row < rows;
  const int64_t start = (row_exists ? row : rows - 1) * columns;   // 64-bit; rows >= 1 (launcher)
  const int threads = blockDim.x;
  const bool packed = columns % kLanes == 0 &&
                      ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(weight) |
                        reinterpret_cast<uintptr_t>(out)) % 16) == 0;
  if (packed && columns <= kPacksPerThread * kLanes * threads) {
    normalise_packed_row(x + start, weight, out + start, row_exists, columns, eps);
  } else if (!packed && columns <= kHeldPerThread * threads) {
    normalise_held_row(x + start, weight, out + start, row_exists, columns, eps);
  } else {
    normalise_long_row(x + start, weight, out + start, row_exists, columns, eps);
  }
}
