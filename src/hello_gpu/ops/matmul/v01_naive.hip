/*
Naive: one thread per element of C, each walking a row of A and a column of B from global memory.
The slow baseline of the SIMT route, kept because it shows what the memory system does to a matmul
that ignores it.
parent: v00_torch
change: thread (x, y) of a 32x32 block computes C[row][column] with row = blockIdx.y * 32 +
  threadIdx.x and column = blockIdx.x * 32 + threadIdx.y: consecutive lanes of a warp own
  consecutive rows
hypothesis: the 32 lanes of a warp read 32 different rows of A, K * 4 bytes apart, so each A load
  instruction touches 32 separate 32-byte sectors for 4 useful bytes each; they share one column of
  B (a broadcast) and write C 32 rows apart. Every FMA needs one uncoalesced 4-byte A load: 2 FLOPs
  per 32-byte sector fetched (L1 keeps some of it for the next 7 k steps, when it survives). At
  4096^3 that is ~140 GB of sector traffic, mostly from L2 (~10 TB/s): ~15-25 ms, 5-10 TFLOP/s at best;
  reference SGEMM worklogs put the naive kernel at ~1-2% of cuBLAS
prediction: ~0.02x torch.mm float32 at 4096^3 (~1 TFLOP/s; anything in 0.01x-0.05x would not surprise)
outcome: 0.0098x torch.mm [0.0098, 0.0098] at 4096^3 float32, 0.499 TFLOP/s (predicted ~0.02x, 0.01x-0.05x)
  (records matmul.float32, run of 8b07192)
deterministic: yes, each element is one thread's sum in k order
dtypes: float32
*/
// hello-gpu: record matmul.float32

constexpr int kTile = 32;      // the block is kTile x kTile threads and covers a kTile x kTile tile of C

// A is M x K, B is K x N, C is M x N, all contiguous row-major (the launcher checks).
__global__ void __launch_bounds__(kTile * kTile)
matmul_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * kTile + threadIdx.x;          // lanes of a warp: consecutive rows
  const int column = blockIdx.x * kTile + threadIdx.y;       // the same column for the whole warp
  if (row >= M || column >= N) return;
  const float* a = A + static_cast<int64_t>(row) * K;        // 64-bit: row * K may pass 2^31
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) sum += a[k] * B[static_cast<int64_t>(k) * N + column];
  C[static_cast<int64_t>(row) * N + column] = sum;
}
