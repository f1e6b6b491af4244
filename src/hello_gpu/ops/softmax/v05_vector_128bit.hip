/*
128-bit loads and stores into the row-in-registers kernel: a thread moves 16 bytes per instruction
(4 float32 or 8 bfloat16 / float16 values) instead of one value.
parent: v04_row_in_registers
change: where the row allows it (columns a multiple of 16 / sizeof(T) and 16-byte aligned
  tensors: every benchmark shape), value slots are filled and written in 16-byte packs: thread t
  holds packs t, t + threads, t + 2 x threads, ...; other rows (1023, 781 or 1 columns) keep v04's
  scalar path, and rows over 32768 columns v04's re-reading fallback
hypothesis: v04 holds the row on chip but issues one load instruction per value: 32 loads a thread,
  4 bytes each in float32 and 2 in bfloat16, each a separate request to the memory system. With
  16-byte packs a warp's load is 512 contiguous bytes and a thread needs 8 (float32) or 4 (bfloat16)
  loads for its 32 values. vector_add measured the same change: 1.07x in float32 and 1.65x in
  bfloat16 (its v03 -> v04). The plain
  one-pass Triton kernel, which does exactly this, reaches 4018 GB/s at 8192x8192 float32, 3889 in
  bfloat16 and 4051 at 4096x32768 (a reference run before this ladder); expect ~0.97x of it: ~3.9 TB/s
  float32 (2.0x torch.softmax at 1926 GB/s; 0.97x Liger at 3999), ~3.75 TB/s bfloat16 (3.6x torch at
  1050), ~3.9 TB/s at 4096x32768 (1.48x torch at 2637: one 1024-thread block per SM, 58 registers
  a thread, rounded up to 64 = all 65536 of the SM's).
  At 4096x1024 each row is one block of 32 threads; the limit is latency, not bytes: ~1.0x torch.
prediction: 1.1x v04 at 8192x8192 float32 (0.97x Liger-Kernel, 2.0x torch.softmax); 1.6x v04 in
  bfloat16 (3.6x torch); 1.48x torch at 4096x32768; ~1.0x torch at 4096x1024
outcome: 1.08x v04 [1.07, 1.09] at 8192x8192 float32, 2.03x torch.softmax (predicted 2.0x); 1.67x v04 [1.66, 1.68] in bfloat16 (predicted 1.6x) (records softmax.float32 and softmax.bfloat16, run of 2c2a085)
deterministic: yes, each thread reduces its registers in a fixed order, then fixed butterflies
entry: softmax_vector_128bit<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record softmax.float32
// hello-gpu: record softmax.bfloat16

// Row values a thread keeps in registers, as float32 (see v04): up to 32768 per block of 1024.
constexpr int kPerThread = 32;
constexpr int kMaxBlock = 1024;
constexpr int kMaxWarps = kMaxBlock / HG_WARP_SIZE;

// 16 bytes of T, aligned so that one access is one 128-bit load or store (LDG.128 / STG.128).
template <typename T>
struct alignas(16) Pack {
  T lane[16 / sizeof(T)];
};

// minus_infinity, warp_max / warp_sum and block_max / block_sum over a launcher-sized block (see v04).
#include "hg_reduce.h"

// One block per row (grid = rows); blockDim.x a multiple of the warp size, at most 1024, chosen by the
// launcher so that columns <= blockDim.x * kPerThread whenever a row can fit (as v04).
template <typename T>
__global__ void __launch_bounds__(kMaxBlock)
softmax_vector_128bit(const T* __restrict__ x, T* __restrict__ out, int rows, int columns) {
  constexpr int kLanes = 16 / sizeof(T);          // values per pack: 4 float32, 8 bfloat16 / float16
  constexpr int kPacks = kPerThread / kLanes;     // packs per thread: 8 or 4 (32 values either way)
  __shared__ float max_slots[kMaxWarps];
  __shared__ float sum_slots[kMaxWarps];
  const int row = blockIdx.x;
  if (row >= rows) return;                        // the whole block leaves together
  const int64_t start = static_cast<int64_t>(row) * columns;   // 64-bit: rows x columns may pass 2^31
  const T* in = x + start;
  T* result = out + start;
  const int threads = blockDim.x;

  if (columns <= threads * kPerThread) {
    // Packs need a 16-byte aligned address. PyTorch allocations are (256 bytes); each row then starts
    // aligned when its length in bytes is a multiple of 16 (columns % kLanes == 0). A view such as
    // x[:, 1:] cannot reach here (the launcher refuses non-contiguous input) but an offset storage
    // could: then, and for 1023, 781 or 1 columns, every row takes the scalar path. The test gives the
    // same answer for every thread, so no warp splits on it.
    const bool packed = columns % kLanes == 0 &&
                        ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) % 16) == 0;
    const int packs = columns / kLanes;
    // Slots that can hold a column (the same for the whole block): later slots are skipped below.
    const int used = packed ? ((packs + threads - 1) / threads) * kLanes : (columns + threads - 1) / threads;

    float v[kPerThread];       // slot s: pack s / kLanes, lane s % kLanes (packed); column t + s x threads (scalar)
    if (packed) {
      const Pack<T>* in_packs = reinterpret_cast<const Pack<T>*>(in);
      // All the pack loads first (8 x 16 bytes per thread in float32), then the conversions.
      // Pack k of this thread is threadIdx.x + k * threads: a warp reads 32 neighbouring packs, 512
      // contiguous bytes, per k.
      Pack<T> loaded[kPacks];
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        const int p = threadIdx.x + k * threads;
        if (p < packs) loaded[k] = in_packs[p];
      }
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        const int p = threadIdx.x + k * threads;
#pragma unroll
        for (int l = 0; l < kLanes; ++l) {
          v[k * kLanes + l] = p < packs ? static_cast<float>(loaded[k].lane[l]) : minus_infinity();
        }
      }
    } else {
      // v04's scalar path: slot k is column threadIdx.x + k * threads.
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const int c = threadIdx.x + k * threads;
        v[k] = (k < used && c < columns) ? static_cast<float>(in[c]) : minus_infinity();
      }
    }

    // The maximum; slots past the row's end hold -inf, which changes no maximum.
    float thread_max = minus_infinity();
#pragma unroll
    for (int s = 0; s < kPerThread; ++s) thread_max = fmaxf(thread_max, v[s]);
    const float row_max = block_max(thread_max, max_slots);

    // exp(x - max) in place. A slot past the end holds -inf, exactly like a -inf entry of the row, so
    // it needs no test of its own: expf(-inf - row_max) = 0 adds nothing (and is never stored). An
    // all -inf row has row_max = -inf: -inf - (-inf) = NaN, so the sum and every output are NaN, the
    // defined 0/0. Slots at or past `used` are empty in every thread and skipped.
    float thread_sum = 0.0f;
#pragma unroll
    for (int s = 0; s < kPerThread; ++s) {
      if (s < used) {
        v[s] = expf(v[s] - row_max);
        thread_sum += v[s];
      }
    }
    const float inverse = 1.0f / block_sum(thread_sum, sum_slots);

    if (packed) {
      Pack<T>* out_packs = reinterpret_cast<Pack<T>*>(result);
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        const int p = threadIdx.x + k * threads;
        if (p < packs) {
          Pack<T> pack;
#pragma unroll
          for (int l = 0; l < kLanes; ++l) pack.lane[l] = static_cast<T>(v[k * kLanes + l] * inverse);
          out_packs[p] = pack;
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const int c = threadIdx.x + k * threads;
        if (k < used && c < columns) result[c] = static_cast<T>(v[k] * inverse);
      }
    }
    return;
  }

  // More than 1024 x 32 = 32768 columns: v04's three passes, re-reading the row (see v07 for two).
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
