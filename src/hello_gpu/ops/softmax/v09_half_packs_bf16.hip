/*
Half of v08's registers for a 2-byte row: 4 packs a thread in bfloat16 and float16, and the compiler
held to 32 registers, so twice the warps share an SM. float32 is v08 unchanged.
parent: v08_packed_registers
change: in bfloat16 and float16 a thread keeps 4 packs of 16 bytes (32 values; v08: 8 packs, 64
  values) and 16 float slots on the scalar path (v08: 32), and __launch_bounds__(1024, 2) asks for
  two 1024-thread blocks an SM, that is at most 32 registers a thread; the launcher gives an 8192-
  column bfloat16 row 256 threads (v08: 128). float32 keeps v08's 8 packs, 32 slots and bounds
hypothesis: v08 runs bfloat16 8192x8192 at 3591 GB/s, 0.92x Triton t03 (3893), though it keeps
  8 rows (128 KiB) in flight an SM against t03's ~4: the bytes in flight are not what is short.
  What differs is the warps: v08 takes 64 registers a thread (ptxas for sm_90, any dtype), so an
  SM holds 1024 threads, 32 warps, each converting and exponentiating 64 values twice; t03 runs at
  93% occupancy (~60 warps, 16 values a thread), and the counters of v05 (same 50% occupancy, 53
  registers) put its top stall at "wait", a fixed-latency dependency between instructions, where
  t03's is "long_scoreboard", waiting on memory (records/nvidia-h200/softmax.bfloat16.profile.json,
  47% against 93% achieved occupancy). Compiled with 4 packs and the 32-register bound, the
  bfloat16 and float16 kernels take 32 registers with no spill stores (ptxas, sm_90; 8 bytes of
  stack), so an SM holds 2048 threads: 8 rows of 256 threads, the same 128 KiB in flight as v08,
  with 64 warps each doing half the work to cover that latency. Expect bfloat16 to reach t03's
  ~3.9 TB/s.
prediction: 1.08x v08 at 8192x8192 bfloat16 (~3.7x torch.softmax, over the 3.5x target); 1.0x v08
  in float32 (the same code)
outcome: 0.922x v08 [0.920, 0.928] at 8192x8192 bfloat16 (predicted 1.08x: wrong) (records softmax.bfloat16, run of e61260e)
deterministic: yes, each thread reduces its packs in a fixed order, then fixed butterflies
entry: softmax_half_packs<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record softmax.float32
// hello-gpu: record softmax.bfloat16

// Row values a thread keeps in registers, up to 1024 x 32 = 32768 a block on the 16-byte path. Per
// dtype, so that a 2-byte row keeps half of v08's registers: 8 packs (32 registers of row) for
// float32 as in v08, 4 packs (16 registers) for bfloat16 and float16; the scalar path likewise.
template <typename T> struct Held {
  static constexpr int packs = sizeof(T) == 4 ? 8 : 4;       // 16-byte packs a thread keeps
  static constexpr int floats = sizeof(T) == 4 ? 32 : 16;    // float slots on the scalar path
  // __launch_bounds__'s second argument: CUDA reads two 1024-thread blocks an SM (so 65536 / 2048 =
  // 32 registers a thread on the H200); HIP-Clang reads it as waves per execution unit, a looser bound.
  static constexpr int min_blocks = sizeof(T) == 4 ? 1 : 2;
};
constexpr int kMaxBlock = 1024;
constexpr int kMaxWarps = kMaxBlock / HG_WARP_SIZE;

// 16 bytes of T, aligned so that one access is one 128-bit load or store (LDG.128 / STG.128).
template <typename T>
struct alignas(16) Pack {
  T lane[16 / sizeof(T)];
};

// -inf as a float (NVRTC has no INFINITY; see v01).
__device__ __forceinline__ float minus_infinity() { return __uint_as_float(0xff800000u); }

// Lane l of a 16-byte pack kept as four raw 32-bit words, as a float. Kept raw because NVRTC spilled
// a Pack<hip_bfloat16> array held across the three passes (30 bytes at 64 registers), and did not
// spill the same bits held as uint4: the conversions below are shifts and masks, done when needed.
template <typename T> __device__ __forceinline__ float lane_value(const uint4& pack, int l);
template <> __device__ __forceinline__ float lane_value<float>(const uint4& pack, int l) {
  const unsigned word = l == 0 ? pack.x : l == 1 ? pack.y : l == 2 ? pack.z : pack.w;
  return __uint_as_float(word);
}
template <> __device__ __forceinline__ float lane_value<hip_bfloat16>(const uint4& pack, int l) {
  const unsigned word = l < 2 ? pack.x : l < 4 ? pack.y : l < 6 ? pack.z : pack.w;
  // bfloat16 is the top half of a float32: the low lane of a word is its low 16 bits (little endian).
  return __uint_as_float(l % 2 == 0 ? word << 16 : word & 0xffff0000u);
}
template <> __device__ __forceinline__ float lane_value<__half>(const uint4& pack, int l) {
  const unsigned word = l < 2 ? pack.x : l < 4 ? pack.y : l < 6 ? pack.z : pack.w;
  return __half2float(__ushort_as_half(static_cast<unsigned short>(l % 2 == 0 ? word & 0xffffu : word >> 16)));
}

// Butterflies over the lanes of a warp, the result in every lane (see v03).
__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor(value, offset));
  return value;
}
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value += __shfl_xor(value, offset);
  return value;
}

// Block-wide maximum and sum, in every thread; blockDim.x a whole number of warps (see v04).
__device__ __forceinline__ float block_max(float value, float* slots) {
  const int lane = threadIdx.x % HG_WARP_SIZE, warp = threadIdx.x / HG_WARP_SIZE;
  const int warps = blockDim.x / HG_WARP_SIZE;
  value = warp_max(value);
  if (lane == 0) slots[warp] = value;
  __syncthreads();
  return warp_max(lane < warps ? slots[lane] : minus_infinity());
}
__device__ __forceinline__ float block_sum(float value, float* slots) {
  const int lane = threadIdx.x % HG_WARP_SIZE, warp = threadIdx.x / HG_WARP_SIZE;
  const int warps = blockDim.x / HG_WARP_SIZE;
  value = warp_sum(value);
  if (lane == 0) slots[warp] = value;
  __syncthreads();
  return warp_sum(lane < warps ? slots[lane] : 0.0f);
}

// One block per row (grid = rows); blockDim.x a multiple of the warp size, at most 1024, chosen by the
// launcher so that columns <= blockDim.x * kPerThread whenever a row can fit (as v04).
template <typename T>
__global__ void __launch_bounds__(kMaxBlock, Held<T>::min_blocks)
softmax_half_packs(const T* __restrict__ x, T* __restrict__ out, int rows, int columns) {
  constexpr int kLanes = 16 / sizeof(T);          // values per pack: 4 float32, 8 bfloat16 / float16
  constexpr int kPacks = Held<T>::packs;          // 8 packs: 32 float32 values; 4: 32 bfloat16 values
  constexpr int kPerThread = Held<T>::floats;
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
        for (int l = 0; l < kLanes; ++l) thread_sum += expf(lane_value<T>(kept[k], l) - row_max);
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
          pack.lane[l] = static_cast<T>(expf(lane_value<T>(kept[k], l) - row_max) * inverse);
        }
        out_packs[p] = pack;
      }
    }
    return;
  }

  if (!packed && columns <= threads * kPerThread) {
    // v05's scalar path, unchanged: slot k is column threadIdx.x + k * threads (1023, 781 or 1 columns).
    const int used = (columns + threads - 1) / threads;
    float v[kPerThread];
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int c = threadIdx.x + k * threads;
      v[k] = (k < used && c < columns) ? static_cast<float>(in[c]) : minus_infinity();
    }
    float thread_max = minus_infinity();
#pragma unroll
    for (int s = 0; s < kPerThread; ++s) thread_max = fmaxf(thread_max, v[s]);
    const float row_max = block_max(thread_max, max_slots);
    float thread_sum = 0.0f;
#pragma unroll
    for (int s = 0; s < kPerThread; ++s) {
      if (s < used) {
        v[s] = expf(v[s] - row_max);
        thread_sum += v[s];
      }
    }
    const float inverse = 1.0f / block_sum(thread_sum, sum_slots);
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
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
  for (int c = threadIdx.x; c < columns; c += threads) thread_sum += expf(static_cast<float>(in[c]) - row_max);
  const float inverse = 1.0f / block_sum(thread_sum, sum_slots);
  for (int c = threadIdx.x; c < columns; c += threads) {
    result[c] = static_cast<T>(expf(static_cast<float>(in[c]) - row_max) * inverse);
  }
}
