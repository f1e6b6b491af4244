/*
v03 with the causal mask turned into loop bounds: key tiles no row of the block can see are never
loaded, tiles every row sees whole skip the mask, and the blocks with the most keys start first.
parent: v03_query_rows_per_warp
change: for a block of query rows first .. last and the bottom-right offset S_kv - S_q, keys past
  last + offset are not visited (their tiles are neither loaded nor scored); the 32-key tiles before
  first + offset + 1 run attend_tile<false> (no compare, no select); only the tiles the diagonal
  crosses and a partial last tile compute the mask. A block whose rows see no key (causal, S_q > S_kv)
  visits nothing and writes zeros. The grid is (B x H, query blocks) and block y takes query block
  (blocks - 1 - y): the last query rows, which see the most keys, are launched first across every
  head, and the short blocks fill the end of the run. Non-causal: the same kernel, the mask only on
  a partial last tile
hypothesis: causal at S_q = S_kv = 4096, v03 loads and scores all 128 tiles of every block and throws
  ~half the scores away; here block b (16 rows) visits b / 2 + 1 tiles: 0.50x the tiles in all, and
  the work model counts exactly the visible pairs (0.5001x). With ~16 waves of blocks per SM the
  uneven block lengths cost little once the long ones go first: expect ~1.9x v03 causal. Non-causal:
  a compare and a select fewer per score against 8 FMAs: ~1.0x v03
prediction: ~1.9x v03 at 4x32x32x4096x4096x128x1 bfloat16 (the same TFLOP/s as non-causal, ~16);
  1.0x v03 at 4x32x32x4096x4096x128
outcome: causal 1.778x v03 [1.777, 1.780] at 4x32x32x4096x4096x128x1 bfloat16 (predicted ~1.9x), 9.67 TFLOP/s
  (predicted ~16: missed, -40%, from v03's base), 56,887 us, 0.016x SDPA [0.016, 0.016]; non-causal 0.889x v03
  [0.889, 0.889] (predicted 1.0x: missed, -11%), 113,780 us (records attention.bfloat16, run of 89ae604)
deterministic: yes, as v03 (the visited tiles keep their order)
entry: attention_causal_skipping<{T}>
dtypes: bfloat16 float16 float32
*/
// hello-gpu: record attention.bfloat16
// hello-gpu: record attention.float16

// v03's warp rows (WarpRows, attend_tile, write_rows) and v02's loaders.
#include "v03_query_rows_per_warp.hip"

// One block per (b x H + h, 16 query rows): grid (B x H, ceil(S_q / 16)), kThreads threads.
template <typename T>
__global__ void __launch_bounds__(kThreads)
attention_causal_skipping(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          T* __restrict__ out, int heads, int kv_heads, int q_len, int kv_len, int head_dim,
                          float scale_log2, int causal) {
  __shared__ float q_tile[kBlockRows][kMaxDim];
  __shared__ float k_tile[kTileKeys][kMaxDim + 1];
  __shared__ float v_tile[kTileKeys][kMaxDim];
  const int bh = static_cast<int>(blockIdx.x);
  const int first_row = static_cast<int>(gridDim.y - 1 - blockIdx.y) * kBlockRows;     // the longest blocks first
  const int last_row = min(first_row + kBlockRows, q_len) - 1;
  // Keys [0, end) are seen by some row of the block; keys [0, whole) by every row (spec.py: query i sees
  // key j when j <= i + S_kv - S_q).
  int end = kv_len, whole = kv_len;
  if (causal) {
    end = min(kv_len, max(0, last_row + (kv_len - q_len) + 1));
    whole = min(kv_len, max(0, first_row + (kv_len - q_len) + 1));
  }
  const int unmasked_end = whole / kTileKeys * kTileKeys;
  const int64_t kv_offset = static_cast<int64_t>(kv_head_of(bh, heads, kv_heads)) * kv_len * head_dim;
  load_query_rows(q_tile, q + static_cast<int64_t>(bh) * q_len * head_dim, first_row, q_len, head_dim, scale_log2);
  WarpRows rows;
  start_rows(rows);
  int start = 0;
  for (; start < unmasked_end; start += kTileKeys) {
    load_key_tile(k_tile, v_tile, k + kv_offset, v + kv_offset, start, kv_len, head_dim);
    attend_tile<false>(rows, q_tile, k_tile, v_tile, first_row, start, q_len, kv_len, head_dim, causal);
  }
  for (; start < end; start += kTileKeys) {
    load_key_tile(k_tile, v_tile, k + kv_offset, v + kv_offset, start, kv_len, head_dim);
    attend_tile<true>(rows, q_tile, k_tile, v_tile, first_row, start, q_len, kv_len, head_dim, causal);
  }
  write_rows(rows, out + static_cast<int64_t>(bh) * q_len * head_dim, first_row, q_len, head_dim);
}
