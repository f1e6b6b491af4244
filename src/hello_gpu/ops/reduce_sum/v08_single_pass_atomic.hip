/*
Single pass, atomic: v07 without the counter and the last block: every block adds its partial
straight into out[0] with one atomicAdd, so out must be zeroed first (a second, tiny launch).
parent: v07_single_pass_last_block
change: each block atomicAdd's its partial into out[0] (zeroed first by the launcher) instead of
  the counter and the last block's ordered sum
hypothesis: 528 atomics on one address cost ~528 L2 clocks, well under 1 us, and no block has to
  fence, count and then sum the partials (~1 us in v07). But out[0] must start at 0, and the zeroing
  is a launch of its own (out.zero_(): ~2-3 us on the device, ~5 us of host time), which gives back
  what the single pass saved: ~0.9x v07 at 2^20, the same as v07 at 2^28. The price is
  repeatability: the float adds happen in the order the blocks finish.
prediction: 0.9x v07_single_pass_last_block at 2^20; 1.0x v07 at 2^28
outcome: 0.91x v07 [0.89, 0.92] at 2^20 (predicted 0.9x), 1.00x v07 at 2^28, as predicted (records reduce_sum.float32, run of a3e1cf2)
deterministic: no, the blocks' partials are added to out[0] in whatever order the atomics arrive
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

// out[0] must be 0 before the launch: the launcher zeroes it.
__global__ void __launch_bounds__(256)
reduce_sum_single_pass_atomic(const float* values, float* out, int64_t n) {
  const float sum = block_sum(thread_sum(values, n));
  if (threadIdx.x == 0) atomicAdd(&out[0], sum);
}
