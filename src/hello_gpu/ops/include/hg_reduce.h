// Warp and block reductions of float values, shared by the rungs that no longer teach them.
// softmax v03_warp_shuffle and reduce_sum v05_warp_shuffle write them out and explain them; later
// rungs include this file. Portable HIP dialect: HG_WARP_SIZE is 32 on NVIDIA and on RDNA, 64 on CDNA.
#ifndef HG_REDUCE_H
#define HG_REDUCE_H

// -inf as a float (NVRTC has no INFINITY macro): the identity of a maximum.
__device__ __forceinline__ float minus_infinity() { return __uint_as_float(0xff800000u); }

// The maximum / sum over the HG_WARP_SIZE lanes of a warp, in every lane. __shfl_xor(v, k) reads v
// from lane (lane ^ k): after offsets 16, 8, 4, 2, 1 each lane has combined all 32 (a butterfly), and
// the two lanes of each step compute a + b and b + a, equal bit for bit. Every lane must call it.
__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor(value, offset));
  return value;
}
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value += __shfl_xor(value, offset);
  return value;
}

// The maximum / sum over the whole block, in every thread. Each warp's butterfly, then lane 0 of each
// warp writes its warp's result to slots[warp], one barrier, and every warp reads all the slots and
// does the same butterfly on them (lanes past the block's warps bring the identity): the result is in
// every thread without a broadcast. blockDim.x a whole number of warps, at most HG_WARP_SIZE of them
// (1024 threads), and `slots` shared memory for them. Called by every thread of the block. Each call
// needs slots of its own, or a barrier before they are written again: a slow warp may still read them.
__device__ __forceinline__ float block_max(float value, float* slots) {
  const int lane = threadIdx.x % HG_WARP_SIZE, warp = threadIdx.x / HG_WARP_SIZE;
  const int warps = blockDim.x / HG_WARP_SIZE;
  value = warp_max(value);
  if (lane == 0) slots[warp] = value;
  __syncthreads();
  return warp_max(lane < warps ? slots[lane] : minus_infinity());
}
__device__ __forceinline__ float block_sum(float value, float* slots) {
  const int lane = threadIdx.x % HG_WARP_SIZE, warp = threadIdx.x / HG_WARP_SIZE;
  const int warps = blockDim.x / HG_WARP_SIZE;
  value = warp_sum(value);
  if (lane == 0) slots[warp] = value;
  __syncthreads();
  return warp_sum(lane < warps ? slots[lane] : 0.0f);
}

// The step across warps alone, for a caller that has each warp's result already (from warp_max /
// warp_sum) and only sometimes needs the whole block's: as block_max / block_sum, after the butterfly.
__device__ __forceinline__ float max_across_warps(float warp_result, float* slots) {
  const int lane = threadIdx.x % HG_WARP_SIZE, warp = threadIdx.x / HG_WARP_SIZE;
  if (lane == 0) slots[warp] = warp_result;
  __syncthreads();
  return warp_max(lane < static_cast<int>(blockDim.x / HG_WARP_SIZE) ? slots[lane] : minus_infinity());
}
__device__ __forceinline__ float sum_across_warps(float warp_result, float* slots) {
  const int lane = threadIdx.x % HG_WARP_SIZE, warp = threadIdx.x / HG_WARP_SIZE;
  if (lane == 0) slots[warp] = warp_result;
  __syncthreads();
  return warp_sum(lane < static_cast<int>(blockDim.x / HG_WARP_SIZE) ? slots[lane] : 0.0f);
}

// The sum over a warp's lanes in lane 0 only (the other lanes hold partial sums): __shfl_down(v, k)
// reads lane (lane + k), half as many lanes holding a useful value after each step.
__device__ __forceinline__ float warp_sum_to_lane0(float value) {
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value += __shfl_down(value, offset);
  return value;
}

// The sum over the block in thread 0 only: a warp's sum to its lane 0, one shared slot per warp, one
// barrier, then warp 0 adds the slots. Whole warps, at most 1024 threads. A second call needs a barrier
// before it: it writes the same slots, which warp 0 may still be reading.
__device__ __forceinline__ float block_sum_to_thread0(float value) {
  __shared__ float warp_sums[1024 / HG_WARP_SIZE];
  const int lane = threadIdx.x % HG_WARP_SIZE;
  const int warp = threadIdx.x / HG_WARP_SIZE;
  value = warp_sum_to_lane0(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  const int warps = blockDim.x / HG_WARP_SIZE;
  if (warp == 0) value = warp_sum_to_lane0(lane < warps ? warp_sums[lane] : 0.0f);
  return value;
}

#endif  // HG_REDUCE_H
