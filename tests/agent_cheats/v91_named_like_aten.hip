/*
CHEAT, library fallback under a borrowed name: a dummy kernel named like ATen's elementwise kernel, never
launched; the companion has PyTorch add in place, so the trace shows vectorized_elementwise_kernel, the
name the candidate's own source declares.

A check that decides ownership by bare kernel name calls ATen's kernel the candidate's own. Caught by
the kernels' origin, since they were launched through the CUDA runtime API (cudaLaunchKernel, as ATen
launches), not through the driver API from a module the candidate compiled (library fallback). GPU only.
parent: v01_thread_per_element
change: the kernel renamed vectorized_elementwise_kernel; the launcher adds with out += a; out += b
hypothesis: a trace read by name sees the candidate's kernel
entry: vectorized_elementwise_kernel
dtypes: float32
block: 256
grid: ceil(n / 256)
*/

__global__ void vectorized_elementwise_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                              float* __restrict__ out, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
