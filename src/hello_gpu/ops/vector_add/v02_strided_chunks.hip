/*
The negative example: each thread adds its own contiguous chunk of 16 elements, as a CPU loop would.
parent: v01_thread_per_element
change: thread t handles elements 16t .. 16t+15 (a chunk per thread) instead of element t
hypothesis: on a CPU the chunk is the cache-friendly choice; on a GPU the 32 threads of a warp execute
  each load together, and now their addresses are 16 x 4 = 64 bytes apart: one warp load touches 32
  different 32-byte sectors (1024 bytes of sectors for 128 useful bytes) instead of 4. The next 15
  loads of the chunk hit those sectors again in L1 only if they survive there: with 2048 resident
  threads per SM each streaming 2 x 64 bytes, the working set is 256 KB per SM, the whole L1, so many
  are refetched from L2. DRAM bytes stay about the same; L1/L2 transactions grow up to 8x.
prediction: 0.3x to 0.5x v01 at 2^28 (L2-transaction bound rather than DRAM bound)
outcome: 0.31x v01 [0.31, 0.31] at 2^28 float32, 0.35x in bfloat16: inside the predicted 0.3-0.5x (records vector_add.float32, run of a3e1cf2)
deterministic: yes, one writer per element
entry: vector_add_chunked<{T}>
dtypes: float32 bfloat16
block: 256
grid: ceil(n / (256 * 16))
*/
// hello-gpu: record vector_add.float32
// hello-gpu: record vector_add.bfloat16

constexpr int kChunk = 16;   // elements per thread, consecutive in memory

template <typename T>
__global__ void vector_add_chunked(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                   int64_t n) {
  int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t first = thread * kChunk;
  for (int j = 0; j < kChunk; ++j) {
    int64_t i = first + j;     // lanes of one warp are kChunk elements apart here: uncoalesced
    if (i < n) out[i] = static_cast<T>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
  }
}
