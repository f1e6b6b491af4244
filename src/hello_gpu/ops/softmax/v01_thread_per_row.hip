/*
One thread per row: the serial algorithm, as on a CPU, run by many threads at once. The slow
baseline of the HIP route, kept because it shows the two ways a kernel can waste a GPU.
parent: v00_torch
change: a thread owns a whole row and walks it three times (maximum, sum of exponentials, write);
  64 threads per block, ceil(rows / 64) blocks
hypothesis: two faults, each large. Too few threads: 8192 rows make 8192 threads, 256 warps on a
  machine that holds 132 SMs x 64 = 8448 (3% of its warp slots), so almost nothing hides the ~600 ns
  DRAM latency. Uncoalesced: the 32 lanes of a warp read 32 different rows, 32 KiB apart, so one load
  instruction touches 32 separate 32-byte sectors to use 4 bytes of each (the L1 keeps the rest of
  the sector for the next 7 steps, if it survives). Rough model: each warp keeps ~8 loads in flight
  and gets 32 new sectors per ~8 steps per ~1 us latency, ~1 GB/s per warp, ~250 GB/s for 256 warps
  per pass; three read passes and one write pass of 256 MiB take ~4 ms: ~130 GB/s counted as one
  read and one write, ~0.07x torch.softmax (1926 GB/s in a reference run before this ladder). 4096x32768 has
  only 4096 threads (2% of the machine) for 128 KiB rows: ~0.03x. bfloat16 moves half the bytes per
  element through the same number of load instructions: a similar element rate, ~half the GB/s.
prediction: ~0.05x torch.softmax at 8192x8192 float32 (anywhere in 0.02x-0.1x would not surprise);
  ~0.03x at 4096x32768; ~0.1x at 4096x1024; ~0.05x in bfloat16
outcome: 0.12x torch.softmax [0.118, 0.118] at 8192x8192 float32 (predicted ~0.05x) (records softmax.float32, run of 2c2a085)
deterministic: yes, each row is reduced by one thread in column order and each output written once
entry: softmax_thread_per_row<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record softmax.float32
// hello-gpu: record softmax.bfloat16

// -inf as a float: NVRTC defines neither INFINITY nor __builtin_huge_valf, but both vendors have
// __uint_as_float (0xff800000 is the bit pattern of -inf: sign 1, exponent all ones, mantissa 0).
__device__ __forceinline__ float minus_infinity() { return __uint_as_float(0xff800000u); }

// x and out are rows x columns, contiguous (the launcher checks): row r starts at r * columns.
// T is float, hip_bfloat16 or __half in memory; the arithmetic is float32 for every T.
template <typename T>
__global__ void softmax_thread_per_row(const T* __restrict__ x, T* __restrict__ out, int rows, int columns) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (row >= rows) return;                // the last block's spare threads (no barrier follows)
  // 64-bit: 8192 x 8192 is 2^26 elements, but rows x columns may pass 2^31 and an int would wrap.
  const int64_t start = static_cast<int64_t>(row) * columns;
  const T* in = x + start;
  T* result = out + start;

  // Pass 1: the maximum. Subtracting it keeps every exponent <= 0, so expf never overflows
  // (expf(89) is already inf in float32).
  float row_max = minus_infinity();
  for (int c = 0; c < columns; ++c) row_max = fmaxf(row_max, static_cast<float>(in[c]));

  // Pass 2: the sum of exponentials. A row of all -inf has row_max = -inf, so x - row_max is
  // -inf - (-inf) = NaN: the sum is NaN and so is every output, which is the defined result (0/0).
  // A scattered -inf in an ordinary row gives expf(-inf) = 0: it adds nothing and outputs exactly 0.
  float sum = 0.0f;
  for (int c = 0; c < columns; ++c) sum += expf(static_cast<float>(in[c]) - row_max);

  // Pass 3: exponentiate again and scale. One division per row, then a multiply per element: the
  // reciprocal adds one rounding (~6e-8 relative), far inside the float32 tolerance of 2e-5.
  const float inverse = 1.0f / sum;
  for (int c = 0; c < columns; ++c) {
    result[c] = static_cast<T>(expf(static_cast<float>(in[c]) - row_max) * inverse);
  }
}
