/*
Shared-memory tree, divergent: each block sums its 256 elements in shared memory, halving the number
of active threads per step; the same kernel is then launched on the blocks' sums until one is left.
parent: v01_atomic_per_element
change: threads cooperate: each block of 256 adds its elements as a tree in shared memory and
  writes one partial; the same kernel runs again on the partials until one value is left (2^28:
  2^20, 4096, 16, 1 values: four launches)
hypothesis: no atomics, so v01's 2^28 serial adds are gone and the reads are coalesced. Two limits
  remain. Memory in flight: one 4-byte load per thread, at most 2048 threads per SM, is 8 KiB per SM,
  1 MiB over 132 SMs; at ~0.7 us DRAM latency that caps reading at ~1.5 TB/s (~0.35x) even if the
  tree were free. And the tree is not free: 8 steps, each ending in a __syncthreads, and because
  the active threads (tid % (2*s) == 0) are spread over the whole block, all 8 warps issue every
  step with most lanes masked off (divergence): 47 warp-steps for 255 adds, where 12 would do.
  Expect ~0.2x torch.sum at 2^28. At 2^20 the GPU work is a few us, but three launches from Python
  take ~100 us of host time (~33 us per checked kernel() call); the timer's cache flush before each
  call (~65 us of GPU time) hides two of them, the third one's wait is counted: ~0.2x.
prediction: 0.2x torch.sum at 2^28; 0.2x at 2^20 (three Python launches)
outcome: 0.21x torch.sum [0.21, 0.21] at 2^28, 0.19x at 2^20, as predicted (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, every block adds in a fixed tree and every level is a fixed set of blocks
dtypes: float32
*/
// hello-gpu: record reduce_sum.float32

// Threads per block. The tree below needs a power of two; the shared array is sized for it.
constexpr int BLOCK = 256;

// Reads n values, writes ceil(n / 256) partial sums: partials[b] = sum of values[256*b .. 256*b+255].
__global__ void __launch_bounds__(BLOCK)
reduce_sum_shared_tree_divergent(const float* values, float* partials, int n) {
  __shared__ float cache[BLOCK];
  const int tid = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * BLOCK + tid;
  // Threads past the end load 0, the one value that does not change a sum.
  cache[tid] = (i < n) ? values[i] : 0.0f;
  __syncthreads();

  // Step s adds the value s places to the right into every (2*s)-th slot: after step s, slot k
  // (k a multiple of 2*s) holds the sum of slots k .. k+2*s-1. After 8 steps slot 0 holds all 256.
  // Divergent: the active threads are scattered (0, 2, 4, ... then 0, 4, 8, ...), so every warp
  // keeps running a few threads with the rest masked off.
  for (int s = 1; s < BLOCK; s *= 2) {
    if (tid % (2 * s) == 0) cache[tid] += cache[tid + s];
    __syncthreads();   // outside the if: every thread of the block reaches it
  }
  if (tid == 0) partials[blockIdx.x] = cache[0];
}
