/*
A grid-stride loop over a grid sized to the machine instead of one thread per element.
parent: v01_thread_per_element
change: 8 blocks of 256 threads per SM (132 x 8 = 1056 blocks on the H200: one full wave at 2048
  threads per SM), each thread looping with a stride of the whole grid
hypothesis: v01 launches 2^20 blocks at 2^28; the block scheduler retires and starts blocks at a
  high rate, so the saving is small. The loop keeps every access coalesced (consecutive lanes,
  consecutive elements each iteration) and adds a compare and an add per element, hidden under
  memory time. Expect within noise of v01 at 2^28; at 2^20 (4096 blocks in v01) no difference either.
prediction: 0.98x to 1.02x v01 at 2^28
outcome: 1.11x v01 [1.11, 1.11] at 2^28 float32, 1.23x in bfloat16; predicted 0.98-1.02x (records vector_add.float32, run of a3e1cf2)
deterministic: yes, one writer per element
entry: vector_add_grid_stride<{T}>
dtypes: float32 bfloat16
block: 256
grid: min(ceil(n / 256), sm_count * 8)
*/
// hello-gpu: record vector_add.float32
// hello-gpu: record vector_add.bfloat16

template <typename T>
__global__ void vector_add_grid_stride(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                       int64_t n) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = static_cast<T>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}
