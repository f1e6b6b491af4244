/*
Hopper's own path: wgmma (a warpgroup of 4 warps multiplies 64 x 128 x 16 in one asynchronous
instruction, both operands read from shared memory) fed by TMA (one thread asks the copy engine for a
whole 2-D tile, which arrives swizzled and signals an mbarrier).
parent: v11_large_warp_tiles
change: block tile 128x128, BK = 64, one warpgroup of 128 threads owning all of it (two m64n128k16 a
  k16 step, 128 float32 sums a thread); thread 0 issues the TMA loads (A: one 128 x 64 box, B: two
  64 x 64 boxes, 32 KiB a stage, 128-byte swizzle) into 3 stages (96 KiB + 1 KiB alignment), each
  completing on its mbarrier; the warpgroup waits on the barrier, multiplies, waits for its wgmmas,
  and a __syncthreads frees the slot for the load 3 tiles ahead. The tensor maps live in global memory
  (tensor_maps.py), since the runtime has no 128-byte parameter. K or N not a multiple of 8: the
  launcher's zero-padded copies, as for the mma.sync rungs
hypothesis: mma.sync on Hopper issues from registers that ldmatrix filled, warp by warp; wgmma reads
  shared memory directly at the full tensor-core rate and TMA moves a tile with one instruction and no
  address arithmetic. The worklogs' first wgmma + TMA kernel reached ~0.5-0.6x cuBLAS on H100 with this
  much serialisation left (wait for the wgmmas, then a barrier, every 64-deep step); two blocks an SM
  (2 x 97 KiB) overlap one block's waits with the other's work
prediction: ~500 TFLOP/s bf16 at 4096^3 (~51% of the ~989 dense peak, ~0.7x torch.mm; 1.1x v11)
outcome: 2.486x v11 [2.457, 2.492] at 4096^3 bfloat16 (predicted 1.1x), 0.743x torch.mm [0.737, 0.752],
  575 TFLOP/s (predicted ~500 TFLOP/s, ~0.7x); 2.455x v11, 0.813x torch.mm [0.806, 0.821] at 8192^3,
  569 TFLOP/s (records matmul.bfloat16, run of 8b07192)
deterministic: yes, each element is one warpgroup's float32 sum in a fixed k order
vendor: nvidia
arch: sm_90a
entry: matmul_wgmma_tma<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record matmul.bfloat16

#include "wgmma_tma.cuh"

// Read by the launcher (tensor_cores.tile_constants): grid, block, TMA boxes and shared bytes come from here.
constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 3, kThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kThreads, 2)
matmul_wgmma_tma(const int64_t* __restrict__ maps, T* __restrict__ C, int M, int N, int K) {
  static_assert(kBK == kTileK && kBM == 128 && kBN == 128, "two m64n128 wgmmas cover the tile");
  constexpr uint32_t kStageBytes = 2 * (kBM + kBN) * kBK;           // 32 KiB
  char* shared = aligned_dynamic_shared(kStages * kStageBytes + kBarrierBytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + kStages * kStageBytes);    // tile t landed in its slot
  const int row0 = blockIdx.y * kBM, column0 = blockIdx.x * kBN;
  const int tiles = (K + kBK - 1) / kBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbarrier_init(&full[s], 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tensor_map_acquire(maps);
    tensor_map_acquire(maps + 16);
    for (int t = 0; t < kStages && t < tiles; ++t) {
      load_stage<kBM, kBN>(shared + t * kStageBytes, maps, &full[t], t * kBK, row0, column0);
    }
  }

  float sums[2][1][64] = {};                         // rows 0-63 and 64-127 of the tile
  for (int t = 0; t < tiles; ++t) {
    const int slot = t % kStages;
    mbarrier_wait(&full[slot], (t / kStages) & 1);   // the slot's (t / kStages)-th fill has landed
    const char* stage = shared + slot * kStageBytes;
    multiply_stage<T, 2, 1>(sums, stage, stage + 2 * kBM * kBK);
    __syncthreads();                                 // every warp's wgmmas are done reading the slot
    if (threadIdx.x == 0 && t + kStages < tiles) {
      load_stage<kBM, kBN>(shared + slot * kStageBytes, maps, &full[slot], (t + kStages) * kBK, row0, column0);
    }
  }
  store_tile<T, 2, 1>(C, M, N, row0, column0, sums);
}
