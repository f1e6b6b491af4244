// The Hopper pieces the wgmma rungs (v12-v14) share, in the CUDA dialect for sm_90a: TMA tile loads
// completing on mbarriers, and wgmma.m64n128k16 reading both operands from shared memory through matrix
// descriptors. tests/test_matmul_tensor_cores.py models the swizzled layouts and the descriptors on the CPU.
//
// Shared-memory layouts (what TMA writes with CU_TENSOR_MAP_SWIZZLE_128B and what the descriptors
// describe). Each tile is 1024-byte aligned: the 128-byte swizzle XORs address bits 4-6 (the 16-byte
// piece within a 128-byte row) with bits 7-9 (the row within an 8-row, 1024-byte atom).
//   A tile (BM x 64, k contiguous: "K-major"): row m at m * 128 bytes. A wgmma reads 64 rows: 8 atoms,
//     1024 bytes apart (SBO = 1024; LBO unused for a swizzled K-major operand); the k16 slice kk starts
//     32 * kk bytes into the rows.
//   B tile (64 x BN, n contiguous as B lies: "MN-major", imm-trans-b = 1): BN / 64 blocks of 64 columns,
//     one TMA box each, 64 k rows x 128 bytes = 8192 bytes apart (LBO = 8192: the next 64 columns); in a
//     block, k row r at r * 128 (SBO = 1024: the next 8 k rows); the k16 slice kk starts 2048 * kk bytes in.
#ifndef HG_MATMUL_WGMMA_TMA_CUH
#define HG_MATMUL_WGMMA_TMA_CUH

#include "mma_sync.cuh"

constexpr int kTileK = 64;                      // elements: one 128-byte swizzle row of 16-bit values
constexpr uint32_t kAtomBytes = 1024;           // 8 rows of 128 bytes
constexpr uint32_t kColumnBlockBytes = kTileK * 128;   // a 64-column block of a B tile: 64 k rows
constexpr uint32_t kBarrierBytes = 256;         // after the stages: room for 32 mbarriers (tensor_maps.py too)

// ------------------------------------------------------------------------------------------- mbarrier

__device__ __forceinline__ void mbarrier_init(uint64_t* barrier, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(arrivals));
}

// The inits visible to the TMA unit (the async proxy) and to the other threads (the __syncthreads after).
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` of TMA transactions: the phase completes when the arrival count
// is reached and that many bytes have landed.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint64_t* barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}

// Waits until the phase of parity `parity` has completed (a barrier starts in phase 0: waiting on parity 0
// waits for its first completion, on 1 for the second, and so on alternately).
__device__ __forceinline__ void mbarrier_wait(uint64_t* barrier, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
}

// ------------------------------------------------------------------------------------------------ TMA

// The tensor maps live in global memory (a 64-byte aligned int64 tensor the launcher fills; see
// tensor_maps.py): the runtime passes kernel arguments in 8-byte slots, not a 128-byte __grid_constant__
// CUtensorMap. Written by a host-to-device copy, a map must be acquired by the tensormap proxy before the
// thread that issues TMA uses it (PTX ISA: fence.proxy.tensormap::generic).
__device__ __forceinline__ void tensor_map_acquire(const void* map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;\n" ::"l"(map) : "memory");
}

// The box of `map` whose first element is (inner, outer) = (column, row) into shared memory at `to`; the
// bytes complete a transaction on `barrier`. Elements outside the tensor arrive as zeros (and count).
__device__ __forceinline__ void tma_load_tile(void* to, const void* map, uint64_t* barrier, int inner, int outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
          "r"(shared_address(to)),
      "l"(map), "r"(inner), "r"(outer), "r"(shared_address(barrier))
      : "memory");
}

// ---------------------------------------------------------------------------------------------- wgmma

// A shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address, leading and
// stride byte offsets, each >> 4 in 14 bits; bits 62-63 = 1: the 128-byte swizzle.
__device__ __forceinline__ uint64_t matrix_descriptor(const void* tile, uint32_t leading_bytes,
                                                      uint32_t stride_bytes) {
  const uint32_t address = shared_address(tile);
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) | (static_cast<uint64_t>(leading_bytes >> 4) << 16) |
         (static_cast<uint64_t>(stride_bytes >> 4) << 32) | (1ull << 62);
}

// The k16 slice kk of a 64-row piece of an A tile (K-major): 32 bytes further into each row.
__device__ __forceinline__ uint64_t a_descriptor(const void* rows, int kk) {
  return matrix_descriptor(static_cast<const char*>(rows) + 32 * kk, 16, kAtomBytes);
}

// The k16 slice kk of 128 columns of a B tile (MN-major): 16 k rows of 128 bytes further.
__device__ __forceinline__ uint64_t b_descriptor(const void* columns, int kk) {
  return matrix_descriptor(static_cast<const char*>(columns) + 2048 * kk, kColumnBlockBytes, kAtomBytes);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// The accumulators are written by wgmma in the background between issue and wait: this empty asm, which
// "reads and writes" each of them, keeps the compiler from moving its own uses of them across either.
template <int kCount>
__device__ __forceinline__ void fence_accumulators(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (64 x 128, float32) += A (64 x 16) B (16 x 128), by the 128 threads of a warpgroup. Thread 32 w + 4 g + t
// holds, for each 8-column block j, d[4 j .. 4 j + 1] = D[16 w + g][8 j + 2 t ..] and d[4 j + 2 .. 4 j + 3] =
// D[16 w + g + 8][8 j + 2 t ..]. imm-trans-a = 0 (A K-major), imm-trans-b = 1 (B MN-major).
// The 64 accumulator operands of one m64n128k16: the register list in the instruction, and the operands.
#define HG_WGMMA_D64_REGISTERS                                                        \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "            \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define HG_WGMMA_D64_OPERANDS                                                                              \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),          \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),    \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),  \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),  \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),  \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),  \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),  \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
// scale-d is a predicate (true: D += A B); imm-scale-a, imm-scale-b = 1, imm-trans-a = 0, imm-trans-b = 1.
#define HG_WGMMA_M64N128K16(TYPE)                                                                    \
  asm volatile(                                                                                      \
      "{\n"                                                                                          \
      ".reg .pred accumulate;\n"                                                                     \
      "setp.ne.b32 accumulate, %66, 0;\n"                                                            \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {" HG_WGMMA_D64_REGISTERS "}, " \
      "%64, %65, accumulate, 1, 1, 0, 1;\n"                                                          \
      "}\n"                                                                                          \
      : HG_WGMMA_D64_OPERANDS                                                                        \
      : "l"(a), "l"(b), "n"(1))

template <typename T>
struct Wgmma;

template <>
struct Wgmma<__nv_bfloat16> {
  static __device__ __forceinline__ void m64n128k16(float (&d)[64], uint64_t a, uint64_t b) {
    HG_WGMMA_M64N128K16("bf16");
  }
};

template <>
struct Wgmma<__half> {
  static __device__ __forceinline__ void m64n128k16(float (&d)[64], uint64_t a, uint64_t b) {
    HG_WGMMA_M64N128K16("f16");
  }
};

// A warpgroup gives registers back to (dec) or takes them from (inc) the SM's pool: the producer needs few,
// the consumers' accumulators many. Every thread of the warpgroup executes it.
template <int kRegisters>
__device__ __forceinline__ void registers_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void registers_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// -------------------------------------------------------------------------------------------- epilogue

// A warpgroup's 64 x 128 accumulator block at (row0, column0) of C, rounded once (thread layout above).
template <typename T>
__device__ __forceinline__ void store_wgmma_block(T* C, int M, int N, int row0, int column0, const float (&d)[64]) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row = row0 + 16 * warp + g;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int column = column0 + 8 * j + 2 * t;
    store_pair(C, M, N, row, column, d[4 * j], d[4 * j + 1]);
    store_pair(C, M, N, row + 8, column, d[4 * j + 2], d[4 * j + 3]);
  }
}

// The dynamic shared memory rounded up to 1024 bytes (the swizzle atom), as a generic pointer; the launcher
// asks for 1024 bytes more than the tiles and barriers take (tensor_maps.hopper_shared_bytes).
__device__ __forceinline__ char* aligned_dynamic_shared(uint32_t needed) {
  extern __shared__ uint4 dynamic_shared[];
  require_dynamic_shared(needed + kAtomBytes);
  char* base = reinterpret_cast<char*>(dynamic_shared);
  const uint32_t address = shared_address(base);
  return base + (((address + kAtomBytes - 1) & ~(kAtomBytes - 1)) - address);
}

// ------------------------------------------------------------------------------------ stage helpers

// #region load-stage
// The TMA copies of one stage, issued by one thread: A's BM x 64 box at (k0, row0) into `to`, then B's
// BN / 64 boxes of 64 x 64 at (column0 + 64 j, k0), 8192 bytes apart, all completing on `barrier`, which
// is told to expect the whole stage (boxes past the edges arrive as zeros and count).
template <int BM, int BN>
__device__ __forceinline__ void load_stage(char* to, const int64_t* maps, uint64_t* barrier, int k0, int row0,
                                           int column0) {
  mbarrier_arrive_expect_bytes(barrier, 2 * (BM + BN) * kTileK);
  tma_load_tile(to, maps, barrier, k0, row0);                      // A's map: maps[0..15]
#pragma unroll
  for (int j = 0; j < BN / 64; ++j) {
    tma_load_tile(to + 2 * BM * kTileK + j * kColumnBlockBytes, maps + 16, barrier, column0 + 64 * j, k0);
  }
}
// #endregion load-stage

// #region multiply-stage
// One 64-deep stage for a warpgroup: kRows x kColumns blocks of 64 x 128 sums, block (r, c) from rows
// 64 r.. of `tile_a` and columns 128 c.. of `tile_b`; returns when the wgmmas are complete (their shared
// memory may be overwritten).
template <typename T, int kRows, int kColumns>
__device__ __forceinline__ void multiply_stage(float (&sums)[kRows][kColumns][64], const char* tile_a,
                                               const char* tile_b) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kColumns; ++c) fence_accumulators(sums[r][c]);
  }
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kTileK / 16; ++kk) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int c = 0; c < kColumns; ++c) {
        Wgmma<T>::m64n128k16(sums[r][c], a_descriptor(tile_a + r * 64 * 128, kk),
                             b_descriptor(tile_b + c * 2 * kColumnBlockBytes, kk));
      }
    }
  }
  wgmma_commit();
  wgmma_wait<0>();
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kColumns; ++c) fence_accumulators(sums[r][c]);
  }
}
// #endregion multiply-stage

template <typename T, int kRows, int kColumns>
__device__ __forceinline__ void store_tile(T* C, int M, int N, int row0, int column0,
                                           const float (&sums)[kRows][kColumns][64]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kColumns; ++c) store_wgmma_block(C, M, N, row0 + 64 * r, column0 + 128 * c, sums[r][c]);
  }
}

// ------------------------------------------------------------------- warp-specialised body (v13, v14)

// #region block-tile
// The tile a block computes in round `round` (0, 1, ...); false when it has no more. Launched per tile
// (v13): its own (blockIdx.y, blockIdx.x), once. Persistent (v14): tiles blockIdx.x + round * gridDim.x in
// grouped order: groups of kGroupRows tile rows (the last may have fewer), numbered down the rows of a
// group first, then across its columns. Python's model: tests/test_matmul_tensor_cores.py::tile_order.
template <bool kPersistent, int kGroupRows>
__device__ __forceinline__ bool block_tile(int round, int tiles_m, int tiles_n, int& tile_m, int& tile_n) {
  if (!kPersistent) {
    tile_m = blockIdx.y;
    tile_n = blockIdx.x;
    return round == 0;
  }
  const int tile = blockIdx.x + round * gridDim.x;
  if (tile >= tiles_m * tiles_n) return false;
  const int per_group = kGroupRows * tiles_n;
  const int first_row = (tile / per_group) * kGroupRows;
  const int rows = min(tiles_m - first_row, kGroupRows);
  const int in_group = tile % per_group;
  tile_m = first_row + in_group % rows;
  tile_n = in_group / rows;
  return true;
}
// #endregion block-tile

// #region specialized-matmul
// 3 warpgroups: warpgroup 0 loads (one thread issues every TMA copy), warpgroups 1 and 2 each multiply 64
// rows of a 128 x BN tile. Per stage two mbarriers: `full` (1 arrival + the stage's bytes: the tiles
// landed) and `empty` (8 arrivals, one per consumer warp: every wgmma reading the slot is complete). The
// k-tile counter `step` runs on across a block's tiles, so the slots and their phases do too.
template <typename T, int BN, int STAGES, bool kPersistent, int kGroupRows>
__device__ __forceinline__ void specialized_matmul(const int64_t* __restrict__ maps, T* __restrict__ C, int M,
                                                   int N, int K) {
  constexpr int kBM = 128, kConsumerWarps = 8;
  constexpr uint32_t kStageBytes = 2 * (kBM + BN) * kTileK;
  char* shared = aligned_dynamic_shared(STAGES * kStageBytes + kBarrierBytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + STAGES * kStageBytes);
  uint64_t* empty = full + STAGES;
  const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + BN - 1) / BN, k_tiles = (K + kTileK - 1) / kTileK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();                                 // the last block-wide barrier: the roles part here

  const int warpgroup = threadIdx.x / 128;
  int tile_m, tile_n, step = 0;
  if (warpgroup == 0) {
    registers_decrease<40>();
    if (threadIdx.x != 0) return;
    tensor_map_acquire(maps);
    tensor_map_acquire(maps + 16);
    for (int round = 0; block_tile<kPersistent, kGroupRows>(round, tiles_m, tiles_n, tile_m, tile_n); ++round) {
      for (int t = 0; t < k_tiles; ++t, ++step) {
        const int slot = step % STAGES, use = step / STAGES;
        if (use > 0) mbarrier_wait(&empty[slot], (use - 1) & 1);   // the consumers freed its previous fill
        load_stage<kBM, BN>(shared + slot * kStageBytes, maps, &full[slot], t * kTileK, tile_m * kBM, tile_n * BN);
      }
    }
    return;
  }

  registers_increase<232>();
  const int rows = 64 * (warpgroup - 1);           // this consumer's 64 rows of the tile
  for (int round = 0; block_tile<kPersistent, kGroupRows>(round, tiles_m, tiles_n, tile_m, tile_n); ++round) {
    float sums[1][BN / 128][64];
#pragma unroll
    for (int c = 0; c < BN / 128; ++c) {
#pragma unroll
      for (int i = 0; i < 64; ++i) sums[0][c][i] = 0.0f;
    }
    for (int t = 0; t < k_tiles; ++t, ++step) {
      const int slot = step % STAGES;
      mbarrier_wait(&full[slot], (step / STAGES) & 1);
      const char* stage = shared + slot * kStageBytes;
      multiply_stage<T, 1, BN / 128>(sums, stage + rows * 128, stage + 2 * kBM * kTileK);
      if (threadIdx.x % 32 == 0) mbarrier_arrive(&empty[slot]);
    }
    // Persistent: the producer is already filling the freed slots with the next tile while these stores run.
    store_tile<T, 1, BN / 128>(C, M, N, tile_m * kBM + rows, tile_n * BN, sums);
  }
}
// #endregion specialized-matmul

#endif  // HG_MATMUL_WGMMA_TMA_CUH
