// The tensor-core pieces attention's mma.sync rung (v06) uses, in the CUDA dialect (sm_80 and newer):
// the m16n8k16 instruction for bfloat16 and float16 with separate b registers, two 16-bit values packed in
// one register, and base-2 exponentials (the copies come from matmul's header). Every layout below is
// checked on the CPU by the Python model in tests/test_attention_mma.py, against the PTX ISA's tables.
#ifndef HG_ATTENTION_MMA_SYNC_CUH
#define HG_ATTENTION_MMA_SYNC_CUH

// What chapter 11's mma.sync rungs already wrote is taken from their header, not written twice: the
// hip_bfloat16 name, shared_address, ldmatrix_x4 (plain and .trans), cp_async_16 with zero fill,
// cp_async_commit, cp_async_wait<pending> and require_dynamic_shared.
#include "../matmul/mma_sync.cuh"

// The fragments of one m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16 with floating point type"),
// for lane = 4 g + t (g = groupID 0..7, t = threadID_in_group 0..3), each register two 16-bit values:
//   A (16x16, row): a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9]
//   B (16x8, col):  b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g]
//   C (16x8, f32):  c[0], c[1] = C[g][2t, 2t+1], c[2], c[3] = C[g+8][2t, 2t+1]

// mma.sync.aligned.m16n8k16.row.col.f32 with inputs of PTX type `type` ("bf16" or "f16"): d = A B + d, in
// place. The instruction differs only in that word, which a string literal must spell: hence a macro.
#define HG_MMA_M16N8K16(type, d, a, b0, b1)                                                               \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." type "." type ".f32 {%0, %1, %2, %3}, "            \
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                                            \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                             \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

// Two 16-bit values as the 32-bit register an mma operand is made of.
template <typename Pair>
__device__ __forceinline__ uint32_t register_bits(Pair pair) {
  return *reinterpret_cast<uint32_t*>(&pair);
}

// Per input type T: the product d = A B + d (mma<T>), and (x, y) rounded to nearest and packed with x in the
// low half (pack<T>), the lower column of an A fragment register, as ldmatrix delivers it from memory.
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  HG_MMA_M16N8K16("bf16", d, a, b0, b1);
}
template <>
__device__ __forceinline__ void mma<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  HG_MMA_M16N8K16("f16", d, a, b0, b1);
}

template <typename T>
__device__ __forceinline__ uint32_t pack(float x, float y);
template <>
__device__ __forceinline__ uint32_t pack<__nv_bfloat16>(float x, float y) {
  return register_bits(__floats2bfloat162_rn(x, y));
}
template <>
__device__ __forceinline__ uint32_t pack<__half>(float x, float y) {
  return register_bits(__floats2half2_rn(x, y));
}

// 2^x in one MUFU.EX2 (ex2.approx: relative error ~2^-22, far below the bfloat16 / float16 outputs' rounding);
// 2^-inf = +0, so a masked score's weight is exactly 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

#endif  // HG_ATTENTION_MMA_SYNC_CUH
