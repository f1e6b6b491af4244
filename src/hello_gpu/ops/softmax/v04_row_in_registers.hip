/*
The row in registers: each thread loads its share of the row once, keeps it, and the maximum, the
sum and the write all work from registers. DRAM sees one read and one write per element.
parent: v03_warp_shuffle
change: single pass over DRAM: a thread keeps up to 32 of its row's values in registers (as float32),
  and the launcher sizes the block to the row (ceil(columns / 32) threads, rounded up to whole warps:
  256 for 8192 columns, 1024 for 32768); rows longer than 1024 x 32 = 32768 columns fall back, inside
  the same kernel, to v03's three passes; exp is computed once per element (kept for the write)
hypothesis: v03 reads every element three times (two of them often from L2, but through the same
  SM load path) and issues a scalar load per element per pass with a loop around it. Here the 32
  loads of a thread are independent and issued back to back, then everything is arithmetic on
  registers: 1 read + 1 write, the minimum a softmax can do, and the bytes counted in the figures. At
  8192 float32 columns a block of 256 holds one 32 KiB row; ~60 registers a thread give 4 blocks (1024
  threads) per SM: 4 rows and 128 KiB of loads in flight per SM, 17 MiB on the chip, ~7x what
  Little's law needs (4.2 TB/s x ~600 ns = 2.5 MB). Loads are still 4 bytes a lane (bfloat16: 2), and
  vector_add showed scalar loads reach ~0.93x copy in float32 and much less in bfloat16 (its v03 vs
  v04: 1.65x from 128-bit loads in bfloat16). Expect ~3.5 TB/s at 8192x8192 float32 (1.8x
  torch.softmax, 1926 GB/s in a reference run before this ladder); ~2.3 TB/s in bfloat16 (2.2x torch, 1050
  GB/s); 4096x32768 holds a 128 KiB row in a block of 1024, one block per SM with read and write
  phases that other SMs overlap: ~3.3 TB/s (1.25x torch, 2637 GB/s).
prediction: 2.2x v03 at 8192x8192 float32 (1.8x torch.softmax); 2.2x torch in bfloat16; 1.25x torch
  at 4096x32768; ~1.0x torch at 4096x1024
outcome: 1.31x v03 [1.30, 1.32] at 8192x8192 float32, 1.89x torch.softmax (predicted 1.8x); 0.84x v03 [0.83, 0.84] in bfloat16 (records softmax.float32 and softmax.bfloat16, run of 2c2a085)
deterministic: yes, each thread reduces its registers in a fixed order, then fixed butterflies
entry: softmax_row_in_registers<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record softmax.float32
// hello-gpu: record softmax.bfloat16

// Row values a thread keeps in registers. 32 floats are 32 of the 64 registers a thread may use
// when 1024 threads share an SM's 65536 (the __launch_bounds__ below makes the compiler fit in 64);
// the rest hold addresses, indices and the partial maximum and sum. A block of up to 1024 threads
// then holds up to 32768 values: a 128 KiB float32 row.
constexpr int kPerThread = 32;
constexpr int kMaxBlock = 1024;
constexpr int kMaxWarps = kMaxBlock / HG_WARP_SIZE;

// minus_infinity, warp_max / warp_sum (v03's butterflies) and block_max / block_sum, which read the
// block's size from blockDim.x: the block is now sized by the launcher, a whole number of warps, at
// most kMaxWarps (<= HG_WARP_SIZE, so one warp reads all the slots).
#include "hg_reduce.h"

// One block per row (grid = rows); blockDim.x a multiple of the warp size, at most 1024, chosen by the
// launcher so that columns <= blockDim.x * kPerThread whenever a row can fit.
template <typename T>
__global__ void __launch_bounds__(kMaxBlock)
softmax_row_in_registers(const T* __restrict__ x, T* __restrict__ out, int rows, int columns) {
  __shared__ float max_slots[kMaxWarps];
  __shared__ float sum_slots[kMaxWarps];
  const int row = blockIdx.x;
  if (row >= rows) return;                     // the whole block leaves together
  const int64_t start = static_cast<int64_t>(row) * columns;   // 64-bit: rows x columns may pass 2^31
  const T* in = x + start;
  T* result = out + start;
  const int threads = blockDim.x;

  if (columns <= threads * kPerThread) {
    // Value k of this thread is column threadIdx.x + k * threads: for each k the lanes of a warp read
    // neighbouring columns (coalesced). Only the first `steps` values can hold a column; the test on
    // k is the same for the whole block, so later k cost nothing (columns = 1024 with a block of 32
    // threads uses all 32; columns = 1 uses one value of one thread).
    const int steps = (columns + threads - 1) / threads;
    float v[kPerThread];
    // Every load first, one per value, before any arithmetic: up to 32 independent loads in flight
    // per thread. `#pragma unroll` makes k a constant in each copy, so v[k] is a register, not memory
    // (an array indexed by a run-time value would live in local memory: "spills").
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int c = threadIdx.x + k * threads;
      v[k] = (k < steps && c < columns) ? static_cast<float>(in[c]) : minus_infinity();
    }
    // The maximum. A slot past the row's end holds -inf, which changes no maximum.
    float thread_max = minus_infinity();
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) thread_max = fmaxf(thread_max, v[k]);
    const float row_max = block_max(thread_max, max_slots);

    // exp(x - max), kept in place of x for the write; slots past the end stay out of the sum. All -inf
    // row: x - row_max = -inf - (-inf) = NaN, so the sum and every output are NaN (the defined 0/0).
    // A scattered -inf gives expf(-inf) = 0: it adds nothing and is written as exactly 0.
    float thread_sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int c = threadIdx.x + k * threads;
      if (k < steps && c < columns) {
        v[k] = expf(v[k] - row_max);
        thread_sum += v[k];
      }
    }
    const float inverse = 1.0f / block_sum(thread_sum, sum_slots);
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int c = threadIdx.x + k * threads;
      if (k < steps && c < columns) result[c] = static_cast<T>(v[k] * inverse);
    }
    return;
  }

  // The row does not fit (more than 1024 x 32 = 32768 columns): v03's three passes, which re-read the
  // row from memory. Slower, but every shape stays correct. The same thread-uniform branch for the
  // whole block (columns and blockDim are the same for all), so the barriers inside stay whole.
  float thread_max = minus_infinity();
  for (int c = threadIdx.x; c < columns; c += threads) thread_max = fmaxf(thread_max, static_cast<float>(in[c]));
  const float row_max = block_max(thread_max, max_slots);
  float thread_sum = 0.0f;
  for (int c = threadIdx.x; c < columns; c += threads) thread_sum += expf(static_cast<float>(in[c]) - row_max);
  const float inverse = 1.0f / block_sum(thread_sum, sum_slots);
  for (int c = threadIdx.x; c < columns; c += threads) {
    result[c] = static_cast<T>(expf(static_cast<float>(in[c]) - row_max) * inverse);
  }
}
