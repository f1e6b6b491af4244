/*
Short rows get one warp each, eight rows to a block of 256 threads: no barrier and no shared memory
on their path. Long rows keep v05's block per row.
parent: v05_vector_128bit
change: rows of up to 32 x 32 = 1024 columns are each handled by one warp (the warp's butterflies are
  the whole reduction), 8 rows per 256-thread block, ceil(rows / 8) blocks; longer rows as v05
hypothesis: at 4096x1024 (16 MiB in, 16 MiB out; torch.softmax 14.6 us, torch.compile 12.1 us in
  a reference run before this ladder) the time is latency and launch, not bandwidth: the bytes alone take
  ~8 us at 4.2 TB/s. v05 launches 4096 blocks of one warp; an SM holds at most 32 blocks, so 32 rows
  per SM, and each block pays a block launch, a barrier and a shared-memory round trip for a
  one-warp reduction. Here 512 blocks of 8 warps: 4 per SM (1024 threads at up to 64 registers),
  the same 32 rows per SM in one wave, 8x fewer blocks to launch, and a row's reduction is 10
  shuffles with nothing else. Expect ~11 us at 4096x1024: 1.3x torch.softmax, 1.1x torch.compile.
  Long rows run v05's code unchanged.
prediction: 1.15x v05 at 4096x1024 float32 (1.3x torch.softmax, 1.1x torch.compile); 1.0x v05 at the
  other shapes
outcome: 1.02x v05 [1.02, 1.03] at 4096x1024 float32 (predicted 1.15x), 1.15x torch.softmax (records softmax.float32, run of 2c2a085)
deterministic: yes, each row is reduced by one warp or one block in a fixed order
entry: softmax_rows_per_block<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record softmax.float32
// hello-gpu: record softmax.bfloat16

// Row values a thread keeps in registers, as float32 (see v04): a warp holds up to 32 x 32 = 1024
// (wave64: 2048), a block of 1024 threads up to 32768.
constexpr int kPerThread = 32;
constexpr int kMaxBlock = 1024;
constexpr int kMaxWarps = kMaxBlock / HG_WARP_SIZE;

// Pack<T> (see v05); minus_infinity, warp_max / warp_sum and the step across warps (see v03 and v04).
#include "hg_pack.h"
#include "hg_reduce.h"

// The maximum and the sum over the group of threads that owns a row, in every thread of the group.
// A warp: its butterfly is the whole reduction. The whole block (whole_block, the same for every
// thread of the block): the butterflies, then one shared-memory round trip across warps (see v04).
// Max and sum have their own slots, and a block handles one row, so each slot is written once per
// launch and needs no barrier against being overwritten while another warp still reads it.
__device__ __forceinline__ float group_max(float value, bool whole_block, float* slots) {
  value = warp_max(value);
  return whole_block ? max_across_warps(value, slots) : value;
}
__device__ __forceinline__ float group_sum(float value, bool whole_block, float* slots) {
  value = warp_sum(value);
  return whole_block ? sum_across_warps(value, slots) : value;
}

// v05's on-chip softmax of one row, by a group of `members` threads of which this is number `member`
// (a warp: lane and HG_WARP_SIZE; a block: threadIdx.x and blockDim.x). Needs columns <= members x 32.
// `packed`: 16-byte packs (columns % (16 / sizeof(T)) == 0 and aligned tensors), else one value per load.
// Written once and called from one place: two inlined copies (one per kind of group) made the
// kernel need more than its 64 registers, and the compiler spilled.
template <typename T>
__device__ __forceinline__ void softmax_row_on_chip(const T* in, T* result, int columns, int member, int members,
                                                    bool packed, bool whole_block, float* max_slots,
                                                    float* sum_slots) {
  constexpr int kLanes = 16 / sizeof(T);          // values per pack: 4 float32, 8 bfloat16 / float16
  constexpr int kPacks = kPerThread / kLanes;     // packs per thread: 8 or 4
  const int packs = columns / kLanes;
  // Slots that can hold a column, the same for the whole group: later ones are skipped.
  const int used = packed ? ((packs + members - 1) / members) * kLanes : (columns + members - 1) / members;

  float v[kPerThread];   // slot s: pack s / kLanes, lane s % kLanes (packed); column member + s x members
  if (packed) {
    const Pack<T>* in_packs = reinterpret_cast<const Pack<T>*>(in);
    Pack<T> loaded[kPacks];
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {              // every load first: 8 x 16 bytes in flight (float32)
      const int p = member + k * members;
      if (p < packs) loaded[k] = in_packs[p];
    }
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = member + k * members;
#pragma unroll
      for (int l = 0; l < kLanes; ++l) v[k * kLanes + l] = p < packs ? static_cast<float>(loaded[k].lane[l]) : minus_infinity();
    }
  } else {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int c = member + k * members;
      v[k] = (k < used && c < columns) ? static_cast<float>(in[c]) : minus_infinity();
    }
  }

  float thread_max = minus_infinity();
#pragma unroll
  for (int s = 0; s < kPerThread; ++s) thread_max = fmaxf(thread_max, v[s]);
  const float row_max = group_max(thread_max, whole_block, max_slots);

  // Empty slots hold -inf like a -inf entry: expf(-inf - row_max) = 0. All -inf row: NaN (0/0), as
  // defined (see v05).
  float thread_sum = 0.0f;
#pragma unroll
  for (int s = 0; s < kPerThread; ++s) {
    if (s < used) {
      v[s] = expf(v[s] - row_max);
      thread_sum += v[s];
    }
  }
  const float inverse = 1.0f / group_sum(thread_sum, whole_block, sum_slots);

  if (packed) {
    Pack<T>* out_packs = reinterpret_cast<Pack<T>*>(result);
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = member + k * members;
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
      const int c = member + k * members;
      if (k < used && c < columns) result[c] = static_cast<T>(v[k] * inverse);
    }
  }
}

// Short rows (columns <= HG_WARP_SIZE x 32): a warp per row, blockDim.x / HG_WARP_SIZE rows per block;
// the launcher gives 256 threads and ceil(rows / warps) blocks, with the device's warp size (8 rows a
// block on NVIDIA, 4 on a wave64 GPU). (A loop over rows here, so that any grid would do, cost ~30
// registers: the compiler overlapped consecutive rows and the kernel spilled.)
// Longer rows: one block per row (grid = rows), blockDim.x sized to the row by the launcher (as v05).
template <typename T>
__global__ void __launch_bounds__(kMaxBlock)
softmax_rows_per_block(const T* __restrict__ x, T* __restrict__ out, int rows, int columns) {
  __shared__ float max_slots[kMaxWarps];
  __shared__ float sum_slots[kMaxWarps];
  constexpr int kLanes = 16 / sizeof(T);
  const int threads = blockDim.x;
  // The same answer for every thread of the block (see v05): so are the branches below.
  const bool packed = columns % kLanes == 0 &&
                      ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) % 16) == 0;
  const bool warp_per_row = columns <= HG_WARP_SIZE * kPerThread;

  if (!warp_per_row && columns > threads * kPerThread) {
    // More than 1024 x 32 = 32768 columns: the three passes of v04 and v05 (see v07 for two).
    const int row = blockIdx.x;
    if (row >= rows) return;                       // the whole block leaves together
    const int64_t start = static_cast<int64_t>(row) * columns;   // 64-bit: rows x columns may pass 2^31
    const T* in = x + start;
    T* result = out + start;
    float thread_max = minus_infinity();
    for (int c = threadIdx.x; c < columns; c += threads) thread_max = fmaxf(thread_max, static_cast<float>(in[c]));
    const float row_max = group_max(thread_max, true, max_slots);
    float thread_sum = 0.0f;
    for (int c = threadIdx.x; c < columns; c += threads) thread_sum += expf(static_cast<float>(in[c]) - row_max);
    const float inverse = 1.0f / group_sum(thread_sum, true, sum_slots);
    for (int c = threadIdx.x; c < columns; c += threads) {
      result[c] = static_cast<T>(expf(static_cast<float>(in[c]) - row_max) * inverse);
    }
    return;
  }

  // Who owns which row. A warp per row: warp w of block b has row b x warps + w (the launcher's grid,
  // ceil(rows / warps) blocks, covers every row; the warps of a block go their own way, with no
  // barrier on this path, so a warp past the last row leaves at once). A block per row: block b has
  // row b, every thread of it.
  const int warps = threads / HG_WARP_SIZE;
  // (An int: row < rows < 2^31, and block b is only launched when b x warps < rows.)
  const int row = warp_per_row ? static_cast<int>(blockIdx.x * warps + threadIdx.x / HG_WARP_SIZE)
                               : static_cast<int>(blockIdx.x);
  if (row >= rows) return;                         // a whole warp (or a whole block) leaves together
  const int member = warp_per_row ? static_cast<int>(threadIdx.x % HG_WARP_SIZE) : static_cast<int>(threadIdx.x);
  const int members = warp_per_row ? HG_WARP_SIZE : threads;
  const int64_t start = static_cast<int64_t>(row) * columns;   // 64-bit: rows x columns may pass 2^31
  softmax_row_on_chip(x + start, out + start, columns, member, members, packed, !warp_per_row, max_slots, sum_slots);
}
