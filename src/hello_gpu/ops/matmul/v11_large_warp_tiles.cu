/*
Larger warp tiles: v10's pipeline with each warp owning 64x64 of C instead of 64x32, the block 128x256.
parent: v10_cp_async_pipeline
change: block tile 128x256 (8 warps as 2 x 4 of 64x64: 4 x 8 m16n8 accumulators, 128 float32 sums a
  thread), BK = 32, 4 stages of 27,136 bytes (108,544 bytes of dynamic shared memory), one block an SM
hypothesis: per k16 step a warp of v10 loads 4 A and 2 B ldmatrix.x4 for 16 mma (0.38 loads an mma);
  at 64x64 it loads 4 + 4 for 32 (0.25), and a block reads (128 + 256) x 32 elements per 128 x 256 x 32
  FMAs instead of (128 + 128) x 32 per 128 x 128 x 32: 1.33x the FMAs per byte from L2 and shared
  memory. The cost is registers (212 a thread, ptxas: 8 warps, one block an SM). The issue's target for the
  route is 0.6x cuBLAS
prediction: ~450 TFLOP/s bf16 at 4096^3 (~45% of the ~989 dense peak, ~0.63x torch.mm; 1.35x v10)
outcome: 0.910x v10 [0.909, 0.911] at 4096^3 bfloat16 (predicted 1.35x: wrong), 0.298x torch.mm
  [0.297, 0.300], 231 TFLOP/s (predicted ~450 TFLOP/s, ~0.63x); 0.906x v10, 0.303x torch.mm [0.300, 0.303] at
  8192^3, 238 TFLOP/s (records matmul.bfloat16, run of 8b07192)
deterministic: yes, each element is one warp's float32 sum in a fixed k order
vendor: nvidia
arch: sm_80
entry: matmul_large_warp_tiles<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record matmul.bfloat16

#include "mma_sync.cuh"

// Read by the launcher (tensor_cores.tile_constants): grid, block and dynamic shared bytes come from here.
constexpr int kBM = 128, kBN = 256, kBK = 32, kWM = 64, kWN = 64, kStages = 4, kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
matmul_large_warp_tiles(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K,
                        int ldb) {
  pipelined_matmul<T, kBM, kBN, kBK, kWM, kWN, kStages, kThreads>(A, B, C, M, N, K, ldb);
}
