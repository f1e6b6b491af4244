/*
The epilogue through shared memory and a TMA store: each consumer warpgroup writes its finished 64 x 256
block of C into a swizzled shared tile, one thread hands it to the copy engine, and the warpgroup goes
back to the next tile's wgmmas at once, while the engine writes C to global memory in whole lines.
parent: v14_persistent_grouped
change: v14's block (a producer warpgroup, two consumer warpgroups of 64 rows, full/empty mbarriers,
  one block an SM taking 128x256 tiles in grouped order), with 3 stages instead of 4 to make room for
  a 64 KiB C tile in shared memory (3 x 48 + 64 = 208 KiB + 1.25 KiB). At the end of a tile each
  consumer thread rounds its 128 sums to 16 bits and writes them with 64 4-byte st.shared into 4 boxes
  of 64 rows x 128 bytes, 128-byte swizzled as TMA reads them; fence.proxy.async and a named barrier
  of the warpgroup's 128 threads (bar.sync 1 or 2), then the warpgroup's first thread issues 4
  cp.async.bulk.tensor stores (a third tensor map, C's, 64 x 64 boxes) and one commit_group, and the
  warpgroup starts its next tile. Before writing the C tile again that thread waits until the engine
  has read the previous stores (cp.async.bulk.wait_group.read 0; a whole tile of wgmmas later) and a
  second named barrier lets the others write. TMA clips rows past M and columns past N; a C whose
  rows are not 16-byte aligned (N not a multiple of 8) gets a padded copy from the launcher
hypothesis: v14's record splits a block's time into rounds of one tile: ~49 us at 4096^3 (4 rounds:
  512 tiles on 132 SMs) and ~94 us at 8192^3 (16 rounds), i.e. ~45.5 us per 4096 of K plus ~3.3 us
  a tile that does not grow with K: 7% of a round at 4096^3, 3.5% at 8192^3, spent with no wgmma in
  flight (ladders.md, matmul, item 6). The SASS puts v14's epilogue at 64 STG.E of 4 bytes a thread;
  one warp's store covers 8 rows x 16 bytes, 8 half-used 32-byte sectors in 8 lines; at one line a
  cycle in the LSU an SM's 512 warp stores take ~4,100 cycles, ~2 us at 1.98 GHz, plus the drain of
  the last wgmmas. Here the same 64 KiB goes through 512 warp-wide st.shared, each one 128-byte wavefront
  with no bank conflict (the swizzle puts the 8 rows' 16-byte pieces on 8 different bank groups):
  ~512 cycles, ~0.3 us, then the engine writes whole 128-byte lines while the next tile multiplies.
  The stage less costs nothing if 2 stages of lead (~1.4 us of wgmmas) still cover a TMA load.
  CUTLASS's sm90 warp-specialised kernels store C the same way (their TMA epilogue)
prediction: ~2.8 us less a round (3.3 -> ~0.5): ~184 us at 4096^3 bf16, 1.06x v14, ~745 TFLOP/s (~75% of
  the ~989 dense peak, ~0.96x torch.mm); ~1,460 us at 8192^3, 1.03x v14, ~750 TFLOP/s (~0.98x torch.mm)
outcome: 1.103x v14 [1.095, 1.105] at 4096^3 bfloat16 (predicted 1.06x), 0.992x torch.mm [0.986, 1.000], 176.2 us
  (~184), 780 TFLOP/s (predicted ~745, ~0.96x); 1.061x v14 [1.059, 1.065] (predicted 1.03x), 1.024x torch.mm [1.022,
  1.025] at 8192^3, 1,383 us (~1,460), 795 TFLOP/s (records matmul.bfloat16, run of 6173353)
deterministic: yes, each element is one warpgroup's float32 sum in a fixed k order
vendor: nvidia
arch: sm_90a
entry: matmul_tma_store_epilogue<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record matmul.bfloat16

#include "wgmma_tma.cuh"

// Read by the launcher (tensor_cores.tile_constants): block, TMA boxes and shared bytes come from here;
// kOutputTiles: BM x BN tiles of C kept in shared memory after the stages (v18_tma_store_epilogue.py).
constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 3, kThreads = 384, kGroupRows = 8, kOutputTiles = 1;
constexpr uint32_t kStageBytes = 2 * (kBM + kBN) * kBK;             // 48 KiB: A 128 x 64, B 64 x 256
constexpr uint32_t kOutputBoxBytes = 64 * 128;                      // a store box: 64 rows x 64 columns
constexpr uint32_t kConsumerOutputBytes = 2 * 64 * kBN;             // a consumer's 64 x 256: 4 boxes, 32 KiB

// ------------------------------------------------------------------------------------- TMA store

// This thread's st.shared writes made visible to the async proxy (the TMA engine) before it reads them
// (PTX ISA, "Async proxy"): every writing thread runs it before the barrier that precedes the store.
__device__ __forceinline__ void shared_writes_to_async_proxy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Named barrier `id` of one warpgroup (128 threads); id 0 is __syncthreads', so the consumers use 1 and 2
// and never wait for the producer or for each other.
__device__ __forceinline__ void warpgroup_barrier(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

// The box of `map` at (inner, outer) = (column, row) written from shared memory at `from` (128-byte
// swizzled as the map says); elements outside the tensor are not written.
__device__ __forceinline__ void tma_store_tile(const void* map, const void* from, int inner, int outer) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
               "r"(shared_address(from)), "r"(inner), "r"(outer)
               : "memory");
}

// The stores this thread issued since its last commit form one group; wait_group.read 0 returns once every
// group has finished reading shared memory (the global writes may still be on their way).
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// #region stage-output
// A consumer warpgroup's 64 x 256 sums, rounded once, into 4 boxes of 64 rows x 64 columns as TMA reads them:
// element (r, c) at box c / 64, byte r * 128 + (c % 64) * 2 of it, 128-byte swizzled (bits 4-6, the 16-byte
// piece of the row, XOR bits 7-9, the row within an 8-row atom; the boxes are 1024-byte aligned). Thread
// 32 w + 4 g + t holds rows 16 w + g and 16 w + g + 8, columns 8 j + 2 t and + 1 of each 128-column half
// (store_wgmma_block's layout). Both its rows are g modulo 8, so the swizzle turns piece j % 8 into
// (j % 8) ^ g and the rest of each address is a constant the store carries: 64 st.shared and no arithmetic.
// A warp's store covers 8 rows x 16 bytes, pieces that the swizzle spreads over all 32 banks (no conflict).
template <typename T>
__device__ __forceinline__ void stage_output(char* boxes, const float (&sums)[1][kBN / 128][64]) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  char* first = boxes + (16 * warp + g) * 128 + 4 * t;             // row 16 w + g, column pair t of piece 0
#pragma unroll
  for (int half = 0; half < kBN / 128; ++half) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int lower = 0; lower < 2; ++lower) {
        const int box = 2 * half + j / 8, piece = (j % 8) ^ g;
        char* at = first + box * kOutputBoxBytes + lower * 8 * 128 + piece * 16;
        const float* pair = &sums[0][half][4 * j + 2 * lower];
        *reinterpret_cast<decltype(TensorCore<T>::two(0.0f, 0.0f))*>(at) = TensorCore<T>::two(pair[0], pair[1]);
      }
    }
  }
}
// #endregion stage-output

// #region tma-store-epilogue
// v14's warp-specialised persistent body (wgmma_tma.cuh's specialized_matmul with kPersistent) with the
// stores of C moved to the TMA engine. maps: A's and B's (the loads); output_map: C's (the stores).
template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
matmul_tma_store_epilogue(const int64_t* __restrict__ maps, const int64_t* __restrict__ output_map,
                          T* __restrict__ C, int M, int N, int K) {
  static_assert(kBM == 128 && kBN == 256 && kBK == kTileK && kThreads == 384 && kOutputTiles == 1,
                "2 consumer warpgroups x 64 rows of one C tile, 1 producer");
  constexpr int kConsumerWarps = 8;
  (void)C;   // written through output_map; a parameter so that the runtime knows this kernel writes C
  char* shared = aligned_dynamic_shared(kStages * kStageBytes + kOutputTiles * 2 * kConsumerOutputBytes +
                                        kBarrierBytes);
  char* output = shared + kStages * kStageBytes;                    // 1024-aligned: 3 x 48 KiB
  uint64_t* full = reinterpret_cast<uint64_t*>(output + 2 * kConsumerOutputBytes);
  uint64_t* empty = full + kStages;
  const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + kBN - 1) / kBN, k_tiles = (K + kTileK - 1) / kTileK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();                                 // the last block-wide barrier: the roles part here

  const int warpgroup = threadIdx.x / 128;
  int tile_m, tile_n, step = 0;
  if (warpgroup == 0) {                            // the producer: v14's, unchanged
    registers_decrease<40>();
    if (threadIdx.x != 0) return;
    tensor_map_acquire(maps);
    tensor_map_acquire(maps + 16);
    for (int round = 0; block_tile<true, kGroupRows>(round, tiles_m, tiles_n, tile_m, tile_n); ++round) {
      for (int t = 0; t < k_tiles; ++t, ++step) {
        const int slot = step % kStages, use = step / kStages;
        if (use > 0) mbarrier_wait(&empty[slot], (use - 1) & 1);   // the consumers freed its previous fill
        load_stage<kBM, kBN>(shared + slot * kStageBytes, maps, &full[slot], t * kTileK, tile_m * kBM, tile_n * kBN);
      }
    }
    return;
  }

  registers_increase<232>();
  const int rows = 64 * (warpgroup - 1);           // this consumer's 64 rows of the tile
  const bool issuer = threadIdx.x % 128 == 0;      // the thread that talks to the TMA engine for the warpgroup
  char* boxes = output + (warpgroup - 1) * kConsumerOutputBytes;
  if (issuer) tensor_map_acquire(output_map);
  for (int round = 0; block_tile<true, kGroupRows>(round, tiles_m, tiles_n, tile_m, tile_n); ++round) {
    float sums[1][kBN / 128][64];
#pragma unroll
    for (int c = 0; c < kBN / 128; ++c) {
#pragma unroll
      for (int i = 0; i < 64; ++i) sums[0][c][i] = 0.0f;
    }
    for (int t = 0; t < k_tiles; ++t, ++step) {
      const int slot = step % kStages;
      mbarrier_wait(&full[slot], (step / kStages) & 1);
      const char* stage = shared + slot * kStageBytes;
      multiply_stage<T, 1, kBN / 128>(sums, stage + rows * 128, stage + 2 * kBM * kTileK);
      if (threadIdx.x % 32 == 0) mbarrier_arrive(&empty[slot]);
    }
    if (issuer) tma_store_wait_read();             // the engine has read the last tile's boxes...
    warpgroup_barrier(warpgroup);                  // ...before anyone writes them again
    stage_output<T>(boxes, sums);
    shared_writes_to_async_proxy();
    warpgroup_barrier(warpgroup);                  // every thread's writes are in, and visible to TMA
    if (issuer) {
#pragma unroll
      for (int box = 0; box < kBN / 64; ++box) {
        tma_store_tile(output_map, boxes + box * kOutputBoxBytes, tile_n * kBN + 64 * box, tile_m * kBM + rows);
      }
      tma_store_commit();
    }
  }
  if (issuer) tma_store_wait_read();               // shared memory must outlive the engine's reads
}
// #endregion tma-store-epilogue
