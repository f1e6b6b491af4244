// Staging tiles of A and B in shared memory with 16-byte loads, and writing C four columns at a time:
// what matmul v06_vectorized introduces and v07 / v08 reuse. Portable HIP dialect.
//
// A is M x K, B is K x N, C is M x N, contiguous row-major. The 16-byte path needs every row to start
// 16-byte aligned (K and N multiples of 4 floats, aligned base pointers): `vectorizable` says so once
// per kernel, the same for every thread, so no warp diverges on it. Otherwise (K = 517, N = 781) the
// same elements are loaded one by one, bounds-checked. Elements past the matrix are zeros, which add
// nothing to any sum.
#ifndef HG_MATMUL_TILE_LOADS_H
#define HG_MATMUL_TILE_LOADS_H

__device__ __forceinline__ bool vectorizable(const float* A, const float* B, const float* C, int N, int K) {
  const uintptr_t addresses = reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B) |
                              reinterpret_cast<uintptr_t>(C);
  return K % 4 == 0 && N % 4 == 0 && addresses % 16 == 0;
}

// Four consecutive elements of row `row` from column `column` (a multiple of 4) of a rows x columns
// matrix; zeros past its edges.
__device__ __forceinline__ float4 load_four(const float* matrix, int rows, int columns, int row, int column,
                                            bool vectorized) {
  if (vectorized) {                                  // all four in range or none (column % 4 == 0 == columns % 4)
    if (row < rows && column < columns) {
      return *reinterpret_cast<const float4*>(matrix + static_cast<int64_t>(row) * columns + column);
    }
    return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = (row < rows && column + i < columns) ? matrix[static_cast<int64_t>(row) * columns + column + i] : 0.0f;
  }
  return make_float4(v[0], v[1], v[2], v[3]);
}

// The BM x BK tile of A at (row0, k0) into As[k][m], transposed: the compute loop then reads a thread's
// kTM rows of A at one k as consecutive floats (16-byte shared loads) instead of a strided column.
// Threads take 4-element pieces of the rows, BK / 4 pieces a row, THREADS pieces a pass.
template <int BM, int BK, int THREADS>
__device__ __forceinline__ void stage_a_transposed(float (*As)[BM], const float* A, int M, int K, int row0, int k0,
                                                   bool vectorized) {
  constexpr int kPiecesPerRow = BK / 4, kRowsPerPass = THREADS / kPiecesPerRow;
  static_assert(BK % 4 == 0 && THREADS % kPiecesPerRow == 0 && BM % kRowsPerPass == 0, "whole passes");
  const int piece = threadIdx.x % kPiecesPerRow;
#pragma unroll
  for (int r = threadIdx.x / kPiecesPerRow; r < BM; r += kRowsPerPass) {
    const float4 v = load_four(A, M, K, row0 + r, k0 + 4 * piece, vectorized);
    As[4 * piece + 0][r] = v.x;
    As[4 * piece + 1][r] = v.y;
    As[4 * piece + 2][r] = v.z;
    As[4 * piece + 3][r] = v.w;
  }
}

// The BK x BN tile of B at (k0, column0) into Bs[k][n], as it lies (one 16-byte shared store a piece).
template <int BN, int BK, int THREADS>
__device__ __forceinline__ void stage_b(float (*Bs)[BN], const float* B, int N, int K, int k0, int column0,
                                        bool vectorized) {
  constexpr int kPiecesPerRow = BN / 4, kRowsPerPass = THREADS / kPiecesPerRow;
  static_assert(BN % 4 == 0 && THREADS % kPiecesPerRow == 0 && BK % kRowsPerPass == 0, "whole passes");
  const int piece = threadIdx.x % kPiecesPerRow;
#pragma unroll
  for (int r = threadIdx.x / kPiecesPerRow; r < BK; r += kRowsPerPass) {
    *reinterpret_cast<float4*>(&Bs[r][4 * piece]) = load_four(B, K, N, k0 + r, column0 + 4 * piece, vectorized);
  }
}

// Four consecutive elements of C at (row, column), column % 4 == 0; whatever lies inside the matrix.
__device__ __forceinline__ void store_four(float* C, int M, int N, int row, int column, float4 v, bool vectorized) {
  if (row >= M) return;
  float* at = C + static_cast<int64_t>(row) * N + column;
  if (vectorized) {
    if (column < N) *reinterpret_cast<float4*>(at) = v;
    return;
  }
  const float values[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (column + i < N) at[i] = values[i];
  }
}

#endif  // HG_MATMUL_TILE_LOADS_H
