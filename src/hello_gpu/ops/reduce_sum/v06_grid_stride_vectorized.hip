/*
Grid-stride, vectorized: a grid sized to the machine (4 blocks per SM) in which every thread sums
thousands of elements in registers, reading them as float4 (16 bytes per load, four loads in flight
per loop step), before one block_sum. Two launches in all: the same kernel then sums the partials in
one block.
parent: v05_warp_shuffle
change: many elements per thread: a grid of min(ceil(n / 4096), 4 * SMs) blocks, each thread
  looping over the array with four float4 loads per step (2^28: 528 blocks, ~2000 elements per
  thread); the same kernel with one block then adds the 528 partials
hypothesis: v05 keeps 8 bytes per thread in flight and pays a block_sum per 512 elements. Here a
  thread has four 16-byte loads in flight (64 bytes), 1024 threads per SM: 64 KiB per SM, 8 MiB over
  132 SMs, well above the ~3 MiB that 4.2 TB/s x ~0.7 us latency needs; block_sum runs once per
  ~0.5M elements; and the finish is always two launches (not four). Expect the read ceiling:
  ~1.0x torch.sum at 2^28 (~256 us). At 2^20 (4 MiB, ~1 us to read) it is two launches, the second
  leaving Python ~33 us after the first (one checked kernel() call). The timer zeroes a 256 MiB
  buffer (~65 us) before each call, which hides that host time; what remains is the second launch's
  device-side gap (~1-2 us) and its one block (~2 us): ~0.8x torch.sum there.
prediction: 1.0x torch.sum at 2^28; 0.8x at 2^20 (two launches)
outcome: 1.03x torch.sum [1.03, 1.03] at 2^28 (predicted 1.0x); 0.40x at 2^20 (predicted 0.8x) (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, each thread's elements, each block's tree and the final block are fixed by n,
  the grid and the data's alignment, which do not change between runs on the same GPU
dtypes: float32
*/
// hello-gpu: record reduce_sum.float32

// The sum over a warp's lanes, in lane 0 (see v05_warp_shuffle.hip).
__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value += __shfl_down(value, offset);
  return value;
}

// The sum over the block, in thread 0 (see v05_warp_shuffle.hip). Whole warps, at most 1024 threads.
__device__ __forceinline__ float block_sum(float value) {
  __shared__ float warp_sums[1024 / HG_WARP_SIZE];
  const int lane = threadIdx.x % HG_WARP_SIZE;
  const int warp = threadIdx.x / HG_WARP_SIZE;
  value = warp_sum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  const int warps = blockDim.x / HG_WARP_SIZE;
  if (warp == 0) value = warp_sum(lane < warps ? warp_sums[lane] : 0.0f);
  return value;
}

// Loads in flight per thread per loop step: four independent 16-byte loads are issued before any of
// them is added, so a thread waits for one DRAM latency per 64 bytes rather than per 16.
constexpr int UNROLL = 4;

// This thread's share of values[0, n): a grid-stride walk over the float4s, plus the few scalars
// before the first 16-byte boundary (head) and after the last whole float4 (tail).
__device__ __forceinline__ float thread_sum(const float* values, int64_t n) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;

  // float4 loads need a 16-byte aligned address. A tensor from PyTorch starts aligned, a view
  // (x[1:]) may not: the first `head` (0 to 3) elements are read one by one.
  const unsigned long long address = reinterpret_cast<unsigned long long>(values);
  int64_t head = static_cast<int64_t>(((16 - (address & 15)) & 15) / 4);
  if (head > n) head = n;
  const float4* body = reinterpret_cast<const float4*>(values + head);
  const int64_t vectors = (n - head) / 4;           // whole float4s after the head
  const int64_t tail = head + 4 * vectors;          // first element after them (0 to 3 remain)

  float sum = 0.0f;
  if (thread < head) sum += values[thread];

  // Full steps: all UNROLL loads of the step are in range, so no bounds test sits between them and
  // the compiler issues the four loads back to back.
  int64_t v = thread;
  for (; v + (UNROLL - 1) * threads < vectors; v += UNROLL * threads) {
    float4 chunk[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) chunk[u] = body[v + u * threads];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) sum += (chunk[u].x + chunk[u].y) + (chunk[u].z + chunk[u].w);
  }
  // The last partial step: fewer than UNROLL float4s left for this thread.
  for (; v < vectors; v += threads) {
    const float4 chunk = body[v];
    sum += (chunk.x + chunk.y) + (chunk.z + chunk.w);
  }
  if (thread < n - tail) sum += values[tail + thread];
  return sum;
}

// Writes one partial sum per block: partials[blockIdx.x]. Launched with one block, it sums everything
// into partials[0], which is how the launcher turns the partials into the result.
__global__ void __launch_bounds__(256)
reduce_sum_grid_stride_vectorized(const float* values, float* partials, int64_t n) {
  const float sum = block_sum(thread_sum(values, n));
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
