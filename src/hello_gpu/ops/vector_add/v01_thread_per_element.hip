/*
One thread per element: the simplest kernel that can be correct.
parent: v00_torch
change: one thread per element, 256 threads per block, one block per 256 elements
hypothesis: the add does 1 FLOP per 12 bytes (float32), so the kernel waits on memory whatever it
  does. With 2^28 elements there are 2^20 blocks of 256 threads, every load is coalesced (a warp
  reads 32 consecutive floats: 128 bytes, four 32-byte sectors), and full occupancy (2048 threads
  per SM) keeps 132 SMs x 2048 x 8 bytes = 2.2 MB of loads in flight, about what Little's law asks
  of 4.2 TB/s at ~500 ns latency (2.1 MB). So the simplest kernel should sit near torch.add.
prediction: 0.95x to 1.0x torch.add at 2^28 and 2^24 (torch.add issues 128-bit loads, this one
  32-bit: four times the load instructions, which should not matter while memory is the limit)
outcome: 0.79x torch.add [0.78, 0.79] at 2^28 float32, 0.47x in bfloat16; predicted 0.95-1.0x (records vector_add.float32, run of a3e1cf2)
deterministic: yes, one writer per element
entry: vector_add<{T}>
dtypes: float32 bfloat16
block: 256
grid: ceil(n / 256)
*/
// hello-gpu: record vector_add.float32
// hello-gpu: record vector_add.bfloat16

// bfloat16 is added in float32 and rounded once on the store: the sum of two bfloat16 values is then
// within one bfloat16 rounding of exact (what torch.add does too).
template <typename T>
__global__ void vector_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n) {
  // 64-bit index: blockIdx.x * blockDim.x overflows a 32-bit int above 2^31 elements.
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<T>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}
