/*
1-D register blocking: each thread computes a column of 8 elements of C, so one value of B read from
shared memory serves 8 FMAs.
parent: v03_shared_tiles
change: blocks of 512 threads own a 64x64 tile of C; per K step of 8 they stage a 64x8 tile of A and
  an 8x64 tile of B (one element each), then thread t computes rows 8 * (t / 64) .. + 7 of column
  t % 64, keeping the 8 sums in registers
hypothesis: v03 does two shared-memory loads per FMA. Here the inner step loads one value of B and 8
  of A (As[r][k]: a broadcast, all 32 lanes of a warp read the same address) for 8 FMAs: ~1.1 loads
  per FMA, and the barrier count per FLOP falls 4x (BK = 8 against 32 FMAs per thread per barrier).
  The worklogs saw ~2.5-3x over the 32x32 shared-memory kernel
prediction: ~2.5x v03 at 4096^3
outcome: 1.925x v03 [1.924, 1.926] at 4096^3 float32 (predicted ~2.5x), 0.313x torch.mm [0.313, 0.313],
  16.0 TFLOP/s (records matmul.float32, run of 8b07192)
deterministic: yes, each element is one thread's sum in k order
dtypes: float32
*/
// hello-gpu: record matmul.float32

constexpr int kBM = 64, kBN = 64, kBK = 8;     // the tile of C a block owns; the K step
constexpr int kTM = 8;                           // rows of C per thread
constexpr int kThreads = kBM * kBN / kTM;        // 512
static_assert(kThreads == kBM * kBK && kThreads == kBK * kBN, "one element of each tile per thread");

__global__ void __launch_bounds__(kThreads)
matmul_register_blocking_1d(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M,
                            int N, int K) {
  __shared__ float As[kBM][kBK];
  __shared__ float Bs[kBK][kBN];
  const int t = threadIdx.x;
  const int row0 = blockIdx.y * kBM, column0 = blockIdx.x * kBN;
  const int thread_column = t % kBN, thread_row = t / kBN;          // rows thread_row * kTM .. + kTM - 1
  const int a_row = t / kBK, a_k = t % kBK;                         // the element of A this thread stages
  const int b_k = t / kBN, b_column = t % kBN;                      // and of B
  float sums[kTM] = {};
  for (int k0 = 0; k0 < K; k0 += kBK) {
    const int ra = row0 + a_row, ka = k0 + a_k, kb = k0 + b_k, cb = column0 + b_column;
    As[a_row][a_k] = (ra < M && ka < K) ? A[static_cast<int64_t>(ra) * K + ka] : 0.0f;
    Bs[b_k][b_column] = (kb < K && cb < N) ? B[static_cast<int64_t>(kb) * N + cb] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
      const float b = Bs[k][thread_column];                       // one shared load for kTM FMAs
#pragma unroll
      for (int i = 0; i < kTM; ++i) sums[i] += As[thread_row * kTM + i][k] * b;
    }
    __syncthreads();
  }
  const int column = column0 + thread_column;
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int row = row0 + thread_row * kTM + i;
    if (row < M && column < N) C[static_cast<int64_t>(row) * N + column] = sums[i];
  }
}
