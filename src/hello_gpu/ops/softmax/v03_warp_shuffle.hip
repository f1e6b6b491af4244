/*
Warp shuffles: each warp combines its 32 values in registers, and shared memory carries only one
value per warp, once, to finish the block's maximum and sum. Still three passes over the row.
parent: v02_block_per_row_shared
change: the reductions use __shfl_xor butterflies inside each warp and one shared-memory round trip
  (8 values, 1 barrier) across warps, instead of v02's 256-slot tree with 10 barriers
hypothesis: v02 spends 2 x 10 barriers and 2 x 8 dependent shared-memory steps per row; while a
  block sits in them it has no load in flight. A butterfly (offsets 16, 8, 4, 2, 1; wave64 starts at
  32) leaves the result in every lane, so one barrier per reduction suffices and no broadcast is
  needed: 2 barriers a row instead of 20. The bytes are unchanged (three read passes, scalar loads),
  so at 8192 and 32768 columns, where a row's passes take ~10-40 us and the trees ~1 us, expect a
  small gain; at 1024 columns (4 elements per thread per pass) the trees are a third of a row's time.
prediction: 1.05x v02 at 8192x8192 float32 (~0.85x torch.softmax); 1.3x v02 at 4096x1024; 1.0x-1.05x
  at 4096x32768 and in bfloat16
outcome: 1.01x v02 [1.005, 1.014] at 8192x8192 float32 (predicted 1.05x) (records softmax.float32, run of 2c2a085)
deterministic: yes, the butterflies and the cross-warp step combine in a fixed order
entry: softmax_warp_shuffle<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record softmax.float32
// hello-gpu: record softmax.bfloat16

// Threads per block (the launcher uses the same): 8 warps of 32 on NVIDIA, 4 wavefronts of 64 on CDNA.
constexpr int kBlock = 256;
constexpr int kWarps = kBlock / HG_WARP_SIZE;

// -inf as a float (NVRTC has no INFINITY; see v01).
__device__ __forceinline__ float minus_infinity() { return __uint_as_float(0xff800000u); }

// The maximum over the HG_WARP_SIZE lanes of a warp, in every lane. __shfl_xor(v, k) reads v from
// lane (lane ^ k): after offsets 16, 8, 4, 2, 1 each lane has combined all 32 (a butterfly). Every
// lane of the warp must call it: a shuffle reads the other lanes' registers.
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

// Block-wide maximum and sum, in every thread: a butterfly per warp, warp results to shared memory,
// one barrier, then every warp reads the kWarps results (8 on NVIDIA) and does the same butterfly on
// them (lanes past kWarps bring the identity: -inf for the maximum, 0 for the sum). Each reduction
// has its own slots, so the second never overwrites values the first is still reading: no barrier
// after the read. Called by every thread of the block.
__device__ __forceinline__ float block_max(float value, float* slots) {
  const int lane = threadIdx.x % HG_WARP_SIZE, warp = threadIdx.x / HG_WARP_SIZE;
  value = warp_max(value);
  if (lane == 0) slots[warp] = value;
  __syncthreads();
  return warp_max(lane < kWarps ? slots[lane] : minus_infinity());
}
__device__ __forceinline__ float block_sum(float value, float* slots) {
  const int lane = threadIdx.x % HG_WARP_SIZE, warp = threadIdx.x / HG_WARP_SIZE;
  value = warp_sum(value);
  if (lane == 0) slots[warp] = value;
  __syncthreads();
  return warp_sum(lane < kWarps ? slots[lane] : 0.0f);
}

// Launched with kBlock threads per block and one block per row (grid = rows).
template <typename T>
__global__ void __launch_bounds__(kBlock)
softmax_warp_shuffle(const T* __restrict__ x, T* __restrict__ out, int rows, int columns) {
  __shared__ float max_slots[kWarps];
  __shared__ float sum_slots[kWarps];
  const int row = blockIdx.x;
  if (row >= rows) return;                     // the whole block leaves together
  const int64_t start = static_cast<int64_t>(row) * columns;   // 64-bit: rows x columns may pass 2^31
  const T* in = x + start;
  T* result = out + start;

  // Pass 1: the maximum (a thread with no column brings -inf).
  float thread_max = minus_infinity();
  for (int c = threadIdx.x; c < columns; c += kBlock) thread_max = fmaxf(thread_max, static_cast<float>(in[c]));
  const float row_max = block_max(thread_max, max_slots);

  // Pass 2: the sum of exponentials. All -inf row: x - row_max = NaN, so the sum and every output
  // are NaN (the defined 0/0); a scattered -inf adds expf(-inf) = 0.
  float thread_sum = 0.0f;
  for (int c = threadIdx.x; c < columns; c += kBlock) thread_sum += expf(static_cast<float>(in[c]) - row_max);
  const float row_sum = block_sum(thread_sum, sum_slots);

  // Pass 3: read again, write once; one division per row.
  const float inverse = 1.0f / row_sum;
  for (int c = threadIdx.x; c < columns; c += kBlock) {
    result[c] = static_cast<T>(expf(static_cast<float>(in[c]) - row_max) * inverse);
  }
}
