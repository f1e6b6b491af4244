/*
First add during load: each thread loads two elements, a block's width apart, and adds them before
the shared-memory tree, so a block of 256 threads covers 512 elements and half as many blocks run.
parent: v03_sequential_addressing
change: each thread loads two elements (i and i + 256) and adds them before the tree: a block
  covers 512 elements, half as many blocks
hypothesis: in v03 half the threads go idle after the first tree step, and every block pays the
  tree and its 8 barriers for only 256 elements. Now the first add happens in registers, the tree
  work per element halves, and each thread has two independent loads in flight: 16 KiB per SM,
  2 MiB over the GPU, ~3 TB/s by Little's law at ~0.7 us latency. Expect ~1.6x v03, ~0.5x torch.sum
  at 2^28. At 2^20 still three Python launches (2048, 4, 1 values).
prediction: 1.6x v03_sequential_addressing at 2^28 (0.5x torch.sum); ~1.0x v03 at 2^20
outcome: 1.87x v03 [1.87, 1.87] at 2^28 (predicted 1.6x), 0.41x torch.sum (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, every block adds in a fixed tree and every level is a fixed set of blocks
dtypes: float32
*/
// hello-gpu: record reduce_sum.float32

// Threads per block. The tree below needs a power of two; the shared array is sized for it.
constexpr int BLOCK = 256;

// Reads n values, writes ceil(n / 512) partial sums: partials[b] = sum of values[512*b .. 512*b+511].
__global__ void __launch_bounds__(BLOCK)
reduce_sum_first_add_during_load(const float* values, float* partials, int n) {
  __shared__ float cache[BLOCK];
  const int tid = threadIdx.x;
  // The block's 512 elements start at 512 * blockIdx.x; thread tid takes element tid and tid + 256,
  // so each of the two loads is still 256 consecutive floats across the block (coalesced).
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (2 * BLOCK) + tid;
  const float first = (i < n) ? values[i] : 0.0f;
  const float second = (i + BLOCK < n) ? values[i + BLOCK] : 0.0f;
  cache[tid] = first + second;
  __syncthreads();

  for (int s = BLOCK / 2; s > 0; s /= 2) {
    if (tid < s) cache[tid] += cache[tid + s];
    __syncthreads();   // outside the if: every thread of the block reaches it
  }
  if (tid == 0) partials[blockIdx.x] = cache[0];
}
