/*
One block per row: 256 threads share a row, and two shared-memory trees combine their partial
maximum and partial sum. The row is still read three times.
parent: v01_thread_per_row
change: a block of 256 threads per row instead of one thread; thread t reads columns t, t + 256,
  t + 512, ... (neighbouring lanes, neighbouring addresses: coalesced); the partial maxima and sums
  meet in a shared-memory tree (8 halving steps, a barrier after each)
hypothesis: both faults of v01 go. 8192 rows are now 8192 blocks of 8 warps; at ~30 registers a
  thread, 8 blocks (2048 threads) fit on an SM, so all 64 warp slots are full and ~1056 rows are in
  flight. A warp's load is one 128-byte line (float32) instead of 32 sectors. The kernel is still
  three passes (max, sum, write): 3 reads + 1 write, against the 1 + 1 that are counted. The 1056 rows
  in flight are 33 MiB at 8192 float32 columns, which the 60 MiB L2 mostly keeps between passes, so
  DRAM sees little more than 1 read + 1 write; the limit is the SMs' own traffic (four 4-byte
  accesses per element, each pass a scalar load per thread with its latency) and 2 x 10 barriers a
  row. Expect ~1.5 TB/s at 8192x8192 float32, 0.8x torch.softmax (1926 GB/s in
  a reference run before this ladder); bfloat16 issues the same loads for 2 bytes each: ~0.8 TB/s, 0.75x
  (torch 1050 GB/s). 4096x32768 rows are 128 KiB: 1056 of them are 132 MiB, twice the L2, so the
  second and third reads go to DRAM: ~1.1 TB/s, 0.4x torch (2637 GB/s).
prediction: 0.8x torch.softmax at 8192x8192 float32; 0.75x in bfloat16; 0.4x at 4096x32768;
  ~0.6x at 4096x1024 (4 elements per thread per pass: the 20 barriers dominate); >20x v01
outcome: 1.43x torch.softmax [1.43, 1.44] at 8192x8192 float32 (predicted 0.8x) (records softmax.float32, run of 2c2a085)
deterministic: yes, each thread reads its columns in order and the tree adds in a fixed pattern
entry: softmax_block_per_row_shared<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record softmax.float32
// hello-gpu: record softmax.bfloat16

// Threads per block; the launcher uses the same number. A power of two: the tree halves it.
constexpr int kBlock = 256;

// -inf as a float (NVRTC has no INFINITY; see v01).
__device__ __forceinline__ float minus_infinity() { return __uint_as_float(0xff800000u); }

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Combine one value per thread into one value for the block, returned to every thread.
// Step s (s = 128, 64, ..., 1): thread t < s combines slot t with slot t + s. After 8 steps slot 0
// holds all 256. Each step reads what another thread wrote in the step before: a barrier after each.
// Every thread of the block must call it (a barrier that some threads skip never opens).
template <typename Op>
__device__ float block_reduce(float value, float* scratch, Op op) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) {
      scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + stride]);
    }
    __syncthreads();
  }
  const float result = scratch[0];
  // Every thread has read slot 0 before anyone may return and write scratch again (the second
  // reduction reuses it): without this barrier a fast thread could overwrite slot 0 first.
  __syncthreads();
  return result;
}

// Launched with kBlock threads per block and one block per row (grid = rows).
template <typename T>
__global__ void __launch_bounds__(kBlock)
softmax_block_per_row_shared(const T* __restrict__ x, T* __restrict__ out, int rows, int columns) {
  __shared__ float scratch[kBlock];
  const int row = blockIdx.x;
  if (row >= rows) return;                     // the whole block leaves together: no barrier is split
  const int64_t start = static_cast<int64_t>(row) * columns;   // 64-bit: rows x columns may pass 2^31
  const T* in = x + start;
  T* result = out + start;

  // Pass 1: each thread's maximum over its columns, then the block's. A thread with no column
  // (columns < 256) contributes -inf, which changes no maximum.
  float thread_max = minus_infinity();
  for (int c = threadIdx.x; c < columns; c += kBlock) thread_max = fmaxf(thread_max, static_cast<float>(in[c]));
  const float row_max = block_reduce(thread_max, scratch, Max());

  // Pass 2: the row read again for the sum. An all -inf row has row_max = -inf and x - row_max =
  // NaN, so the sum is NaN and so are the outputs: the defined 0/0. A scattered -inf adds expf(-inf) = 0.
  float thread_sum = 0.0f;
  for (int c = threadIdx.x; c < columns; c += kBlock) thread_sum += expf(static_cast<float>(in[c]) - row_max);
  const float row_sum = block_reduce(thread_sum, scratch, Sum());

  // Pass 3: read a third time, write once. One division per row, a multiply per element.
  const float inverse = 1.0f / row_sum;
  for (int c = threadIdx.x; c < columns; c += kBlock) {
    result[c] = static_cast<T>(expf(static_cast<float>(in[c]) - row_max) * inverse);
  }
}
