/*
Decode GEMV: one warp per output column n, reading weight row n once with 16-byte loads and applying
it to up to 16 rows of A held in cache, each lane a slice of K, then one warp reduction per row.
parent: v00_torch
change: block of 8 warps, warp w of block (x, y) computes C[m][n] for n = 8x + w and the 16 rows m
  of A in tile y: lane l reads 16-byte packs l, l + 32, ... of weight row n (4 float32 or 8
  bf16 / fp16 values) and the same packs of each row of A, keeps 16 float32 sums, and a butterfly
  per row adds the 32 lanes'. Where K is not a multiple of a pack or a pointer is unaligned, the
  same walk goes element by element
hypothesis: at M = 1 and 16 the work is reading the weight (117 MB in bf16 for 14336x4096) once:
  every weight byte is loaded by exactly one lane in 512-byte coalesced warp loads, A (8 KiB a row)
  stays in L1/L2. 14336 warps of 8 KiB each, 24-32 per SM at once (64 registers a thread in bf16 /
  fp16, 80 in float32: 4 or 3 blocks of 256), 512 bytes a warp per load, ~16-32 KiB in flight per SM where ~26 KiB covers DRAM latency
  (4.8 TB/s x ~700 ns / 132 SMs): near copy bandwidth: ~0.85 of copy on the weight bytes at 14336x4096 and 4096x14336 (1.3x
  F.linear's 0.64-0.67), ~0.6 at 4096x4096 (only 4096 warps: 31 per SM, one wave, the tail shows),
  ~0.9 for the 128256x4096 head (0.95x F.linear). At M = 16 each pack of the weight meets 16 rows of
  A from L1: the same bytes, 16x the FMAs, still memory-bound (16 FLOPs per weight byte in bf16)
prediction: ~1.3x F.linear bf16 at 1x14336x4096 and 16x14336x4096; ~0.95x at 1x128256x4096
outcome: 0.704x F.linear [0.702, 0.713] at 1x14336x4096 bfloat16, 2,033 GB/s (predicted ~1.3x); 0.134x
  F.linear at 16x14336x4096 (393 GB/s), 0.787x F.linear at 1x4096x14336; float32: 0.595x F.linear
  [0.589, 0.599] at 1x4096x4096 (1,287 GB/s), 0.514x F.linear at 16x4096x4096 (records linear.bfloat16 and
  linear.float32, run of 8b07192)
deterministic: yes, each lane sums its packs in order and the butterfly is fixed
entry: linear_warp_per_row<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record linear.float32
// hello-gpu: record linear.bfloat16

#include "hg_pack.h"     // Pack<T>, lane_as_float
#include "hg_reduce.h"   // warp_sum

constexpr int kWarpsPerBlock = 8;
constexpr int kRows = 16;      // rows of A per warp: a whole M = 16 decode step reads the weight once

// a is M x K, weight N x K, out M x N, contiguous (the launcher checks). blockDim.x = 8 warps.
template <typename T>
__global__ void __launch_bounds__(kWarpsPerBlock * HG_WARP_SIZE)
linear_warp_per_row(const T* __restrict__ a, const T* __restrict__ weight, T* __restrict__ out, int M, int N, int K) {
  const int warp = threadIdx.x / HG_WARP_SIZE, lane = threadIdx.x % HG_WARP_SIZE;
  const int n = blockIdx.x * kWarpsPerBlock + warp;
  if (n >= N) return;                                  // the whole warp leaves: its butterflies stay whole
  const int m0 = blockIdx.y * kRows;
  const int rows = min(kRows, M - m0);
  const T* w = weight + static_cast<int64_t>(n) * K;
  const T* x = a + static_cast<int64_t>(m0) * K;
  float sums[kRows] = {};
  constexpr int kLanes = 16 / sizeof(T);
  // One answer for the whole grid, so no warp diverges on it.
  const bool packed = K % kLanes == 0 && ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(weight)) % 16) == 0;
  if (packed) {
    const int packs = K / kLanes;
    for (int p = lane; p < packs; p += HG_WARP_SIZE) {
      const Pack<T> wp = reinterpret_cast<const Pack<T>*>(w)[p];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < rows) {
          const Pack<T> xp = reinterpret_cast<const Pack<T>*>(x + static_cast<int64_t>(r) * K)[p];
#pragma unroll
          for (int l = 0; l < kLanes; ++l) sums[r] += lane_as_float(wp, l) * lane_as_float(xp, l);
        }
      }
    }
  } else {
    for (int k = lane; k < K; k += HG_WARP_SIZE) {
      const float wk = static_cast<float>(w[k]);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < rows) sums[r] += wk * static_cast<float>(x[static_cast<int64_t>(r) * K + k]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r < rows) {                                    // the same for every lane: whole butterflies only
      const float total = warp_sum(sums[r]);
      if (lane == 0) out[static_cast<int64_t>(m0 + r) * N + n] = static_cast<T>(total);
    }
  }
}
