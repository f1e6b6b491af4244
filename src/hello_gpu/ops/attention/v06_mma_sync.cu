/*
FlashAttention-2 on the tensor cores: each warp computes its 16 query rows' scores and output with
mma.sync (16x8x16 bfloat16 / float16 products, float32 sums), fed from shared memory by ldmatrix.
parent: v04_causal_block_skipping
change: 8 warps a block, 128 query rows (16 a warp), 64-key tiles. Q K^T: the warp's Q rows are loaded
  once as A fragments (ldmatrix, 32 registers at D = 128) and each tile's keys come as B fragments by
  ldmatrix (K rows are the B operand's columns, so no transpose); the 16 x 64 scores stay in the
  accumulator registers (2 rows x 16 keys a lane). Online softmax in registers: each row's maximum over
  its 4 lanes by two shuffles, weights 2^(s x scale x log2(e) - max) by ex2.approx, the output rescaled
  in place. The float32 weights are rounded to the input dtype and packed two a register, which is
  exactly the A fragment of P V (the m16n8 C layout of two key tiles = the m16n8k16 A layout), so P
  never touches shared memory; V comes by ldmatrix.trans (V rows are keys: the B operand's k). K and V
  tiles are copied by cp.async into two stages: tile j + 1 lands while tile j is multiplied, one
  barrier a tile. Shared rows padded by 16 bytes (conflict-free ldmatrix, see below). Causal: v04's
  block bounds, plus per warp: a tile none of the warp's rows can see is skipped, one every row sees
  whole skips the mask. Bottom-right causal and fully masked rows (exact zeros) as spec.py defines;
  GQA by indexing the KV head (b, h / (H / H_kv)), never a copy; grid (query blocks, B x H), each
  head's query blocks together (its K and V stay in L2), the longest (causal) first
hypothesis: v04 spends 1 FMA instruction per multiply-add on float32 SIMT lanes (~67 TFLOP/s peak on
  the H200, ~16 predicted for v04); one mma.sync does 2048. Per warp and 64-key tile at D = 128 the
  warp issues 128 mma.sync and 64 ldmatrix.x4 (32 KiB of K and V, each fragment used by 16 rows
  only), and 32 ex2 a lane. Shared memory (128 B/clock an SM) then bounds the loop before the
  tensor cores do (mma.sync reaches ~2/3 of Hopper's ~990 dense TFLOP/s): 8 warps x 32 KiB = 2048
  clocks an SM per tile for 4.2 MFLOP, ~535 TFLOP/s at 1.98 GHz. With the exponentials, the
  softmax's scalar work between the two products, one barrier a tile and one block (8 warps of 219
  registers on sm_90) an SM, expect ~half of that. FlashAttention-2 (the flash backend) gives each
  warp 32 rows, half these shared bytes per FLOP: this rung should not reach it; a later rung can
  (more rows a warp, or wgmma)
prediction: ~250 TFLOP/s at 4x32x32x4096x4096x128 bfloat16 (~15x v04, ~0.75x the flash backend's 343,
  short of the issue's 1.0x target); causal ~230 (~0.75x its 315); 4x32x8 (GQA) the same
outcome: not measured yet
deterministic: yes, each output row is one warp's, its keys summed in a fixed order
vendor: nvidia
arch: sm_80
entry: attention_mma_sync<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record attention.bfloat16
// hello-gpu: record attention.float16

#include "mma_sync.cuh"

// Read by v06_mma_sync.py (constants()): the launcher's block, grid and shared memory come from these lines.
constexpr int kWarps = 8, kThreads = 256;
constexpr int kBlockRows = 128;                  // query rows a block: 16 a warp, one m16 tile
constexpr int kTileKeys = 64;                    // keys a K/V tile: 8 n8 score tiles, 4 k16 steps of P V
constexpr int kStages = 2;                       // K/V tiles in shared memory: one multiplied, one landing
// Shared rows are padded by 16 bytes. An ldmatrix reads in 4 phases of 8 lanes; each lane's address is a
// row's 16 bytes, and a phase is conflict-free when its 8 rows start in 8 different 16-byte groups of the
// 32 four-byte banks. Rows of 256 bytes (D = 128) or 128 (D = 64) all start in group 0: an 8-way conflict,
// 32 shared-memory passes for an ldmatrix.x4 instead of 4. Padded to 272 (17 groups) or 144 bytes (9),
// row r starts in group r mod 8. Padding rather than an XOR swizzle: every address stays
// row x stride + column, and the cost, 6% (D = 128) or 12% (D = 64) more shared memory, fits.
constexpr int kPad = 8;

static_assert(kBlockRows == 16 * kWarps && kThreads == 32 * kWarps, "one m16 row tile a warp");

// Dynamic shared memory, in elements: Q (kBlockRows rows), then K and V for each stage (kTileKeys rows
// each), rows D + kPad long. D = 128: (128 + 2 x 2 x 64) x 136 x 2 bytes = 104,448; D = 64: 55,296.
template <int D>
__host__ __device__ constexpr int shared_elements() {
  return (kBlockRows + 2 * kStages * kTileKeys) * (D + kPad);
}

// Rows row0 .. row0 + kRows - 1 of a (rows x D) row-major matrix into shared rows of D + kPad elements,
// 16 bytes a cp.async. Rows past `rows` are zero-filled: their scores are masked and their V rows meet
// weight 0, but stale shared memory could hold a NaN, and 0 x NaN is NaN.
template <typename T, int D, int kRows>
__device__ __forceinline__ void copy_rows_async(T* shared, const T* matrix, int row0, int rows) {
  constexpr int kPiecesPerRow = D / 8, kPieces = kRows * kPiecesPerRow;
  static_assert(kPieces % kThreads == 0, "whole passes of the block");
#pragma unroll
  for (int p = threadIdx.x; p < kPieces; p += kThreads) {
    const int r = p / kPiecesPerRow, c = (p % kPiecesPerRow) * 8;
    const bool inside = row0 + r < rows;
    const T* from = inside ? matrix + static_cast<int64_t>(row0 + r) * D + c : matrix;
    cp_async_16(shared_address(shared + r * (D + kPad) + c), from, inside);
  }
}

// What a warp carries across the key tiles for its 16 rows. Lane 4g + t holds rows g and g + 8 (index 0
// and 1 below), the C fragment layout: acc[j] covers output columns 8j + 2t, 8j + 2t + 1 of both rows.
template <int D>
struct WarpRows {
  uint32_t q[D / 16][4];      // the rows of Q as A fragments, one per k16 step of D
  float acc[D / 8][4];        // the unnormalised output, D / 8 m16n8 tiles
  float max[2];               // the running maximum of each row's raw scores (Q K^T, before the scale)
  float sum[2];               // this lane's share of each row's sum of weights (its 16 keys a tile)
};

// One 64-key tile (keys start ..) for the calling warp's rows (first row `row0`): scores, the online-softmax
// update (t02_fused_online_softmax.py derives it) and P V. kMasked: hide keys past kv_len and, when causal,
// those after the diagonal (key > row + offset); without it every key of the tile is visible to every row.
template <bool kMasked, typename T, int D>
__device__ __forceinline__ void attend_tile(WarpRows<D>& rows, const T* k_tile, const T* v_tile, int row0,
                                            int start, int kv_len, int offset, bool causal, float scale_log2) {
  constexpr int kStride = D + kPad, kScoreTiles = kTileKeys / 8;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;

  // S = Q K^T: per k16 step of D, one ldmatrix.x4 gives two n8 tiles' B fragments. Lanes 0-7 address keys
  // 8j .. 8j + 7 at columns d .. d + 7 (b[0] of tile j), lanes 8-15 the same keys at d + 8 (b[1]), lanes
  // 16-31 keys 8j + 8 .. 8j + 15 (tile j + 1).
  float s[kScoreTiles][4];
#pragma unroll
  for (int j = 0; j < kScoreTiles; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
  for (int step = 0; step < D / 16; ++step) {
#pragma unroll
    for (int j = 0; j < kScoreTiles; j += 2) {
      uint32_t b[4];
      ldmatrix_x4(b, shared_address(k_tile + (8 * j + (lane / 16) * 8 + lane % 8) * kStride + 16 * step +
                                    ((lane / 8) % 2) * 8));
      mma<T>(s[j], rows.q[step], b[0], b[1]);
      mma<T>(s[j + 1], rows.q[step], b[2], b[3]);
    }
  }

  // s[j][e] is row g + 8 (e / 2), key start + 8j + 2t + e % 2.
  if (kMasked) {
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = start + 8 * j + 2 * t + e % 2, row = row0 + g + 8 * (e / 2);
        if (key >= kv_len || (causal && key > row + offset)) s[j][e] = -INFINITY;
      }
    }
  }

  // Each row's maximum: over this lane's 16 keys, then over the row's 4 lanes (4t .. 4t + 3 differ in bits 0, 1).
  float scaled_max[2], correction[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float m = rows.max[r];
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j) m = fmaxf(m, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    // A row that has seen no key yet has maximum -inf; subtracting 0 keeps its weights 2^-inf = 0, not NaN.
    scaled_max[r] = m == -INFINITY ? 0.0f : m * scale_log2;
    correction[r] = exp2_approx(rows.max[r] * scale_log2 - scaled_max[r]);     // 2^-inf = 0 on the first tile
    rows.max[r] = m;
  }

  // Weights 2^(s scale log2(e) - max) (one FFMA and one ex2 each), the sums, and the output rescaled.
#pragma unroll
  for (int j = 0; j < kScoreTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[j][e] = exp2_approx(fmaf(s[j][e], scale_log2, -scaled_max[e / 2]));
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float share = 0.0f;
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j) share += s[j][2 * r] + s[j][2 * r + 1];
    rows.sum[r] = rows.sum[r] * correction[r] + share;
  }
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    rows.acc[j][0] *= correction[0];
    rows.acc[j][1] *= correction[0];
    rows.acc[j][2] *= correction[1];
    rows.acc[j][3] *= correction[1];
  }

  // O += P V, per 16 keys: score tiles 2kk and 2kk + 1, packed, are the A fragment (a[0]: row g, keys 2t, 2t+1
  // = tile 2kk's c[0], c[1]; a[1]: row g + 8 = its c[2], c[3]; a[2], a[3]: the same from tile 2kk + 1). One
  // ldmatrix.x4.trans gives two n8 column tiles' B fragments: lanes 0-15 address keys 16kk .. 16kk + 15 at
  // columns 8j .. 8j + 7 (b[0], b[1] of tile j), lanes 16-31 the same keys at 8j + 8 (tile j + 1).
#pragma unroll
  for (int kk = 0; kk < kTileKeys / 16; ++kk) {
    const uint32_t a[4] = {pack<T>(s[2 * kk][0], s[2 * kk][1]),
                           pack<T>(s[2 * kk][2], s[2 * kk][3]),
                           pack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                           pack<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int j = 0; j < D / 8; j += 2) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, shared_address(v_tile + (16 * kk + lane % 16) * kStride + 8 * j + (lane / 16) * 8));
      mma<T>(rows.acc[j], a, b[0], b[1]);
      mma<T>(rows.acc[j + 1], a, b[2], b[3]);
    }
  }
}

// The warp's rows, divided by their sums (a row that saw no key: sum 0, output exactly 0), rounded once and
// stored two columns (4 bytes) a store; rows past q_len are not written.
template <typename T, int D>
__device__ __forceinline__ void write_rows(WarpRows<D>& rows, T* out_head, int row0, int q_len) {
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float total = rows.sum[r];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
    const int row = row0 + g + 8 * r;
    if (row >= q_len) continue;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      *reinterpret_cast<uint32_t*>(out_head + static_cast<int64_t>(row) * D + 8 * j + 2 * t) =
          pack<T>(rows.acc[j][2 * r] * inverse, rows.acc[j][2 * r + 1] * inverse);
    }
  }
}

template <typename T, int D>
__device__ __forceinline__ void attend_block(const T* __restrict__ q, const T* __restrict__ k,
                                             const T* __restrict__ v, T* __restrict__ out, int heads, int kv_heads,
                                             int q_len, int kv_len, float scale_log2, bool causal) {
  constexpr int kStride = D + kPad, kStageElements = kTileKeys * kStride;
  require_dynamic_shared(2u * shared_elements<D>());
  extern __shared__ uint4 shared_memory[];             // 16-byte aligned: every cp.async and ldmatrix row is
  T* q_tile = reinterpret_cast<T*>(shared_memory);
  T* k_tiles = q_tile + kBlockRows * kStride;
  T* v_tiles = k_tiles + kStages * kStageElements;

  const int bh = static_cast<int>(blockIdx.y);
  const int kv_head = (bh / heads) * kv_heads + (bh % heads) / (heads / kv_heads);   // GQA: b x H_kv + h / group
  const T* q_head = q + static_cast<int64_t>(bh) * q_len * D;
  const T* k_head = k + static_cast<int64_t>(kv_head) * kv_len * D;
  const T* v_head = v + static_cast<int64_t>(kv_head) * kv_len * D;
  const int first_row = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kBlockRows;    // the longest blocks first
  const int offset = kv_len - q_len;                   // spec.py: query i sees key j when j <= i + offset

  // Keys [0, end) are seen by some row of the block: the tiles the block loads (v04's bound).
  const int last_row = min(first_row + kBlockRows, q_len) - 1;
  const int end = causal ? min(kv_len, max(0, last_row + offset + 1)) : kv_len;
  const int tiles = (end + kTileKeys - 1) / kTileKeys;
  // The same bounds for the warp's 16 rows: keys [0, warp_end) seen by some row, [0, warp_whole) by every row.
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int row0 = first_row + 16 * warp;
  const int warp_end = causal ? min(kv_len, max(0, min(row0 + 15, q_len - 1) + offset + 1)) : kv_len;
  const int warp_whole = causal ? min(kv_len, max(0, row0 + offset + 1)) : kv_len;

  // Q and the first K/V tile in one group; Q's rows as A fragments once it has landed (lanes 0-15 address
  // rows 0-15 at columns 16 step (matrices 0, 1: a[0], a[1]), lanes 16-31 the same rows at 16 step + 8).
  copy_rows_async<T, D, kBlockRows>(q_tile, q_head, first_row, q_len);
  if (tiles > 0) {
    copy_rows_async<T, D, kTileKeys>(k_tiles, k_head, 0, kv_len);
    copy_rows_async<T, D, kTileKeys>(v_tiles, v_head, 0, kv_len);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  WarpRows<D> rows;
#pragma unroll
  for (int step = 0; step < D / 16; ++step) {
    ldmatrix_x4(rows.q[step], shared_address(q_tile + (16 * warp + lane % 16) * kStride + 16 * step + (lane / 16) * 8));
  }
#pragma unroll
  for (int j = 0; j < D / 8; ++j) rows.acc[j][0] = rows.acc[j][1] = rows.acc[j][2] = rows.acc[j][3] = 0.0f;
  rows.max[0] = rows.max[1] = -INFINITY;
  rows.sum[0] = rows.sum[1] = 0.0f;

  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile % kStages, start = tile * kTileKeys;
    // The other stage was last read in the previous iteration, which every warp has left (the barrier below).
    if (tile + 1 < tiles) {
      const int next = (tile + 1) % kStages;
      copy_rows_async<T, D, kTileKeys>(k_tiles + next * kStageElements, k_head, start + kTileKeys, kv_len);
      copy_rows_async<T, D, kTileKeys>(v_tiles + next * kStageElements, v_head, start + kTileKeys, kv_len);
    }
    cp_async_commit();
    const T* k_tile = k_tiles + stage * kStageElements;
    const T* v_tile = v_tiles + stage * kStageElements;
    if (start < warp_end) {                          // else no row of this warp sees any key of the tile
      if (start + kTileKeys <= warp_whole) {
        attend_tile<false>(rows, k_tile, v_tile, row0, start, kv_len, offset, causal, scale_log2);
      } else {
        attend_tile<true>(rows, k_tile, v_tile, row0, start, kv_len, offset, causal, scale_log2);
      }
    }
    cp_async_wait_all();                             // tile + 1 has landed (this thread's copies) ...
    __syncthreads();                                 // ... everyone's, and every warp is done with this stage
  }
  write_rows(rows, out + static_cast<int64_t>(bh) * q_len * D, row0, q_len);
}

// One block of kThreads per (kBlockRows query rows, b x H + h): grid (ceil(S_q / kBlockRows), B x H), dynamic
// shared memory 2 x shared_elements<D>() bytes (v06_mma_sync.py). head_dim is 64 or 128 (spec.dims refuses
// any other); both are compiled into this one kernel, so ptxas gives it the registers D = 128 needs.
template <typename T>
__global__ void __launch_bounds__(kThreads)
attention_mma_sync(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ out,
                   int heads, int kv_heads, int q_len, int kv_len, int head_dim, float scale_log2, int causal) {
  if (head_dim == 128) {
    attend_block<T, 128>(q, k, v, out, heads, kv_heads, q_len, kv_len, scale_log2, causal != 0);
  } else {
    attend_block<T, 64>(q, k, v, out, heads, kv_heads, q_len, kv_len, scale_log2, causal != 0);
  }
}
