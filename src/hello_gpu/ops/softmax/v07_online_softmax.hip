/*
Online softmax: the maximum and the sum travel together as one (max, sum) pair that can be merged,
so a row needs one reduction instead of two, and a row too long for the chip is read twice instead
of three times.
parent: v06_rows_per_block
change: each thread turns its values into a pair (its maximum m, the sum of exp(x - m) over its
  values) with no communication, and the group merges pairs once (1 butterfly; in a block, 1 barrier
  instead of 2); rows longer than 1024 x 32 = 32768 columns build the pair in one streaming read
  with 16-byte loads (rescaling the running sum whenever the running maximum grows), then read
  again to write: 2 reads + 1 write instead of v06's 3 + 1 with scalar loads
hypothesis: at the four benchmark shapes every row fits on chip, so DRAM traffic is v06's (1 read,
  1 write) and only the reduction changes: one barrier and one dependent butterfly fewer per row,
  a few hundred cycles against a row's ~8 us at 8192 columns: expect no measurable change (~1.0x
  v06). The gain is for rows past 32768 columns, e.g. 4096x65536 float32 (1 GiB, 256 KiB rows):
  v06 falls back to three passes of scalar 4-byte loads; 132 rows in flight (one 1024-thread block
  per SM) are 33 MiB, inside the 60 MiB L2, so its re-reads mostly hit L2 and DRAM sees ~1 read + 1
  write in both; v07 saves one of the three passes through the SMs' load path (both compute two exps
  per element) and issues 4x fewer load instructions: ~1.3x v06 there.
prediction: 1.0x v06 (0.98-1.03) at 8192x8192, 4096x32768 and 4096x1024 float32 and 8192x8192
  bfloat16; ~1.3x v06 at 4096x65536 float32 (not a benchmark shape)
outcome: 0.99x v06 [0.988, 0.996] at 8192x8192 float32, 0.81x in bfloat16 (predicted 1.0x) (records softmax.float32 and softmax.bfloat16, run of 2c2a085)
deterministic: yes, pairs merge in fixed butterflies, and lanes that meet compute the same result
entry: softmax_online<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record softmax.float32
// hello-gpu: record softmax.bfloat16

// Row values a thread keeps in registers, as float32 (see v04): a warp holds up to 32 x 32 = 1024
// (wave64: 2048), a block of 1024 threads up to 32768.
constexpr int kPerThread = 32;
constexpr int kMaxBlock = 1024;
constexpr int kMaxWarps = kMaxBlock / HG_WARP_SIZE;
// Values each thread loads per step of the streaming loops for long rows, all issued before any is
// used: 4 float32 packs (64 bytes in flight per thread) or 2 bfloat16 / float16 packs. 4 packs of
// 8 bfloat16 made the kernel need all of its 64 registers; 16 values a step fit in ~48.
constexpr int kStepValues = 16;

// Pack<T> (see v05) and minus_infinity (see v01).
#include "hg_pack.h"
#include "hg_reduce.h"

// The online-softmax pair. (m, s) stands for "values whose maximum is m and whose sum of exp(x - m)
// is s"; the empty set is (-inf, 0). Two pairs merge exactly: the larger maximum stays, and the other
// sum is rescaled to it, s_lo x exp(m_lo - m_hi) (<= s_lo, so nothing can overflow).
// A side with m = -inf (empty, or all its values -inf) adds 0; testing it keeps -inf - (-inf) = NaN
// out of rows that have finite values. Both lanes of a butterfly step compute the same bits: the
// pairs are put in the same (hi, lo) order on both sides, and when the maxima tie, exp(0) is exactly 1
// and s_hi + s_lo = s_lo + s_hi.
__device__ __forceinline__ void merge(float& m, float& s, float other_m, float other_s) {
  float m_hi = m, s_hi = s, m_lo = other_m, s_lo = other_s;
  if (other_m > m) {
    m_hi = other_m; s_hi = other_s; m_lo = m; s_lo = s;
  }
  s = s_hi + (m_lo == minus_infinity() ? 0.0f : s_lo * expf(m_lo - m_hi));
  m = m_hi;
}

// Merge the pairs of a warp's lanes, the result in every lane (a butterfly, as v03's sums).
__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) {
    const float other_m = __shfl_xor(m, offset);
    const float other_s = __shfl_xor(s, offset);
    merge(m, s, other_m, other_s);
  }
}

// Merge over the group that owns a row: a warp, or the whole block (whole_block is the same for every
// thread of the block): butterflies, one shared-memory round trip across warps, one barrier.
// A block handles one row, so the slots are written once per launch: no reuse to guard.
__device__ __forceinline__ void group_merge(float& m, float& s, bool whole_block, float* m_slots, float* s_slots) {
  warp_merge(m, s);
  if (!whole_block) return;
  const int lane = threadIdx.x % HG_WARP_SIZE, warp = threadIdx.x / HG_WARP_SIZE;
  if (lane == 0) {
    m_slots[warp] = m;
    s_slots[warp] = s;
  }
  __syncthreads();
  const bool mine = lane < static_cast<int>(blockDim.x / HG_WARP_SIZE);
  m = mine ? m_slots[lane] : minus_infinity();
  s = mine ? s_slots[lane] : 0.0f;
  warp_merge(m, s);
}

// Fold `count` more values into a running pair: one exp per value, plus one rescale when the maximum
// grows. -inf values (row entries or padding) add exactly 0; while m is still -inf nothing is added.
template <int kCount>
__device__ __forceinline__ void fold(float& m, float& s, const float (&values)[kCount]) {
  float local = values[0];
#pragma unroll
  for (int i = 1; i < kCount; ++i) local = fmaxf(local, values[i]);
  if (local > m) {
    s *= expf(m - local);        // m = -inf: s is 0 and expf(-inf) = 0, still 0
    m = local;
  }
  if (m != minus_infinity()) {
#pragma unroll
    for (int i = 0; i < kCount; ++i) s += expf(values[i] - m);
  }
}

// v06's on-chip softmax of one row (a group of `members` threads, this one number `member`; needs
// columns <= members x 32), with the pair: m_t and exp(x - m_t) from the thread's own values, one
// merge, then out = exp(x - m_t) x exp(m_t - M) / S = exp(x - M) / S: still one exp per value.
template <typename T>
__device__ __forceinline__ void softmax_row_on_chip(const T* in, T* result, int columns, int member, int members,
                                                    bool packed, bool whole_block, float* m_slots,
                                                    float* s_slots) {
  constexpr int kLanes = 16 / sizeof(T);          // values per pack: 4 float32, 8 bfloat16 / float16
  constexpr int kPacks = kPerThread / kLanes;     // packs per thread: 8 or 4
  const int packs = columns / kLanes;
  const int used = packed ? ((packs + members - 1) / members) * kLanes : (columns + members - 1) / members;

  float v[kPerThread];   // slot s: pack s / kLanes, lane s % kLanes (packed); column member + s x members
  if (packed) {
    const Pack<T>* in_packs = reinterpret_cast<const Pack<T>*>(in);
    Pack<T> loaded[kPacks];
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {              // every load first
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

  // This thread's pair, before any communication. A thread whose values are all -inf (or that has
  // none) keeps (-inf, 0) and zeros in v: exp(x - (-inf)) would be NaN.
  float m = minus_infinity();
#pragma unroll
  for (int s = 0; s < kPerThread; ++s) m = fmaxf(m, v[s]);
  const float thread_max = m;
  float sum = 0.0f;
#pragma unroll
  for (int s = 0; s < kPerThread; ++s) {
    if (s < used) {
      v[s] = thread_max == minus_infinity() ? 0.0f : expf(v[s] - thread_max);
      sum += v[s];
    }
  }
  group_merge(m, sum, whole_block, m_slots, s_slots);

  // One factor per thread. A finite row: exp(thread_max - M) <= 1 and the sum S >= 1. A thread with
  // only -inf values: exp(-inf) / S = 0 times its zeros. An all -inf row: M = -inf, S = 0, and
  // exp(-inf - (-inf)) / 0 is NaN, so every output is NaN: the defined 0/0.
  const float factor = expf(thread_max - m) / sum;

  if (packed) {
    Pack<T>* out_packs = reinterpret_cast<Pack<T>*>(result);
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = member + k * members;
      if (p < packs) {
        Pack<T> pack;
#pragma unroll
        for (int l = 0; l < kLanes; ++l) pack.lane[l] = static_cast<T>(v[k * kLanes + l] * factor);
        out_packs[p] = pack;
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int c = member + k * members;
      if (k < used && c < columns) result[c] = static_cast<T>(v[k] * factor);
    }
  }
}

// A row longer than the block's registers hold (columns > blockDim.x x 32): one streaming read that
// builds each thread's pair, one merge over the block, then a second read to write exp(x - M) / S.
// The second read is mostly served by L2 while the rows in flight fit in it: one 1024-thread block per
// SM is 132 rows, 33 MiB at 65536 float32 columns (256 KiB a row) against the 60 MiB L2.
template <typename T>
__device__ __forceinline__ void softmax_row_streaming(const T* in, T* result, int columns, bool packed,
                                                      float* m_slots, float* s_slots) {
  constexpr int kLanes = 16 / sizeof(T);
  constexpr int kUnroll = kStepValues / kLanes;   // packs per step: 4 (float32) or 2
  const int threads = blockDim.x;
  const int packs = columns / kLanes;
  float m = minus_infinity(), s = 0.0f;
  if (packed) {
    const Pack<T>* in_packs = reinterpret_cast<const Pack<T>*>(in);
    for (int first = threadIdx.x; first < packs; first += kUnroll * threads) {
      Pack<T> chunk[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {           // the step's loads first
        const int p = first + u * threads;
        if (p < packs) chunk[u] = in_packs[p];
      }
      // Then one pack at a time (4 or 8 floats live, not all 16 at once).
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (first + u * threads < packs) {
          float values[kLanes];
#pragma unroll
          for (int l = 0; l < kLanes; ++l) values[l] = static_cast<float>(chunk[u].lane[l]);
          fold(m, s, values);
        }
      }
    }
  } else {
    constexpr int kScalars = 4;                    // single values per step: 4 loads in flight
    for (int first = threadIdx.x; first < columns; first += kScalars * threads) {
      float values[kScalars];
#pragma unroll
      for (int u = 0; u < kScalars; ++u) {
        const int c = first + u * threads;
        values[u] = c < columns ? static_cast<float>(in[c]) : minus_infinity();
      }
      fold(m, s, values);
    }
  }
  group_merge(m, s, true, m_slots, s_slots);

  // All -inf row: m = -inf, so x - m is NaN and the outputs are NaN, the defined 0/0.
  const float inverse = 1.0f / s;
  if (packed) {
    const Pack<T>* in_packs = reinterpret_cast<const Pack<T>*>(in);
    Pack<T>* out_packs = reinterpret_cast<Pack<T>*>(result);
    for (int first = threadIdx.x; first < packs; first += kUnroll * threads) {
      Pack<T> chunk[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int p = first + u * threads;
        if (p < packs) chunk[u] = in_packs[p];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int p = first + u * threads;
        if (p < packs) {
          Pack<T> pack;
#pragma unroll
          for (int l = 0; l < kLanes; ++l) pack.lane[l] = static_cast<T>(expf(static_cast<float>(chunk[u].lane[l]) - m) * inverse);
          out_packs[p] = pack;
        }
      }
    }
  } else {
    for (int c = threadIdx.x; c < columns; c += threads) {
      result[c] = static_cast<T>(expf(static_cast<float>(in[c]) - m) * inverse);
    }
  }
}

// As v06: short rows (columns <= HG_WARP_SIZE x 32) a warp each, blockDim.x / HG_WARP_SIZE rows per
// block, grid = ceil(rows / warps); longer rows a block each (grid = rows), blockDim.x sized by the
// launcher; rows past 1024 x 32 columns stream.
template <typename T>
__global__ void __launch_bounds__(kMaxBlock)
softmax_online(const T* __restrict__ x, T* __restrict__ out, int rows, int columns) {
  __shared__ float m_slots[kMaxWarps];
  __shared__ float s_slots[kMaxWarps];
  constexpr int kLanes = 16 / sizeof(T);
  const int threads = blockDim.x;
  // The same answer for every thread of the block (see v05): so are the branches below.
  const bool packed = columns % kLanes == 0 &&
                      ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) % 16) == 0;
  const bool warp_per_row = columns <= HG_WARP_SIZE * kPerThread;

  if (!warp_per_row && columns > threads * kPerThread) {
    const int row = blockIdx.x;
    if (row >= rows) return;                       // the whole block leaves together
    const int64_t start = static_cast<int64_t>(row) * columns;   // 64-bit: rows x columns may pass 2^31
    softmax_row_streaming(x + start, out + start, columns, packed, m_slots, s_slots);
    return;
  }

  // Who owns which row: as v06 (a warp past the last row, or a block past it, leaves at once).
  const int warps = threads / HG_WARP_SIZE;
  const int row = warp_per_row ? static_cast<int>(blockIdx.x * warps + threadIdx.x / HG_WARP_SIZE)
                               : static_cast<int>(blockIdx.x);
  if (row >= rows) return;
  const int member = warp_per_row ? static_cast<int>(threadIdx.x % HG_WARP_SIZE) : static_cast<int>(threadIdx.x);
  const int members = warp_per_row ? HG_WARP_SIZE : threads;
  const int64_t start = static_cast<int64_t>(row) * columns;
  softmax_row_on_chip(x + start, out + start, columns, member, members, packed, !warp_per_row, m_slots, s_slots);
}
