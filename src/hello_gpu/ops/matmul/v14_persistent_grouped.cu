/*
Persistent blocks in grouped tile order: one block an SM for the whole matmul, each taking tiles in
turn, so the producer loads the next tile while the consumers write the last one out, and neighbouring
blocks work on tiles that share rows of A and columns of B in L2.
parent: v13_warp_specialized
change: v13's block, launched once per SM (132 on the H200; fewer when there are fewer tiles); block b
  takes tiles b, b + grid, b + 2 grid ... numbered in groups of 8 tile rows: within a group the tile
  index runs down the 8 rows first, then across the columns (tile_order below). The slot and phase
  counters run on across tiles, so the producer fills slots for the next tile as soon as the consumers
  free them, during their epilogue
hypothesis: v13's 4096^3 grid is 32 x 16 = 512 tiles on 132 SMs, and every block pays its pipeline
  fill (4 stages of loads before the first wgmma) and its epilogue (128 x 256 outputs stored while its
  tensor cores idle): ~2 us of a tile's ~45 us at 4096^3 (268 MFLOP at ~5.6 TFLOP/s an SM). A persistent block pays the fill once and
  overlaps each epilogue with the next tile's loads. The order matters at 8192^3 (64 x 32 tiles): 132
  concurrent tiles in row-major order read 5 row blocks of A and all 32 column blocks of B from DRAM
  (37 blocks of K x 128 or K x 256), grouped by 8 tile rows 8 + 17 = 25 (1.5x less); at 4096^3 (16 tile
  columns) both orders read ~25-28, so the gain there is the persistence alone. The worklogs' persistent
  + grouped step gave 5-10% on H100
prediction: ~740 TFLOP/s bf16 at 4096^3 (~75% of the ~989 dense peak, ~1.03x torch.mm; 1.09x v13), ~720 at
  8192^3 (~1.07x torch.mm's 672)
outcome: not measured yet
deterministic: yes, each element is one warpgroup's float32 sum in a fixed k order
vendor: nvidia
arch: sm_90a
entry: matmul_persistent_grouped<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record matmul.bfloat16

#include "wgmma_tma.cuh"

// Read by the launcher (tensor_cores.tile_constants): block, TMA boxes and shared bytes come from here.
constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kThreads = 384, kGroupRows = 8;
constexpr int kConsumerWarps = 8;

// Tile `tile` of a tiles_m x tiles_n grid in grouped order: groups of kGroupRows tile rows (the last group
// may have fewer), numbered down the rows first within a group. Python's model: test_matmul_tensor_cores.
__device__ __forceinline__ void tile_order(int tile, int tiles_m, int tiles_n, int& tile_m, int& tile_n) {
  const int per_group = kGroupRows * tiles_n;
  const int first_row = (tile / per_group) * kGroupRows;
  const int rows = min(tiles_m - first_row, kGroupRows);
  const int in_group = tile % per_group;
  tile_m = first_row + in_group % rows;
  tile_n = in_group / rows;
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
matmul_persistent_grouped(const int64_t* __restrict__ maps, T* __restrict__ C, int M, int N, int K) {
  static_assert(kBK == kTileK && kBM == 128 && kBN == 256, "2 consumers x 64 rows, 2 x m64n128 each");
  constexpr uint32_t kBytesA = kBM * kBK * 2, kBytesB = kBK * kBN * 2, kStageBytes = kBytesA + kBytesB;
  char* shared = aligned_dynamic_shared(kStages * kStageBytes + kBarrierBytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + kBN - 1) / kBN, tiles = tiles_m * tiles_n;
  const int k_tiles = (K + kBK - 1) / kBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    registers_decrease<40>();
    if (threadIdx.x != 0) return;
    const int64_t* map_a = maps;
    const int64_t* map_b = maps + 16;
    tensor_map_acquire(map_a);
    tensor_map_acquire(map_b);
    int step = 0;                                  // k tiles loaded by this block so far, across its tiles
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int tile_m, tile_n;
      tile_order(tile, tiles_m, tiles_n, tile_m, tile_n);
      for (int t = 0; t < k_tiles; ++t, ++step) {
        const int slot = step % kStages, use = step / kStages;
        if (use > 0) mbarrier_wait(&empty[slot], (use - 1) & 1);
        char* to = shared + slot * kStageBytes;
        mbarrier_arrive_expect_bytes(&full[slot], kStageBytes);
        tma_load_tile(to, map_a, &full[slot], t * kBK, tile_m * kBM);
#pragma unroll
        for (int j = 0; j < kBN / 64; ++j) {
          tma_load_tile(to + kBytesA + j * kColumnBlockBytes, map_b, &full[slot], tile_n * kBN + 64 * j, t * kBK);
        }
      }
    }
    return;
  }

  registers_increase<232>();
  const int rows = 64 * (warpgroup - 1);
  int step = 0;                                    // k tiles consumed, in the producer's order
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int tile_m, tile_n;
    tile_order(tile, tiles_m, tiles_n, tile_m, tile_n);
    float sums[2][64];
#pragma unroll
    for (int i = 0; i < 64; ++i) sums[0][i] = sums[1][i] = 0.0f;
    for (int t = 0; t < k_tiles; ++t, ++step) {
      const int slot = step % kStages;
      mbarrier_wait(&full[slot], (step / kStages) & 1);
      const char* tile_a = shared + slot * kStageBytes + rows * 128;
      const char* tile_b = shared + slot * kStageBytes + kBytesA;
      fence_accumulators(sums[0]);
      fence_accumulators(sums[1]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          Wgmma<T>::m64n128k16(sums[half], a_descriptor(tile_a, kk),
                               b_descriptor(tile_b + half * 2 * kColumnBlockBytes, kk));
        }
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_accumulators(sums[0]);
      fence_accumulators(sums[1]);
      if (threadIdx.x % 32 == 0) mbarrier_arrive(&empty[slot]);
    }
    // The producer is already filling the freed slots with the next tile while these stores run.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      store_wgmma_block(C, M, N, tile_m * kBM + rows, tile_n * kBN + 128 * half, sums[half]);
    }
  }
}
