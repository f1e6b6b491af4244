// The tensor-core pieces attention's mma.sync rung (v06) uses, in the CUDA dialect (sm_80 and newer):
// the m16n8k16 instruction for bfloat16 and float16, two 16-bit values packed in one register,
// ldmatrix (plain and .trans), cp.async with zero fill, and base-2 exponentials. Every layout below is
// checked on the CPU by the Python model in tests/test_attention_mma.py, against the PTX ISA's tables.
#ifndef HG_ATTENTION_MMA_SYNC_CUH
#define HG_ATTENTION_MMA_SYNC_CUH

// The rung's `entry: name<{T}>` becomes name<hip_bfloat16> for bfloat16 (hello_gpu.ops.header.C_TYPES); the
// CUDA-dialect prelude defines only __nv_bfloat16, so the name is given here.
typedef __nv_bfloat16 hip_bfloat16;

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

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// Four 8x8 matrices of 16-bit elements: lanes 8i .. 8i+7 give the addresses of matrix i's 8 rows (16 bytes
// each); register i of lane 4g + t then holds row g, elements 2t and 2t+1 of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The same with each matrix transposed on the way: register i of lane 4g + t holds column g, rows 2t and
// 2t+1 of matrix i.
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
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

// Traps when the launch gave less dynamic shared memory than the kernel uses (the launcher computes the
// bytes from the same constants; a mismatch must fail loudly, never read past the end).
__device__ __forceinline__ void require_dynamic_shared(uint32_t bytes) {
  uint32_t given;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(given));
  if (given < bytes) __trap();
}

// 2^x in one MUFU.EX2 (ex2.approx: relative error ~2^-22, far below the bfloat16 / float16 outputs' rounding);
// 2^-inf = +0, so a masked score's weight is exactly 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

#endif  // HG_ATTENTION_MMA_SYNC_CUH
