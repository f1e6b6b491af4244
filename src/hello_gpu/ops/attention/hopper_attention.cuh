// The Hopper pieces of the attention rungs (v07 and later), CUDA dialect for sm_90a, on top of matmul's
// (mbarriers, tensor maps in global memory, matrix descriptors, wgmma fences, setmaxnreg, the 1024-byte
// aligned dynamic shared memory, store_pair): what attention needs beyond them is a 3-D TMA box (one
// head's rows, zeros past its end), wgmma with B K-major (the key tile as it lies), and wgmma with A in
// registers (the weights P never go through shared memory). tests/test_attention_hopper.py models each
// layout below on the CPU against the PTX ISA's definitions.
//
// Shared-memory tiles (TMA with CU_TENSOR_MAP_SWIZZLE_128B): a 128-row tile of Q, K or V with D = 64 or
// 128 columns lies as D / 64 panels of 128 rows x 64 columns (128 bytes a row, 16 KiB a panel), each
// panel one TMA box, 1024-byte aligned (the swizzle atom: 8 rows).
//   Q as wgmma's A (64 x 16 slices, K-major) and K as B of S = Q K^T (16 x 128, B[d][key] = K[key][d]:
//     d contiguous, K-major too): row r at r * 128 of its panel, 8-row atoms SBO = 1024 apart (LBO unused
//     when swizzled); the k16 slice kk of D is panel kk / 4, 32 * (kk % 4) bytes into the rows.
//   V as B of O += P V (16 x D, B[key][d] = V[key][d]: d contiguous, MN-major, imm-trans-b = 1, allowed
//     for 16-bit types): the 64-column panels LBO = 16384 apart, 8-key atoms SBO = 1024 apart; the k16
//     slice kk of the keys starts 16 keys x 128 bytes = 2048 * kk bytes into the tile.
#ifndef HG_ATTENTION_HOPPER_CUH
#define HG_ATTENTION_HOPPER_CUH

#include "../matmul/wgmma_tma.cuh"

constexpr int kPanelColumns = kTileK;                   // 64 16-bit elements: one 128-byte swizzle row
constexpr int kTileRows = 128;                          // query rows of a block, keys of a K/V tile
constexpr uint32_t kPanelBytes = kTileRows * 128;       // 16 KiB: one 128 x 64 box

// The box of `map` (a 3-D map: columns, rows, planes; here D, S and batch x heads) whose first element is
// (column, row, plane), into shared memory at `to`, completing a transaction on `barrier`. Rows past the
// plane's end arrive as zeros (and count): a tile never reads the next head's rows.
__device__ __forceinline__ void tma_load_box_3d(void* to, const void* map, uint64_t* barrier, int column, int row,
                                                int plane) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(shared_address(to)),
      "l"(map), "r"(column), "r"(row), "r"(plane), "r"(shared_address(barrier))
      : "memory");
}

// The k16 slice kk of a K-major operand whose panels are kPanelBytes apart (Q's 64 rows, or K's 128 keys).
__device__ __forceinline__ uint64_t k_major_descriptor(const char* rows, int kk) {
  return a_descriptor(rows + (kk / 4) * kPanelBytes, kk % 4);
}

// The k16 slice kk (keys 16 kk ..) of a V tile, MN-major: panels of 64 columns LBO apart, 8 keys SBO apart.
__device__ __forceinline__ uint64_t v_descriptor(const char* tile, int kk) {
  return matrix_descriptor(tile + 2048 * kk, kPanelBytes, kAtomBytes);
}

// The 32 accumulator operands of an m64n64k16 (matmul's HG_WGMMA_D64_* hold the 64 of an n128).
#define HG_WGMMA_D32_REGISTERS                                                       \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define HG_WGMMA_D32_OPERANDS                                                                              \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),          \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),    \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),  \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// S (64 x 128) [+]= A (64 x 16) B (16 x 128), both from shared memory and K-major (imm-trans-a = imm-trans-b
// = 0); `accumulate` 0 overwrites S (the first k16 slice of a tile), 1 adds.
#define HG_WGMMA_SCORES(TYPE)                                                                        \
  asm volatile(                                                                                      \
      "{\n"                                                                                          \
      ".reg .pred accumulate;\n"                                                                     \
      "setp.ne.b32 accumulate, %66, 0;\n"                                                            \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {" HG_WGMMA_D64_REGISTERS "}, " \
      "%64, %65, accumulate, 1, 1, 0, 0;\n"                                                          \
      "}\n"                                                                                          \
      : HG_WGMMA_D64_OPERANDS                                                                        \
      : "l"(a), "l"(b), "r"(accumulate))

// O (64 x N) += A (64 x 16, four 32-bit registers a thread: the register fragment) B (16 x N, shared memory,
// MN-major: imm-trans-b = 1). With A in registers the instruction has no imm-trans-a.
// A_AND_B: the operand numbers of A's 4 registers and of B's descriptor; PREDICATE: that of scale-d (always 1).
#define HG_WGMMA_VALUES(N, TYPE, REGISTERS, OPERANDS, A_AND_B, PREDICATE)                              \
  asm volatile(                                                                                        \
      "{\n"                                                                                            \
      ".reg .pred accumulate;\n"                                                                       \
      "setp.ne.b32 accumulate, " PREDICATE ", 0;\n"                                                    \
      "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" REGISTERS "}, " A_AND_B     \
      ", accumulate, 1, 1, 1;\n"                                                                       \
      "}\n"                                                                                            \
      : OPERANDS                                                                                       \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1))

template <typename T>
struct AttentionWgmma;

#define HG_ATTENTION_WGMMA(C_TYPE, TYPE)                                                                    \
  template <>                                                                                               \
  struct AttentionWgmma<C_TYPE> {                                                                           \
    static __device__ __forceinline__ void scores(float (&d)[64], uint64_t a, uint64_t b, int accumulate) { \
      HG_WGMMA_SCORES(TYPE);                                                                                \
    }                                                                                                       \
    static __device__ __forceinline__ void values(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {     \
      HG_WGMMA_VALUES(128, TYPE, HG_WGMMA_D64_REGISTERS, HG_WGMMA_D64_OPERANDS,                             \
                      "{%64, %65, %66, %67}, %68", "%69");                                                  \
    }                                                                                                       \
    static __device__ __forceinline__ void values(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {     \
      HG_WGMMA_VALUES(64, TYPE, HG_WGMMA_D32_REGISTERS, HG_WGMMA_D32_OPERANDS,                              \
                      "{%32, %33, %34, %35}, %36", "%37");                                                  \
    }                                                                                                       \
  };

HG_ATTENTION_WGMMA(__nv_bfloat16, "bf16")
HG_ATTENTION_WGMMA(__half, "f16")

#endif  // HG_ATTENTION_HOPPER_CUH
