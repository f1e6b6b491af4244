/*
Producer and consumers: one warpgroup only loads (TMA), two only multiply (wgmma), handing the stages
back and forth through two mbarriers a stage, so loads never wait for a block-wide barrier.
parent: v12_wgmma_tma
change: 384 threads = 3 warpgroups. Warpgroup 0 gives registers back (setmaxnreg.dec to 40) and one of
  its threads runs the loads: wait until slot s is empty, announce 48 KiB on its full barrier, issue the
  TMA copies (A 128 x 64, B four 64 x 64 boxes). Warpgroups 1 and 2 take registers (setmaxnreg.inc to
  232) and each owns 64 rows of a 128x256 tile: per k16 step two m64n128k16 (128 float32 sums a
  thread); after its wgmmas complete, each consumer warp arrives on the slot's empty barrier (8
  arrivals free it). 4 stages x 48 KiB = 192 KiB (+ 1 KiB alignment): one block an SM.
  Registers: 40 x 128 + 232 x 256 = 64,512 of the SM's 65,536
hypothesis: v12 stalls every 64-deep step twice (its own wgmma wait, then a barrier before the next load
  can start), and a 128x128 tile reads 1 byte of operands per 64 FMAs. Here the producer runs up to 4
  stages ahead of the consumers at all times, the consumers only ever wait on data, and the 128x256
  tile does 1.33x the FMAs per byte. The worklogs' specialised 128x256 kernel reached ~0.9-1.0x cuBLAS
  on H100; the issue's target for the route is 0.95x
prediction: ~680 TFLOP/s bf16 at 4096^3 (~69% of the ~989 dense peak, ~0.95x torch.mm; 1.35x v12)
outcome: not measured yet
deterministic: yes, each element is one warpgroup's float32 sum in a fixed k order
vendor: nvidia
arch: sm_90a
entry: matmul_warp_specialized<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record matmul.bfloat16

#include "wgmma_tma.cuh"

// Read by the launcher (tensor_cores.tile_constants): grid, block, TMA boxes and shared bytes come from here.
constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kThreads = 384;
constexpr int kConsumerWarps = 8;                  // 2 consumer warpgroups: the empty barriers' arrival count

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
matmul_warp_specialized(const int64_t* __restrict__ maps, T* __restrict__ C, int M, int N, int K) {
  static_assert(kBK == kTileK && kBM == 128 && kBN == 256, "2 consumers x 64 rows, 2 x m64n128 each");
  constexpr uint32_t kBytesA = kBM * kBK * 2, kBytesB = kBK * kBN * 2, kStageBytes = kBytesA + kBytesB;
  char* shared = aligned_dynamic_shared(kStages * kStageBytes + kBarrierBytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + kStages * kStageBytes);    // the slot's tile landed
  uint64_t* empty = full + kStages;                                                 // every consumer is done with it
  const int row0 = blockIdx.y * kBM, column0 = blockIdx.x * kBN;
  const int tiles = (K + kBK - 1) / kBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();                                 // the last block-wide barrier: the roles part here

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    registers_decrease<40>();
    if (threadIdx.x != 0) return;
    const int64_t* map_a = maps;
    const int64_t* map_b = maps + 16;
    tensor_map_acquire(map_a);
    tensor_map_acquire(map_b);
    for (int t = 0; t < tiles; ++t) {
      const int slot = t % kStages, use = t / kStages;
      if (use > 0) mbarrier_wait(&empty[slot], (use - 1) & 1);    // the consumers freed its previous fill
      char* to = shared + slot * kStageBytes;
      mbarrier_arrive_expect_bytes(&full[slot], kStageBytes);
      tma_load_tile(to, map_a, &full[slot], t * kBK, row0);
#pragma unroll
      for (int j = 0; j < kBN / 64; ++j) {
        tma_load_tile(to + kBytesA + j * kColumnBlockBytes, map_b, &full[slot], column0 + 64 * j, t * kBK);
      }
    }
    return;
  }

  registers_increase<232>();
  const int rows = 64 * (warpgroup - 1);           // this consumer's 64 rows of the tile
  float sums[2][64] = {};                          // columns 0-127 and 128-255
  for (int t = 0; t < tiles; ++t) {
    const int slot = t % kStages;
    mbarrier_wait(&full[slot], (t / kStages) & 1);
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
#pragma unroll
  for (int half = 0; half < 2; ++half) store_wgmma_block(C, M, N, row0 + rows, column0 + 128 * half, sums[half]);
}
