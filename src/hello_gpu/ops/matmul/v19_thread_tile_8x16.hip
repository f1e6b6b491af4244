/*
A thread tile of 8x16 instead of 8x8: each thread sums 128 elements of C, so a float it reads from
shared memory feeds 16 (A) or 8 (B) FMAs instead of 8 and 8, and the staging, barrier and loop work of a K tile is
spread over twice the FFMAs.
parent: v17_prefetch_double_buffer
change: v17's loop (register prefetch of tile t + 1 before the FMAs of tile t, two shared buffers, one
  barrier a tile, 4x4 sub-tiles read as float4s, As rows padded to 132 floats) on a smaller block:
  128 threads (4 warps as 2 x 2, each a 64x64 warp tile) for the same 128x128 tile of C, BK = 16, so
  each thread holds 2 x 4 sub-tiles of 4x4 = 8x16 sums (v17: 256 threads, 2 x 2 sub-tiles, 8x8). A
  thread stages 4 + 4 float4s a tile (v17: 2 + 2): A rows t / 2 and t / 2 + 64, B rows t / 32 + 4j.
  __launch_bounds__(128, 2): up to 255 registers a thread, 2 blocks (8 warps) an SM
hypothesis: v17 is issue-bound, and its 16-byte path issues 1,180 instructions a tile for 1,024 FFMAs
  (86.8% FFMA, the loop of benchmarks/matmul_sass_evidence.py less the scalar-load blocks); it reached
  43.1 TFLOP/s, 0.64 of the H200's FFMA peak (132 SMs x 128 FMAs x 2 x 1.98 GHz = 66.9 TFLOP/s). Here a
  thread issues 6 LDS.128 a k for 128 FFMAs (v17: 4 for 64), and a tile's 8 LDG.128, 16 + 4 STS,
  address arithmetic, barrier and loop control are shared by 2,048 FFMAs instead of 1,024: 2,267
  instructions a tile, 90.3% FFMA (same count, sm_90, 243 registers, no spills). The longer outer
  product also lets ptxas keep one operand of more FFMAs in the operand reuse cache (0.89 reused
  operands an FFMA, v17 0.83), and only 16 of 2,048 FFMAs read all three sources from one register
  bank (bank = register % 2; v17: 95 of 1,024), the pattern microbenchmarks found to cost an issue cycle
  on Volta (NVIDIA documents no rule for Hopper: a reading of the SASS, not a measurement). What this
  rung gives up is warps: 8 an SM, 2 a scheduler (v17: 16, 4). They suffice if nothing stalls long:
  each warp has 128 independent FFMAs a k (a dependent FFMA waits ~4 cycles), the next k's LDS.128
  issue among this k's FFMAs (~30 cycles of latency against 128 issue slots), the next tile's global
  loads wait behind 2,048 FFMAs of each warp (~4,500 issue cycles a scheduler against ~600-1,000 of
  latency), and the SM's other block issues while one waits at its barrier. v07 held the same 8x16
  sums at 8 warps an SM and reached 22.7 TFLOP/s because it waited on 8 serial global round trips a
  tile (docs/ladders.md, item 1); v17's prefetch, kept here, removed those. Shared memory: per k a
  warp's 6 LDS.128 (8 lanes share each float4) and ~2 wavefronts of stores are 8 wavefronts for 128
  warp FFMAs, 0.25 of the SM's 1 wavefront a cycle at 4 warp FFMAs a cycle (v17: 0.31); L2 traffic
  and wave efficiency are v17's (the same 128x128 block tile: 1,024 tiles on 264 block slots)
prediction: ~1.08x v17 at 4096^3 float32 (1.02-1.12): ~46 TFLOP/s (44-48), ~0.90x torch.mm float32
  (51.2 TFLOP/s in records matmul.float32, run of 6173353).
  Model: v17's cycles that issue (0.74 of them, from its 43.1 TFLOP/s and 86.8% share) unchanged and
  the FFMA share 86.8% -> 90.3%: 43.1 x 90.3 / 86.8 = 44.8 TFLOP/s (0.875x); if each FFMA with three
  sources in one register bank costs one cycle, v17 lost 95 cycles a tile in 1,275 and this rung 16 in
  2,283: x 1.07 more, 48.1 TFLOP/s (0.94x); the prediction is the midpoint, 46.4. If 2 warps a
  scheduler leave more cycles idle than 4 did (the tile's first LDS after each barrier, stalls v17's
  other warps filled), the issuing fraction falls: at 0.71 this rung only matches v17, and the issue's
  0.85x (43.5 TFLOP/s) then needs more warps, which 128 sums a thread cannot have (2 blocks of 128
  threads x 248 registers, 243 rounded up to the allocation unit, take 63,488 of the SM's 65,536)
outcome: 1.056x v17 [1.054, 1.056] at 4096^3 float32 (predicted ~1.08x, 1.02-1.12): 45.9 TFLOP/s, 0.886x
  torch.mm [0.884, 0.886] (predicted ~0.90x), above the issue's 0.85x. Measured on an H100 (records
  matmul.hip.float32 of nvidia-h100-80gb-hbm3, run of 90e366c; the H200 was not lent), where torch.mm
  makes 51.6 TFLOP/s and v17 43.1, as on the H200. Between the two models above: the FFMA share alone
  predicted 1.04x, the register banks 1.11x more; the gain sits nearer the first, so the bank conflicts
  cost less than an issue cycle each here, or the fewer warps gave some of it back (not separated)
deterministic: yes, each element is one thread's sum in k order
dtypes: float32
*/
// hello-gpu: record matmul.float32

#include "tile_loads.h"

constexpr int kBM = 128, kBN = 128, kBK = 16;
constexpr int kThreads = 128;
constexpr int kWarpLanes = 32;                          // threads a warp tile (index arithmetic, not HG_WARP_SIZE)
constexpr int kWM = 64, kWN = 64;                       // a warp's tile: 2 rows x 2 columns of warps
constexpr int kTM = 4, kTN = 4;                         // a thread's block in each sub-tile
constexpr int kSubM = 32, kSubN = 16;                   // sub-tiles: 8 lanes down x 4 across, 4x4 each
constexpr int kIterM = kWM / kSubM, kIterN = kWN / kSubN;   // 2 x 4 sub-tiles a warp: 8x16 sums a thread
constexpr int kLaneColumns = kSubN / kTN;               // 4 lanes across a sub-tile
constexpr int kAPad = 4;                                // floats after each As row: 4 banks
constexpr int kAStride = kBM + kAPad;                   // As row (one k): 132 floats
constexpr int kALoads = kBM * kBK / 4 / kThreads;       // float4s of A a thread stages a tile: 4
constexpr int kBLoads = kBK * kBN / 4 / kThreads;       // float4s of B: 4
constexpr int kARowsPerPass = kThreads / 2;             // A: 2 lanes a row, 64 rows a pass
constexpr int kBRowsPerPass = kThreads / (kBN / 4);     // B: 32 lanes a row, 4 rows a pass
static_assert((kBM / kWM) * (kBN / kWN) * kWarpLanes == kThreads, "one warp tile per 32 threads");
static_assert((kSubM / kTM) * kLaneColumns == kWarpLanes, "a sub-tile is 32 threads' 4x4 blocks");
static_assert(kBK == 16 && kALoads == 4 && kBLoads == 4 && kARowsPerPass * 2 == kBM && kBRowsPerPass * 4 == kBK,
              "A: 2 lanes a row x pieces 0-1 and 2-3, two passes of 64 rows; B: 4 passes of 4 rows");

// A thread's registers for one K tile on its way from global to shared memory.
struct Staged {
  float4 a[kALoads];
  float4 b[kBLoads];
};

// A float4 j of thread t: row t / 2 + 64 (j / 2), k piece t % 2 + 2 (j % 2) (two lanes read a 32-byte
// sector of a row).
__device__ __forceinline__ int a_row_of(int j) { return threadIdx.x / 2 + kARowsPerPass * (j / 2); }
__device__ __forceinline__ int a_k_of(int j) { return 4 * (threadIdx.x % 2 + 2 * (j % 2)); }

// Issue the loads of the K tile at k0; nothing waits for them until store_tile. B: row t / 32 + 4j,
// piece t % 32 (a warp reads 512 contiguous bytes of a row).
__device__ __forceinline__ Staged load_tile(const float* A, const float* B, int M, int N, int K, int row0,
                                            int column0, int k0, bool vectorized) {
  Staged staged;
  const int b_piece = threadIdx.x % (kBN / 4);
#pragma unroll
  for (int j = 0; j < kALoads; ++j) {
    staged.a[j] = load_four(A, M, K, row0 + a_row_of(j), k0 + a_k_of(j), vectorized);
  }
#pragma unroll
  for (int j = 0; j < kBLoads; ++j) {
    staged.b[j] = load_four(B, K, N, k0 + threadIdx.x / (kBN / 4) + kBRowsPerPass * j, column0 + 4 * b_piece,
                            vectorized);
  }
  return staged;
}

// Write the staged tile: A transposed (As[k][m], four scalar stores a float4), B as it lies. With the
// 132-float rows, the 32 lanes' A stores of one k fall on banks 16 (lane % 2) + lane / 2 + const: all
// different (as in v17; the second pass adds 64 rows, 0 mod 32 banks, to every lane alike).
__device__ __forceinline__ void store_tile(float (*As)[kAStride], float (*Bs)[kBN], const Staged& staged) {
  const int b_piece = threadIdx.x % (kBN / 4);
#pragma unroll
  for (int j = 0; j < kALoads; ++j) {
    const int k = a_k_of(j), row = a_row_of(j);
    As[k + 0][row] = staged.a[j].x;
    As[k + 1][row] = staged.a[j].y;
    As[k + 2][row] = staged.a[j].z;
    As[k + 3][row] = staged.a[j].w;
  }
#pragma unroll
  for (int j = 0; j < kBLoads; ++j) {
    *reinterpret_cast<float4*>(&Bs[threadIdx.x / (kBN / 4) + kBRowsPerPass * j][4 * b_piece]) = staged.b[j];
  }
}

// __launch_bounds__'s second argument: CUDA reads 2 blocks an SM, so 65536 / 256 threads = 256 registers
// a thread, capped at 255 (128 sums, 24 operands, 32 staged floats); HIP-Clang reads it as waves per
// execution unit, a looser bound.
__global__ void __launch_bounds__(kThreads, 2)
matmul_thread_tile_8x16(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
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
