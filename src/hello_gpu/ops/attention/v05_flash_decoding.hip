/*
Flash-decoding: a few query rows against a long KV cache. The keys are split across blocks, each block
reads its K/V bytes once for every query head of its GQA group, 16 bytes a load, and a second kernel
merges the blocks' partial softmaxes.
parent: v04_causal_block_skipping
change: when a KV head has at most 64 (query, head) rows (decode: S_q = 1 and a group of 4 heads
  gives 4), the keys are cut into chunks, one block of 4 warps per (4 rows, chunk, batch x KV head),
  the chunk count chosen from S_kv and the SM count (launcher: ~3 blocks per SM, the most that fit at
  148 registers a thread). The block's 4 rows are the heads of a group side by side (t06's order), so
  K and V are read once for the whole group, not once per query head as in v04. Each warp streams its
  own 32-key tiles (no barrier in the loop): a key's row is D x 2 bytes = 16 packs of 16 bytes
  (bfloat16, D = 128), so 16 lanes read one key and a warp-wide load covers 2 keys; a lane multiplies
  its 8 columns by the 4 rows' q (in registers) and a 4-step butterfly over the 16 lanes sums each dot
  product. After the 16 steps of a tile, lane l holds the scores of one key of the tile (l's position
  among its 16 lanes picks the step), so the online softmax runs one key a lane as in v03; P V reads V
  the same way, each lane taking its key's weight with a shuffle. At the end the 4 warps' partials
  merge through shared memory and the block writes one float32 partial (maximum, sum, unnormalised
  output) per row; a second small kernel merges a row's chunks in order (the online-softmax merge of
  t02's notes, on whole chunks) and divides. More than 64 rows a KV head (prefill): v04's kernel, unchanged
hypothesis: decode is memory-bound on the KV cache: at 1x32x8x1x32768x128 bfloat16 K and V are
  2 x 8 x 32768 x 128 x 2 bytes = 134 MB (q and the output 8 KiB each; the partials, 43 chunks x 8
  heads x 4 rows x 130 floats = 0.7 MB, written and read once: 1% more). v04 runs B x H = 32 blocks on
  132 SMs, each walking all 32768 keys alone in 1024 tiles, with two barriers and a load round trip a
  tile and one warp per scheduler: ~1.5 us a tile, ~1.5 ms (~0.09 TB/s), and the group's 4 heads read
  the same KV head 4 times (from L2 when they run together). Here 344 blocks (43 chunks of 768 keys x
  8 KV heads) fill the SMs' 396 slots; each lane has 4 16-byte loads of a batch in flight and ptxas
  hoists the next batches' loads above the arithmetic (what the 148 registers hold); a 32-key tile
  (16 KiB of K and V) costs a warp ~2000 instructions (per K pack 32 FMAs and 16 shuffles, per V pack
  32 FMAs and 4 shuffles): ~16 us of issue an SM against ~32 us of DRAM time at the copy bandwidth, so
  the loads should set the pace, less the tail of SMs holding 3 blocks where others hold 2: ~0.65x the
  copy bandwidth. t06 does the same split with tensor-core dot products and no shuffles: ~0.8x t06. At
  1x32x8x1x4096x128 (16.8 MB: ~4 us at copy) two launches and the merge dominate: ~0.35x copy. With
  S_q = 4 the 16 rows are 4 blocks re-reading each chunk (through L2): ~4x the instructions,
  compute-bound. Parent v04, not v03: v04 is the ladder's best HIP rung and the one prefill falls back
  to; at decode the two are the same (causal skipping saves at most S_q - 1 keys of S_kv)
prediction: ~0.65x the copy bandwidth in KV reads at 1x32x8x1x32768x128 bfloat16 (~30x v04, ~0.8x
  t06); ~0.65x copy at 16x32x8x1x32768x128; ~0.35x copy at 1x32x8x1x4096x128; prefill shapes: v04's time
outcome: 1,421 GB/s (0.33x copy) at 1x32x8x1x32768x128 bfloat16 (predicted ~0.65x: missed, -49%), 94.5 us, 199x v04
  [198, 200] (~30x), 0.522x SDPA [0.520, 0.530], 0.68x t06 (ratio of medians; ~0.8x); 1,538 GB/s (0.36x copy) at
  16x32x8x1x32768x128 (~0.65x: missed, -44%) (records attention.bfloat16, run of 89ae604)
deterministic: yes, each warp sums its keys in a fixed order, the 4 warps merge in order, and the merge
  kernel visits the chunks in order; the chunk count depends only on the shape and the SM count
entry: attention_flash_decoding<{T}>
dtypes: bfloat16 float16 float32
*/
// hello-gpu: record attention.bfloat16
// hello-gpu: record attention.float16

// v02's kWarps (4), kThreads, kMaxDim and visible(); v04's kernel, which prefill shapes run (launcher).
#include "v04_causal_block_skipping.hip"
// Pack-free reads of 16 bytes: lane_value<T>(uint4, l) is element l of a pack, as float32.
#include "hg_pack.h"

// A key's row is split over at most 32 lanes (float32, D = 128: 32 packs of 4), so a warp holds whole
// keys on 32- and 64-wide warps alike.
static_assert(HG_WARP_SIZE % 32 == 0, "v05 reads a key's row with up to 32 lanes: warps of 32 or 64 lanes");

constexpr int kDecodeRows = 4;        // (query, head) rows a block: one query's 4 heads of a Llama 3 group
// 16-byte loads a lane issues before it uses any (2 KiB a 32-wide warp). ptxas hoists the next batches' loads
// above this batch's arithmetic as far as registers allow: 148 registers a thread at 4 (compile-check, sm_90),
// 168 and a spill in float16 at 8.
constexpr int kLoadsInFlight = 4;

// How a warp reads a tile of HG_WARP_SIZE keys of K or V with head size kHeadDim: a key's row is
// kLanesPerKey packs of 16 bytes, lane l reads pack (l mod kLanesPerKey) of key (l / kLanesPerKey) of
// each step, kKeysPerStep keys a step, kLanesPerKey steps a tile.
template <typename T, int kHeadDim>
struct DecodeTile {
  static constexpr int kPack = 16 / sizeof(T);                     // elements a load: 8 (16-bit), 4 (float32)
  static constexpr int kLanesPerKey = kHeadDim / kPack;             // 16 (bfloat16, D = 128), 8, 32 (float32), 16
  static constexpr int kKeysPerStep = HG_WARP_SIZE / kLanesPerKey;  // 2, 4, 1, 2 (twice that on 64-wide)
  static_assert(kLanesPerKey % kLoadsInFlight == 0 && kLanesPerKey <= HG_WARP_SIZE, "a key's packs in batches");
};

// What a warp carries across its tiles for each of the block's rows: the running maximum (the same in
// every lane), this lane's share of the running sum (the weights of the keys whose scores it held), and
// its kPack columns of the unnormalised output, from the keys of its step position (summed at the end).
template <int kPack>
struct DecodeState {
  float max[kDecodeRows];
  float share[kDecodeRows];
  float acc[kDecodeRows][kPack];
};

// The 4 warps' partials of a block, merged through shared memory at the end of the chunk (8.3 KiB).
struct WarpPartials {
  float acc[kWarps][kDecodeRows][kMaxDim];
  float max[kWarps][kDecodeRows];
  float sum[kWarps][kDecodeRows];
};

// The 16-byte packs this lane reads in steps first .. first + kLoadsInFlight - 1 of a tile: `lane_rows` points
// at its pack of the tile's key (tile + slot), and step s's key is kKeysPerStep x s keys further, a constant
// offset (one 64-bit address a lane, not one per load). Zeros from key `stop` on: a masked key's value must be
// 0, not what lies past the chunk or the tensor (a weight of 0 times a NaN is NaN).
template <int kLanesPerKey, int kKeysPerStep>
__device__ __forceinline__ void load_packs(uint4 (&packs)[kLoadsInFlight], const uint4* __restrict__ lane_rows,
                                           int first, int key, int stop) {
#pragma unroll
  for (int b = 0; b < kLoadsInFlight; ++b) {       // every load issued before any is used
    packs[b].x = packs[b].y = packs[b].z = packs[b].w = 0u;
    if (key + (first + b) * kKeysPerStep < stop) packs[b] = lane_rows[(first + b) * kKeysPerStep * kLanesPerKey];
  }
}

// Merge a partial softmax (other_max, other_sum, other_acc) into (max, sum, acc): both rescaled to the
// larger maximum. A partial that saw no key has max -inf and sum and acc 0: it weighs 0, and two of
// them merge into another (no -inf - -inf = NaN: the shift is 0 there).
__device__ __forceinline__ void merge_partial(float& max, float& sum, float& acc, float other_max, float other_sum,
                                              float other_acc) {
  const float new_max = fmaxf(max, other_max);
  const float shift = new_max == minus_infinity() ? 0.0f : new_max;
  const float mine = exp2f(max - shift), theirs = exp2f(other_max - shift);
  sum = sum * mine + other_sum * theirs;
  acc = acc * mine + other_acc * theirs;
  max = new_max;
}

// One tile's scores: after step s, the kLanesPerKey lanes of key (tile + s x kKeysPerStep + slot) all hold
// its dot products, and the lane whose segment is s keeps them. So lane l ends with the scores of key
// tile + (l mod kLanesPerKey) x kKeysPerStep + l / kLanesPerKey: one key a lane, every key of the tile once.
template <typename T, int kHeadDim>
__device__ __forceinline__ void score_tile(float (&score)[kDecodeRows],
                                           const float (&q_part)[kDecodeRows][DecodeTile<T, kHeadDim>::kPack],
                                           const uint4* __restrict__ k_lane, int key, int stop, int segment) {
  using Tile = DecodeTile<T, kHeadDim>;
#pragma unroll
  for (int first = 0; first < Tile::kLanesPerKey; first += kLoadsInFlight) {
    uint4 packs[kLoadsInFlight];
    load_packs<Tile::kLanesPerKey, Tile::kKeysPerStep>(packs, k_lane, first, key, stop);
#pragma unroll
    for (int b = 0; b < kLoadsInFlight; ++b) {
      float key_part[Tile::kPack];
#pragma unroll
      for (int e = 0; e < Tile::kPack; ++e) key_part[e] = lane_value<T>(packs[b], e);
#pragma unroll
      for (int r = 0; r < kDecodeRows; ++r) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < Tile::kPack; ++e) dot = fmaf(q_part[r][e], key_part[e], dot);
        // The key's kLanesPerKey lanes are aligned and a power of two: offsets below it stay among them.
#pragma unroll
        for (int offset = Tile::kLanesPerKey / 2; offset > 0; offset /= 2) dot += __shfl_xor(dot, offset);
        if (segment == first + b) score[r] = dot;
      }
    }
  }
}

// acc += P V for one tile: step s reads V's packs as score_tile read K's, and each lane takes the weight
// of its key (tile + s x kKeysPerStep + slot) from the lane that scored it, slot x kLanesPerKey + s.
template <typename T, int kHeadDim>
__device__ __forceinline__ void add_weighted_values(DecodeState<DecodeTile<T, kHeadDim>::kPack>& state,
                                                    const float (&weight)[kDecodeRows],
                                                    const uint4* __restrict__ v_lane, int key, int stop,
                                                    int segment) {
  using Tile = DecodeTile<T, kHeadDim>;
  const int lane = static_cast<int>(threadIdx.x) % HG_WARP_SIZE;
#pragma unroll
  for (int first = 0; first < Tile::kLanesPerKey; first += kLoadsInFlight) {
    uint4 packs[kLoadsInFlight];
    load_packs<Tile::kLanesPerKey, Tile::kKeysPerStep>(packs, v_lane, first, key, stop);
#pragma unroll
    for (int b = 0; b < kLoadsInFlight; ++b) {
      float value[Tile::kPack];
#pragma unroll
      for (int e = 0; e < Tile::kPack; ++e) value[e] = lane_value<T>(packs[b], e);
#pragma unroll
      for (int r = 0; r < kDecodeRows; ++r) {
        const float p = __shfl(weight[r], lane - segment + first + b);
#pragma unroll
        for (int e = 0; e < Tile::kPack; ++e) state.acc[r][e] = fmaf(p, value[e], state.acc[r][e]);
      }
    }
  }
}

// One block: rows row_group x 4 .. + 3 of KV head bkv's (query, head) pairs, over keys
// [chunk x chunk_keys, (chunk + 1) x chunk_keys); its partial goes to part_acc / part_stats.
template <typename T, int kHeadDim>
__device__ __forceinline__ void decode_chunk(WarpPartials& partials, const T* __restrict__ q,
                                             const T* __restrict__ k, const T* __restrict__ v,
                                             float* __restrict__ part_acc, float* __restrict__ part_stats,
                                             int heads, int kv_heads, int q_len, int kv_len, int chunk_keys,
                                             float scale_log2, int causal) {
  using Tile = DecodeTile<T, kHeadDim>;
  constexpr int kPack = Tile::kPack;
  const int lane = static_cast<int>(threadIdx.x) % HG_WARP_SIZE;
  const int warp = static_cast<int>(threadIdx.x) / HG_WARP_SIZE;
  const int segment = lane % Tile::kLanesPerKey;       // the pack of a key's row this lane reads
  const int slot = lane / Tile::kLanesPerKey;          // which of a step's keys
  const int row_group = static_cast<int>(blockIdx.x), chunk = static_cast<int>(blockIdx.y);
  const int bkv = static_cast<int>(blockIdx.z);
  const int group = heads / kv_heads;

  // Row r is the (query, head) pair g = row_group x 4 + r of this KV head: query g / group, head g mod
  // group of the group. Its q columns segment x kPack .. + kPack, times scale x log2(e), in registers.
  float q_part[kDecodeRows][kPack];
  int query[kDecodeRows];
  bool live[kDecodeRows];
#pragma unroll
  for (int r = 0; r < kDecodeRows; ++r) {
    const int g = row_group * kDecodeRows + r;
    live[r] = g < group * q_len;                       // the last row group may have fewer than 4 rows
    query[r] = g / group;
    const int head = (bkv / kv_heads) * heads + (bkv % kv_heads) * group + g % group;
    const T* q_row = q + (static_cast<int64_t>(head) * q_len + query[r]) * kHeadDim + segment * kPack;
#pragma unroll
    for (int e = 0; e < kPack; ++e) q_part[r][e] = live[r] ? static_cast<float>(q_row[e]) * scale_log2 : 0.0f;
  }

  // K and V rows of this KV head as 16-byte packs (the launcher checks that k and v are 16-byte aligned;
  // a row of D = 64 or 128 elements is a whole number of packs).
  const int64_t kv_offset = static_cast<int64_t>(bkv) * kv_len * kHeadDim;
  const uint4* k_rows = reinterpret_cast<const uint4*>(k + kv_offset);
  const uint4* v_rows = reinterpret_cast<const uint4*>(v + kv_offset);
  const int start = chunk * chunk_keys;
  const int stop = min(kv_len, start + chunk_keys);

  DecodeState<kPack> state;
#pragma unroll
  for (int r = 0; r < kDecodeRows; ++r) {
    state.max[r] = minus_infinity();
    state.share[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < kPack; ++e) state.acc[r][e] = 0.0f;
  }
  // Warp w takes tiles w, w + 4, ... of the chunk: no barrier until the merge.
  for (int tile = start + warp * HG_WARP_SIZE; tile < stop; tile += kWarps * HG_WARP_SIZE) {
    // This lane reads pack `segment` of keys tile + slot, tile + slot + kKeysPerStep, ...
    const int64_t lane_pack = static_cast<int64_t>(tile + slot) * Tile::kLanesPerKey + segment;
    float score[kDecodeRows] = {};
    score_tile<T, kHeadDim>(score, q_part, k_rows + lane_pack, tile + slot, stop, segment);
    const int key = tile + segment * Tile::kKeysPerStep + slot;      // the key whose scores this lane holds
    float weight[kDecodeRows];
#pragma unroll
    for (int r = 0; r < kDecodeRows; ++r) {
      const bool seen = live[r] && key < stop && visible(query[r], key, q_len, kv_len, causal);
      const float s = seen ? score[r] : minus_infinity();
      const float new_max = fmaxf(state.max[r], warp_max(s));
      const float shift = new_max == minus_infinity() ? 0.0f : new_max;   // no key seen yet: no -inf - -inf
      const float scale = exp2f(state.max[r] - shift);
      weight[r] = exp2f(s - shift);
      state.share[r] = state.share[r] * scale + weight[r];
      state.max[r] = new_max;
#pragma unroll
      for (int e = 0; e < kPack; ++e) state.acc[r][e] *= scale;
    }
    add_weighted_values<T, kHeadDim>(state, weight, v_rows + lane_pack, tile + slot, stop, segment);
  }

  // The warp's partial: its sum over all lanes' shares, its output summed over the lanes that hold the same
  // columns for other keys (offsets kLanesPerKey .. HG_WARP_SIZE / 2), then written by the first key's lanes.
#pragma unroll
  for (int r = 0; r < kDecodeRows; ++r) {
    const float total = warp_sum(state.share[r]);
#pragma unroll
    for (int e = 0; e < kPack; ++e) {
      for (int offset = Tile::kLanesPerKey; offset < HG_WARP_SIZE; offset *= 2) {
        state.acc[r][e] += __shfl_xor(state.acc[r][e], offset);
      }
      if (slot == 0) partials.acc[warp][r][segment * kPack + e] = state.acc[r][e];
    }
    if (lane == 0) {
      partials.max[warp][r] = state.max[r];
      partials.sum[warp][r] = total;
    }
  }
  __syncthreads();
  // The block's partial: the 4 warps merged in order, one (row, column) a thread at a time.
  const int64_t part = ((static_cast<int64_t>(bkv) * gridDim.x + row_group) * gridDim.y + chunk) * kDecodeRows;
  for (int i = static_cast<int>(threadIdx.x); i < kDecodeRows * kHeadDim; i += static_cast<int>(blockDim.x)) {
    const int r = i / kHeadDim, d = i % kHeadDim;
    float max = minus_infinity(), sum = 0.0f, acc = 0.0f;
    for (int w = 0; w < kWarps; ++w) merge_partial(max, sum, acc, partials.max[w][r], partials.sum[w][r],
                                                   partials.acc[w][r][d]);
    part_acc[(part + r) * kHeadDim + d] = acc;
    if (d == 0) {
      part_stats[(part + r) * 2] = max;
      part_stats[(part + r) * 2 + 1] = sum;
    }
  }
}

// (1) The split. Grid (ceil(group x S_q / 4), chunks, B x H_kv): the row groups of a chunk are launched
// side by side, so a chunk that more than one of them reads comes from L2 the second time. kThreads
// threads. part_acc is (B x H_kv, row groups, chunks, 4, D) and part_stats (..., 4, 2: max, sum), float32.
template <typename T>
__global__ void __launch_bounds__(kThreads)
attention_flash_decoding(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                         float* __restrict__ part_acc, float* __restrict__ part_stats, int heads, int kv_heads,
                         int q_len, int kv_len, int head_dim, int chunk_keys, float scale_log2, int causal) {
  __shared__ WarpPartials partials;
  if (head_dim == 128) {
    decode_chunk<T, 128>(partials, q, k, v, part_acc, part_stats, heads, kv_heads, q_len, kv_len, chunk_keys,
                         scale_log2, causal);
  } else if (head_dim == 64) {
    decode_chunk<T, 64>(partials, q, k, v, part_acc, part_stats, heads, kv_heads, q_len, kv_len, chunk_keys,
                        scale_log2, causal);
  }
}

// (2) The merge. One block of kMaxDim threads per (query, head) row g of KV head bkv: grid (group x S_q,
// B x H_kv). Thread d merges column d of the row's chunks in chunk order and divides by the sum; a row
// that saw no key (causal, S_q > S_kv) has sum 0 and gets exactly 0.
template <typename T>
__device__ __forceinline__ void combine_chunks(const float* __restrict__ part_acc,
                                               const float* __restrict__ part_stats, T* __restrict__ out,
                                               int heads, int kv_heads, int q_len, int head_dim, int chunks) {
  const int d = static_cast<int>(threadIdx.x);
  const int g = static_cast<int>(blockIdx.x), bkv = static_cast<int>(blockIdx.y);
  if (d >= head_dim) return;
  const int group = heads / kv_heads;
  const int row_groups = (group * q_len + kDecodeRows - 1) / kDecodeRows;
  const int64_t first = (static_cast<int64_t>(bkv) * row_groups + g / kDecodeRows) * chunks * kDecodeRows
                        + g % kDecodeRows;
  float max = minus_infinity(), sum = 0.0f, acc = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const int64_t part = first + static_cast<int64_t>(c) * kDecodeRows;
    merge_partial(max, sum, acc, part_stats[part * 2], part_stats[part * 2 + 1], part_acc[part * head_dim + d]);
  }
  const int query = g / group;
  const int head = (bkv / kv_heads) * heads + (bkv % kv_heads) * group + g % group;
  out[(static_cast<int64_t>(head) * q_len + query) * head_dim + d] = static_cast<T>(sum > 0.0f ? acc / sum : 0.0f);
}

// One kernel per dtype, not a template, as v01's weighted values: the compile gate compiles every
// non-template kernel, and the launcher picks one by the entry's template argument (launch.sibling).
__global__ void attention_decode_combine_float(const float* __restrict__ part_acc,
                                               const float* __restrict__ part_stats, float* __restrict__ out,
                                               int heads, int kv_heads, int q_len, int head_dim, int chunks) {
  combine_chunks<float>(part_acc, part_stats, out, heads, kv_heads, q_len, head_dim, chunks);
}
__global__ void attention_decode_combine_half(const float* __restrict__ part_acc,
                                              const float* __restrict__ part_stats, __half* __restrict__ out,
                                              int heads, int kv_heads, int q_len, int head_dim, int chunks) {
  combine_chunks<__half>(part_acc, part_stats, out, heads, kv_heads, q_len, head_dim, chunks);
}
__global__ void attention_decode_combine_bfloat16(const float* __restrict__ part_acc,
                                                  const float* __restrict__ part_stats,
                                                  hip_bfloat16* __restrict__ out, int heads, int kv_heads,
                                                  int q_len, int head_dim, int chunks) {
  combine_chunks<hip_bfloat16>(part_acc, part_stats, out, heads, kv_heads, q_len, head_dim, chunks);
}
