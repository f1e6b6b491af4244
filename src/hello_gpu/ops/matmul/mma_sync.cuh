// The tensor-core pieces the mma.sync rungs (v09-v11) share, in the CUDA dialect (sm_80 and newer):
// the m16n8k16 instruction for bfloat16 and float16, ldmatrix, cp.async with zero fill, and the C
// epilogue. Every layout below is checked on the CPU by the Python model in tests/test_matmul_tensor_cores.py.
//
// The operands, as the launcher (tensor_cores.py) guarantees them: A (M, K) row-major, B (K, ldb)
// row-major with ldb >= N, K and ldb multiples of 8 elements, A and B 16-byte aligned, so every
// 16-byte piece of a row (8 elements) is wholly inside the matrix or wholly outside it. C is (M, N).
#ifndef HG_MATMUL_MMA_SYNC_CUH
#define HG_MATMUL_MMA_SYNC_CUH

// header.C_TYPES instantiates `entry: name<{T}>` for bfloat16 as name<hip_bfloat16>; in the CUDA dialect the
// prelude defines only __nv_bfloat16, so the name is given here (a second identical typedef is legal C++).
typedef __nv_bfloat16 hip_bfloat16;

// The fragments of one m16n8k16 (PTX ISA "Matrix fragments for mma.m16n8k16"), for lane = 4 g + t:
//   A (16x16): a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..], a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]
//   B (16x8):  b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]
//   C (16x8):  c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1]
template <typename T>
struct TensorCore;

template <>
struct TensorCore<__nv_bfloat16> {
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  static __device__ __forceinline__ __nv_bfloat16 one(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ __nv_bfloat162 two(float x, float y) { return __floats2bfloat162_rn(x, y); }
};

template <>
struct TensorCore<__half> {
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  static __device__ __forceinline__ __half one(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ __half2 two(float x, float y) { return __floats2half2_rn(x, y); }
};

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// Four 8x8 matrices of 16-bit elements: lanes 8i..8i+7 give the addresses of matrix i's 8 rows (16 bytes
// each); register i of lane 4g + t then holds row g, elements 2t and 2t+1 of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The same, each matrix transposed on the way: register i of lane 4g + t holds column g, rows 2t and
// 2t+1 of matrix i. B lies k-major in shared memory (rows k, columns n); .trans hands each lane the two
// k-neighbours of one column n, which is the b fragment's layout.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// 16 bytes from global to shared memory without passing through registers; `inside` false writes 16 zero
// bytes instead (src-size 0: nothing is read, so `global` only needs to be some valid address).
__device__ __forceinline__ void cp_async_16(uint32_t shared, const void* global, bool inside) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(global),
               "r"(inside ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending)); }

// The 16 bytes at (row, column) of a rows x columns row-major matrix, or zeros outside it (column is a
// multiple of 8 and so is `columns`: the piece is wholly in or out).
template <typename T>
__device__ __forceinline__ uint4 load_piece(const T* matrix, int rows, int columns, int row, int column) {
  if (row < rows && column < columns) {
    return *reinterpret_cast<const uint4*>(matrix + static_cast<int64_t>(row) * columns + column);
  }
  return make_uint4(0u, 0u, 0u, 0u);
}

// The address cp_async_16 reads for that piece; the matrix itself when the piece is outside (not read).
template <typename T>
__device__ __forceinline__ const T* piece_address(const T* matrix, int rows, int columns, int row, int column) {
  return (row < rows && column < columns) ? matrix + static_cast<int64_t>(row) * columns + column : matrix;
}

// Two neighbouring outputs C[row][column], C[row][column + 1] (column even), rounded once from float32;
// whatever lies inside the M x N matrix. One 4-byte store when N is even and C 4-byte aligned (then the
// pair is), else element by element (N = 781; an out= view starting at an odd element).
template <typename T>
__device__ __forceinline__ void store_pair(T* C, int M, int N, int row, int column, float x, float y) {
  if (row >= M || column >= N) return;
  T* at = C + static_cast<int64_t>(row) * N + column;
  if ((N & 1) == 0 && (reinterpret_cast<uintptr_t>(C) & 3) == 0) {
    *reinterpret_cast<decltype(TensorCore<T>::two(x, y))*>(at) = TensorCore<T>::two(x, y);
    return;
  }
  at[0] = TensorCore<T>::one(x);
  if (column + 1 < N) at[1] = TensorCore<T>::one(y);
}

// A warp's MI x NI grid of m16n8 accumulators, stored: tile (i, j) covers rows row0 + 16 i .. + 15 and
// columns column0 + 8 j .. + 7 of C.
template <typename T, int MI, int NI>
__device__ __forceinline__ void store_warp_tile(T* C, int M, int N, int row0, int column0,
                                                const float (&sums)[MI][NI][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const int row = row0 + 16 * i + g, column = column0 + 8 * j + 2 * t;
      store_pair(C, M, N, row, column, sums[i][j][0], sums[i][j][1]);
      store_pair(C, M, N, row + 8, column, sums[i][j][2], sums[i][j][3]);
    }
  }
}

// #region warp-tile-mma
// One BK-deep slab of a warp's MI x NI grid of m16n8 tiles: As points at the warp's first row of the A tile
// (row stride SA elements, k along the row), Bs at k = 0 and the warp's first column of the B tile (row
// stride SB). Per k16 step: MI ldmatrix.x4 for A (a 16x16 block each), NI / 2 ldmatrix.x4.trans for B
// (two 16x8 blocks each), MI x NI mma.
template <typename T, int MI, int NI, int BK, int SA, int SB>
__device__ __forceinline__ void warp_tile_mma(float (&sums)[MI][NI][4], const T* As, const T* Bs) {
  static_assert(NI % 2 == 0 && BK % 16 == 0, "B fragments come two n8 tiles per ldmatrix.x4; k steps of 16");
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < BK; kk += 16) {
    uint32_t a[MI][4], b[NI][2];
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      // lanes 0-15 give rows 0-15 at k = kk (matrices 0, 1), lanes 16-31 the same rows at kk + 8 (2, 3)
      ldmatrix_x4(a[i], shared_address(As + (16 * i + lane % 16) * SA + kk + (lane / 16) * 8));
    }
#pragma unroll
    for (int j = 0; j < NI; j += 2) {
      // lanes 0-15 give k rows kk..kk+15 at column 8 j (matrices 0, 1: b[j]), lanes 16-31 at 8 j + 8 (b[j + 1])
      uint32_t r[4];
      ldmatrix_x4_trans(r, shared_address(Bs + (kk + lane % 16) * SB + 8 * j + (lane / 16) * 8));
      b[j][0] = r[0];
      b[j][1] = r[1];
      b[j + 1][0] = r[2];
      b[j + 1][1] = r[3];
    }
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
      for (int j = 0; j < NI; ++j) TensorCore<T>::mma(sums[i][j], a[i], b[j]);
    }
  }
}
// #endregion warp-tile-mma

// The BM x BK tile of A at (row0, k0) into As (row stride SA) and the BK x BN tile of B at (k0, column0)
// into Bs (row stride SB), 16 bytes a thread a step, by cp.async: nothing passes through registers, and
// the copy runs while the warps compute on another stage. Pieces outside the matrices are zero-filled.
template <typename T, int BM, int BN, int BK, int SA, int SB, int THREADS>
__device__ __forceinline__ void copy_tiles_async(T* As, T* Bs, const T* A, const T* B, int M, int K, int ldb,
                                                 int row0, int column0, int k0) {
  constexpr int kPiecesA = BM * BK / 8, kPiecesB = BK * BN / 8;
  static_assert(kPiecesA % THREADS == 0 && kPiecesB % THREADS == 0, "whole passes");
#pragma unroll
  for (int p = threadIdx.x; p < kPiecesA; p += THREADS) {
    const int r = p / (BK / 8), c = (p % (BK / 8)) * 8;
    cp_async_16(shared_address(As + r * SA + c), piece_address(A, M, K, row0 + r, k0 + c),
                row0 + r < M && k0 + c < K);
  }
#pragma unroll
  for (int p = threadIdx.x; p < kPiecesB; p += THREADS) {
    const int r = p / (BN / 8), c = (p % (BN / 8)) * 8;
    cp_async_16(shared_address(Bs + r * SB + c), piece_address(B, K, ldb, k0 + r, column0 + c),
                k0 + r < K && column0 + c < ldb);
  }
}

// Traps when the launch gave less dynamic shared memory than the kernel's stages take (the launcher
// computes the bytes from the same tile sizes; a mismatch must fail loudly, never read past the end).
__device__ __forceinline__ void require_dynamic_shared(uint32_t bytes) {
  uint32_t given;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(given));
  if (given < bytes) __trap();
}

// #region pipelined-matmul
// The multi-stage body of v10 and v11. Dynamic shared memory holds STAGES slots, each a BM x (BK + 8) tile
// of A and a BK x (BN + 8) tile of B (tensor_cores.pipelined_shared_bytes). While the warps multiply the
// tile in slot t % STAGES, the copies of the next STAGES - 1 tiles are in flight; one __syncthreads a
// step both publishes tile t and frees the slot that tile t + STAGES - 1 is copied into.
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int THREADS>
__device__ __forceinline__ void pipelined_matmul(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                                                 int M, int N, int K, int ldb) {
  constexpr int kSA = BK + 8, kSB = BN + 8;           // padded rows, as v09
  constexpr int kMI = WM / 16, kNI = WN / 8;
  constexpr int kSlotA = BM * kSA, kSlotB = BK * kSB;  // elements
  static_assert((BM / WM) * (BN / WN) * 32 == THREADS, "one warp tile per warp");
  static_assert(STAGES >= 2, "a pipeline needs a slot to fill while another is read");
  require_dynamic_shared(2u * STAGES * (kSlotA + kSlotB));
  extern __shared__ uint4 dynamic_shared[];           // 16-byte aligned: every cp.async target is
  T* As = reinterpret_cast<T*>(dynamic_shared);
  T* Bs = As + STAGES * kSlotA;
  const int row0 = blockIdx.y * BM, column0 = blockIdx.x * BN;
  const int warp = threadIdx.x / 32;
  const int warp_row = (warp / (BN / WN)) * WM, warp_column = (warp % (BN / WN)) * WN;
  const int tiles = (K + BK - 1) / BK;

  // Prologue: tiles 0 .. STAGES - 2, one commit group each (empty groups past the last tile keep the count).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < tiles) {
      copy_tiles_async<T, BM, BN, BK, kSA, kSB, THREADS>(As + s * kSlotA, Bs + s * kSlotB, A, B, M, K, ldb, row0,
                                                          column0, s * BK);
    }
    cp_async_commit();
  }
  float sums[kMI][kNI][4] = {};
  for (int t = 0; t < tiles; ++t) {
    // Groups committed so far: STAGES - 1 + t, the one of tile t being number t; letting the newest
    // STAGES - 2 stay pending means tile t's has landed (for this thread's copies; the barrier: for all).
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    // Every warp is past tile t - 1 (the barrier), so its slot, (t + STAGES - 1) % STAGES, can be refilled.
    const int next = t + STAGES - 1;
    if (next < tiles) {
      const int slot = next % STAGES;
      copy_tiles_async<T, BM, BN, BK, kSA, kSB, THREADS>(As + slot * kSlotA, Bs + slot * kSlotB, A, B, M, K, ldb,
                                                          row0, column0, next * BK);
    }
    cp_async_commit();
    const int slot = t % STAGES;
    warp_tile_mma<T, kMI, kNI, BK, kSA, kSB>(sums, As + slot * kSlotA + warp_row * kSA, Bs + slot * kSlotB + warp_column);
  }
  cp_async_wait<0>();                                 // only empty groups remain; leave none behind
  store_warp_tile<T, kMI, kNI>(C, M, N, row0 + warp_row, column0 + warp_column, sums);
}
// #endregion pipelined-matmul

#endif  // HG_MATMUL_MMA_SYNC_CUH
