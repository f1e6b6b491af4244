/*
Prefetch into registers, double-buffered shared memory: the global loads of K tile t + 1 are issued
before the FMAs of tile t and land in registers while those FMAs run; one barrier a tile.
parent: v08_tuned_tiles
change: v08's block (256 threads, 128x128 of C, BK = 16, 8 warp tiles of 64x32, 64 sums a thread)
  with a new staging: each thread issues its 2 + 2 float4 loads of the next A and B tiles (trip counts
  known at compile time) before the 16-k FMA loop of the current tile, and writes them to the other of
  two shared buffers after it; tile t + 1 is read only after the one __syncthreads that ends tile t.
  Two supporting layout changes: a thread's 8x8 block is 2 x 2 sub-tiles of 4x4 (v08: 1 x 2 of 8x4),
  so the 8 lanes down a sub-tile read 8 consecutive float4s of A (128 bytes, one wavefront: v08's
  stride of 8 floats put two lanes' float4s on the same banks); As rows padded to 132 floats and A
  loaded 2 lanes a row, so the transposed scalar stores of A hit 32 different banks (v08: 4-way)
hypothesis: v06 / v07 / v08 stage each tile as load -> wait -> store, 4 serial global round trips a
  16-k tile in v08 (benchmarks/matmul_sass_evidence.py, docs/ladders.md): every warp of the block
  waits ~1500 cycles a tile with no FMA to issue, and only the SM's other block fills the gap, which
  kept v06 and v08 at ~50% of the FFMA peak. Here a tile's loads wait behind 1,024 FFMAs of each
  warp (4 warps a scheduler: ~4,700 issue cycles a tile against ~600-1,000 cycles of global latency),
  so no warp waits on global memory and the FFMA pipe is limited by issue: the main loop's 16-byte
  path is ~1,180 instructions a tile for 1,024 FFMAs (87%). Shared memory: a thread reads 16 floats a
  k for 64 FFMAs (1 byte an FMA); a warp's 4 LDS.128 a k are 4 wavefronts, the tile's stores 1 more a
  k, for 64 warp FFMAs: at 4 warp FFMAs a cycle, ~0.31 of the SM's 1 wavefront a cycle, not the
  limit. Registers stay <= 128 (__launch_bounds__(256, 2)): 2 blocks of 256 threads an SM, 16 warps,
  as v08
prediction: ~1.3x v08 at 4096^3 float32: ~42 TFLOP/s (40-45), ~0.82x torch.mm float32 (51.1 TFLOP/s in
  records matmul.float32, run of 8b07192).
  Model: the H200's FFMA peak, 132 SMs x 128 FMAs x 2 x 1.98 GHz = 66.9 TFLOP/s, x 0.87 (the FFMA
  share of the loop) x 0.97 (wave efficiency: 1,024 tiles on 264 block slots, 3.9 waves) = 56.5 if
  every cycle issued; x ~0.75 for the cycles that do not (FFMA operand register-bank conflicts, the
  barrier a tile, each tile's first LDS): 42. The issue's 0.85x (43.4) needs 0.77 there; cuBLAS's
  51.1 is 76% of the peak
outcome: 1.328x v08 [1.326, 1.328] at 4096^3 float32 (predicted ~1.3x), 0.842x torch.mm [0.841, 0.842] (predicted
  ~0.82x; the issue's 0.85x missed by 0.008), 3,189 us, 43.1 TFLOP/s (predicted ~42, 40-45) (records matmul.float32, run
  of 6173353)
deterministic: yes, each element is one thread's sum in k order
dtypes: float32
*/
// hello-gpu: record matmul.float32

#include "tile_loads.h"

constexpr int kBM = 128, kBN = 128, kBK = 16;
constexpr int kThreads = 256;
constexpr int kWarpLanes = 32;                          // threads a warp tile (index arithmetic, not HG_WARP_SIZE)
constexpr int kWM = 64, kWN = 32;                       // a warp's tile: 2 rows x 4 columns of warps
constexpr int kTM = 4, kTN = 4;                         // a thread's block in each sub-tile
constexpr int kSubM = 32, kSubN = 16;                   // sub-tiles: 8 lanes down x 4 across, 4x4 each
constexpr int kIterM = kWM / kSubM, kIterN = kWN / kSubN;   // 2 x 2 sub-tiles a warp
constexpr int kLaneColumns = kSubN / kTN;               // 4 lanes across a sub-tile
constexpr int kAPad = 4;                                // floats after each As row: 4 banks
constexpr int kAStride = kBM + kAPad;                   // As row (one k): 132 floats
constexpr int kALoads = kBM * kBK / 4 / kThreads;       // float4s of A a thread stages a tile: 2
constexpr int kBLoads = kBK * kBN / 4 / kThreads;       // float4s of B: 2
static_assert((kBM / kWM) * (kBN / kWN) * kWarpLanes == kThreads, "one warp tile per 32 threads");
static_assert((kSubM / kTM) * kLaneColumns == kWarpLanes, "a sub-tile is 32 threads' 4x4 blocks");
static_assert(kBK == 16 && kALoads == 2 && kBLoads == 2, "A: 2 lanes a row x pieces 0-1 and 2-3; B: 8 rows a pass");

// A thread's registers for one K tile on its way from global to shared memory.
struct Staged {
  float4 a[kALoads];
  float4 b[kBLoads];
};

// Issue the loads of the K tile at k0; nothing waits for them until store_tile. A: thread t takes row
// t / 2 and the 4-float pieces t % 2 and t % 2 + 2 (two lanes read a 32-byte sector of a row). B: row
// t / 32 and t / 32 + 8, piece t % 32 (a warp reads 512 contiguous bytes of a row).
__device__ __forceinline__ Staged load_tile(const float* A, const float* B, int M, int N, int K, int row0,
                                            int column0, int k0, bool vectorized) {
  Staged staged;
  const int a_row = threadIdx.x / 2, b_piece = threadIdx.x % (kBN / 4);
#pragma unroll
  for (int j = 0; j < kALoads; ++j) {
    staged.a[j] = load_four(A, M, K, row0 + a_row, k0 + 4 * (threadIdx.x % 2 + 2 * j), vectorized);
  }
#pragma unroll
  for (int j = 0; j < kBLoads; ++j) {
    staged.b[j] = load_four(B, K, N, k0 + threadIdx.x / (kBN / 4) + 8 * j, column0 + 4 * b_piece, vectorized);
  }
  return staged;
}

// Write the staged tile: A transposed (As[k][m], four scalar stores a float4), B as it lies. With the
// 132-float rows, the 32 lanes' A stores of one k fall on banks 16 (lane % 2) + lane / 2 + const: all
// different.
__device__ __forceinline__ void store_tile(float (*As)[kAStride], float (*Bs)[kBN], const Staged& staged) {
  const int a_row = threadIdx.x / 2, b_piece = threadIdx.x % (kBN / 4);
#pragma unroll
  for (int j = 0; j < kALoads; ++j) {
    const int k = 4 * (threadIdx.x % 2 + 2 * j);
    As[k + 0][a_row] = staged.a[j].x;
    As[k + 1][a_row] = staged.a[j].y;
    As[k + 2][a_row] = staged.a[j].z;
    As[k + 3][a_row] = staged.a[j].w;
  }
#pragma unroll
  for (int j = 0; j < kBLoads; ++j) {
    *reinterpret_cast<float4*>(&Bs[threadIdx.x / (kBN / 4) + 8 * j][4 * b_piece]) = staged.b[j];
  }
}

// __launch_bounds__'s second argument: CUDA reads 2 blocks an SM, so 65536 / 512 = 128 registers a thread on
// the H200; HIP-Clang reads it as waves per execution unit, a looser bound.
__global__ void __launch_bounds__(kThreads, 2)
matmul_prefetch_double_buffer(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                              int M, int N, int K) {
  __shared__ __align__(16) float As[2][kBK][kAStride];     // transposed: As[buffer][k][m]
  __shared__ __align__(16) float Bs[2][kBK][kBN];
  const bool vectorized = vectorizable(A, B, C, N, K);
  const int row0 = blockIdx.y * kBM, column0 = blockIdx.x * kBN;
  const int warp = threadIdx.x / kWarpLanes, lane = threadIdx.x % kWarpLanes;
  // This thread's first row / column in the block tile; sub-tile (wm, wn) adds wm * kSubM / wn * kSubN.
  const int my_row = (warp / (kBN / kWN)) * kWM + (lane / kLaneColumns) * kTM;
  const int my_column = (warp % (kBN / kWN)) * kWN + (lane % kLaneColumns) * kTN;
  const int tiles = (K + kBK - 1) / kBK;

  store_tile(As[0], Bs[0], load_tile(A, B, M, N, K, row0, column0, 0, vectorized));
  __syncthreads();
  float sums[kIterM * kTM][kIterN * kTN] = {};
  float a_values[kIterM * kTM], b_values[kIterN * kTN];
  for (int tile = 0; tile < tiles; ++tile) {
    const int current = tile % 2;
    const bool more = tile + 1 < tiles;                     // the same in every thread: no divergence
    Staged next;
    if (more) next = load_tile(A, B, M, N, K, row0, column0, (tile + 1) * kBK, vectorized);
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
#pragma unroll
      for (int wm = 0; wm < kIterM; ++wm) {
        const float4 a = *reinterpret_cast<const float4*>(&As[current][k][my_row + wm * kSubM]);
        float* to = &a_values[wm * kTM];
        to[0] = a.x; to[1] = a.y; to[2] = a.z; to[3] = a.w;
      }
#pragma unroll
      for (int wn = 0; wn < kIterN; ++wn) {
        const float4 b = *reinterpret_cast<const float4*>(&Bs[current][k][my_column + wn * kSubN]);
        float* to = &b_values[wn * kTN];
        to[0] = b.x; to[1] = b.y; to[2] = b.z; to[3] = b.w;
      }
#pragma unroll
      for (int i = 0; i < kIterM * kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kIterN * kTN; ++j) sums[i][j] += a_values[i] * b_values[j];
      }
    }
    // The other buffer was last read in tile - 1, before the barrier that ended it: free to overwrite.
    if (more) store_tile(As[1 - current], Bs[1 - current], next);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kIterM * kTM; ++i) {
    const int row = row0 + my_row + (i / kTM) * kSubM + i % kTM;
#pragma unroll
    for (int wn = 0; wn < kIterN; ++wn) {
      const float* s = &sums[i][wn * kTN];
      store_four(C, M, N, row, column0 + my_column + wn * kSubN, make_float4(s[0], s[1], s[2], s[3]), vectorized);
    }
  }
}
