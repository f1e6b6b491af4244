/*
Single pass, last block: v06's kernel, but the last block to finish sums the partials itself, so
the whole reduction is one launch.
parent: v06_grid_stride_vectorized
change: one launch instead of two: each block publishes its partial (store, __threadfence,
  atomicAdd on a counter); the block that counts last adds all partials in index order and resets
  the counter
hypothesis: at 2^20 the work is ~1 us of reading and v06 pays a second launch (~2-3 us device side,
  ~33 us of host time for a checked kernel() call from Python). One launch removes it; the extra
  cost is one atomic and one fence per block (528 at most) and a 528-value block_sum in the last
  block (~1 us). torch.sum at 2^20 is also one launch plus a device-wide combine, so the win over it
  comes from a leaner kernel: ~1.3x torch.sum at 2^20. At 2^28 the same reads as v06: ~1.0x.
prediction: 1.3x torch.sum at 2^20 and 1.6x v06_grid_stride_vectorized there; 1.0x torch.sum at 2^28
outcome: 1.37x torch.sum [1.35, 1.38] at 2^20 (predicted 1.3x), 1.03x [1.03, 1.04] at 2^28 (predicted 1.0x) (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, the last block adds the partials in index order whichever block finishes last
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

// Launched with grid = min(ceil(n / 4096), 4 * SMs) blocks of 256 threads (see the launcher).
// partials holds at least gridDim.x floats; blocks_done is one int that is 0 before the launch, and the
// kernel leaves it 0 again. Two launches sharing one blocks_done must not run at the same time.
__global__ void __launch_bounds__(256)
reduce_sum_single_pass_last_block(const float* values, float* partials, int* blocks_done, float* out,
                                  int64_t n) {
  __shared__ bool is_last_block;
  const float sum = block_sum(thread_sum(values, n));
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum;
    // The store above must reach memory that every SM sees before the count below says it is there:
    // otherwise the last block could read an old partial.
    __threadfence();
    const int finished_before = atomicAdd(blocks_done, 1);
    is_last_block = (finished_before == static_cast<int>(gridDim.x) - 1);
    __threadfence();   // and our reads of the partials come after the count (the acquire side)
  }
  // Every thread learns the answer; this barrier also means warp 0 has finished reading warp_sums in
  // the first block_sum before the second block_sum below overwrites them.
  __syncthreads();

  // is_last_block is the same for every thread of the block, so the barriers inside block_sum are
  // reached by all of them (a barrier inside a branch is only wrong when the branch splits a block).
  if (is_last_block) {
    // volatile: read from the L2, where the other blocks' partials are, not from a stale L1 line.
    const volatile float* done_partials = partials;
    float total = 0.0f;
    for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += blockDim.x) total += done_partials[b];
    total = block_sum(total);
    if (threadIdx.x == 0) {
      out[0] = total;
      *blocks_done = 0;   // ready for the next launch (the next kernel on this stream starts after this one)
    }
  }
}
