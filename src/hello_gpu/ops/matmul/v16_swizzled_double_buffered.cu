/*
v11's tiles and 8 warps with a main loop the tensor cores can run from: XOR-swizzled shared memory instead of
padded rows, the next k16 step's fragments loaded while this step's mma.sync run, copy addresses set up once.
parent: v11_large_warp_tiles
change: the same 128x256 block of 8 warps of 64x64, BK = 32 and 4 cp.async stages; only the loop around the
  mma.sync changes: (1) tiles unpadded in shared memory (4 x 24,576 = 98,304 bytes), each 16-byte chunk
  moved inside its 128-byte line by XOR with its row mod 8 (A's 64-byte rows, two a line: row / 2), so every
  8-lane phase of an ldmatrix, a cp.async or the epilogue covers the 32 banks once; (2) two sets of fragment
  registers: step s + 1's 4 + 4 ldmatrix.x4 issue before step s's 32 mma.sync, and a tile's last step first
  waits for the next tile (one barrier a tile), so the next tile's first fragments load under that step's
  mma; (3) each thread's 2 + 4 copies a tile keep their shared offsets, global pointers and row or column
  bounds from before the loop (a pointer step, a compare and a select a copy); (4) C leaves through shared
  memory in 16-byte stores of whole 512-byte rows where N is a multiple of 8 and C 16-byte aligned, else
  pair by pair as in v11. 255 registers (__launch_bounds__(256, 1)), no spills: 128 accumulators and 2 x 32
  fragment registers
hypothesis: v10 and v11 are issue-bound, not occupancy-bound. Compiled for sm_90 as the H200 builds them, v10's
  loop issues 14.3 instructions per HMMA and v11's 8.5 (index arithmetic and bounds redone for each 16-byte
  copy); v16's issues 2.4 (155 per 64 HMMA, benchmarks/matmul_sass_evidence.py) and uses each LDSM a median
  64 instructions after it (v10: 14, v11: 12). 2 warps a scheduler then leave ~60% of the issue slots idle,
  and a warp with 32 independent mma.sync and its next fragments in registers feeds its tensor core alone
  (CUTLASS's Ampere kernels run 128x256 tiles at 8 warps an SM). More warps are not the way on Hopper:
  shared memory moves 128 bytes a cycle an SM, an ldmatrix.x4 takes 4 such cycles, and the 4 tensor cores
  want an mma every c / 4 cycles (c: cycles of one m16n8k16 on one tensor core). A 64x32 warp tile reads 6
  ldmatrix.x4 per 16 mma and a 128x128 block writes 0.5 cycles of cp.async per mma: 2.0 cycles per mma, the
  whole budget at c = 8 and 133% of it at c = 6; 64x64 reads 8 per 32, 1.0 + 0.375 (128x256 writes) = 1.375
  (69% at c = 8, 92% at c = 6). A 64x64 warp tile does not fit 168 registers either: compiled so (4 warps a
  128x128 block, 3 blocks an SM) it spills 680 bytes a thread, and 64x32 in 128 (2 blocks of 8 warps) spills
  28. The ceiling is the mma.sync rate: wgmma's dense bf16 peak (989 TFLOP/s) is c = 4, and the
  FlashAttention-3 authors put mma.sync near 2/3 of it on Hopper (c = 6: ~660 TFLOP/s)
prediction: ~530 TFLOP/s bf16 at 4096^3 (~0.68x torch.mm's 777.9; 2.3x v11, 2.1x v10): 85% of a c = 6 mma.sync
  (shared memory 92% busy, a barrier every 64 mma a warp), less ~3% for 3.9 waves of 512 tiles at one block
  an SM and ~3% for each block's unhidden prologue and epilogue; ~540 TFLOP/s at 8192^3 (~0.77x torch.mm's
  701 there). If an m16n8k16 takes 8 cycles on Hopper (half of wgmma's rate) instead: ~420 TFLOP/s (0.54x),
  and the issue's 0.6x is beyond this route; ncu's tensor-pipe utilisation tells which. Either way, v16 at
  1.8x v11 or more, with the same 8 warps an SM, says occupancy was not what held v11 back
outcome: 2.066x v11 [2.065, 2.068] at 4096^3 bfloat16 (predicted 2.3x), 289 us, 0.604x torch.mm [0.601, 0.607], 476
  TFLOP/s (predicted ~530, ~0.68x: 10% short, between the c = 6 and c = 8 cases); 2.046x v11, 0.583x torch.mm [0.581,
  0.589] at 8192^3, 451 TFLOP/s (predicted ~540: 16% short) (records matmul.bfloat16, run of 6173353)
deterministic: yes, each element is one warp's float32 sum in a fixed k order
vendor: nvidia
arch: sm_80
entry: matmul_swizzled_double_buffered<{T}>
dtypes: bfloat16 float16
*/

#include "mma_sync.cuh"

// Read by the launcher (tensor_cores.tile_constants): grid, block and dynamic shared bytes come from here.
constexpr int kBM = 128, kBN = 256, kBK = 32, kWM = 64, kWN = 64, kStages = 4, kThreads = 256;

constexpr int kMI = kWM / 16, kNI = kWN / 8;              // 4 x 8 m16n8 accumulators a warp, 128 floats a thread
constexpr int kSteps = kBK / 16;                           // k16 steps a tile
constexpr int kChunksA = kBK / 8, kChunksB = kBN / 8;      // 16-byte chunks a row: 4 (A, 64 bytes), 32 (B, 512)
constexpr int kTileA = kBM * kBK, kTileB = kBK * kBN;      // elements a stage: 4,096 + 8,192
constexpr int kCopiesA = kBM * kChunksA / kThreads;        // 2 chunks of A a thread a tile
constexpr int kCopiesB = kBK * kChunksB / kThreads;        // 4 chunks of B
static_assert(kSteps == 2, "the fragment buffers alternate within a tile: an even step count starts each tile on 0");
static_assert(kStages >= 3, "the slot refilled during tile t is tile t - 1's, neither t's nor t + 1's");
static_assert(kCopiesA * kThreads == kBM * kChunksA && kCopiesB * kThreads == kBK * kChunksB, "whole passes");
static_assert(kBM * kBN <= kStages * (kTileA + kTileB), "the C tile fits in the stages' shared memory");

// #region swizzle
// Element offset of 16-byte chunk `chunk` of row `row` in a tile of CHUNKS chunks a row. 8 chunks make a
// 128-byte line, which spans all 32 banks; the chunk keeps its line and moves within it by XOR with the
// line's row number mod 8 (rows of 64 bytes: two share a line, so row / 2). An ldmatrix phase reads 8
// consecutive rows at one chunk column, a cp.async pass 8 consecutive chunks: after the XOR both fall on 8
// different 4-bank groups. tests/test_matmul_tensor_cores.py models this function and counts the groups.
template <int CHUNKS>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  static_assert(CHUNKS == 4 || CHUNKS % 8 == 0, "rows of 64 bytes or of whole 128-byte lines");
  constexpr int kRowsPerLine = CHUNKS >= 8 ? 1 : 8 / CHUNKS;
  return 8 * ((row * CHUNKS + chunk) ^ ((row / kRowsPerLine) % 8));
}
// #endregion swizzle

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
matmul_swizzled_double_buffered(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N,
                                int K, int ldb) {
  constexpr uint32_t kStageBytes = 2 * (kTileA + kTileB);
  require_dynamic_shared(kStages * kStageBytes);
  extern __shared__ uint4 dynamic_shared[];
  const uint32_t shared_base = shared_address(dynamic_shared);
  const int row0 = blockIdx.y * kBM, column0 = blockIdx.x * kBN;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warp_row = (warp / (kBN / kWN)) * kWM, warp_column = (warp % (kBN / kWN)) * kWN;
  const int tiles = (K + kBK - 1) / kBK;

  // #region copy-setup
  // This thread's chunks, fixed for the whole loop: A rows threadIdx.x / 4 + 64 c at chunk threadIdx.x % 4,
  // B rows threadIdx.x / 32 + 8 c at chunk threadIdx.x % 32 (a warp copies one 512-byte row of B, or 64
  // contiguous bytes of each of 8 rows of A). Byte offsets in a stage, the first global element of each
  // chunk at k0 = 0, and whether its row (A) or column (B) lies inside the matrix.
  uint32_t a_to[kCopiesA], b_to[kCopiesB];
  const T* a_from[kCopiesA];
  const T* b_from[kCopiesB];
  bool a_inside[kCopiesA], b_inside[kCopiesB];
  const int a_chunk = threadIdx.x % kChunksA, b_chunk = threadIdx.x % kChunksB;
#pragma unroll
  for (int c = 0; c < kCopiesA; ++c) {
    const int row = threadIdx.x / kChunksA + c * (kThreads / kChunksA);
    a_to[c] = 2 * swizzled<kChunksA>(row, a_chunk);
    a_inside[c] = row0 + row < M;
    a_from[c] = A + static_cast<int64_t>(a_inside[c] ? row0 + row : 0) * K + 8 * a_chunk;
  }
#pragma unroll
  for (int c = 0; c < kCopiesB; ++c) {
    const int row = threadIdx.x / kChunksB + c * (kThreads / kChunksB);
    b_to[c] = 2 * kTileA + 2 * swizzled<kChunksB>(row, b_chunk);
    b_inside[c] = column0 + 8 * b_chunk < ldb;
    b_from[c] = B + static_cast<int64_t>(row) * ldb + (b_inside[c] ? column0 + 8 * b_chunk : 0);
  }
  const int64_t b_step = static_cast<int64_t>(kBK) * ldb;     // elements from one tile of B to the next

  // The next tile into stage `slot`: tiles are copied in order 0, 1, 2, ..., so each pointer steps one tile
  // (BK elements along A's rows, BK rows of B) after its copy. Chunks past K or outside the matrix are
  // zero-filled (src-size 0, nothing read; the source address then stays the matrix's first element). K is a
  // multiple of 8 (tensor_cores.py), so a chunk is wholly in or out.
  int k_left = K;                                              // columns of A (rows of B) from this tile on
  auto copy_next_tile = [&](int slot) {
    const uint32_t stage = shared_base + slot * kStageBytes;
#pragma unroll
    for (int c = 0; c < kCopiesA; ++c) {
      const bool inside = a_inside[c] && 8 * a_chunk < k_left;
      cp_async_16(stage + a_to[c], inside ? a_from[c] : A, inside);
      a_from[c] += kBK;
    }
#pragma unroll
    for (int c = 0; c < kCopiesB; ++c) {
      const bool inside = b_inside[c] && threadIdx.x / kChunksB + c * (kThreads / kChunksB) < k_left;
      cp_async_16(stage + b_to[c], inside ? b_from[c] : B, inside);
      b_from[c] += b_step;
    }
    k_left -= kBK;
  };
  // #endregion copy-setup

  // #region fragment-addresses
  // ldmatrix addresses, byte offsets in a stage. A: lanes 0-15 give rows 0-15 of an m16 tile at chunk 2 s,
  // lanes 16-31 the same rows at chunk 2 s + 1 (k + 8); the row's XOR key (row / 2) % 8 = (lane % 16) / 2
  // for every m16 tile of the warp (warp_row and 16 i are multiples of 16), so tile i is 16 i rows
  // (1,024 bytes) on. B (.trans): lanes 0-15 give k rows 16 s .. 16 s + 15 at the warp's chunk j,
  // lanes 16-31 at chunk j + 1; the key is the k row mod 8 = lane % 8.
  uint32_t a_at[kSteps], b_at[kSteps][kNI / 2];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    a_at[s] = 2 * swizzled<kChunksA>(warp_row + lane % 16, 2 * s + lane / 16);
#pragma unroll
    for (int j = 0; j < kNI; j += 2) {
      b_at[s][j / 2] = 2 * kTileA + 2 * swizzled<kChunksB>(16 * s + lane % 16, warp_column / 8 + j + lane / 16);
    }
  }
  uint32_t a[2][kMI][4], b[2][kNI][2];
  auto load_fragments = [&](int buffer, int step, uint32_t stage) {
#pragma unroll
    for (int i = 0; i < kMI; ++i) ldmatrix_x4(a[buffer][i], stage + a_at[step] + i * 16 * 2 * kBK);
#pragma unroll
    for (int j = 0; j < kNI; j += 2) {
      uint32_t r[4];
      ldmatrix_x4_trans(r, stage + b_at[step][j / 2]);
      b[buffer][j][0] = r[0];
      b[buffer][j][1] = r[1];
      b[buffer][j + 1][0] = r[2];
      b[buffer][j + 1][1] = r[3];
    }
  };
  // #endregion fragment-addresses

  // #region main-loop
  // Prologue: tiles 0 .. kStages - 2, one commit group each (empty past the last tile: the count stays right).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < tiles) copy_next_tile(s);
    cp_async_commit();
  }
  cp_async_wait<kStages - 2>();                        // group 0 = tile 0 has landed (this thread's copies) ...
  __syncthreads();                                     // ... and everyone's
  load_fragments(0, 0, shared_base);

  float sums[kMI][kNI][4] = {};
  int slot = 0;
  for (int t = 0; t < tiles; ++t) {
    const uint32_t stage = shared_base + slot * kStageBytes;
    const int next_slot = slot + 1 == kStages ? 0 : slot + 1;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      if (s + 1 < kSteps) {
        load_fragments((s + 1) % 2, s + 1, stage);
      } else {
        // Groups committed: kStages - 1 + t, group g = tile g. Leaving the newest kStages - 3 pending means
        // tile t + 1 has landed; after the barrier every warp has also read all of tile t - 1, whose slot
        // (t + kStages - 1) % kStages takes tile t + kStages - 1. Then tile t + 1's first fragments, under
        // this step's 32 mma (past the last tile they read a stage nobody uses: harmless, never multiplied).
        cp_async_wait<kStages - 3>();
        __syncthreads();
        if (t + kStages - 1 < tiles) copy_next_tile(slot == 0 ? kStages - 1 : slot - 1);
        cp_async_commit();
        load_fragments(0, 0, shared_base + next_slot * kStageBytes);
      }
#pragma unroll
      for (int i = 0; i < kMI; ++i) {
#pragma unroll
        for (int j = 0; j < kNI; ++j) TensorCore<T>::mma(sums[i][j], a[s % 2][i], b[s % 2][j]);
      }
    }
    slot = next_slot;
  }
  cp_async_wait<0>();                                  // only empty groups remain; leave none behind
  // #endregion main-loop

  // #region epilogue
  // C through shared memory when whole 16-byte chunks can be stored: the warps write their sums as pairs into
  // a 128 x 256 tile (swizzled like B: the 8 rows g of a pair store land on 8 different 4-bank groups, the 4
  // lanes t on the 4 banks of each), then each warp stores whole rows of the tile, 512 contiguous bytes.
  // The same test for every thread: no warp diverges on it.
  const bool whole_chunks = N % 8 == 0 && (reinterpret_cast<uintptr_t>(C) & 15) == 0;
  if (!whole_chunks) {
    store_warp_tile<T, kMI, kNI>(C, M, N, row0 + warp_row, column0 + warp_column, sums);
    return;
  }
  __syncthreads();                                     // every warp is done reading the stages
  using Pair = decltype(TensorCore<T>::two(0.0f, 0.0f));
  T* tile = reinterpret_cast<T*>(dynamic_shared);
  const int g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int i = 0; i < kMI; ++i) {
#pragma unroll
    for (int j = 0; j < kNI; ++j) {
      const int row = warp_row + 16 * i + g, chunk = (warp_column + 8 * j) / 8;
      *reinterpret_cast<Pair*>(&tile[swizzled<kChunksB>(row, chunk) + 2 * t4]) =
          TensorCore<T>::two(sums[i][j][0], sums[i][j][1]);
      *reinterpret_cast<Pair*>(&tile[swizzled<kChunksB>(row + 8, chunk) + 2 * t4]) =
          TensorCore<T>::two(sums[i][j][2], sums[i][j][3]);
    }
  }
  __syncthreads();
#pragma unroll
  for (int c = 0; c < kBM * kChunksB / kThreads; ++c) {    // 16 chunks a thread, a fixed count: no remainder loop
    const int row = threadIdx.x / kChunksB + c * (kThreads / kChunksB), chunk = threadIdx.x % kChunksB;
    if (row0 + row < M && column0 + 8 * chunk < N) {
      *reinterpret_cast<uint4*>(C + static_cast<int64_t>(row0 + row) * N + column0 + 8 * chunk) =
          *reinterpret_cast<const uint4*>(&tile[swizzled<kChunksB>(row, chunk)]);
    }
  }
  // #endregion epilogue
}
