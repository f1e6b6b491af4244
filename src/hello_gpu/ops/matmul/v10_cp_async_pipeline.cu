/*
A cp.async pipeline: v09's tiles and warps, the loads made asynchronous and several tiles deep, so the
tensor cores multiply one tile while the next three are on their way.
parent: v09_mma_sync
change: tiles copied global -> shared by cp.async (16 bytes a thread, zero-filled past the edges, no
  registers in between) into 4 slots of dynamic shared memory (4 x 18,944 = 75,776 bytes, opted in
  above 48 KiB by the launch); one __syncthreads a k step instead of two
hypothesis: in v09 every k step waits a full global-memory latency (~600-800 ns on H200) before its 16
  mma.sync a warp; with 3 tiles in flight the latency is hidden behind ~3 steps of tensor-core work,
  and the registers that staged v09's loads are free. The worklogs' cp.async step gave 1.5-2x on
  Ampere. 98 registers a thread (ptxas) fit 2 blocks (16 warps) an SM, 2 x 75 KiB of shared memory too
prediction: ~330 TFLOP/s bf16 at 4096^3 (~33% of the ~989 dense peak, ~0.46x torch.mm; 1.6x v09)
outcome: 2.369x v09 [2.366, 2.372] at 4096^3 bfloat16 (predicted 1.6x), 0.328x torch.mm [0.325, 0.330],
  253 TFLOP/s (predicted ~330 TFLOP/s, ~0.46x); 2.402x v09, 0.315x torch.mm [0.312, 0.318] at 8192^3,
  247 TFLOP/s (records matmul.bfloat16, run of 8b07192)
deterministic: yes, each element is one warp's float32 sum in a fixed k order
vendor: nvidia
arch: sm_80
entry: matmul_cp_async_pipeline<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record matmul.bfloat16

#include "mma_sync.cuh"

// Read by the launcher (tensor_cores.tile_constants): grid, block and dynamic shared bytes come from here.
constexpr int kBM = 128, kBN = 128, kBK = 32, kWM = 64, kWN = 32, kStages = 4, kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads)
matmul_cp_async_pipeline(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K,
                         int ldb) {
  pipelined_matmul<T, kBM, kBN, kBK, kWM, kWN, kStages, kThreads>(A, B, C, M, N, K, ldb);
}
