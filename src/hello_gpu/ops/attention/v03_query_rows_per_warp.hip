/*
FlashAttention-2's split of the work: each warp owns 4 query rows outright, so the softmax and the
output stay in its registers and only the K/V tile is shared by the block.
parent: v02_fused_block_steps
change: the same block (4 warps, 16 query rows, 32-key tiles of K and V in shared memory, loaded
  between two barriers), but warp w owns rows 4w .. 4w + 3 for the whole kernel: lane j computes the
  scores of key j for the warp's 4 rows in registers (4 FMAs per K element read from shared memory,
  v02 had 1); each row's tile maximum is a 5-step butterfly, its weights stay in the lanes; the
  running sum is kept per lane (one share per key lane, summed once at the end: a row's rescaling
  factor is the same in every lane); P V takes each weight from its lane with a shuffle, and each
  lane holds 4 columns of the 4 rows' outputs (16 floats) in registers. No score, weight or row
  statistic goes through shared memory, and the block meets at 2 barriers a tile instead of 4
hypothesis: v02 spends a tile on ~1570 shared loads a thread (the scores' q and k, then the weights
  in P V, each read once per FMA or two) and on step (3), where 16 threads do 32 exp2 each in series
  while 112 wait. Here a thread issues ~770 shared loads and 128 shuffles a tile for the same 1024
  FMAs, and every thread computes its own exp2 (4 a tile). Shared-memory issue and barrier waits were
  v02's bound, so ~2x v02 at 4x32x32x4096x4096x128; still scalar float32 FMAs (no tensor cores on
  this route), ~0.05x the flash backend
prediction: ~2x v02 at 4x32x32x4096x4096x128 bfloat16 (~16 TFLOP/s), causal the same time as
  non-causal (every tile is visited, the masked half thrown away: v04 skips it)
outcome: 2.271x v02 [2.271, 2.273] at 4x32x32x4096x4096x128 bfloat16 (predicted ~2x), 0.016x SDPA [0.016, 0.016],
  10.9 TFLOP/s (predicted ~16: missed, -32%, from v02's base), 101,078 us; causal 101,070 us, the same time (as
  predicted) (records attention.bfloat16, run of 89ae604)
deterministic: yes, each row's butterflies, lane shares and key order are fixed
entry: attention_rows_per_warp<{T}>
dtypes: bfloat16 float16 float32
*/
// hello-gpu: record attention.bfloat16
// hello-gpu: record attention.float16

// v02's constants (kWarps, kBlockRows, kTileKeys, kMaxDim), its loaders and the mask (visible).
#include "v02_fused_block_steps.hip"

constexpr int kRowsPerWarp = kBlockRows / kWarps;          // 4
constexpr int kColumnsPerLane = kMaxDim / HG_WARP_SIZE;    // output columns a lane holds: 4 (2 on a 64-wide wavefront)

// The maximum / sum over the 32 lanes holding one tile's keys, in every lane (a butterfly). On a
// 64-wide wavefront both halves compute the same 32 keys (simpler than splitting rows between them;
// this route targets 32-wide warps first), and offsets below 32 keep each half to itself.
__device__ __forceinline__ float across_keys_max(float value) {
#pragma unroll
  for (int offset = kTileKeys / 2; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor(value, offset));
  return value;
}
__device__ __forceinline__ float across_keys_sum(float value) {
#pragma unroll
  for (int offset = kTileKeys / 2; offset > 0; offset /= 2) value += __shfl_xor(value, offset);
  return value;
}

// What a warp carries across the key tiles for each of its rows: the running maximum (the same in
// every lane), this lane's share of the running sum (the weights of its keys), and its columns of
// the unnormalised output.
struct WarpRows {
  float max[kRowsPerWarp];
  float sum[kRowsPerWarp];
  float acc[kRowsPerWarp][kColumnsPerLane];
};

__device__ __forceinline__ void start_rows(WarpRows& rows) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    rows.max[r] = minus_infinity();
    rows.sum[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < kColumnsPerLane; ++c) rows.acc[r][c] = 0.0f;
  }
}

// #region attend-tile
// One 32-key tile (keys start ..) for the calling warp's rows: scores, the online-softmax update (see
// t02_fused_online_softmax.py for its derivation) and P V. kMasked: hide keys past kv_len and, when
// causal, above the diagonal; without it every key of the tile must be visible to every row (v04).
template <bool kMasked>
__device__ __forceinline__ void attend_tile(WarpRows& rows, const float (*q_tile)[kMaxDim],
                                            const float (*k_tile)[kMaxDim + 1], const float (*v_tile)[kMaxDim],
                                            int first_row, int start, int q_len, int kv_len, int head_dim, int causal) {
  const int lane = static_cast<int>(threadIdx.x) % HG_WARP_SIZE;
  const int row0 = static_cast<int>(threadIdx.x) / HG_WARP_SIZE * kRowsPerWarp;
  const int key = lane % kTileKeys;
  float weight[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) weight[r] = 0.0f;
  for (int d = 0; d < head_dim; ++d) {
    const float key_d = k_tile[key][d];                   // padded rows: 32 lanes, 32 banks
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) weight[r] = fmaf(q_tile[row0 + r][d], key_d, weight[r]);   // q: broadcast
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    if (kMasked && !visible(first_row + row0 + r, start + key, q_len, kv_len, causal)) weight[r] = minus_infinity();
    const float new_max = fmaxf(rows.max[r], across_keys_max(weight[r]));
    const float shift = new_max == minus_infinity() ? 0.0f : new_max;      // no key seen yet: no -inf - -inf
    const float scale = exp2f(rows.max[r] - shift);
    weight[r] = exp2f(weight[r] - shift);
    rows.sum[r] = rows.sum[r] * scale + weight[r];
    rows.max[r] = new_max;
#pragma unroll
    for (int c = 0; c < kColumnsPerLane; ++c) rows.acc[r][c] *= scale;
  }
  for (int j = 0; j < kTileKeys; ++j) {
    float weight_j[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) weight_j[r] = __shfl(weight[r], j);      // key j's weight, from lane j
#pragma unroll
    for (int c = 0; c < kColumnsPerLane; ++c) {
      const int d = lane + c * HG_WARP_SIZE;
      if (d < head_dim) {
        const float value = v_tile[j][d];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) rows.acc[r][c] = fmaf(weight_j[r], value, rows.acc[r][c]);
      }
    }
  }
}
// #endregion attend-tile

// The warp's rows divided by their sums (the lanes' shares added once, here), rows past q_len left out;
// a row that saw no key has sum 0 and gets 0.
template <typename T>
__device__ __forceinline__ void write_rows(const WarpRows& rows, T* __restrict__ out_head, int first_row, int q_len,
                                           int head_dim) {
  const int lane = static_cast<int>(threadIdx.x) % HG_WARP_SIZE;
  const int row0 = static_cast<int>(threadIdx.x) / HG_WARP_SIZE * kRowsPerWarp;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const float total = across_keys_sum(rows.sum[r]);    // every lane takes part in the butterfly
    const int row = first_row + row0 + r;
    if (row >= q_len) continue;
    const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
#pragma unroll
    for (int c = 0; c < kColumnsPerLane; ++c) {
      const int d = lane + c * HG_WARP_SIZE;
      if (d < head_dim) out_head[static_cast<int64_t>(row) * head_dim + d] = static_cast<T>(rows.acc[r][c] * inverse);
    }
  }
}

// One block per (16 query rows, b x H + h): grid (ceil(S_q / 16), B x H), kThreads threads, as v02.
template <typename T>
__global__ void __launch_bounds__(kThreads)
attention_rows_per_warp(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                        T* __restrict__ out, int heads, int kv_heads, int q_len, int kv_len, int head_dim,
                        float scale_log2, int causal) {
  __shared__ float q_tile[kBlockRows][kMaxDim];
  __shared__ float k_tile[kTileKeys][kMaxDim + 1];
  __shared__ float v_tile[kTileKeys][kMaxDim];
  const int bh = static_cast<int>(blockIdx.y);
  const int first_row = static_cast<int>(blockIdx.x) * kBlockRows;
  const int64_t kv_offset = static_cast<int64_t>(kv_head_of(bh, heads, kv_heads)) * kv_len * head_dim;
  load_query_rows(q_tile, q + static_cast<int64_t>(bh) * q_len * head_dim, first_row, q_len, head_dim, scale_log2);
  WarpRows rows;
  start_rows(rows);
  for (int start = 0; start < kv_len; start += kTileKeys) {
    load_key_tile(k_tile, v_tile, k + kv_offset, v + kv_offset, start, kv_len, head_dim);   // its barriers cover q_tile
    attend_tile<true>(rows, q_tile, k_tile, v_tile, first_row, start, q_len, kv_len, head_dim, causal);
  }
  write_rows(rows, out + static_cast<int64_t>(bh) * q_len * head_dim, first_row, q_len, head_dim);
}
