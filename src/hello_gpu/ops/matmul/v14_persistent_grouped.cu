/*
Persistent blocks in grouped tile order: one block an SM for the whole matmul, each taking tiles in
turn, so the producer loads the next tile while the consumers write the last one out, and neighbouring
blocks work on tiles that share rows of A and columns of B in L2.
parent: v13_warp_specialized
change: v13's block, launched once per SM (132 on the H200; fewer when there are fewer tiles); block b
  takes tiles b, b + grid, b + 2 grid ... numbered in groups of 8 tile rows: within a group the tile
  index runs down the 8 rows first, then across the columns (block_tile in wgmma_tma.cuh). The slot and phase
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
outcome: 1.034x v13 [1.031, 1.035] at 4096^3 bfloat16 (predicted 1.09x), 0.904x torch.mm [0.901, 0.909],
  704 TFLOP/s (predicted ~740 TFLOP/s, ~1.03x); 1.046x v13, 0.948x torch.mm [0.945, 0.962] at 8192^3,
  729 TFLOP/s (predicted ~720 TFLOP/s, ~1.07x) (records matmul.bfloat16, run of 8b07192)
deterministic: yes, each element is one warpgroup's float32 sum in a fixed k order
vendor: nvidia
arch: sm_90a
entry: matmul_persistent_grouped<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record matmul.bfloat16

#include "wgmma_tma.cuh"

// Read by the launcher (tensor_cores.tile_constants): block, TMA boxes and shared bytes come from here.
// The body, with v13's, is specialized_matmul in wgmma_tma.cuh: here block_tile hands each block tiles in
// grouped order until none is left.
constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kThreads = 384, kGroupRows = 8;

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
matmul_persistent_grouped(const int64_t* __restrict__ maps, T* __restrict__ C, int M, int N, int K) {
  static_assert(kBM == 128 && kBK == kTileK && kThreads == 384, "2 consumer warpgroups x 64 rows, 1 producer");
  specialized_matmul<T, kBN, kStages, true, kGroupRows>(maps, C, M, N, K);
}
