/*
Coalesced: the same naive kernel with the two thread indices swapped, so a warp's lanes own
consecutive columns of C instead of consecutive rows.
parent: v01_naive
change: row = blockIdx.y * 32 + threadIdx.y, column = blockIdx.x * 32 + threadIdx.x
hypothesis: now the 32 lanes read one row of A at the same k (one address: a broadcast) and 32
  consecutive floats of B's row k (128 contiguous bytes: 4 sectors, every byte used), and write C
  coalesced too. The sector traffic per FMA drops ~8x from v01's; the kernel then waits on L1/L2
  rather than DRAM, with one load per FMA still: the SGEMM worklogs saw ~6-8x over naive
prediction: ~6x v01 at 4096^3 (~0.1x torch.mm float32)
outcome: 11.5x v01 [11.5, 11.5] at 4096^3 float32 (predicted ~6x), 0.113x torch.mm [0.113, 0.113],
  5.74 TFLOP/s (records matmul.float32, run of 8b07192)
deterministic: yes, each element is one thread's sum in k order
dtypes: float32
*/
// hello-gpu: record matmul.float32

constexpr int kTile = 32;

__global__ void __launch_bounds__(kTile * kTile)
matmul_coalesced(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N,
                 int K) {
  const int row = blockIdx.y * kTile + threadIdx.y;          // one row for the whole warp
  const int column = blockIdx.x * kTile + threadIdx.x;       // lanes of a warp: consecutive columns
  if (row >= M || column >= N) return;
  const float* a = A + static_cast<int64_t>(row) * K;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) sum += a[k] * B[static_cast<int64_t>(k) * N + column];
  C[static_cast<int64_t>(row) * N + column] = sum;
}
