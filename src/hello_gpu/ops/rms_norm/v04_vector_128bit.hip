/*
128-bit loads and stores: x, weight and out move 16 bytes per instruction (8 bfloat16, 4 float32).
parent: v03_warp_shuffle_registers
change: where x, weight and out are 16-byte aligned and columns is a multiple of the pack (8 in
  bfloat16/float16, 4 in float32), each thread holds up to 32 elements as 16-byte packs (4 packs of
  bfloat16, 8 of float32): pack p of a row goes to thread p % 256, so a warp's load covers 512
  consecutive bytes. Odd widths (1, 127, 781, 4097) and unaligned tensors keep v03's element loads;
  rows over 8192 columns keep v03's two passes
hypothesis: v03 issues one 2-byte load and one 2-byte store per bfloat16 element; here one
  instruction moves 8 of them (4 in float32), so the load/store instructions and their address
  arithmetic drop 8x (4x). Registers stay where v03 had them in bfloat16 (48 a thread, 5 blocks of
  256 per SM; the element path for odd widths sets that figure) and rise to 58 in float32 (4
  blocks), whose 8 packs of slots are only half used at 4096 columns. The DRAM bytes do not change
  (536 MB at 16384x8192 bfloat16). vector_add's v04 measured 1.65x from the same change in
  bfloat16 and 1.07x in float32 (issue rate mattered more than expected there), so expect
  ~3.7 TB/s in bfloat16: 1.4x F.rms_norm (2642 GB/s in a reference run before this ladder), ~0.92x the plain
  Triton kernel (4007 GB/s); ~3.5 TB/s in float32 at 8192x4096, 1.2x F.rms_norm (2934 GB/s)
prediction: 1.15x v03 at 16384x8192 bfloat16 (1.4x F.rms_norm); 1.05x v03 at 8192x4096 float32
outcome: 1.234x v03 [1.227, 1.237] at 16384x8192 bfloat16 (predicted 1.15x), 1.51x F.rms_norm (records rms_norm.bfloat16, run of 152c451)
deterministic: yes, each thread adds its packs' elements in a fixed order, then v03's butterfly; the
  path (packs or elements) depends only on the shape and the tensors' alignment
entry: rms_norm_vector_128bit<{T}>
dtypes: float32 bfloat16 float16
*/
// hello-gpu: record rms_norm.float32
// hello-gpu: record rms_norm.bfloat16

// v03's kBlock (256 threads, the companion's BLOCK) and kPerThread (32 elements held): rows of up to
// 256 x 32 = 8192 columns stay in registers in both paths; its block_sum_all, and its two row paths,
// unchanged: normalise_held_row (the row held in registers, one load an element) and
// normalise_long_row (over 8192 columns).
#include "v03_warp_shuffle_registers.hip"

// 16 bytes of T, aligned so that one access is one 128-bit load or store (LDG.128 / global_load_dwordx4).
template <typename T>
struct alignas(16) Pack {
  T lane[16 / sizeof(T)];
};

// Aligned rows whose width is a whole number of packs: 16-byte accesses only.
template <typename T>
__device__ __forceinline__ void normalise_packed_row(const T* __restrict__ x_row, const T* __restrict__ weight,
                                                     T* __restrict__ out_row, int columns, float eps) {
  constexpr int kLanes = 16 / sizeof(T);
  constexpr int kPacks = kPerThread / kLanes;          // 4 (bfloat16, float16) or 8 (float32)
  const int packs = columns / kLanes;                  // exact: columns % kLanes == 0 here
  const Pack<T>* x_packs = reinterpret_cast<const Pack<T>*>(x_row);
  const Pack<T>* weight_packs = reinterpret_cast<const Pack<T>*>(weight);
  Pack<T>* out_packs = reinterpret_cast<Pack<T>*>(out_row);

  Pack<T> held[kPacks];                                // raw T: 16 registers in bfloat16, 32 in float32
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {                   // every load issued before any is used
    const int pack = threadIdx.x + k * kBlock;
    if (pack < packs) held[k] = x_packs[pack];
  }
  float sum_of_squares = 0.0f;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    if (threadIdx.x + k * kBlock < packs) {            // the packs this thread loaded, and only those
#pragma unroll
      for (int lane = 0; lane < kLanes; ++lane) {
        const float value = static_cast<float>(held[k].lane[lane]);
        sum_of_squares += value * value;
      }
    }
  }
  const float rstd = rsqrtf(block_sum_all(sum_of_squares) / static_cast<float>(columns) + eps);
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int pack = threadIdx.x + k * kBlock;
    if (pack < packs) {
      // The weight comes from L1/L2 (every row reads the same one). ptxas issues each of these loads
      // after the previous pack's store, so a block waits up to kPacks cache round trips here in
      // series; the other resident blocks keep DRAM busy meanwhile. Loading all of them first would
      // cost 16 (bfloat16) to 32 (float32) more registers a thread: 80 and 84 with compile-check.
      const Pack<T> w = weight_packs[pack];
      Pack<T> result;
#pragma unroll
      for (int lane = 0; lane < kLanes; ++lane) {
        result.lane[lane] = static_cast<T>(static_cast<float>(held[k].lane[lane]) * rstd *
                                           static_cast<float>(w.lane[lane]));
      }
      out_packs[pack] = result;
    }
  }
}



// One block per row. The path depends only on columns and the three base addresses, the same for
// every thread of the grid, so every thread reaches the one barrier (inside block_sum_all).
template <typename T>
__global__ void __launch_bounds__(kBlock)
rms_norm_vector_128bit(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out,
                       int rows, int columns, float eps) {
  constexpr int kLanes = 16 / sizeof(T);
  if (static_cast<int>(blockIdx.x) >= rows) return;   // whole block, before any barrier
  const int64_t start = static_cast<int64_t>(blockIdx.x) * columns;   // 64-bit row offset
  // A pack needs a 16-byte aligned address: aligned bases and whole packs per row make every row
  // start aligned. Fresh PyTorch tensors are aligned (256 bytes); a view such as x[:, 1:] is not
  // contiguous and is refused by the launcher, but a flat slice reshaped can start anywhere.
  const bool packed = columns % kLanes == 0 &&
                      ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(weight) |
                        reinterpret_cast<uintptr_t>(out)) % 16) == 0;
  if (columns > kBlock * kPerThread) {
    normalise_long_row(x + start, weight, out + start, columns, eps);
  } else if (packed) {
    normalise_packed_row(x + start, weight, out + start, columns, eps);
  } else {
    normalise_held_row(x + start, weight, out + start, columns, eps);
  }
}
