/*
Thread per row: the first HIP rung, the simplest kernel that can be correct, and a slow one on purpose.
parent: v00_torch
change: one thread owns a whole row: a serial loop adds the squares in float32, a second loop reads
  the row again and writes x * rstd * weight; 64 threads per block, ceil(rows / 64) blocks
hypothesis: the same 2 bytes in and 2 out per bfloat16 element as any rung (536 MB at 16384x8192),
  but the access pattern defeats the memory system. The 32 lanes of a warp read 32 different rows,
  so one load instruction touches 32 sectors of 32 bytes for 64 useful bytes; L1 keeps each sector
  for the next 15 columns, so DRAM traffic stays near 1x per pass, but a thread waits for its
  misses one after another. ptxas unrolls the loop 16 times: one 32-byte sector per thread per DRAM
  round trip. 16384 threads x 32 bytes = 512 KiB in flight over the whole GPU, ~0.7 TB/s by
  Little's law at ~0.7 us: ~350 us per pass over x, and the second pass reads x from DRAM again
  (the 256 MiB input is long gone from the 60 MiB L2): ~0.75 ms against 203 us for F.rms_norm
  (a reference run before this ladder). At 8192x4096 half the threads each wait half as many round trips:
  ~0.35 ms against 48 us
prediction: 0.2x to 0.3x F.rms_norm at 16384x8192 bfloat16; ~0.15x at 8192x4096 bfloat16
outcome: 0.077x F.rms_norm [0.077, 0.077] at 16384x8192 bfloat16 (predicted 0.2-0.3x) (records rms_norm.bfloat16, run of 152c451)
deterministic: yes, one thread adds its row's squares left to right, always in the same order
entry: rms_norm_thread_per_row<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record rms_norm.float32
// hello-gpu: record rms_norm.bfloat16

// Threads per block (the companion's BLOCK). Small on purpose: a thread is a row, and 8192 rows in
// blocks of 64 make 128 blocks, which spread over 128 of the 132 SMs instead of crowding 32 of them.
constexpr int kBlock = 64;

// x and out are (rows, columns), contiguous; weight is (columns,). Everything is computed in float32
// and rounded once to T on the store: float16 squares of |x| > 256 would overflow (spec: near_overflow).
template <typename T>
__global__ void __launch_bounds__(kBlock)
rms_norm_thread_per_row(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out,
                        int rows, int columns, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const int64_t start = row * columns;          // 64-bit: 16384 x 8192 = 2^27 here, 2^31 is reachable
  const T* x_row = x + start;
  T* out_row = out + start;

  float sum_of_squares = 0.0f;
  for (int column = 0; column < columns; ++column) {
    const float value = static_cast<float>(x_row[column]);
    sum_of_squares += value * value;
  }
  const float rstd = rsqrtf(sum_of_squares / static_cast<float>(columns) + eps);

  // Second pass: x again (from DRAM at the benchmark shapes), the weight (from L1/L2: every row reads it).
  for (int column = 0; column < columns; ++column) {
    const float value = static_cast<float>(x_row[column]);
    out_row[column] = static_cast<T>(value * rstd * static_cast<float>(weight[column]));
  }
}
