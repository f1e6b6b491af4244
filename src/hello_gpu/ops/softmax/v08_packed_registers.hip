/*
The row kept in registers in its own dtype: 8 packs of 16 bytes a thread whatever the dtype, so a
bfloat16 row needs half the threads v05 gives it.
parent: v05_vector_128bit
change: on the 16-byte path a thread keeps its packs as loaded (8 x 16 bytes: 32 float32 or 64
  bfloat16 / float16 values) instead of converting them into 32 float slots, and converts on the fly
  in each pass (the exponential is computed twice, once for the sum, once for the write); the
  launcher gives a row ceil(packs / 8) threads: 128 for 8192 bfloat16 columns (v05: 256), 256 for
  8192 float32 (as v05)
hypothesis: v05 reads 3362 GB/s in bfloat16 at 8192x8192 against 3894 in float32, and the sweep of
  its block size (benchmarks/softmax_sweep.py, records/nvidia-h200/softmax-sweep.json, run of
  commit db9e96d) found it getting slower with every doubling of threads per row: 0.87x Triton t03
  at 256 threads, 0.58x at 512, 0.32x at 1024. Its register count is fixed at compile time (~60 for
  32 float slots), so an SM holds ~1024 threads whatever the row: 4 rows of 256 threads. In float32
  that is 4 x 32 KiB in flight; in bfloat16 only 4 x 16 KiB, half the bytes in flight for the same
  latency (Little's law), hence the lower bandwidth. Holding raw packs, a thread keeps 128 bytes of
  row in 32 registers in any dtype: a bfloat16 row is 128 threads, ~8 rows in flight per SM, the
  same bytes in flight as float32. The second exponential costs ~2 x 67M exps per call, well
  under the memory time. Expect bfloat16 to reach float32's ~3.9 TB/s: ~1.15x v05, ~3.7x
  torch.softmax; float32 unchanged (~1.0x v05).
prediction: 1.15x v05 at 8192x8192 bfloat16 (~3.7x torch.softmax); 1.0x v05 at 8192x8192 float32
outcome: 1.066x v05 [1.059, 1.072] at 8192x8192 bfloat16 (predicted 1.15x), 3.41x torch.softmax (records softmax.bfloat16, run of 152c451)
deterministic: yes, each thread reduces its packs in a fixed order, then fixed butterflies
entry: softmax_packed_registers<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record softmax.float32
// hello-gpu: record softmax.bfloat16

// Row values a thread keeps in registers, as float32 (see v04): up to 32768 per block of 1024.
constexpr int kPerThread = 32;          // float slots a thread holds on the scalar path (as v05)
constexpr int kPacksPerThread = 8;      // 16-byte packs a thread holds on the packed path, any dtype
constexpr int kMaxBlock = 1024;
constexpr int kMaxWarps = kMaxBlock / HG_WARP_SIZE;

// Pack<T> (see v05) and lane_value<T>: lane l of a 16-byte pack kept as four raw 32-bit words
// (uint4), as a float. Raw because NVRTC spilled a Pack<hip_bfloat16> array held across the three
// passes below (30 bytes at 64 registers), and did not spill the same bits held as uint4.
#include "hg_pack.h"
// minus_infinity, warp_max / warp_sum and block_max / block_sum over a launcher-sized block (see v04).
#include "hg_reduce.h"

// e^(value - row_max), as every softmax so far computes it. A parameter of the row code below, so
// that v10_exp2 can run the same code with another exponential.
struct NaturalExp {
  static __device__ __forceinline__ float of_difference(float value, float row_max) { return expf(value - row_max); }
};

// The kernel's code, for one block and its row; v09_half_packs_bf16 and v10_exp2 include this file
// and run it with other parameters: kPacks 16-byte packs a thread keeps on the packed path,
// kFloats float slots on the scalar path, Exp the exponential. One block per row (grid = rows);
// blockDim.x a multiple of the warp size, at most 1024, chosen by the launcher so that
// columns <= blockDim.x * kFloats whenever a row can fit (as v04).
template <typename T, int kPacks, int kFloats, typename Exp>
__device__ __forceinline__ void softmax_row_kept(const T* __restrict__ x, T* __restrict__ out, int rows,
                                                 int columns) {
  constexpr int kLanes = 16 / sizeof(T);          // values per pack: 4 float32, 8 bfloat16 / float16
  __shared__ float max_slots[kMaxWarps];
  __shared__ float sum_slots[kMaxWarps];
  const int row = blockIdx.x;
  if (row >= rows) return;                        // the whole block leaves together
  const int64_t start = static_cast<int64_t>(row) * columns;   // 64-bit: rows x columns may pass 2^31
  const T* in = x + start;
  T* result = out + start;
  const int threads = blockDim.x;

  // The 16-byte path: up to kPacks packs a thread, kept as loaded. Packs need a 16-byte aligned
  // address: every row starts aligned when columns % kLanes == 0 and the tensors are (see v05).
  const bool packed = columns % kLanes == 0 &&
                      ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) % 16) == 0;
  const int packs = columns / kLanes;
  if (packed && packs <= threads * kPacks) {
    const uint4* in_packs = reinterpret_cast<const uint4*>(in);
    // Pack k of this thread is threadIdx.x + k * threads: a warp reads 512 contiguous bytes per k.
    uint4 kept[kPacks];
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = threadIdx.x + k * threads;
      if (p < packs) kept[k] = in_packs[p];
    }
    float thread_max = minus_infinity();
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (threadIdx.x + k * threads < packs) {
#pragma unroll
        for (int l = 0; l < kLanes; ++l) thread_max = fmaxf(thread_max, lane_value<T>(kept[k], l));
      }
    }
    const float row_max = block_max(thread_max, max_slots);
    // An all -inf row: row_max = -inf, -inf - (-inf) = NaN, so the sum and every output are NaN (0/0).
    float thread_sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (threadIdx.x + k * threads < packs) {
#pragma unroll
        for (int l = 0; l < kLanes; ++l) thread_sum += Exp::of_difference(lane_value<T>(kept[k], l), row_max);
      }
    }
    const float inverse = 1.0f / block_sum(thread_sum, sum_slots);
    Pack<T>* out_packs = reinterpret_cast<Pack<T>*>(result);
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = threadIdx.x + k * threads;
      if (p < packs) {
        Pack<T> pack;
#pragma unroll
        for (int l = 0; l < kLanes; ++l) {
          pack.lane[l] = static_cast<T>(Exp::of_difference(lane_value<T>(kept[k], l), row_max) * inverse);
        }
        out_packs[p] = pack;
      }
    }
    return;
  }

  if (!packed && columns <= threads * kFloats) {
    // v05's scalar path, unchanged: slot k is column threadIdx.x + k * threads (1023, 781 or 1 columns).
    const int used = (columns + threads - 1) / threads;
    float v[kFloats];
#pragma unroll
    for (int k = 0; k < kFloats; ++k) {
      const int c = threadIdx.x + k * threads;
      v[k] = (k < used && c < columns) ? static_cast<float>(in[c]) : minus_infinity();
    }
    float thread_max = minus_infinity();
#pragma unroll
    for (int s = 0; s < kFloats; ++s) thread_max = fmaxf(thread_max, v[s]);
    const float row_max = block_max(thread_max, max_slots);
    float thread_sum = 0.0f;
#pragma unroll
    for (int s = 0; s < kFloats; ++s) {
      if (s < used) {
        v[s] = Exp::of_difference(v[s], row_max);
        thread_sum += v[s];
      }
    }
    const float inverse = 1.0f / block_sum(thread_sum, sum_slots);
#pragma unroll
    for (int k = 0; k < kFloats; ++k) {
      const int c = threadIdx.x + k * threads;
      if (k < used && c < columns) result[c] = static_cast<T>(v[k] * inverse);
    }
    return;
  }

  // A row neither path holds (over 1024 x 8 packs, or over 1024 x 32 columns unpacked): v04's three
  // passes, re-reading the row (see v07 for two).
  float thread_max = minus_infinity();
  for (int c = threadIdx.x; c < columns; c += threads) thread_max = fmaxf(thread_max, static_cast<float>(in[c]));
  const float row_max = block_max(thread_max, max_slots);
  float thread_sum = 0.0f;
  for (int c = threadIdx.x; c < columns; c += threads) thread_sum += Exp::of_difference(static_cast<float>(in[c]), row_max);
  const float inverse = 1.0f / block_sum(thread_sum, sum_slots);
  for (int c = threadIdx.x; c < columns; c += threads) {
    result[c] = static_cast<T>(Exp::of_difference(static_cast<float>(in[c]), row_max) * inverse);
  }
}

template <typename T>
__global__ void __launch_bounds__(kMaxBlock)
softmax_packed_registers(const T* __restrict__ x, T* __restrict__ out, int rows, int columns) {
  softmax_row_kept<T, kPacksPerThread, kPerThread, NaturalExp>(x, out, rows, columns);
}
