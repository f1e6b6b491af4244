/*
Block per row: 256 threads share a row, coalesced; a shared-memory tree adds their sums of squares.
parent: v01_thread_per_row
change: one block of 256 threads per row (grid = rows): thread t reads columns t, t + 256, ... so a
  warp reads 32 consecutive elements per load; the 256 partial sums meet in a shared-memory tree
  (8 halving steps, a barrier each); a second loop reads the row again to write x * rstd * weight
hypothesis: the loads are now coalesced and there are 16384 blocks to keep every SM busy (8
  resident blocks of 256 fill the 2048 threads of an SM). ptxas unrolls the first loop 16 times,
  so a thread has 16 loads (32 bytes of bfloat16) in flight: 64 KiB per SM, plenty for DRAM. The
  second pass finds the row in L2 (1056 resident rows x 16 KiB = 17 MiB of the 60 MiB), so DRAM
  sees x once; what costs now is instructions: every element is loaded twice, plus the weight, and
  stored once, each a 2-byte access (64 bytes per warp instruction), with 9 barriers per row. Expect
  ~2.4 TB/s in bfloat16 (~0.9x F.rms_norm, 2642 GB/s in a reference run before this ladder) and ~2.9 TB/s
  (~1.0x, 2934 GB/s) in float32, where each instruction carries twice the bytes
prediction: 0.9x F.rms_norm at 16384x8192 bfloat16; 1.0x at 8192x4096 float32; 3x v01 or more
outcome: 1.18x F.rms_norm [1.18, 1.19] at 16384x8192 bfloat16 (predicted 0.9x) (records rms_norm.bfloat16, run of 152c451)
deterministic: yes, each thread adds its columns in order and the tree pairs the same slots every run
entry: rms_norm_block_per_row<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record rms_norm.float32
// hello-gpu: record rms_norm.bfloat16

// Threads per block (the companion's BLOCK): a power of two for the halving tree. 256 threads at
// 28-32 registers each (compile-check): 8 blocks fill an SM's 2048 threads and its 65536 registers.
constexpr int kBlock = 256;

template <typename T>
__global__ void __launch_bounds__(kBlock)
rms_norm_block_per_row(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out,
                       int rows, int columns, float eps) {
  __shared__ float partial[kBlock];
  if (static_cast<int>(blockIdx.x) >= rows) return;   // the whole block leaves together, before any barrier
  const int64_t start = static_cast<int64_t>(blockIdx.x) * columns;   // 64-bit row offset
  const T* x_row = x + start;
  T* out_row = out + start;

  // columns < 2^31 - 1024 (the launcher checks), so column + kBlock never wraps.
  float sum_of_squares = 0.0f;
  for (int column = threadIdx.x; column < columns; column += kBlock) {
    const float value = static_cast<float>(x_row[column]);
    sum_of_squares += value * value;
  }
  partial[threadIdx.x] = sum_of_squares;
  __syncthreads();
  // Halving tree: after the step with `stride`, slots [0, stride) hold the sums of twice as many.
  // The barrier ends each step: the next step reads slots another thread has just written.
  for (int stride = kBlock / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  // partial[0] is final (the last step ended with a barrier) and nobody writes it again.
  const float rstd = rsqrtf(partial[0] / static_cast<float>(columns) + eps);

  for (int column = threadIdx.x; column < columns; column += kBlock) {
    const float value = static_cast<float>(x_row[column]);      // from L2: this block read it just now
    out_row[column] = static_cast<T>(value * rstd * static_cast<float>(weight[column]));
  }
}
