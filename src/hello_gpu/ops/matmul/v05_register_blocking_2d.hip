/*
2-D register blocking: each thread computes an 8x8 block of C from 8 values of A and 8 of B per k,
an outer product in registers.
parent: v04_register_blocking_1d
change: blocks of 256 threads own a 128x128 tile of C; per K step of 8 they stage a 128x8 tile of A
  and an 8x128 tile of B (4 elements each per thread); thread t holds 8 A values and 8 B values in
  registers and does their 64 products
hypothesis: v04 loads ~9 shared values per 8 FMAs; an 8x8 outer product loads 16 for 64 FMAs (4 FMAs
  per load), and each tile element staged from global memory now serves 128 FMAs instead of 64. The
  limit moves toward issuing FMAs (64 sums a thread: 147 registers, so one block of 256 threads
  per SM: 8 warps, few to hide latency with). The worklogs saw ~1.7-2x over 1-D blocking, ~70% of cuBLAS
prediction: ~1.8x v04 at 4096^3 (~0.6x torch.mm float32)
outcome: 1.271x v04 [1.270, 1.271] at 4096^3 float32 (predicted ~1.8x), 0.397x torch.mm [0.397, 0.398]
  (predicted ~0.6x), 20.3 TFLOP/s (records matmul.float32, run of 8b07192)
deterministic: yes, each element is one thread's sum in k order
dtypes: float32
*/
// hello-gpu: record matmul.float32

constexpr int kBM = 128, kBN = 128, kBK = 8;
constexpr int kTM = 8, kTN = 8;                             // the block of C one thread computes
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);         // 256
constexpr int kLoads = kBM * kBK / kThreads;                // 4 elements of each tile per thread
static_assert(kBM * kBK == kBK * kBN, "the A and B tiles hold as many elements");

__global__ void __launch_bounds__(kThreads)
matmul_register_blocking_2d(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M,
                            int N, int K) {
  __shared__ float As[kBM][kBK];
  __shared__ float Bs[kBK][kBN];
  const int t = threadIdx.x;
  const int row0 = blockIdx.y * kBM, column0 = blockIdx.x * kBN;
  const int thread_column = t % (kBN / kTN), thread_row = t / (kBN / kTN);
  float sums[kTM][kTN] = {};
  float a_values[kTM], b_values[kTN];
  for (int k0 = 0; k0 < K; k0 += kBK) {
#pragma unroll
    for (int s = 0; s < kLoads; ++s) {
      const int e = t + s * kThreads;                        // consecutive threads: consecutive elements
      const int ar = e / kBK, ak = e % kBK, bk = e / kBN, bc = e % kBN;
      const int ra = row0 + ar, ka = k0 + ak, kb = k0 + bk, cb = column0 + bc;
      As[ar][ak] = (ra < M && ka < K) ? A[static_cast<int64_t>(ra) * K + ka] : 0.0f;
      Bs[bk][bc] = (kb < K && cb < N) ? B[static_cast<int64_t>(kb) * N + cb] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
#pragma unroll
      for (int i = 0; i < kTM; ++i) a_values[i] = As[thread_row * kTM + i][k];
#pragma unroll
      for (int j = 0; j < kTN; ++j) b_values[j] = Bs[k][thread_column * kTN + j];
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j) sums[i][j] += a_values[i] * b_values[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int row = row0 + thread_row * kTM + i;
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int column = column0 + thread_column * kTN + j;
      if (row < M && column < N) C[static_cast<int64_t>(row) * N + column] = sums[i][j];
    }
  }
}
