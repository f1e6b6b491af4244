/*
Tensor cores through mma.sync: the first rung of the pre-Hopper route. Each warp multiplies 16x16 by
16x8 blocks with one instruction (mma.sync.m16n8k16, float32 sums), fed from shared memory by ldmatrix.
parent: v08_tuned_tiles
change: bfloat16 / float16 inputs on the tensor cores: block tile 128x128, BK = 32, 8 warps as 2 x 4,
  each warp a 64x32 tile = 4 x 4 m16n8 accumulators (64 float32 sums a thread); A and B staged in
  shared memory with 16-byte loads and rows padded by 8 elements (16 bytes), so the 8 row addresses of
  each ldmatrix phase fall in 8 different 4-bank groups (A rows 80 bytes apart, B rows 272: no bank
  conflict); one stage: load, __syncthreads, compute, __syncthreads. K or N not a multiple of 8 runs on
  zero-padded copies of A and B (tensor_cores.py)
hypothesis: one mma.sync does 4096 FMAs where v08's SIMT FMA does one, so the multiply is no longer the
  limit: the loads are. Per 128x128x32 step a block reads 16 KiB and does 1 MFLOP, and nothing overlaps
  the global loads with the tensor-core work (one stage, two barriers a step), so most of each step
  waits on memory. The public worklogs put a first ldmatrix + mma.sync kernel at 25-35% of cuBLAS
prediction: ~200 TFLOP/s bf16 at 4096^3 (~20% of the H200's ~989 dense bf16 peak, ~0.28x torch.mm)
outcome: 0.139x torch.mm [0.138, 0.139] at 4096^3 bfloat16, 107 TFLOP/s (predicted ~200 TFLOP/s, ~0.28x);
  0.138x torch.mm at 8192^3, 109 TFLOP/s (records matmul.bfloat16, run of 8b07192)
deterministic: yes, each element is one warp's float32 sum in a fixed k order
vendor: nvidia
arch: sm_80
entry: matmul_mma_sync<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record matmul.bfloat16

#include "mma_sync.cuh"

// Read by v09_mma_sync.py (tensor_cores.tile_constants): the launcher's grid and block come from here.
constexpr int kBM = 128, kBN = 128, kBK = 32, kThreads = 256;
constexpr int kWM = 64, kWN = 32;                  // a warp's tile: 2 warps across M, 4 across N
constexpr int kMI = kWM / 16, kNI = kWN / 8;       // 4 x 4 m16n8 accumulators a warp
constexpr int kPad = 8;                            // elements: 16 bytes a row
constexpr int kSA = kBK + kPad, kSB = kBN + kPad;  // row strides in shared memory: 40 and 136 elements

template <typename T>
__global__ void __launch_bounds__(kThreads)
matmul_mma_sync(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K,
                int ldb) {
  static_assert((kBM / kWM) * (kBN / kWN) * 32 == kThreads, "one warp tile per warp");
  // 128 x 40 + 32 x 136 elements = 18,944 bytes: static, under the 48 KiB a block gets without opting in.
  __shared__ __align__(16) T As[kBM * kSA];
  __shared__ __align__(16) T Bs[kBK * kSB];
  const int row0 = blockIdx.y * kBM, column0 = blockIdx.x * kBN;
  const int warp = threadIdx.x / 32;
  const int warp_row = (warp / (kBN / kWN)) * kWM, warp_column = (warp % (kBN / kWN)) * kWN;

  float sums[kMI][kNI][4] = {};
  for (int k0 = 0; k0 < K; k0 += kBK) {
    // 512 pieces of 16 bytes per tile, 2 per thread: A rows take 4 pieces (64 bytes), B rows 16 (256 bytes).
#pragma unroll
    for (int p = threadIdx.x; p < kBM * kBK / 8; p += kThreads) {
      const int r = p / (kBK / 8), c = (p % (kBK / 8)) * 8;
      *reinterpret_cast<uint4*>(&As[r * kSA + c]) = load_piece(A, M, K, row0 + r, k0 + c);
    }
#pragma unroll
    for (int p = threadIdx.x; p < kBK * kBN / 8; p += kThreads) {
      const int r = p / (kBN / 8), c = (p % (kBN / 8)) * 8;
      *reinterpret_cast<uint4*>(&Bs[r * kSB + c]) = load_piece(B, K, ldb, k0 + r, column0 + c);
    }
    __syncthreads();
    warp_tile_mma<T, kMI, kNI, kBK, kSA, kSB>(sums, &As[warp_row * kSA], &Bs[warp_column]);
    __syncthreads();
  }
  store_warp_tile<T, kMI, kNI>(C, M, N, row0 + warp_row, column0 + warp_column, sums);
}
