// The warp-tiled SGEMM body that matmul v07_warp_tiling introduces and v08_tuned_tiles instantiates with
// other tile sizes. Portable HIP dialect; the warp tiles are groups of 32 threads by index (no
// shuffles), so the code is correct whatever the hardware warp size.
//
// Three levels of tiles. A block owns BM x BN of C and stages BK-deep tiles of A (transposed) and B in
// shared memory (tile_loads.h). Each group of 32 threads (a warp on NVIDIA and RDNA) owns a WM x WN
// piece of the block tile, split into WMITER x WNITER sub-tiles of WSUBM x WSUBN; in each sub-tile a
// thread owns a TM x TN block, so a thread holds WMITER * TM x WNITER * TN sums. Per k, a thread reads
// WMITER * TM values of A and WNITER * TN of B from shared memory for their outer product.
#ifndef HG_MATMUL_WARP_TILING_H
#define HG_MATMUL_WARP_TILING_H

#include "tile_loads.h"

constexpr int kWarpTileLanes = 32;       // threads per warp tile (the index arithmetic's warp, not HG_WARP_SIZE)

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int THREADS>
__device__ __forceinline__ void warp_tiled_matmul(const float* __restrict__ A, const float* __restrict__ B,
                                                  float* __restrict__ C, int M, int N, int K) {
  constexpr int kWMITER = (WM * WN) / (kWarpTileLanes * TM * TN * WNITER);
  constexpr int kWSUBM = WM / kWMITER, kWSUBN = WN / WNITER;
  constexpr int kLaneColumns = kWSUBN / TN;                  // threads across a sub-tile
  static_assert(kWMITER >= 1 && kWMITER * kWarpTileLanes * TM * TN * WNITER == WM * WN, "warp tile = 32 threads' blocks");
  static_assert(kLaneColumns * (kWSUBM / TM) == kWarpTileLanes, "a sub-tile is 32 threads' TM x TN blocks");
  static_assert((BM / WM) * (BN / WN) * kWarpTileLanes == THREADS, "one warp tile per 32 threads");
  static_assert(TM % 4 == 0 && TN % 4 == 0, "16-byte shared reads and C stores");

  __shared__ __align__(16) float As[BK][BM];                 // transposed: As[k][m]
  __shared__ __align__(16) float Bs[BK][BN];
  const bool vectorized = vectorizable(A, B, C, N, K);
  const int row0 = blockIdx.y * BM, column0 = blockIdx.x * BN;
  const int warp = threadIdx.x / kWarpTileLanes, lane = threadIdx.x % kWarpTileLanes;
  const int warp_row = warp / (BN / WN), warp_column = warp % (BN / WN);
  const int lane_row = lane / kLaneColumns, lane_column = lane % kLaneColumns;
  // This thread's first row / column inside the block tile; sub-tile (wm, wn) adds wm * kWSUBM / wn * kWSUBN.
  const int my_row = warp_row * WM + lane_row * TM, my_column = warp_column * WN + lane_column * TN;

  float sums[kWMITER * TM][WNITER * TN] = {};
  float a_values[kWMITER * TM], b_values[WNITER * TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    stage_a_transposed<BM, BK, THREADS>(As, A, M, K, row0, k0, vectorized);
    stage_b<BN, BK, THREADS>(Bs, B, N, K, k0, column0, vectorized);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int wm = 0; wm < kWMITER; ++wm) {
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
          const float4 a = *reinterpret_cast<const float4*>(&As[k][my_row + wm * kWSUBM + i]);
          float* to = &a_values[wm * TM + i];
          to[0] = a.x; to[1] = a.y; to[2] = a.z; to[3] = a.w;
        }
      }
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn) {
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          const float4 b = *reinterpret_cast<const float4*>(&Bs[k][my_column + wn * kWSUBN + j]);
          float* to = &b_values[wn * TN + j];
          to[0] = b.x; to[1] = b.y; to[2] = b.z; to[3] = b.w;
        }
      }
#pragma unroll
      for (int i = 0; i < kWMITER * TM; ++i) {
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j) sums[i][j] += a_values[i] * b_values[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int wm = 0; wm < kWMITER; ++wm) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int row = row0 + my_row + wm * kWSUBM + i;
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn) {
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          const float* s = &sums[wm * TM + i][wn * TN + j];
          store_four(C, M, N, row, column0 + my_column + wn * kWSUBN + j, make_float4(s[0], s[1], s[2], s[3]),
                     vectorized);
        }
      }
    }
  }
}

#endif  // HG_MATMUL_WARP_TILING_H
