/*
Shared-memory tiling: a block stages a 32x32 tile of A and one of B in shared memory, then every
thread reads its row and column of the tiles from there, 32 times each.
parent: v02_coalesced
change: for each K step of 32, the 1024 threads load one element of each tile (coalesced), barrier,
  32 FMAs from shared memory, barrier; tiles past the matrix edge are filled with zeros
hypothesis: each element of A and B loaded from global memory is now used 32 times (once per
  thread of its tile row or column) instead of once: global traffic falls 32x, and the limit moves to
  shared memory: two shared loads per FMA (As[ty][k] is a broadcast, Bs[k][tx] 32 banks), ~1/3 of
  the FMA rate at best. The worklogs saw ~1.5x over coalesced
prediction: ~1.5x v02 at 4096^3
outcome: 1.443x v02 [1.443, 1.444] at 4096^3 float32 (predicted ~1.5x), 0.162x torch.mm [0.162, 0.163],
  8.29 TFLOP/s (records matmul.float32, run of 8b07192)
deterministic: yes, each element is one thread's sum in k order
dtypes: float32
*/
// hello-gpu: record matmul.float32

constexpr int kTile = 32;

__global__ void __launch_bounds__(kTile * kTile)
matmul_shared_tiles(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N,
                    int K) {
  __shared__ float As[kTile][kTile];
  __shared__ float Bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty;
  const int column = blockIdx.x * kTile + tx;
  float sum = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    // Thread (tx, ty) loads A[row][k0 + tx] and B[k0 + ty][column]: a warp reads 128 contiguous bytes of each.
    As[ty][tx] = (row < M && k0 + tx < K) ? A[static_cast<int64_t>(row) * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && column < N) ? B[static_cast<int64_t>(k0 + ty) * N + column] : 0.0f;
    __syncthreads();                                   // the tiles are complete
#pragma unroll
    for (int k = 0; k < kTile; ++k) sum += As[ty][k] * Bs[k][tx];
    __syncthreads();                                   // everyone is done with them before the next load
  }
  if (row < M && column < N) C[static_cast<int64_t>(row) * N + column] = sum;
}
