/*
FlashAttention-2 on the tensor cores: each warp computes its 32 query rows' scores and output with
mma.sync (16x8x16 bfloat16 / float16 products, float32 sums), fed from shared memory by ldmatrix.
parent: v04_causal_block_skipping
change: 4 warps a block, 128 query rows, 32 a warp: two m16 row tiles, and every K and V fragment an
  ldmatrix brings from shared memory is multiplied into both. 64-key K/V tiles, scored 32 keys at a time
  (the register budget below). Q K^T: Q's A fragments by ldmatrix (read again each 32 keys at D = 128,
  where registers cannot hold them; held in registers at D = 64), K's B fragments by ldmatrix (K rows are
  the B operand's columns, so no transpose); the 32 x 32 scores stay in the accumulator registers. Online
  softmax in registers: each row's maximum over its 4 lanes by two shuffles, weights
  2^(s x scale x log2(e) - max) by ex2.approx, the output rescaled in place. The float32 weights are
  rounded to the input dtype and packed two a register, which is exactly the A fragment of P V (the m16n8
  C layout of two key tiles = the m16n8k16 A layout), so P never touches shared memory; V comes by
  ldmatrix.trans. K and V tiles are copied by cp.async into two stages: tile j + 1 lands while tile j is
  multiplied, one barrier a tile. Shared rows padded by 16 bytes (conflict-free ldmatrix, see below). D is
  a template argument: D = 64 and D = 128 are separate kernels, each with its own registers. Causal: v04's
  block bounds, plus per warp and 32 keys: keys none of the warp's rows can see are skipped, keys every row
  sees whole skip the mask. Bottom-right causal and fully masked rows (exact zeros) as spec.py defines; GQA
  by indexing the KV head (b, h / (H / H_kv)), never a copy; grid (query blocks, B x H), each head's query
  blocks together (its K and V stay in L2), the longest (causal) first
hypothesis: v04 spends 1 FMA instruction per multiply-add on float32 SIMT lanes (~67 TFLOP/s peak on the
  H200, ~16 predicted for v04); one mma.sync does 2048. Shared memory (128 B/clock an SM) is what a warp's
  row count decides. Per warp and 64-key tile at D = 128 the warp issues 256 mma.sync (1.05 MFLOP) and 96
  ldmatrix.x4: K 16 KiB, V 16 KiB, Q 16 KiB (twice, once per 32 keys), 48 KiB. With 16 rows a warp the
  same 1.05 MFLOP took two warps and 64 KiB (K and V read by each): 0.75x the shared bytes per FLOP. Two
  blocks an SM (241 / 247 registers on sm_80 / sm_90 x 128 threads; 2 x 104,448 bytes of shared memory
  in the H200's 228 KiB), 8 warps: 8 x 48 KiB = 3,072 clocks an SM per tile for 8.4 MFLOP, ~714 TFLOP/s
  at 1.98 GHz (16 rows a warp: ~535). That is above what mma.sync reaches on Hopper (~2/3 of the ~990
  dense TFLOP/s, ~660), so the tensor cores bound the loop now, not shared memory. Between the two
  products a warp computes 2048 exponentials a tile (MUFU: 16 a clock an SM, ~1,000 clocks an SM a tile
  against ~3,300 of mma) and rescales its 128 output registers twice; the other warp of its SM
  sub-partition multiplies meanwhile, but not always: expect ~half the mma.sync bound. The flash backend
  (FlashAttention-2) uses this same split (4 warps x 32 rows, Q read from shared memory each tile, 64-key
  tiles), so this rung should land near it
prediction: ~350 TFLOP/s at 4x32x32x4096x4096x128 bfloat16 (~22x v04; ~1.0x the flash backend's 343, the
  issue's target, met or missed by a few percent); causal ~320 (~1.0x its 315); 4x32x8 (GQA) the same;
  D = 64 (8x16x16x2048x2048x64) ~0.9x the flash backend at that shape: the softmax costs twice as much
  per FLOP at D = 64, and this rung still scores 32 keys at a time there
outcome: 34.2x v04 [34.1, 34.2] at 4x32x32x4096x4096x128 bfloat16 (predicted ~22x), 0.465x SDPA [0.459, 0.468], 324
  TFLOP/s (predicted ~350: missed, -7%), 3,391 us, 0.92x the flash peer (ratio of medians; predicted ~1.0x); causal
  307 TFLOP/s (predicted ~320: met, -4%), 0.93x the flash peer (records attention.bfloat16, run of 89ae604)
deterministic: yes, each output row is one warp's, its keys summed in a fixed order
vendor: nvidia
arch: sm_80
entry: attention_mma_sync_d128<{T}>
dtypes: bfloat16 float16
*/
// hello-gpu: record attention.bfloat16
// hello-gpu: record attention.float16

#include "mma_sync.cuh"

// Read by v06_mma_sync.py (constants()): the launcher's block, grid and shared memory come from these lines.
constexpr int kWarps = 4, kThreads = 128;
constexpr int kRowTiles = 2;                     // m16 row tiles a warp: its 32 query rows share each K/V fragment
constexpr int kBlockRows = 128;                  // query rows a block: 32 a warp
constexpr int kTileKeys = 64;                    // keys a K/V tile: copied as one cp.async group, one barrier
constexpr int kScoreKeys = 32;                   // keys scored at once: 4 n8 score tiles, 2 k16 steps of P V
constexpr int kStages = 2;                       // K/V tiles in shared memory: one multiplied, one landing
// Shared rows are padded by 16 bytes. An ldmatrix reads in 4 phases of 8 lanes; each lane's address is a
// row's 16 bytes, and a phase is conflict-free when its 8 rows start in 8 different 16-byte groups of the
// 32 four-byte banks. Rows of 256 bytes (D = 128) or 128 (D = 64) all start in group 0: an 8-way conflict,
// 32 shared-memory passes for an ldmatrix.x4 instead of 4. Padded to 272 (17 groups) or 144 bytes (9),
// row r starts in group r mod 8. Padding rather than an XOR swizzle: every address stays
// row x stride + column, and the cost, 6% (D = 128) or 12% (D = 64) more shared memory, fits.
constexpr int kPad = 8;

static_assert(kBlockRows == 16 * kRowTiles * kWarps && kThreads == 32 * kWarps, "kRowTiles m16 row tiles a warp");

// The register budget (255 a thread at most; an m16n8 float32 tile is 4 registers a lane), D = 128: the
// output O, 32 rows x 128 columns / 32 lanes = 128; the scores S of kScoreKeys keys, 32 x 32 / 32 = 32; each
// row's maximum and sum, 8; addresses, bounds and loop state, ~20: ~190, and ptxas fills the rest with
// ldmatrix results it loads ahead of their mma: ptxas -v says 241 on sm_80, 247 on sm_90, no spills.
// Scoring 64 keys at once (S = 64) did not fit: ptxas kept up to 13 ldmatrix.x4 (52 registers) in flight at
// the start of a tile and spilled 48-136 bytes at 255 registers, with every order of the code tried (the
// exponentials inside P V, the k16 loop rolled, a leaner mask and copy). Holding all of Q's A fragments
// (2 row tiles x 8 k16 steps x 4 = 64) cannot fit either, so at D = 128 Q is read from shared memory by
// ldmatrix again for each kScoreKeys keys (2 ldmatrix.x4 a k16 step, 8 registers). At D = 64: O 64, S 32,
// all of Q 2 x 4 x 4 = 32: Q is loaded once and held (kHoldQ), and each key is read only as K and as V
// (ptxas -v: 174 registers on sm_80, 177 on sm_90).
template <int D>
constexpr bool kHoldQ = D == 64;

// Dynamic shared memory, in elements: Q (kBlockRows rows), then K and V for each stage (kTileKeys rows
// each), rows D + kPad long. D = 128: (128 + 2 x 2 x 64) x 136 x 2 bytes = 104,448; D = 64: 55,296.
template <int D>
__host__ __device__ constexpr int shared_elements() {
  return (kBlockRows + 2 * kStages * kTileKeys) * (D + kPad);
}

// Rows row0 .. row0 + kRows - 1 of a (rows x D) row-major matrix into shared rows of D + kPad elements,
// 16 bytes a cp.async: thread x copies piece x % (D / 8) of row x / (D / 8), then the same piece kRowsPerPass
// rows further each pass (a fixed number of passes, so the loop unrolls to one pointer plus constants). Rows
// past `rows` are zero-filled: their scores are masked and their V rows meet weight 0, but stale shared
// memory could hold a NaN, and 0 x NaN is NaN.
template <typename T, int D, int kRows>
__device__ __forceinline__ void copy_rows_async(T* shared, const T* matrix, int row0, int rows) {
  constexpr int kPiecesPerRow = D / 8, kRowsPerPass = kThreads / kPiecesPerRow;
  static_assert(kThreads % kPiecesPerRow == 0 && kRows % kRowsPerPass == 0, "whole passes of the block");
  const int r = static_cast<int>(threadIdx.x) / kPiecesPerRow, c = (static_cast<int>(threadIdx.x) % kPiecesPerRow) * 8;
  const T* from = matrix + static_cast<int64_t>(row0 + r) * D + c;
#pragma unroll
  for (int pass = 0; pass < kRows / kRowsPerPass; ++pass) {
    const int row = r + pass * kRowsPerPass;
    const bool inside = row0 + row < rows;
    cp_async_16(shared_address(shared + row * (D + kPad) + c), inside ? from + pass * kRowsPerPass * D : matrix,
                inside);
  }
}

// What a warp carries across the key tiles for its 32 rows: row tile m is rows 16m .. 16m + 15 of the warp.
// Lane 4g + t holds rows g and g + 8 of each row tile (index r = 0, 1 below), the C fragment layout:
// acc[m][j] covers output columns 8j + 2t, 8j + 2t + 1 of both.
template <int D>
struct WarpRows {
  uint32_t q[D / 16][kRowTiles][4];   // Q's A fragments per k16 step of D, when kHoldQ<D> (else never used)
  float acc[kRowTiles][D / 8][4];     // the unnormalised output, D / 8 m16n8 tiles a row tile
  float max[kRowTiles][2];            // the running maximum of each row's raw scores (Q K^T, before the scale)
  float sum[kRowTiles][2];            // this lane's share of each row's sum of weights (its keys 2t, 2t + 1 of 8)
};

// Q's A fragments for k16 step `step` of the warp's row tiles (shared row tile kRowTiles x warp + m): lanes
// 0-15 address the tile's rows 0-15 at columns 16 step .. + 7 (matrices 0, 1: a[0], a[1]), lanes 16-31 the
// same rows at 16 step + 8 (a[2], a[3]).
template <typename T, int D>
__device__ __forceinline__ void load_q(uint32_t (&a)[kRowTiles][4], const T* q_tile, int warp, int step) {
  constexpr int kStride = D + kPad;
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m) {
    ldmatrix_x4(a[m], shared_address(q_tile + (16 * (kRowTiles * warp + m) + lane % 16) * kStride + 16 * step +
                                     (lane / 16) * 8));
  }
}

// kScoreKeys keys (start .. start + 31, shared rows from k_rows, v_rows) for the calling warp's rows (first row
// `row0`): scores, the online-softmax update (t02_fused_online_softmax.py derives it) and P V. Each K and V
// fragment an ldmatrix brings is multiplied into both row tiles. kMasked: hide keys past kv_len and, when
// causal, those after the diagonal (key > row + offset); without it every key is visible to every row.
template <bool kMasked, typename T, int D>
__device__ __forceinline__ void attend_keys(WarpRows<D>& rows, const T* q_tile, const T* k_rows, const T* v_rows,
                                            int warp, int row0, int start, int kv_len, int offset, bool causal,
                                            float scale_log2) {
  constexpr int kStride = D + kPad, kScoreTiles = kScoreKeys / 8;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;

  // S = Q K^T: per k16 step of D, Q's two A fragments (held, or read now), and per ldmatrix.x4 of K two n8
  // tiles' B fragments: lanes 0-7 address keys 8j .. 8j + 7 at columns d .. d + 7 (b[0] of tile j), lanes
  // 8-15 the same keys at d + 8 (b[1]), lanes 16-31 keys 8j + 8 .. 8j + 15 (tile j + 1). 4 mma a K load.
  float s[kRowTiles][kScoreTiles][4];
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m) {
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j) s[m][j][0] = s[m][j][1] = s[m][j][2] = s[m][j][3] = 0.0f;
  }
#pragma unroll
  for (int step = 0; step < D / 16; ++step) {
    uint32_t loaded[kRowTiles][4];
    if constexpr (!kHoldQ<D>) load_q<T, D>(loaded, q_tile, warp, step);
    const uint32_t(&a)[kRowTiles][4] = kHoldQ<D> ? rows.q[step] : loaded;
#pragma unroll
    for (int j = 0; j < kScoreTiles; j += 2) {
      uint32_t b[4];
      ldmatrix_x4(b, shared_address(k_rows + (8 * j + (lane / 16) * 8 + lane % 8) * kStride + 16 * step +
                                    ((lane / 8) % 2) * 8));
#pragma unroll
      for (int m = 0; m < kRowTiles; ++m) {
        mma<T>(s[m][j], a[m], b[0], b[1]);
        mma<T>(s[m][j + 1], a[m], b[2], b[3]);
      }
    }
  }

  // s[m][j][2r + h] is the warp's row 16m + g + 8r, key start + 8j + 2t + h. Per row, the last key it sees
  // (kv_len - 1, or row + offset when causal) counted from this lane's first key start + 2t: then each score
  // is one compare with a constant, and no per-score index stays in a register.
  if (kMasked) {
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 16 * m + g + 8 * r;
        const int last = (causal ? min(kv_len - 1, row + offset) : kv_len - 1) - start - 2 * t;
#pragma unroll
        for (int j = 0; j < kScoreTiles; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if (8 * j + h > last) s[m][j][2 * r + h] = -INFINITY;
          }
        }
      }
    }
  }

  // Each row's maximum: over this lane's 8 keys, then over the row's 4 lanes (4g .. 4g + 3 differ in bits 0, 1).
  float scaled_max[kRowTiles][2], correction[kRowTiles][2];
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float x = rows.max[m][r];
#pragma unroll
      for (int j = 0; j < kScoreTiles; ++j) x = fmaxf(x, fmaxf(s[m][j][2 * r], s[m][j][2 * r + 1]));
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
      // A row that has seen no key yet has maximum -inf; subtracting 0 keeps its weights 2^-inf = 0, not NaN.
      scaled_max[m][r] = x == -INFINITY ? 0.0f : x * scale_log2;
      correction[m][r] = exp2_approx(rows.max[m][r] * scale_log2 - scaled_max[m][r]);   // 2^-inf = 0 at first
      rows.max[m][r] = x;
    }
  }

  // Weights 2^(s scale log2(e) - max) (one FFMA and one ex2 each), the sums, and the output rescaled.
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m) {
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[m][j][e] = exp2_approx(fmaf(s[m][j][e], scale_log2, -scaled_max[m][e / 2]));
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float share = 0.0f;
#pragma unroll
      for (int j = 0; j < kScoreTiles; ++j) share += s[m][j][2 * r] + s[m][j][2 * r + 1];
      rows.sum[m][r] = rows.sum[m][r] * correction[m][r] + share;
    }
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      rows.acc[m][j][0] *= correction[m][0];
      rows.acc[m][j][1] *= correction[m][0];
      rows.acc[m][j][2] *= correction[m][1];
      rows.acc[m][j][3] *= correction[m][1];
    }
  }

  // O += P V, per 16 keys: score tiles 2kk and 2kk + 1 of a row tile, packed, are its A fragment (p[0]: row g,
  // keys 2t, 2t+1 = tile 2kk's c[0], c[1]; p[1]: row g + 8 = its c[2], c[3]; p[2], p[3]: the same from tile
  // 2kk + 1). One ldmatrix.x4.trans gives two n8 column tiles' B fragments: lanes 0-15 address keys
  // 16kk .. 16kk + 15 at columns 8j .. 8j + 7 (b[0], b[1] of tile j), lanes 16-31 the same keys at 8j + 8
  // (tile j + 1). 4 mma a V load.
#pragma unroll
  for (int kk = 0; kk < kScoreKeys / 16; ++kk) {
    uint32_t p[kRowTiles][4];
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m) {
      p[m][0] = pack<T>(s[m][2 * kk][0], s[m][2 * kk][1]);
      p[m][1] = pack<T>(s[m][2 * kk][2], s[m][2 * kk][3]);
      p[m][2] = pack<T>(s[m][2 * kk + 1][0], s[m][2 * kk + 1][1]);
      p[m][3] = pack<T>(s[m][2 * kk + 1][2], s[m][2 * kk + 1][3]);
    }
#pragma unroll
    for (int j = 0; j < D / 8; j += 2) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, shared_address(v_rows + (16 * kk + lane % 16) * kStride + 8 * j + (lane / 16) * 8));
#pragma unroll
      for (int m = 0; m < kRowTiles; ++m) {
        mma<T>(rows.acc[m][j], p[m], b[0], b[1]);
        mma<T>(rows.acc[m][j + 1], p[m], b[2], b[3]);
      }
    }
  }
}

// The warp's rows, divided by their sums (a row that saw no key: sum 0, output exactly 0), rounded once and
// stored two columns (4 bytes) a store; rows past q_len are not written.
template <typename T, int D>
__device__ __forceinline__ void write_rows(WarpRows<D>& rows, T* out_head, int row0, int q_len) {
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float total = rows.sum[m][r];
      total += __shfl_xor_sync(0xffffffffu, total, 1);
      total += __shfl_xor_sync(0xffffffffu, total, 2);
      const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
      const int row = row0 + 16 * m + g + 8 * r;
      if (row >= q_len) continue;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        *reinterpret_cast<uint32_t*>(out_head + static_cast<int64_t>(row) * D + 8 * j + 2 * t) =
            pack<T>(rows.acc[m][j][2 * r] * inverse, rows.acc[m][j][2 * r + 1] * inverse);
      }
    }
  }
}

template <typename T, int D>
__device__ __forceinline__ void attend_block(const T* __restrict__ q, const T* __restrict__ k,
                                             const T* __restrict__ v, T* __restrict__ out, int heads, int kv_heads,
                                             int q_len, int kv_len, float scale_log2, bool causal) {
  constexpr int kStride = D + kPad, kStageElements = kTileKeys * kStride;
  require_dynamic_shared(2u * shared_elements<D>());
  extern __shared__ uint4 shared_memory[];             // 16-byte aligned, as cp.async and ldmatrix need
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
  // The same bounds for the warp's 32 rows: keys [0, warp_end) seen by some row, [0, warp_whole) by every row.
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int row0 = first_row + 16 * kRowTiles * warp;
  const int warp_end = causal ? min(kv_len, max(0, min(row0 + 16 * kRowTiles - 1, q_len - 1) + offset + 1)) : kv_len;
  const int warp_whole = causal ? min(kv_len, max(0, row0 + offset + 1)) : kv_len;

  // Q and the first K/V tile in one group; Q stays in shared memory for the whole block (and, kHoldQ<D>,
  // its A fragments also in registers from here on).
  copy_rows_async<T, D, kBlockRows>(q_tile, q_head, first_row, q_len);
  if (tiles > 0) {
    copy_rows_async<T, D, kTileKeys>(k_tiles, k_head, 0, kv_len);
    copy_rows_async<T, D, kTileKeys>(v_tiles, v_head, 0, kv_len);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  WarpRows<D> rows;
  if constexpr (kHoldQ<D>) {
#pragma unroll
    for (int step = 0; step < D / 16; ++step) load_q<T, D>(rows.q[step], q_tile, warp, step);
  }
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m) {
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      rows.acc[m][j][0] = rows.acc[m][j][1] = rows.acc[m][j][2] = rows.acc[m][j][3] = 0.0f;
    }
    rows.max[m][0] = rows.max[m][1] = -INFINITY;
    rows.sum[m][0] = rows.sum[m][1] = 0.0f;
  }

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
    // The tile's keys kScoreKeys at a time, per warp: parts no row of the warp sees are skipped, parts every
    // row sees whole skip the mask. Not unrolled, so each variant of attend_keys is in the code once (D = 128,
    // sm_90: 2,400 SASS instructions, 3,512 unrolled; both without spills).
#pragma unroll 1
    for (int part = 0; part < kTileKeys / kScoreKeys; ++part) {
      const int first = start + part * kScoreKeys;
      if (first >= warp_end) break;                  // no row of this warp sees these keys or any after them
      const T* k_rows = k_tile + part * kScoreKeys * kStride;
      const T* v_rows = v_tile + part * kScoreKeys * kStride;
      if (first + kScoreKeys <= warp_whole) {
        attend_keys<false>(rows, q_tile, k_rows, v_rows, warp, row0, first, kv_len, offset, causal, scale_log2);
      } else {
        attend_keys<true>(rows, q_tile, k_rows, v_rows, warp, row0, first, kv_len, offset, causal, scale_log2);
      }
    }
    cp_async_wait_all();                             // tile + 1 has landed (this thread's copies) ...
    __syncthreads();                                 // ... everyone's, and every warp is done with this stage
  }
  write_rows(rows, out + static_cast<int64_t>(bh) * q_len * D, row0, q_len);
}

// One block of kThreads per (kBlockRows query rows, b x H + h): grid (ceil(S_q / kBlockRows), B x H), dynamic
// shared memory 2 x shared_elements<D>() bytes (v06_mma_sync.py). D is a template argument, not a runtime
// switch: ptxas sizes a kernel's registers for its largest path, so D = 64 in a kernel that also holds D = 128
// would pay D = 128's. The compile gate compiles a rung's entry for each of its dtypes and every
// non-template kernel: D = 128 is the entry (one instantiation per dtype) and D = 64 one plain kernel per
// dtype, which the launcher finds by the entry's dtype (launch.sibling). All four are compiled and checked.
template <typename T>
__global__ void __launch_bounds__(kThreads)
attention_mma_sync_d128(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                        T* __restrict__ out, int heads, int kv_heads, int q_len, int kv_len, float scale_log2,
                        int causal) {
  attend_block<T, 128>(q, k, v, out, heads, kv_heads, q_len, kv_len, scale_log2, causal != 0);
}
__global__ void __launch_bounds__(kThreads)
attention_mma_sync_d64_bfloat16(const hip_bfloat16* __restrict__ q, const hip_bfloat16* __restrict__ k,
                                const hip_bfloat16* __restrict__ v, hip_bfloat16* __restrict__ out, int heads,
                                int kv_heads, int q_len, int kv_len, float scale_log2, int causal) {
  attend_block<hip_bfloat16, 64>(q, k, v, out, heads, kv_heads, q_len, kv_len, scale_log2, causal != 0);
}
__global__ void __launch_bounds__(kThreads)
attention_mma_sync_d64_half(const __half* __restrict__ q, const __half* __restrict__ k,
                            const __half* __restrict__ v, __half* __restrict__ out, int heads, int kv_heads,
                            int q_len, int kv_len, float scale_log2, int causal) {
  attend_block<__half, 64>(q, k, v, out, heads, kv_heads, q_len, kv_len, scale_log2, causal != 0);
}
