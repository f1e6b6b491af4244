// Block sum with warp shuffles: each warp adds its values with __shfl_down, the warps' sums meet in
// shared memory, the first warp adds those, and one atomicAdd per block adds the block's partial to *out.
//
// HG_WARP_SIZE is the warp (NVIDIA: 32) or wavefront (AMD: 32 on RDNA, 64 on CDNA) size, a compile-time
// constant from hello-gpu's prelude. Launch with blockDim.x a multiple of HG_WARP_SIZE (at most 1024),
// and pass a zeroed output, since blocks add into it:
//
//   total = torch.zeros(1, device="cuda")
//   block_sum(x, total, block=256)
//
// The loop strides over the grid, so any grid size covers all n elements.

__device__ float warp_sum(float value) {
  for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) value += __shfl_down(value, offset);
  return value;  // lane 0 holds the warp's sum
}

__global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float warp_sums[1024 / HG_WARP_SIZE];
  const int lane = threadIdx.x % HG_WARP_SIZE;
  const int warp = threadIdx.x / HG_WARP_SIZE;

  float value = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) value += x[i];
  value = warp_sum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();

  if (warp == 0) {
    const int warps = blockDim.x / HG_WARP_SIZE;
    value = lane < warps ? warp_sums[lane] : 0.0f;
    value = warp_sum(value);
    if (lane == 0) atomicAdd(out, value);
  }
}
