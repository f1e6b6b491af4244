/*
Attention in one kernel (FlashAttention-1 style): the scores live one tile at a time in shared memory,
and an online softmax carries each row's maximum, sum and output across the key tiles.
parent: v01_materialised_three_kernels
change: one block of 4 warps per (16 query rows, batch x head); the rows of Q, pre-multiplied by scale x
  log2(e), stay in shared memory. For each tile of 32 keys the whole block works each step together,
  with a barrier between steps, as FlashAttention-1 splits a tile's work across all of a block's warps:
  (1) K and V tiles loaded to shared memory as float32; (2) the 16 x 32 scores, 4 a thread, into a
  shared tile (-inf where the causal mask hides the key); (3) one thread per row updates the row's
  maximum and sum and turns its 32 scores into weights 2^(s - max); (4) every thread rescales its
  output elements (a column, for 16 rows at D = 128) by the row's correction and adds P V. The scores
  never reach global memory; the output is divided by the sum once, at the end (a row that saw no key: 0)
hypothesis: v01 moves 16 bytes of float32 per score through DRAM/L2 (68 GB at 4x32x32x4096x4096x128:
  ~15 ms) and computes each score from global loads with no reuse. Here a K/V tile is read once per 16
  query rows (from L2: 2 MiB of K and V a head, re-read by its 256 query blocks, ~64 GB through L2 in
  all) and every score from shared memory: 2 shared loads per FMA in the score step (q broadcast, k
  padded to 129 floats a row so the 32 lanes hit 32 banks), 1 per FMA in P V. Bound by shared-memory
  issue and by step (3), where 16 of 128 threads each do 32 exp2 in series while the rest wait at the
  barrier: 4 barriers a tile. Expect ~3x v01 (~10 ms: ~100 TFLOP/s is out of reach for scalar float32
  FMAs, whose peak on the H200 is ~67 TFLOP/s)
prediction: ~8 TFLOP/s at 4x32x32x4096x4096x128 bfloat16 (~3x v01, 0.025x the flash backend);
  decode (S_q = 1): one block per (batch, head) with 1 live row of 16, ~0.3x v01 at 16x32x8x1x32768x128
  (v01 spreads one query's keys over S_kv / 256 blocks, this walks them in one block)
outcome: 5.303x v01 [5.302, 5.304] at 4x32x32x4096x4096x128 bfloat16 (predicted ~3x), 0.0069x SDPA [0.0069, 0.0069],
  4.8 TFLOP/s (predicted ~8: missed, -40%), 229,270 us; 0.355x v01 [0.355, 0.355] at 16x32x8x1x32768x128 (predicted
  ~0.3x) (records attention.bfloat16, run of 89ae604)
deterministic: yes, each score, row statistic and output element has one owner, in a fixed order
entry: attention_fused_block_steps<{T}>
dtypes: bfloat16 float16 float32
*/
// hello-gpu: record attention.bfloat16
// hello-gpu: record attention.float16

#include "hg_reduce.h"

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * HG_WARP_SIZE;      // 128 on NVIDIA and RDNA (256 on a 64-wide wavefront)
constexpr int kBlockRows = 16;                       // query rows a block
constexpr int kTileKeys = 32;                        // keys a tile
constexpr int kMaxDim = 128;                         // the largest head size (the spec's D: 64 or 128)
// Shared memory at D = 128: Q 8 KiB, K 16.1 KiB (rows padded by one float: lane j reads row j, column
// d at bank (j x 129 + d) mod 32 = (j + d) mod 32, 32 lanes in 32 banks), V 16 KiB: 40.1 KiB, under
// the 48 KiB a kernel may declare statically.

// The block's query rows, times scale x log2(e) (the scores then come out in base-2 exponents), as
// float32; rows past q_len are zeros (their results are never written).
template <typename T>
__device__ __forceinline__ void load_query_rows(float (*q_tile)[kMaxDim], const T* __restrict__ q_head,
                                                int first_row, int q_len, int head_dim, float scale_log2) {
  for (int i = threadIdx.x; i < kBlockRows * head_dim; i += blockDim.x) {
    const int r = i / head_dim, d = i % head_dim, row = first_row + r;
    q_tile[r][d] = row < q_len ? static_cast<float>(q_head[static_cast<int64_t>(row) * head_dim + d]) * scale_log2
                               : 0.0f;
  }
}

// Keys start .. start + 31 of K and V into shared memory (zeros past kv_len), between two barriers:
// the first waits for every reader of the previous tile, the second for every writer of this one.
template <typename T>
__device__ __forceinline__ void load_key_tile(float (*k_tile)[kMaxDim + 1], float (*v_tile)[kMaxDim],
                                              const T* __restrict__ k_head, const T* __restrict__ v_head,
                                              int start, int kv_len, int head_dim) {
  __syncthreads();
  for (int i = threadIdx.x; i < kTileKeys * head_dim; i += blockDim.x) {
    const int j = i / head_dim, d = i % head_dim, key = start + j;
    const int64_t at = static_cast<int64_t>(key) * head_dim + d;
    k_tile[j][d] = key < kv_len ? static_cast<float>(k_head[at]) : 0.0f;
    v_tile[j][d] = key < kv_len ? static_cast<float>(v_head[at]) : 0.0f;
  }
  __syncthreads();
}

// Query head bh = b x H + h reads key/value head b x H_kv + h / (H / H_kv): GQA without a copy.
__device__ __forceinline__ int kv_head_of(int bh, int heads, int kv_heads) {
  return (bh / heads) * kv_heads + (bh % heads) / (heads / kv_heads);
}

// Bottom-right causal (spec.py): query `row` sees `key` when key <= row + S_kv - S_q.
__device__ __forceinline__ bool visible(int row, int key, int q_len, int kv_len, int causal) {
  return key < kv_len && (!causal || key <= row + (kv_len - q_len));
}

// One block per (16 query rows, b x H + h): grid (ceil(S_q / 16), B x H), kThreads threads.
template <typename T>
__global__ void __launch_bounds__(kThreads)
attention_fused_block_steps(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                            T* __restrict__ out, int heads, int kv_heads, int q_len, int kv_len, int head_dim,
                            float scale_log2, int causal) {
  __shared__ float q_tile[kBlockRows][kMaxDim];
  __shared__ float k_tile[kTileKeys][kMaxDim + 1];
  __shared__ float v_tile[kTileKeys][kMaxDim];
  __shared__ float p_tile[kBlockRows][kTileKeys + 1];     // scores, then weights
  __shared__ float row_max[kBlockRows], row_sum[kBlockRows], row_scale[kBlockRows];
  const int bh = static_cast<int>(blockIdx.y);
  const int first_row = static_cast<int>(blockIdx.x) * kBlockRows;
  const int64_t kv_offset = static_cast<int64_t>(kv_head_of(bh, heads, kv_heads)) * kv_len * head_dim;
  const T* k_head = k + kv_offset;
  const T* v_head = v + kv_offset;
  load_query_rows(q_tile, q + static_cast<int64_t>(bh) * q_len * head_dim, first_row, q_len, head_dim, scale_log2);
  if (threadIdx.x < kBlockRows) {
    row_max[threadIdx.x] = minus_infinity();
    row_sum[threadIdx.x] = 0.0f;
  }
  // Step (4)'s ownership: column `column` of rows r0, r0 + step, ... (16 rows a thread at D = 128 and
  // 128 threads; 8 at D = 64). Threads of a warp share their rows, so reads of p_tile are broadcasts.
  const int column = static_cast<int>(threadIdx.x) % head_dim;
  const int row_step = kThreads / head_dim;
  const int r0 = static_cast<int>(threadIdx.x) / head_dim;
  float acc[kBlockRows];
#pragma unroll
  for (int i = 0; i < kBlockRows; ++i) acc[i] = 0.0f;

  for (int start = 0; start < kv_len; start += kTileKeys) {
    load_key_tile(k_tile, v_tile, k_head, v_head, start, kv_len, head_dim);       // (1)
    for (int e = threadIdx.x; e < kBlockRows * kTileKeys; e += kThreads) {        // (2)
      const int r = e / kTileKeys, j = e % kTileKeys;
      float dot = 0.0f;
      for (int d = 0; d < head_dim; ++d) dot = fmaf(q_tile[r][d], k_tile[j][d], dot);
      p_tile[r][j] = visible(first_row + r, start + j, q_len, kv_len, causal) ? dot : minus_infinity();
    }
    __syncthreads();
    if (threadIdx.x < kBlockRows) {                                              // (3)
      const int r = static_cast<int>(threadIdx.x);
      float tile_max = minus_infinity();
      for (int j = 0; j < kTileKeys; ++j) tile_max = fmaxf(tile_max, p_tile[r][j]);
      const float new_max = fmaxf(row_max[r], tile_max);
      // A row that has seen no key keeps -inf: subtract 0 there (no -inf - -inf = NaN); its weights are 0.
      const float shift = new_max == minus_infinity() ? 0.0f : new_max;
      float tile_sum = 0.0f;
      for (int j = 0; j < kTileKeys; ++j) {
        const float weight = exp2f(p_tile[r][j] - shift);
        p_tile[r][j] = weight;
        tile_sum += weight;
      }
      const float scale = exp2f(row_max[r] - shift);      // the old terms against the new maximum (<= 1)
      row_sum[r] = row_sum[r] * scale + tile_sum;
      row_max[r] = new_max;
      row_scale[r] = scale;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kBlockRows; ++i) {                                       // (4)
      const int r = r0 + i * row_step;
      if (r < kBlockRows) acc[i] *= row_scale[r];
    }
    for (int j = 0; j < kTileKeys; ++j) {
      const float value = v_tile[j][column];
#pragma unroll
      for (int i = 0; i < kBlockRows; ++i) {
        const int r = r0 + i * row_step;
        if (r < kBlockRows) acc[i] = fmaf(p_tile[r][j], value, acc[i]);
      }
    }
  }
  // row_sum's last update (step 3) is behind the barrier that precedes step (4): no barrier needed here.
  T* out_head = out + static_cast<int64_t>(bh) * q_len * head_dim;
#pragma unroll
  for (int i = 0; i < kBlockRows; ++i) {
    const int r = r0 + i * row_step, row = first_row + r;
    if (r < kBlockRows && row < q_len) {
      const float total = row_sum[r];
      out_head[static_cast<int64_t>(row) * head_dim + column] = static_cast<T>(total > 0.0f ? acc[i] / total : 0.0f);
    }
  }
}
