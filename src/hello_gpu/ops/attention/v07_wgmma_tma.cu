/*
FlashAttention-3's forward on Hopper: TMA brings Q once and K/V tiles into a ring of stages, wgmma
computes S = Q K^T and O += P V on the tensor cores, the softmax stays in registers and overlaps the
tensor cores' P V of the previous tile.
parent: v04_causal_block_skipping
change: one block of 3 warpgroups per (128 query rows, head, batch); grid (B x H, query tiles), the
  tiles with the most keys launched first (v04's order). Warpgroup 0 gives registers back (setmaxnreg
  to 40) and one thread issues every TMA copy: Q's 128 x D tile once, then per 128-key tile K and V
  into a 2-stage ring, each with its full mbarrier (1 arrival + the bytes) and empty mbarrier (8
  consumer warps). The boxes are 3-D (D, S, B x heads): rows past a head's end arrive as zeros, and
  K/V tiles are addressed by the KV head (h / (H / H_kv): GQA, never repeated). Warpgroups 1 and 2
  (setmaxnreg to 232) own 64 query rows each: S = Q K^T by wgmma m64n128k16 with Q and K read from
  shared memory (both K-major), online softmax in float32 registers with exp2 (a row's 4 threads
  combine maxima by 2 shuffles), P rounded to the input dtype in registers and used as the register
  A operand of O += P V (wgmma m64nDk16, V MN-major through the descriptor's transpose mode). The key
  tiles run from the last to the first: the tiles the diagonal or the end of S_kv cuts come first and
  mask scores to -inf (bottom-right causal as spec.py); the others skip the mask, and causal tiles no
  row sees are never loaded. Intra-warpgroup overlap (FA3's): tile j's Q K^T and tile j-1's P V are
  issued together and the softmax of tile j runs while P V computes (O is rescaled before P V is
  issued, P rewritten only after it completes). D = 64 and 128; 160 KiB of shared memory at D = 128
  (80 at 64): one block an SM. Left for the next rung: the two consumer warpgroups taking turns on
  the tensor cores (FA3's ping-pong), 176-key tiles, O written through shared memory by a TMA store
hypothesis: v04 runs on the CUDA cores in float32; wgmma runs at the tensor cores' ~989 TFLOP/s dense
  peak. Per 128-key tile a block does 2 x 2 x 128^3 = 8.4 MFLOP of matmul (~1.1 us at 989 / 132 SMs)
  and 16,384 exp2 (~0.5 us at 16 MUFU results a clock an SM, 1.98 GHz) plus ~4 FP32 operations a
  score: in series the softmax would add ~45%; overlapped with the previous tile's P V in each
  warpgroup, and the two warpgroups interleaving freely, most of it hides. K and V come from L2 at
  64 KiB a tile: 128 FLOP a byte. The FA3 paper's ablation (H100, D = 128) gives ~570-580 TFLOP/s
  with one of its two overlaps removed, 661 with both; with 128-key tiles, 2 stages and O stored
  from registers, expect ~0.8x cuDNN. Causal: half the tiles (the work model counts them exactly),
  the diagonal ones masked, the long blocks first: the same fraction of cuDNN's causal
prediction: ~480 TFLOP/s bf16 at 4x32x32x4096x4096x128 (0.8x cuDNN's 597; ~30x v04's ~16) and ~420
  causal (0.8x cuDNN's 523); within a few % of that at 4x32x8 (GQA: the same FLOPs, each K/V tile
  read by 4 blocks from L2)
outcome: 52.8x v04 [52.8, 52.9] at 4x32x32x4096x4096x128 bfloat16 (predicted ~30x, from v04's predicted ~16), 0.838x
  SDPA [0.834, 0.847], 498 TFLOP/s (predicted ~480: met, +4%), 2,207 us; causal 456 TFLOP/s (predicted ~420: missed,
  +8%), 0.823x SDPA [0.812, 0.828]; cuDNN not measured in this run (records attention.bfloat16, run of 89ae604)
deterministic: yes, each output row is one warpgroup's, its key tiles in a fixed order (last to first)
vendor: nvidia
arch: sm_90a
entry: attention_wgmma_tma<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record attention.bfloat16
// hello-gpu: record attention.float16

#include "hopper_attention.cuh"

// Read by the launcher (tensor_cores.tile_constants): grid, block and shared bytes come from here.
constexpr int kBlockM = 128, kBlockN = 128, kStages = 2, kThreads = 384;
constexpr int kConsumerWarps = 8;
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;   // 40 x 128 + 232 x 256 = 168 x 384

__device__ __forceinline__ float minus_infinity() { return __int_as_float(0xff800000u); }

// 2^x in one MUFU instruction (relative error ~2^-22, well inside the float32 term of spec.tolerance);
// 2^-inf = 0, which the masked scores rely on.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The row statistics of a consumer thread. It holds 2 rows of its warpgroup's 64 (PTX's m64nNk16
// accumulator layout, thread 32 w + 4 g + t: rows 16 w + g and 16 w + g + 8), register 4 j + 2 h + e being
// row h, column 8 j + 2 t + e. The 4 threads 4 g .. 4 g + 3 of a warp hold all of a row: lanes that
// differ in bits 0 and 1, so two xor-shuffles (1, 2) complete a row maximum.
struct RowState {
  float max[2];         // the running maximum of the raw scores q.k (-inf: no visible key yet)
  float sum[2];         // this thread's share of the running sum of 2^(scale_log2 (s - max))
  float rescale[2];     // 2^(scale_log2 (previous max - max)): what O must be multiplied by
  int visible_end[2];   // keys [0, visible_end) are visible to the row (bottom-right causal, S_kv)
};

// One tile's softmax in place: s becomes the weights 2^(scale_log2 s - scale_log2 max) of the new running
// maximum. kMasked: keys at or past the row's visible_end are set to -inf first (the diagonal and the end
// of S_kv). A row that has seen no visible key keeps max = -inf and subtracts 0: its weights are 0, not NaN.
template <bool kMasked>
__device__ __forceinline__ void online_softmax(float (&s)[64], RowState& rows, int key0, float scale_log2) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float row_max = rows.max[h];
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[4 * j + 2 * h + e];
        if (kMasked && key0 + 8 * j + 2 * t + e >= rows.visible_end[h]) x = minus_infinity();
        row_max = fmaxf(row_max, x);
      }
    }
    row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 1));
    row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 2));
    const float subtracted = row_max == minus_infinity() ? 0.0f : row_max * scale_log2;
    rows.rescale[h] = fast_exp2(rows.max[h] * scale_log2 - subtracted);      // 0 while max was -inf
    rows.max[h] = row_max;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[4 * j + 2 * h + e];
        x = fast_exp2(fmaf(x, scale_log2, -subtracted));
        sum += x;
      }
    }
    rows.sum[h] = rows.sum[h] * rows.rescale[h] + sum;
  }
}

// O's rows times their rescale factors (O is D / 2 accumulators: the same layout, D / 8 column blocks).
template <int kCount>
__device__ __forceinline__ void rescale_output(float (&o)[kCount], const RowState& rows) {
#pragma unroll
  for (int j = 0; j < kCount / 4; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) o[4 * j + i] *= rows.rescale[i / 2];
  }
}

// The weights as wgmma's register A operand, rounded to T. The A fragment of the k16 slice kk is 4 registers
// of 2 values: (row g, keys 16 kk + 2 t ..), (g + 8, same), (g, 16 kk + 8 + 2 t ..), (g + 8, same), which are
// the accumulators 8 kk .. 8 kk + 7 in order: register i of the A operand is accumulators 2 i and 2 i + 1.
template <typename T>
__device__ __forceinline__ void pack_weights(uint32_t (&p)[32], const float (&s)[64]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const auto two = TensorCore<T>::two(s[2 * i], s[2 * i + 1]);      // .x (the lower 16 bits) = s[2 i]
    p[i] = *reinterpret_cast<const uint32_t*>(&two);
  }
}

// S = Q K^T for a warpgroup's 64 rows and a 128-key tile, issued and committed (not waited for).
template <typename T, int kHeadDim>
__device__ __forceinline__ void issue_scores(float (&s)[64], const char* q_rows, const char* k_tile) {
  fence_accumulators(s);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    AttentionWgmma<T>::scores(s, k_major_descriptor(q_rows, kk), k_major_descriptor(k_tile, kk), kk > 0);
  }
  wgmma_commit();
}

// O += P V for the tile's 128 keys, issued and committed.
template <typename T, int kHeadDim>
__device__ __forceinline__ void issue_values(float (&o)[kHeadDim / 2], const uint32_t (&p)[32], const char* v_tile) {
  fence_accumulators(o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk) {
    const uint32_t a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    AttentionWgmma<T>::values(o, a, v_descriptor(v_tile, kk));
  }
  wgmma_commit();
}

// O / sum, rounded once, at rows row0 and row0 + 8 of the head's (S_q x D) output. A row with no visible
// key has sum 0 and O 0: it is written as exactly 0 (spec.py).
template <typename T, int kHeadDim>
__device__ __forceinline__ void store_rows(T* out, int q_len, int row0, const float (&o)[kHeadDim / 2],
                                           const RowState& rows) {
  const int t = threadIdx.x % 4;
  float inverse[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float total = rows.sum[h] + __shfl_xor_sync(0xffffffffu, rows.sum[h], 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    inverse[h] = total > 0.0f ? 1.0f / total : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
    store_pair(out, q_len, kHeadDim, row0, 8 * j + 2 * t, o[4 * j] * inverse[0], o[4 * j + 1] * inverse[0]);
    store_pair(out, q_len, kHeadDim, row0 + 8, 8 * j + 2 * t, o[4 * j + 2] * inverse[1], o[4 * j + 3] * inverse[1]);
  }
}

__device__ __forceinline__ void consumer_warp_arrive(uint64_t* barrier) {
  if (threadIdx.x % 32 == 0) mbarrier_arrive(barrier);
}

template <typename T, int kHeadDim>
__device__ __forceinline__ void attention_block(const int64_t* __restrict__ maps, T* __restrict__ out, int heads,
                                                int kv_heads, int q_len, int kv_len, float scale_log2, int causal) {
  constexpr uint32_t kTileBytes = kHeadDim / kPanelColumns * kPanelBytes;      // 128 rows of Q, K or V
  constexpr uint32_t kStageBytes = 2 * kTileBytes;                            // K, then V
  static_assert(kBlockM == kTileRows && kBlockN == kTileRows && kThreads == 384, "2 x 64 rows, 128-key tiles");
  char* shared = aligned_dynamic_shared(kTileBytes + kStages * kStageBytes + kBarrierBytes);
  char* q_tile = shared;
  char* stages = shared + kTileBytes;
  uint64_t* q_full = reinterpret_cast<uint64_t*>(stages + kStages * kStageBytes);
  uint64_t* k_full = q_full + 1;
  uint64_t* v_full = k_full + kStages;
  uint64_t* k_empty = v_full + kStages;
  uint64_t* v_empty = k_empty + kStages;

  const int bh = blockIdx.x;                                        // b x H + h: the plane of Q and O
  const int kv_plane = (bh / heads) * kv_heads + (bh % heads) / (heads / kv_heads);
  const int first_row = (static_cast<int>(gridDim.y) - 1 - static_cast<int>(blockIdx.y)) * kBlockM;
  const int last_row = min(first_row + kBlockM, q_len) - 1;
  // Keys [0, end) are seen by some row of the block; keys [0, whole) by every row (spec.py: query i sees
  // key j when j <= i + S_kv - S_q). A tile inside [0, whole) needs no mask.
  int end = kv_len, whole = kv_len;
  if (causal) {
    end = min(kv_len, max(0, last_row + (kv_len - q_len) + 1));
    whole = min(kv_len, max(0, first_row + (kv_len - q_len) + 1));
  }
  const int tiles = (end + kBlockN - 1) / kBlockN;

  if (threadIdx.x == 0) {
    mbarrier_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&k_full[s], 1);
      mbarrier_init(&v_full[s], 1);
      mbarrier_init(&k_empty[s], kConsumerWarps);
      mbarrier_init(&v_empty[s], kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();                                 // the last block-wide barrier: the roles part here

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    registers_decrease<kProducerRegisters>();
    if (threadIdx.x != 0 || tiles == 0) return;
    const int64_t* q_map = maps;
    const int64_t* k_map = maps + 16;
    const int64_t* v_map = maps + 32;
    tensor_map_acquire(q_map);
    tensor_map_acquire(k_map);
    tensor_map_acquire(v_map);
    mbarrier_arrive_expect_bytes(q_full, kTileBytes);
#pragma unroll
    for (int p = 0; p < kHeadDim / kPanelColumns; ++p) {
      tma_load_box_3d(q_tile + p * kPanelBytes, q_map, q_full, p * kPanelColumns, first_row, bh);
    }
    for (int i = 0; i < tiles; ++i) {
      const int slot = i % kStages, use = i / kStages;
      const int key0 = (tiles - 1 - i) * kBlockN;                  // the last tile first
      char* k_tile = stages + slot * kStageBytes;
      if (use > 0) mbarrier_wait(&k_empty[slot], (use - 1) & 1);   // every S reading the slot's K is done
      mbarrier_arrive_expect_bytes(&k_full[slot], kTileBytes);
#pragma unroll
      for (int p = 0; p < kHeadDim / kPanelColumns; ++p) {
        tma_load_box_3d(k_tile + p * kPanelBytes, k_map, &k_full[slot], p * kPanelColumns, key0, kv_plane);
      }
      if (use > 0) mbarrier_wait(&v_empty[slot], (use - 1) & 1);   // every P V reading the slot's V is done
      mbarrier_arrive_expect_bytes(&v_full[slot], kTileBytes);
#pragma unroll
      for (int p = 0; p < kHeadDim / kPanelColumns; ++p) {
        tma_load_box_3d(k_tile + kTileBytes + p * kPanelBytes, v_map, &v_full[slot], p * kPanelColumns, key0,
                        kv_plane);
      }
    }
    return;
  }

  registers_increase<kConsumerRegisters>();
  const int warp = (threadIdx.x % 128) / 32, g = (threadIdx.x % 32) / 4;
  const int rows_first = 64 * (warpgroup - 1);                      // this consumer's 64 rows of the block
  const int row0 = first_row + rows_first + 16 * warp + g;          // and this thread's: row0, row0 + 8
  RowState rows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    rows.max[h] = minus_infinity();
    rows.sum[h] = 0.0f;
    rows.rescale[h] = 0.0f;
    rows.visible_end[h] = causal ? min(kv_len, row0 + 8 * h + (kv_len - q_len) + 1) : kv_len;
  }
  float o[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) o[i] = 0.0f;
  T* out_head = out + static_cast<int64_t>(bh) * q_len * kHeadDim;
  if (tiles == 0) {                                 // no row of the block sees a key: zeros (spec.py)
    store_rows<T, kHeadDim>(out_head, q_len, row0, o, rows);
    return;
  }
  float s[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) s[i] = 0.0f;
  uint32_t p[32];
  const char* q_rows = q_tile + rows_first * 128;
  mbarrier_wait(q_full, 0);

  // Tile 0 of the walk (the last key tile): its scores, its softmax, its weights.
  mbarrier_wait(&k_full[0], 0);
  issue_scores<T, kHeadDim>(s, q_rows, stages);
  wgmma_wait<0>();
  fence_accumulators(s);
  consumer_warp_arrive(&k_empty[0]);
  int key0 = (tiles - 1) * kBlockN;
  if (key0 + kBlockN > whole) online_softmax<true>(s, rows, key0, scale_log2);
  else online_softmax<false>(s, rows, key0, scale_log2);
  pack_weights<T>(p, s);

  // Step i: issue S_i = Q K_i^T, rescale O to step i-1's maximum, issue O += P_{i-1} V_{i-1}; the softmax of
  // S_i runs while that P V computes. P is rewritten only after the P V reading it is complete.
  for (int i = 1; i < tiles; ++i) {
    const int slot = i % kStages, previous = (i - 1) % kStages;
    mbarrier_wait(&k_full[slot], (i / kStages) & 1);
    issue_scores<T, kHeadDim>(s, q_rows, stages + slot * kStageBytes);
    rescale_output(o, rows);
    mbarrier_wait(&v_full[previous], ((i - 1) / kStages) & 1);
    issue_values<T, kHeadDim>(o, p, stages + previous * kStageBytes + kTileBytes);
    wgmma_wait<1>();                                // S_i is complete (groups complete in order)
    fence_accumulators(s);
    consumer_warp_arrive(&k_empty[slot]);
    key0 = (tiles - 1 - i) * kBlockN;
    if (key0 + kBlockN > whole) online_softmax<true>(s, rows, key0, scale_log2);
    else online_softmax<false>(s, rows, key0, scale_log2);
    wgmma_wait<0>();                                // P_{i-1} V_{i-1} is complete
    fence_accumulators(o);
    fence_accumulators(s);                          // the packing below stays after the wait
    consumer_warp_arrive(&v_empty[previous]);
    pack_weights<T>(p, s);
  }
  rescale_output(o, rows);
  const int last = (tiles - 1) % kStages;
  mbarrier_wait(&v_full[last], ((tiles - 1) / kStages) & 1);
  issue_values<T, kHeadDim>(o, p, stages + last * kStageBytes + kTileBytes);
  wgmma_wait<0>();
  fence_accumulators(o);
  store_rows<T, kHeadDim>(out_head, q_len, row0, o, rows);
}

// One block per (b x H + h, 128 query rows): grid (B x H, ceil(S_q / 128)), kThreads threads, the dynamic
// shared memory of the head size's tiles (the launcher's shared_bytes). maps: Q's, K's and V's tensor maps.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
attention_wgmma_tma(const int64_t* __restrict__ maps, T* __restrict__ out, int heads, int kv_heads, int q_len,
                    int kv_len, int head_dim, float scale_log2, int causal) {
  if (head_dim == 128) {
    attention_block<T, 128>(maps, out, heads, kv_heads, q_len, kv_len, scale_log2, causal);
  } else if (head_dim == 64) {
    attention_block<T, 64>(maps, out, heads, kv_heads, q_len, kv_len, scale_log2, causal);
  } else {
    __trap();                                       // the launcher refuses any other D first
  }
}
