/*
Warp shuffles, and the row held in registers: x crosses DRAM once and is never loaded twice.
parent: v02_block_per_row
change: each thread loads its up to 32 elements of the row (columns t, t + 256, ...) into registers
  once, adds their squares, and writes the outputs from those registers; the block's sum is two
  rounds of __shfl_xor with one shared-memory round trip between them (1 barrier instead of 9).
  Rows longer than 256 x 32 = 8192 columns do not fit: they take v02's way (read twice) in the same
  kernel, so every shape stays correct
hypothesis: v02 loads every element twice (DRAM, then L2) and waits at 9 barriers per row. Here
  the 32 loads of a thread are independent and issued before any is used: 256 threads x 32 x 2
  bytes = 16 KiB per bfloat16 block in flight, and 5 blocks per SM at 48 registers a thread
  (compile-check; 65536 / (48 x 256) = 5.3): 80 KiB per SM, far above the ~16-32 KiB that ~2 TB/s
  of reads x 1-2 us of loaded latency needs over 132 SMs. DRAM traffic is the minimum, 536 MB at
  16384x8192 bfloat16 (read x, write out; weight from L2). What still costs is instruction count:
  two 2-byte loads (x, weight) and a 2-byte store per element (v02: three loads and a store).
  Expect ~3.2 TB/s: 1.2x F.rms_norm (2642 GB/s in a reference run before this ladder), 0.8x the plain
  Triton kernel (4007 GB/s); in float32 ~3.3 TB/s, 1.1x F.rms_norm at 8192x4096
prediction: 1.3x v02 at 16384x8192 bfloat16 (1.2x F.rms_norm); 1.1x F.rms_norm at 8192x4096 float32
outcome: 1.037x v02 [1.029, 1.040] at 16384x8192 bfloat16 (predicted 1.3x); 0.81x v02 [0.806, 0.817] at 8192x4096 bfloat16 (records rms_norm.bfloat16, run of 152c451)
deterministic: yes, each thread adds its elements in order, then the same butterfly and the same
  per-warp order in every thread and every run
entry: rms_norm_warp_shuffle_registers<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record rms_norm.float32
// hello-gpu: record rms_norm.bfloat16

// Threads per block (the companion's BLOCK), whole warps. 256 threads x 32 registers of row = 8192
// columns, the benchmark's longest row; at 48 registers a thread an SM holds 5 such blocks.
constexpr int kBlock = 256;
// Row elements a thread keeps in registers (as float32). Compile-time, so the array lives in
// registers: a run-time bound would put it in local memory (DRAM-backed), which defeats the rung.
constexpr int kPerThread = 32;

// The sum of `value` over the warp, in every lane. XOR butterfly: at each step lane i adds lane
// i ^ offset's value; i and its partner compute a + b and b + a, which are equal bit for bit, so
// after log2(HG_WARP_SIZE) steps every lane holds the same total. Every lane of the warp must call it.
__device__ __forceinline__ float warp_sum_all(float value) {
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value += __shfl_xor(value, offset);
  return value;
}

// The sum of `value` over the block, in every thread: a butterfly in each warp, one shared slot per
// warp, one barrier, then every warp adds the slots the same way (so no broadcast and no second
// barrier). Called once per kernel, so the slots are never rewritten while someone reads them.
__device__ __forceinline__ float block_sum_all(float value) {
  __shared__ float warp_sums[kBlock / HG_WARP_SIZE];   // 8 floats (wave64: 4)
  const int lane = threadIdx.x % HG_WARP_SIZE;
  const int warp = threadIdx.x / HG_WARP_SIZE;
  value = warp_sum_all(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();                                     // every slot written before any is read
  return warp_sum_all(lane < kBlock / HG_WARP_SIZE ? warp_sums[lane] : 0.0f);
}

// The row fits: one load per element, kept in registers until the store.
template <typename T>
__device__ __forceinline__ void normalise_held_row(const T* __restrict__ x_row, const T* __restrict__ weight,
                                                   T* __restrict__ out_row, int columns, float eps) {
  float held[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {               // all loads first: 32 in flight per thread
    const int column = threadIdx.x + k * kBlock;       // < 8192 + 256: no overflow
    held[k] = column < columns ? static_cast<float>(x_row[column]) : 0.0f;
  }
  float sum_of_squares = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) sum_of_squares += held[k] * held[k];
  const float rstd = rsqrtf(block_sum_all(sum_of_squares) / static_cast<float>(columns) + eps);
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int column = threadIdx.x + k * kBlock;
    if (column < columns) out_row[column] = static_cast<T>(held[k] * rstd * static_cast<float>(weight[column]));
  }
}

// The row does not fit (columns > 8192): v02's two passes, the second from L2.
template <typename T>
__device__ __forceinline__ void normalise_long_row(const T* __restrict__ x_row, const T* __restrict__ weight,
                                                   T* __restrict__ out_row, int columns, float eps) {
  float sum_of_squares = 0.0f;
  for (int column = threadIdx.x; column < columns; column += kBlock) {   // columns < 2^31 - 1024
    const float value = static_cast<float>(x_row[column]);
    sum_of_squares += value * value;
  }
  const float rstd = rsqrtf(block_sum_all(sum_of_squares) / static_cast<float>(columns) + eps);
  for (int column = threadIdx.x; column < columns; column += kBlock) {
    out_row[column] = static_cast<T>(static_cast<float>(x_row[column]) * rstd * static_cast<float>(weight[column]));
  }
}

// One block per row. The branch depends only on `columns`, the same for the whole block, so every
// thread reaches the barrier inside block_sum_all. Two functions rather than one body: the 32
// registers of `held` are not kept alive in the long-row path.
template <typename T>
__global__ void __launch_bounds__(kBlock)
rms_norm_warp_shuffle_registers(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out,
                                int rows, int columns, float eps) {
  if (static_cast<int>(blockIdx.x) >= rows) return;   // whole block, before any barrier
  const int64_t start = static_cast<int64_t>(blockIdx.x) * columns;   // 64-bit row offset
  if (columns <= kBlock * kPerThread) {
    normalise_held_row(x + start, weight, out + start, columns, eps);
  } else {
    normalise_long_row(x + start, weight, out + start, columns, eps);
  }
}
