/*
RDNA4 matrix cores through WMMA: each wave of 32 lanes multiplies a 16x16 tile of A by a 16x16 tile of B
with one instruction (v_wmma_f32_16x16x16_f16 / _bf16, float32 sums), called through clang's gfx12
builtins from the HIP dialect. AMD's counterpart of v09_mma_sync, for the RX 9070 XT.
parent: v08_tuned_tiles
change: bfloat16 / float16 inputs on the matrix cores: block tile 64x64, BK = 16 (one WMMA deep), 4
  waves as 2 x 2, each wave a 32x32 tile = 2 x 2 WMMA accumulators (8 float32 a lane each: 32 sums a
  lane). A is staged row-major and B transposed in LDS, both with k contiguous and rows padded to 24
  elements (48 bytes), so each lane reads its 8-element fragment with one 16-byte LDS load. Global
  loads go element by element with zeros past the edges: any M, N, K, any alignment
hypothesis: one WMMA does 4096 multiply-adds where a SIMT FMA does one, so the multiply stops being the
  limit (the RX 9070 XT's 64 CUs x 1024 FLOP/clk = 194.6 TFLOP/s dense, against 48.7 float32 with dual
  issue, ~24 without). The loads become it: a 64x64x16 step reads 4 KiB with 2-byte loads (16 a
  thread) for 16 WMMAs, one stage, two barriers, nothing overlapped; like v09 on NVIDIA (25-35% of the
  vendor BLAS in the worklogs), expect ~25% of the dense peak
prediction: ~50 TFLOP/s bf16 at 4096^3 on an RX 9070 XT (~25% of the 194.6 dense peak, which is derived,
  not measured); not run here: no AMD GPU in this project's sessions (the gfx1201 compile gate builds it,
  tests/test_matmul_wmma_layout.py checks the fragment layout it assumes on the CPU)
outcome: not measured yet: it needs an AMD gfx1201 GPU (an RX 9070 XT), and this project's GPU is an H200;
  the H200 run of 8b07192 lists it as skipped (requires amd gfx1201; this GPU is nvidia sm_90; records matmul.bfloat16)
deterministic: yes, each element is one wave's float32 sum in a fixed k order
vendor: amd
arch: gfx1201
entry: matmul_rdna4_wmma<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record matmul.bfloat16

// The fragment layout of v_wmma_*_16x16x16 in wave32 on gfx12 (RDNA4), as AMD documents it: "AMD RDNA 4
// Instruction Set Architecture Reference Guide" (WMMA matrix layouts) and AMD GPUOpen, "Using the Matrix
// Cores of AMD RDNA 4 architecture GPUs" (T. Harada, A. Yoshimura, 2025,
// https://gpuopen.com/learn/using_matrix_core_amd_rdna4/). With g = lane / 16 and r = lane % 16, lane
// `lane` holds, in element e = 0..7 of its 8-element vectors:
//   A (16 x 16, M x K): A[r][8 g + e]        (a column of A per VGPR: "A is ... column major")
//   B (16 x 16, K x N): B[8 g + e][r]        (a row of B per VGPR)
//   C, D (16 x 16 float32): C[8 g + e][r]    (a row of C per VGPR)
// RDNA3 (gfx11) held 16 elements a lane, A and B duplicated across the two halves of the wave; gfx12
// holds each element once. tests/test_matmul_wmma_layout.py models this on the CPU (numpy) and checks
// that the sum it implies is A @ B + C.

constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 128;
constexpr int kWM = 32, kWN = 32;                  // a wave's tile: 2 waves across M, 2 across N
constexpr int kPad = 8;                            // elements: rows of 24 (48 bytes, a multiple of 16)
constexpr int kRow = kBK + kPad;                   // LDS row stride of both tiles, in elements

typedef short Short8 __attribute__((ext_vector_type(8)));       // 8 raw 16-bit values: one fragment
typedef _Float16 Half8 __attribute__((ext_vector_type(8)));
typedef float Float8 __attribute__((ext_vector_type(8)));       // 8 float32 sums: one accumulator

// D = A B + C on one 16x16x16 tile. The builtins take the fragments as vectors: bfloat16 as raw 16-bit
// integers (clang 19's signature), float16 as _Float16; the bits are the same.
template <typename T> struct Wmma;
template <> struct Wmma<__half> {
  __device__ static Float8 mma(Short8 a, Short8 b, Float8 c) {
    return __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(__builtin_bit_cast(Half8, a),
                                                            __builtin_bit_cast(Half8, b), c);
  }
};
template <> struct Wmma<hip_bfloat16> {
  __device__ static Float8 mma(Short8 a, Short8 b, Float8 c) {
    return __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12(a, b, c);
  }
};

// a is M x K, b K x N, c M x N, row-major and contiguous (the launcher checks). 128 threads = 4 waves.
template <typename T>
__global__ void __launch_bounds__(kThreads)
matmul_rdna4_wmma(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K) {
  static_assert(HG_WARP_SIZE == 32, "the _w32 WMMA builtins need wave32 (gfx12's default)");
  static_assert(sizeof(T) == 2, "16-bit inputs: bfloat16 or float16");
  static_assert((kBM / kWM) * (kBN / kWN) * 32 == kThreads, "one wave tile per wave");
  // Raw 16-bit values. As[m][k] is the A tile, Bt[n][k] the B tile transposed: 2 x 64 x 24 x 2 = 6 KiB.
  __shared__ __align__(16) unsigned short As[kBM * kRow];
  __shared__ __align__(16) unsigned short Bt[kBN * kRow];
  const unsigned short* a_bits = reinterpret_cast<const unsigned short*>(A);
  const unsigned short* b_bits = reinterpret_cast<const unsigned short*>(B);
  const int row0 = blockIdx.y * kBM, column0 = blockIdx.x * kBN;
  const int wave = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wave_row = (wave / (kBN / kWN)) * kWM, wave_column = (wave % (kBN / kWN)) * kWN;
  const int r = lane % 16, g = lane / 16;          // the fragment coordinates of this lane (see above)

  Float8 sums[2][2] = {};
  for (int k0 = 0; k0 < K; k0 += kBK) {
    // 1024 elements per tile, 8 a thread. A: 16 threads read one row's 16 k (32 bytes). B: 64 threads
    // read one k row's 64 columns (128 bytes, coalesced) and write them down a column of Bt.
#pragma unroll
    for (int i = threadIdx.x; i < kBM * kBK; i += kThreads) {
      const int m = i / kBK, k = i % kBK;
      const int row = row0 + m, kk = k0 + k;
      As[m * kRow + k] = row < M && kk < K ? a_bits[static_cast<int64_t>(row) * K + kk] : 0;
    }
#pragma unroll
    for (int i = threadIdx.x; i < kBK * kBN; i += kThreads) {
      const int k = i / kBN, n = i % kBN;
      const int kk = k0 + k, column = column0 + n;
      Bt[n * kRow + k] = kk < K && column < N ? b_bits[static_cast<int64_t>(kk) * N + column] : 0;
    }
    __syncthreads();
    Short8 a_fragments[2], b_fragments[2];
#pragma unroll
    for (int t = 0; t < 2; ++t) {                  // 16-byte LDS reads: k = 8 g .. 8 g + 7 of one row
      a_fragments[t] = *reinterpret_cast<const Short8*>(&As[(wave_row + 16 * t + r) * kRow + 8 * g]);
      b_fragments[t] = *reinterpret_cast<const Short8*>(&Bt[(wave_column + 16 * t + r) * kRow + 8 * g]);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) sums[i][j] = Wmma<T>::mma(a_fragments[i], b_fragments[j], sums[i][j]);
    }
    __syncthreads();
  }
  // Element e of accumulator (i, j) is C[16 i + 8 g + e][16 j + r] of the wave's tile.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int column = column0 + wave_column + 16 * j + r;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int row = row0 + wave_row + 16 * i + 8 * g + e;
        if (row < M && column < N) C[static_cast<int64_t>(row) * N + column] = static_cast<T>(sums[i][j][e]);
      }
    }
  }
}
