/*
Vectorised loads: v05's tiles, moved with 16-byte instructions: global loads of four floats, A staged
transposed so that shared-memory reads are four floats too, C written four columns at a time.
parent: v05_register_blocking_2d
change: per K step of 8, each of the 256 threads loads one float4 of A (written transposed into
  As[k][m]) and one float4 of B; the 8x8 block of a thread reads its A and B values as two float4s
  each; C is stored as float4s. Where K or N is not a multiple of 4 (517, 781) or a pointer is not
  16-byte aligned, the same elements go one by one (tile_loads.h)
hypothesis: v05 issues one 4-byte load per element, global and shared: 4 + 4 global and 16 shared
  load instructions per thread per K step, against 64 FMAs. Packs cut them to 1 + 1 and 4: the
  instruction issue slots freed go to FMAs. As[m][k] in v05 was read down a column (stride 8 floats,
  bank conflicts between lanes of different rows); transposed it is a contiguous read. The worklogs
  saw ~1.1-1.2x over 2-D blocking
prediction: ~1.15x v05 at 4096^3 (~0.7x torch.mm float32)
outcome: 1.666x v05 [1.662, 1.668] at 4096^3 float32 (predicted ~1.15x), 0.661x torch.mm [0.660, 0.662]
  (predicted ~0.7x), 33.7 TFLOP/s (records matmul.float32, run of 8b07192)
deterministic: yes, each element is one thread's sum in k order
dtypes: float32
*/
// hello-gpu: record matmul.float32

#include "tile_loads.h"

constexpr int kBM = 128, kBN = 128, kBK = 8;
constexpr int kTM = 8, kTN = 8;
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);         // 256: one float4 of each tile per thread

__global__ void __launch_bounds__(kThreads)
matmul_vectorized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N,
                  int K) {
  __shared__ __align__(16) float As[kBK][kBM];               // transposed: As[k][m]
  __shared__ __align__(16) float Bs[kBK][kBN];
  const bool vectorized = vectorizable(A, B, C, N, K);
  const int row0 = blockIdx.y * kBM, column0 = blockIdx.x * kBN;
  const int thread_column = threadIdx.x % (kBN / kTN), thread_row = threadIdx.x / (kBN / kTN);
  float sums[kTM][kTN] = {};
  float a_values[kTM], b_values[kTN];
  for (int k0 = 0; k0 < K; k0 += kBK) {
    stage_a_transposed<kBM, kBK, kThreads>(As, A, M, K, row0, k0, vectorized);
    stage_b<kBN, kBK, kThreads>(Bs, B, N, K, k0, column0, vectorized);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
#pragma unroll
      for (int i = 0; i < kTM; i += 4) {
        const float4 a = *reinterpret_cast<const float4*>(&As[k][thread_row * kTM + i]);
        a_values[i] = a.x; a_values[i + 1] = a.y; a_values[i + 2] = a.z; a_values[i + 3] = a.w;
      }
#pragma unroll
      for (int j = 0; j < kTN; j += 4) {
        const float4 b = *reinterpret_cast<const float4*>(&Bs[k][thread_column * kTN + j]);
        b_values[j] = b.x; b_values[j + 1] = b.y; b_values[j + 2] = b.z; b_values[j + 3] = b.w;
      }
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
#pragma unroll
    for (int j = 0; j < kTN; j += 4) {
      store_four(C, M, N, row0 + thread_row * kTM + i, column0 + thread_column * kTN + j,
                 make_float4(sums[i][j], sums[i][j + 1], sums[i][j + 2], sums[i][j + 3]), vectorized);
    }
  }
}
