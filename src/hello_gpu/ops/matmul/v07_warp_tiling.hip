/*
Warp tiling: between the block tile and the thread's registers, a tile per warp. The 4 warps of a
block each own a 64x64 quarter of its 128x128 tile, computed as 4 sub-tiles of 64x16, each thread an
8x4 block of each sub-tile (warp_tiling.h).
parent: v06_vectorized
change: blocks of 128 threads (4 warps), BK = 16; thread (warp w, lane l) holds 8 x 16 sums: rows of
  its warp's quarter picked by l / 4, columns by l % 4 in each of the 4 sub-tiles; loads as v06
hypothesis: in v06 the 32 lanes of a warp read A values for 2 thread rows and B values for 16
  thread columns spread over the whole 128-wide tile, so a warp's shared loads touch more distinct
  addresses than needed. With a warp confined to a 64x64 quarter, its lanes read 64 A values and 16 B
  values a sub-tile, and the sub-tiles reuse them from registers: fewer shared-memory wavefronts per
  FMA; 128 sums a thread take 203 registers (ptxas, sm_90), so 2 blocks of 128 threads fit an SM.
  The worklogs put this step at ~1.1-1.2x, reaching ~0.9x cuBLAS on an A6000
prediction: ~1.15x v06 at 4096^3 (~0.8x torch.mm float32)
outcome: 0.674x v06 [0.672, 0.676] at 4096^3 float32 (predicted ~1.15x: wrong), 0.447x torch.mm [0.445, 0.448]
  (predicted ~0.8x), 22.7 TFLOP/s (records matmul.float32, run of 8b07192)
deterministic: yes, each element is one thread's sum in k order
dtypes: float32
*/
// hello-gpu: record matmul.float32

#include "warp_tiling.h"

constexpr int kBM = 128, kBN = 128, kBK = 16;
constexpr int kWM = 64, kWN = 64, kWNITER = 4;              // a warp's tile and its sub-tiles across N
constexpr int kTM = 8, kTN = 4;                             // a thread's block in each sub-tile
constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads)
matmul_warp_tiling(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N,
                   int K) {
  warp_tiled_matmul<kBM, kBN, kBK, kWM, kWN, kWNITER, kTM, kTN, kThreads>(A, B, C, M, N, K);
}
