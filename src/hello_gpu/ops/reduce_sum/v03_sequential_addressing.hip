/*
Sequential addressing: the same shared-memory tree, but the active threads are the first s of the
block, adding the value s slots away, so whole warps are either busy or idle.
parent: v02_shared_tree_divergent
change: the tree's active threads are the first s (`if (tid < s)`, s = 128, 64, ..., 1) instead
  of every (2s)-th thread
hypothesis: the active threads now fill whole warps (128, 64, 32 threads: 4, 2, 1 warps), so the
  idle warps skip the step instead of issuing it masked: 12 warp-steps for the 255 adds instead of
  47. A warp's 32 reads of cache[tid + s] are 32 consecutive floats, one per bank: no bank
  conflicts. The shared tree gets ~4x cheaper, but the 1 MiB in flight from one 4-byte load per
  thread still caps reading at ~1.5 TB/s: expect ~0.3x torch.sum at 2^28, and the same three
  Python launches at 2^20.
prediction: 1.4x v02_shared_tree_divergent at 2^28 (0.3x torch.sum); ~1.0x v02 at 2^20
outcome: 1.03x v02 [1.03, 1.04] at 2^28 (predicted 1.4x) (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, every block adds in a fixed tree and every level is a fixed set of blocks
dtypes: float32
*/
// hello-gpu: record reduce_sum.float32

// Threads per block. The tree below needs a power of two; the shared array is sized for it.
constexpr int BLOCK = 256;

// Reads n values, writes ceil(n / 256) partial sums: partials[b] = sum of values[256*b .. 256*b+255].
__global__ void __launch_bounds__(BLOCK)
reduce_sum_sequential_addressing(const float* values, float* partials, int n) {
  __shared__ float cache[BLOCK];
  const int tid = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * BLOCK + tid;
  cache[tid] = (i < n) ? values[i] : 0.0f;
  __syncthreads();

  // Step s folds the upper half of the live slots onto the lower half: slot tid (tid < s) adds slot
  // tid + s. Live slots: 256, 128, ..., 1. The busy threads are 0 .. s-1, whole warps while s >= 32.
  for (int s = BLOCK / 2; s > 0; s /= 2) {
    if (tid < s) cache[tid] += cache[tid + s];
    __syncthreads();   // outside the if: every thread of the block reaches it
  }
  if (tid == 0) partials[blockIdx.x] = cache[0];
}
