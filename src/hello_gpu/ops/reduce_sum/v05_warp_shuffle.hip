/*
Warp shuffle: the tree inside a warp uses register shuffles instead of shared memory; shared memory
only carries one value per warp to the first warp, which adds them the same way.
parent: v04_first_add_during_load
change: inside each warp the tree is __shfl_down in registers; shared memory carries one sum per
  warp to warp 0, which adds them the same way (1 barrier instead of 9)
hypothesis: a shuffle moves a value between lanes in registers (no shared store, load and barrier
  per step); the block now has 1 barrier instead of 9, and shared memory carries 8 floats instead
  of 256 (on wave64, 4). Blocks finish their tree sooner, so on average more of them are waiting on
  loads: more bytes in flight. The reads are the same as v04 (two 4-byte loads per thread), which
  still caps bandwidth near ~3 TB/s: expect ~1.15x v04 at 2^28 (~0.6x torch.sum). At 2^20 the three
  Python launches still set the time.
prediction: 1.15x v04_first_add_during_load at 2^28 (0.6x torch.sum); ~1.0x v04 at 2^20
outcome: 1.30x v04 [1.30, 1.30] at 2^28 (predicted 1.15x), 0.53x torch.sum (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, the shuffle trees and the levels add in a fixed order
dtypes: float32
*/
// hello-gpu: record reduce_sum.float32

// The sum of `value` over the HG_WARP_SIZE lanes of a warp (32 on NVIDIA, 32 or 64 on AMD), in
// lane 0. Step k adds the value `offset` lanes up: after the offsets 16, 8, 4, 2, 1 (wave64: 32
// first) lane 0 holds all of them. Every lane of the warp must call it (the shuffle reads the others).
__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value += __shfl_down(value, offset);
  return value;
}

// The sum of `value` over the whole block, in thread 0. blockDim.x must be a multiple of HG_WARP_SIZE
// (whole warps, so every lane exists for the shuffles) and at most 1024. Called by every thread.
__device__ __forceinline__ float block_sum(float value) {
  __shared__ float warp_sums[1024 / HG_WARP_SIZE];   // one slot per warp: 32 (wave32) or 16 (wave64)
  const int lane = threadIdx.x % HG_WARP_SIZE;
  const int warp = threadIdx.x / HG_WARP_SIZE;
  value = warp_sum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();   // every warp's sum is in shared memory before warp 0 reads them
  const int warps = blockDim.x / HG_WARP_SIZE;       // <= HG_WARP_SIZE, so one warp can hold them all
  if (warp == 0) {   // the whole of warp 0 enters: the shuffles below see all its lanes
    value = warp_sum(lane < warps ? warp_sums[lane] : 0.0f);
  }
  return value;      // meaningful in thread 0 only
}

// Reads n values, writes ceil(n / (2 * blockDim.x)) partial sums, one per block of 2 * blockDim.x
// values. The launcher uses 256 threads (512 values per block); any multiple of the warp works.
__global__ void reduce_sum_warp_shuffle(const float* values, float* partials, int n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (2 * blockDim.x) + threadIdx.x;
  const float first = (i < n) ? values[i] : 0.0f;
  const float second = (i + blockDim.x < n) ? values[i + blockDim.x] : 0.0f;
  const float sum = block_sum(first + second);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
