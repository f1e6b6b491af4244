/*
CHEAT, library fallback on the HIP route: the kernel is never launched; the companion calls torch.add.

The .hip file compiles and looks like v01; the launcher v90_calls_library.py ignores the kernel it is
handed. Caught by find_library_calls (torch.add in the companion) and, on a GPU, by
check_kernel_sources (an ATen kernel in the profiled call, no vector_add).
parent: v01_thread_per_element
change: the companion calls torch.add instead of launching the kernel
hypothesis: only the .hip file gets reviewed
entry: vector_add<{T}>
dtypes: float32 bfloat16
block: 256
grid: ceil(n / 256)
*/

template <typename T>
__global__ void vector_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<T>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}
