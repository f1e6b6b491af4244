"""attention's tensor-core rung v06_mma_sync (CUDA dialect, sm_80): its layouts and control flow checked on
the CPU against a model of the hardware, its machine code, its launcher; on the GPU, its answers.

The model follows the PTX ISA's definitions: the fragments of mma.m16n8k16 (which lane holds which
element of A, B and C) and what ldmatrix / ldmatrix.trans deliver to each lane from the 8 row addresses
each 8-lane group gives. Driven by the kernel's address formulas and its block / warp / tile / part bounds
(4 warps of two m16 row tiles, 64-key tiles scored 32 keys at a time, Q held at D = 64 and read again at
D = 128), it computes attention in float64 from a model of the block's shared memory (padding and stale stages NaN,
so a read of either shows), and must equal spec.reference. The formulas are written here once more on
purpose (a model that imported them could not disagree with them); test_the_model_uses_the_kernels_formulas
ties each to the kernel's text. Tile sizes are read from the kernel file, as the launcher reads them.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.compiler import ptxas_section
from hello_gpu.runtime.device import gpu_vendor
from hello_gpu.runtime.resources import parse_ptxas_report

HAS_GPU = gpu_vendor() is not None
ATTENTION = load_op("attention")
spec = ATTENTION.spec
RUNG = ATTENTION.rung("v06_mma_sync")
SOURCE = RUNG.path.read_text(encoding="utf-8")
launcher = load_module(RUNG.companion, "test_attention_mma_launcher")
TILES = launcher.TILES
LANES = np.arange(32)
G, T = LANES // 4, LANES % 4                   # lane = 4 g + t: groupID and threadID_in_group in the PTX ISA

# ------------------------------------------------------------------------------------ the hardware, per PTX


def ldmatrix_x4(shared: np.ndarray, addresses, trans: bool = False) -> np.ndarray:
    """Registers of ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16, shape (32 lanes, 4 registers, 2 halves):
    lanes 8i .. 8i+7 give the (element) addresses of matrix i's 8 rows of 8 elements; register i of lane
    4g + t holds row g, elements 2t (low half) and 2t+1 of matrix i; with .trans, column g, rows 2t, 2t+1."""
    rows = np.asarray(addresses).reshape(4, 8)
    matrices = shared[rows[:, :, None] + np.arange(8)]                 # (matrix, row, column)
    if trans:
        matrices = matrices.transpose(0, 2, 1)
    return np.stack([matrices[:, G, 2 * T], matrices[:, G, 2 * T + 1]], axis=-1).transpose(1, 0, 2)


def c_matrix(c: np.ndarray) -> np.ndarray:
    """The 16x8 matrix of an m16n8 float32 C fragment (32, 4): c[0], c[1] = C[g][2t, 2t+1], c[2], c[3] = C[g+8][...]."""
    m = np.full((16, 8), np.nan)
    m[G, 2 * T], m[G, 2 * T + 1], m[G + 8, 2 * T], m[G + 8, 2 * T + 1] = c.T
    return m


def c_fragment(m: np.ndarray) -> np.ndarray:
    return np.stack([m[G, 2 * T], m[G, 2 * T + 1], m[G + 8, 2 * T], m[G + 8, 2 * T + 1]], axis=1)


def mma_m16n8k16(c: np.ndarray, a: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """D = A B + C of mma.sync.aligned.m16n8k16.row.col.f32, each operand as the lanes hold it: a (32, 4, 2)
    = A[g][2t+h], A[g+8][2t+h], A[g][2t+8+h], A[g+8][2t+8+h]; b0, b1 (32, 2) = B[2t+h][g], B[2t+8+h][g].
    An element no lane supplies stays NaN and poisons the product."""
    a_matrix, b_matrix = np.full((16, 16), np.nan), np.full((16, 8), np.nan)
    for h in (0, 1):
        a_matrix[G, 2 * T + h], a_matrix[G + 8, 2 * T + h] = a[:, 0, h], a[:, 1, h]
        a_matrix[G, 2 * T + 8 + h], a_matrix[G + 8, 2 * T + 8 + h] = a[:, 2, h], a[:, 3, h]
        b_matrix[2 * T + h, G], b_matrix[2 * T + 8 + h, G] = b0[:, h], b1[:, h]
    return c_fragment(a_matrix @ b_matrix + c_matrix(c))


def shuffle_xor(values: np.ndarray, mask: int) -> np.ndarray:
    """__shfl_xor_sync: each lane gets lane (lane ^ mask)'s value."""
    return values[LANES ^ mask]


# ------------------------------------------------------------------------------------ the kernel, modelled

# The kernel's ldmatrix addresses in elements, per lane (v06_mma_sync.cu): Q's from the Q tile's first
# element (warp, row tile m of the warp, k16 step), K's and V's from the first shared row of the kScoreKeys
# keys being scored.
ADDRESSES = {
    "q": lambda warp, m, step, stride: (16 * (TILES["RowTiles"] * warp + m) + LANES % 16) * stride + 16 * step
    + (LANES // 16) * 8,
    "k": lambda j, step, stride: (8 * j + (LANES // 16) * 8 + LANES % 8) * stride + 16 * step + ((LANES // 8) % 2) * 8,
    "v": lambda kk, j, stride: (16 * kk + LANES % 16) * stride + 8 * j + (LANES // 16) * 8,
}


def hold_q(d: int) -> bool:
    """kHoldQ<D>: Q's A fragments loaded once and kept in registers (D = 64), or read again for each
    kScoreKeys keys (D = 128)."""
    return d == 64


# The same, in the kernel's words (whitespace aside).
KERNEL_TEXT = (
    "(16 * (kRowTiles * warp + m) + lane % 16) * kStride + 16 * step + (lane / 16) * 8",
    "(8 * j + (lane / 16) * 8 + lane % 8) * kStride + 16 * step + ((lane / 8) % 2) * 8",
    "(16 * kk + lane % 16) * kStride + 8 * j + (lane / 16) * 8",
    "constexpr bool kHoldQ = D == 64;",
    "if constexpr (!kHoldQ<D>) load_q<T, D>(loaded, q_tile, warp, step);",
    "const uint32_t(&a)[kRowTiles][4] = kHoldQ<D> ? rows.q[step] : loaded;",
    "for (int step = 0; step < D / 16; ++step) load_q<T, D>(rows.q[step], q_tile, warp, step);",
    "mma<T>(s[m][j], a[m], b[0], b[1]); mma<T>(s[m][j + 1], a[m], b[2], b[3]);",
    "const int row = row0 + 16 * m + g + 8 * r;",
    "const int last = (causal ? min(kv_len - 1, row + offset) : kv_len - 1) - start - 2 * t;",
    "if (8 * j + h > last) s[m][j][2 * r + h] = -INFINITY;",
    "const int r = static_cast<int>(threadIdx.x) / kPiecesPerRow, c = (static_cast<int>(threadIdx.x) % "
    "kPiecesPerRow) * 8;",
    "constexpr int kPiecesPerRow = D / 8, kRowsPerPass = kThreads / kPiecesPerRow;",
    "const int row = r + pass * kRowsPerPass;",
    "const bool inside = row0 + row < rows;",
    "cp_async_16(shared_address(shared + row * (D + kPad) + c), inside ? from + pass * kRowsPerPass * D : matrix, "
    "inside);",
    "const int kv_head = (bh / heads) * kv_heads + (bh % heads) / (heads / kv_heads);",
    "const int first_row = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kBlockRows;",
    "const int end = causal ? min(kv_len, max(0, last_row + offset + 1)) : kv_len;",
    "const int row0 = first_row + 16 * kRowTiles * warp;",
    "const int warp_end = causal ? min(kv_len, max(0, min(row0 + 16 * kRowTiles - 1, q_len - 1) + offset + 1)) "
    ": kv_len;",
    "const int warp_whole = causal ? min(kv_len, max(0, row0 + offset + 1)) : kv_len;",
    "return (kBlockRows + 2 * kStages * kTileKeys) * (D + kPad);",
    "T* k_tiles = q_tile + kBlockRows * kStride;",
    "T* v_tiles = k_tiles + kStages * kStageElements;",
    "copy_rows_async<T, D, kTileKeys>(k_tiles + next * kStageElements, k_head, start + kTileKeys, kv_len);",
    "copy_rows_async<T, D, kTileKeys>(v_tiles + next * kStageElements, v_head, start + kTileKeys, kv_len);",
    "const T* k_tile = k_tiles + stage * kStageElements;",
    "const T* v_tile = v_tiles + stage * kStageElements;",
    "for (int part = 0; part < kTileKeys / kScoreKeys; ++part) { const int first = start + part * kScoreKeys; "
    "if (first >= warp_end) break;",
    "const T* k_rows = k_tile + part * kScoreKeys * kStride;",
    "const T* v_rows = v_tile + part * kScoreKeys * kStride;",
    "if (first + kScoreKeys <= warp_whole) {",
    "scaled_max[m][r] = x == -INFINITY ? 0.0f : x * scale_log2;",
    "correction[m][r] = exp2_approx(rows.max[m][r] * scale_log2 - scaled_max[m][r]);",
    "s[m][j][e] = exp2_approx(fmaf(s[m][j][e], scale_log2, -scaled_max[m][e / 2]));",
    "p[m][0] = pack<T>(s[m][2 * kk][0], s[m][2 * kk][1]); p[m][1] = pack<T>(s[m][2 * kk][2], s[m][2 * kk][3]); "
    "p[m][2] = pack<T>(s[m][2 * kk + 1][0], s[m][2 * kk + 1][1]); p[m][3] = pack<T>(s[m][2 * kk + 1][2], "
    "s[m][2 * kk + 1][3]);",
    "mma<T>(rows.acc[m][j], p[m], b[0], b[1]); mma<T>(rows.acc[m][j + 1], p[m], b[2], b[3]);",
    "const float inverse = total > 0.0f ? 1.0f / total : 0.0f;",
    "const int row = row0 + 16 * m + g + 8 * r; if (row >= q_len) continue;",
    "*reinterpret_cast<uint32_t*>(out_head + static_cast<int64_t>(row) * D + 8 * j + 2 * t) = "
    "pack<T>(rows.acc[m][j][2 * r] * inverse, rows.acc[m][j][2 * r + 1] * inverse);",
)


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def copy_rows(shared: np.ndarray, base: int, matrix: np.ndarray, row0: int, rows: int, count: int, stride: int):
    """copy_rows_async: thread x copies piece x % (D / 8) (16 bytes, 8 elements) of row x / (D / 8), then the same
    piece kRowsPerPass rows further each pass; rows past ``rows`` are zero-filled."""
    d = matrix.shape[1]
    pieces_per_row = d // 8
    rows_per_pass = TILES["Threads"] // pieces_per_row
    for thread in range(TILES["Threads"]):
        r, c = thread // pieces_per_row, (thread % pieces_per_row) * 8
        for copy_pass in range(count // rows_per_pass):
            row = r + copy_pass * rows_per_pass
            inside = row0 + row < rows
            shared[base + row * stride + c:base + row * stride + c + 8] = matrix[row0 + row, c:c + 8] if inside else 0.0


def load_q(shared, warp: int, step: int, stride: int, addresses) -> list[np.ndarray]:
    """load_q: the A fragments of the warp's row tiles for one k16 step."""
    return [ldmatrix_x4(shared, addresses["q"](warp, m, step, stride)) for m in range(TILES["RowTiles"])]


def attend_keys(state: dict, shared, k_rows, v_rows, start, kv_len, offset, causal, scale_log2, masked, stride, d,
                addresses, swap=None):
    """attend_keys for one warp: lane arrays throughout, float64, with exp2 exact (the kernel's ex2.approx and its
    rounding of P to 16 bits are what the GPU tier's tolerance covers). ``swap`` names an operand the model
    misuses on purpose (test_the_model_sees_a_swapped_operand)."""
    score_tiles, row_tiles = TILES["ScoreKeys"] // 8, TILES["RowTiles"]
    s = np.zeros((row_tiles, score_tiles, 32, 4))
    for step in range(d // 16):
        a = state["q"][step] if hold_q(d) else load_q(shared, state["warp"], step, stride, addresses)
        if swap == "q row tiles":
            a = a[::-1]
        for j in range(0, score_tiles, 2):
            b = ldmatrix_x4(shared, k_rows + addresses["k"](j, step, stride))
            first, second = ((2, 3), (0, 1)) if swap == "k tiles" else ((0, 1), (2, 3))
            for m in range(row_tiles):
                s[m, j] = mma_m16n8k16(s[m, j], a[m], b[:, first[0]], b[:, first[1]])
                s[m, j + 1] = mma_m16n8k16(s[m, j + 1], a[m], b[:, second[0]], b[:, second[1]])
    if masked:
        for m in range(row_tiles):
            for r in range(2):
                row = state["row0"] + 16 * m + G + 8 * r
                last = (np.minimum(kv_len - 1, row + offset) if causal else kv_len - 1) - start - 2 * T
                for j in range(score_tiles):
                    for h in (0, 1):
                        s[m, j, 8 * j + h > last, 2 * r + h] = -np.inf
    scaled_max, correction = np.zeros((row_tiles, 32, 2)), np.zeros((row_tiles, 32, 2))
    for m in range(row_tiles):
        for r in range(2):
            x = np.maximum(state["max"][m, :, r], s[m, :, :, 2 * r:2 * r + 2].max(axis=(0, 2)))
            x = np.maximum(x, shuffle_xor(x, 1))
            x = np.maximum(x, shuffle_xor(x, 2))
            scaled_max[m, :, r] = np.where(x == -np.inf, 0.0, x * scale_log2)
            correction[m, :, r] = np.exp2(state["max"][m, :, r] * scale_log2 - scaled_max[m, :, r])
            state["max"][m, :, r] = x
    s = np.exp2(s * scale_log2 - scaled_max[:, None, :, [0, 0, 1, 1]])
    shares = np.stack([s[:, :, :, 0:2].sum(axis=(1, 3)), s[:, :, :, 2:4].sum(axis=(1, 3))], axis=2)  # (m, lane, r)
    state["sum"] = state["sum"] * correction + shares
    state["acc"] *= correction[:, None, :, [0, 0, 1, 1]]
    for kk in range(TILES["ScoreKeys"] // 16):
        # pack(x, y): x in the low half. p[0] = tile 2kk's c[0], c[1]; p[1] its c[2], c[3]; p[2], p[3] tile 2kk+1's.
        p = [np.stack([s[m, 2 * kk][:, 0:2], s[m, 2 * kk][:, 2:4], s[m, 2 * kk + 1][:, 0:2], s[m, 2 * kk + 1][:, 2:4]],
                      axis=1) for m in range(row_tiles)]
        if swap == "p row tiles":
            p = p[::-1]
        for j in range(0, d // 8, 2):
            b = ldmatrix_x4(shared, v_rows + addresses["v"](kk, j, stride), trans=True)
            for m in range(row_tiles):
                state["acc"][m, j] = mma_m16n8k16(state["acc"][m, j], p[m], b[:, 0], b[:, 1])
                state["acc"][m, j + 1] = mma_m16n8k16(state["acc"][m, j + 1], p[m], b[:, 2], b[:, 3])


def kernel_model(q, k, v, causal: bool, addresses=ADDRESSES, swap=None) -> np.ndarray:
    """v06_mma_sync's grid, blocks, warps, tiles and parts on float64 arrays q (B, H, S_q, D), k, v
    (B, H_kv, S_kv, D)."""
    batch, heads, q_len, d = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    block_rows, tile_keys, stages, warps = TILES["BlockRows"], TILES["TileKeys"], TILES["Stages"], TILES["Warps"]
    score_keys, row_tiles = TILES["ScoreKeys"], TILES["RowTiles"]
    stride = d + TILES["Pad"]
    scale_log2 = 1.4426950408889634 / math.sqrt(d)
    grid_x = -(-q_len // block_rows)
    out = np.full(q.shape, np.nan)
    q_heads, out_heads = q.reshape(-1, q_len, d), out.reshape(-1, q_len, d)
    k_heads, v_heads = k.reshape(-1, kv_len, d), v.reshape(-1, kv_len, d)
    k_base = block_rows * stride
    v_base = k_base + stages * tile_keys * stride
    for bh in range(batch * heads):
        kv_head = (bh // heads) * kv_heads + (bh % heads) // (heads // kv_heads)
        for block_x in range(grid_x):
            shared = np.full(v_base + stages * tile_keys * stride, np.nan)    # padding and untouched stages: NaN
            first_row = (grid_x - 1 - block_x) * block_rows
            offset = kv_len - q_len
            last_row = min(first_row + block_rows, q_len) - 1
            end = min(kv_len, max(0, last_row + offset + 1)) if causal else kv_len
            tiles = -(-end // tile_keys)
            copy_rows(shared, 0, q_heads[bh], first_row, q_len, block_rows, stride)
            if tiles > 0:
                copy_rows(shared, k_base, k_heads[kv_head], 0, kv_len, tile_keys, stride)
                copy_rows(shared, v_base, v_heads[kv_head], 0, kv_len, tile_keys, stride)
            states = []
            for warp in range(warps):
                row0 = first_row + 16 * row_tiles * warp
                states.append({
                    "warp": warp, "row0": row0,
                    "q": [load_q(shared, warp, step, stride, addresses) for step in range(d // 16)] if hold_q(d)
                    else None,
                    "acc": np.zeros((row_tiles, d // 8, 32, 4)), "max": np.full((row_tiles, 32, 2), -np.inf),
                    "sum": np.zeros((row_tiles, 32, 2)),
                    "end": min(kv_len, max(0, min(row0 + 16 * row_tiles - 1, q_len - 1) + offset + 1)) if causal
                    else kv_len,
                    "whole": min(kv_len, max(0, row0 + offset + 1)) if causal else kv_len})
            for tile in range(tiles):
                stage, start = tile % stages, tile * tile_keys
                if tile + 1 < tiles:
                    following = (tile + 1) % stages * tile_keys * stride
                    for base, heads_of in ((k_base, k_heads), (v_base, v_heads)):
                        copy_rows(shared, base + following, heads_of[kv_head], start + tile_keys, kv_len, tile_keys,
                                  stride)
                k_tile, v_tile = k_base + stage * tile_keys * stride, v_base + stage * tile_keys * stride
                for state in states:
                    for part in range(tile_keys // score_keys):
                        first = start + part * score_keys
                        if first >= state["end"]:
                            break
                        attend_keys(state, shared, k_tile + part * score_keys * stride,
                                    v_tile + part * score_keys * stride, first, kv_len, offset, causal, scale_log2,
                                    first + score_keys > state["whole"], stride, d, addresses, swap)
            for state in states:                                                  # write_rows
                for m in range(row_tiles):
                    for r in range(2):
                        total = state["sum"][m, :, r] + shuffle_xor(state["sum"][m, :, r], 1)
                        total = total + shuffle_xor(total, 2)
                        inverse = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)
                        rows = state["row0"] + 16 * m + G + 8 * r
                        live = rows < q_len
                        for j in range(d // 8):
                            for h in (0, 1):
                                out_heads[bh, rows[live], (8 * j + 2 * T + h)[live]] = \
                                    (state["acc"][m, j][:, 2 * r + h] * inverse)[live]
    return out


# Every branch of the kernel, D = 64 (Q held) and D = 128 (Q read again for each part): one key and one query;
# keys cut mid-part; fully masked rows (S_q > S_kv, causal), a whole block of them (200 x 70: rows 0..127 see
# nothing, the block loads no tile); both query blocks of a head (the reversed order); warps skipping parts
# and tiles, masked and unmasked parts (127 x 127; 160 x 160 at D = 128); the causal offset S_kv - S_q > 0
# over 5 tiles, and S_kv - S_q = 1, where key 32 is seen by the last row of warp 0 alone (64 x 65); a last
# tile of 8 keys whose second part no warp visits (5 x 200); batch 2 with GQA groups of 2 and 4.
MODEL_SHAPES = ((1, 2, 1, 1, 1, 128), (1, 2, 1, 33, 31, 64, 1), (1, 2, 2, 127, 127, 64, 1),
                (1, 1, 1, 160, 160, 128, 1), (1, 2, 1, 200, 70, 64, 1), (1, 2, 1, 100, 300, 64, 1),
                (1, 2, 1, 64, 65, 128, 1), (2, 4, 2, 5, 200, 128), (2, 4, 1, 3, 65, 64, 1))


def _model_inputs(shape, seed: int):
    q, k, v, causal = spec.make_inputs(shape, "float32", seed=seed)
    return q.double(), k.double(), v.double(), causal


@pytest.mark.parametrize("shape", MODEL_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_kernels_layouts_and_bounds_compute_attention(shape):
    """The model of v06 (fragments, ldmatrix addresses, masks, skipped parts, online softmax, stores) equals
    the float64 reference to rounding; the rows that see no key are exactly 0; every output is written."""
    q, k, v, causal = _model_inputs(shape, seed=sum(shape))
    got = kernel_model(q.numpy(), k.numpy(), v.numpy(), causal)
    expected = spec.reference(q, k, v, causal).numpy()
    assert not np.isnan(got).any(), "an output element no lane writes (or a read of padding / a stale stage)"
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    empty = spec.first_visible_rows(spec.dims(shape))
    assert (got[:, :, :empty] == 0).all()


SWAPPED_ADDRESSES = {
    # Which lane bit picks the row half and which the column half (lanes 8-15 against 16-31), exchanged.
    "q": lambda warp, m, step, stride: (16 * (TILES["RowTiles"] * warp + m) + LANES % 8 + (LANES // 16) * 8) * stride
    + 16 * step + ((LANES // 8) % 2) * 8,
    "k": lambda j, step, stride: (8 * j + ((LANES // 8) % 2) * 8 + LANES % 8) * stride + 16 * step + (LANES // 16) * 8,
    "v": lambda kk, j, stride: (16 * kk + LANES % 8 + (LANES // 16) * 8) * stride + 8 * j + ((LANES // 8) % 2) * 8,
}


@pytest.mark.parametrize("d", spec.HEAD_DIMS)
@pytest.mark.parametrize("wrong", ["q address", "k address", "v address", "q row tiles", "k tiles", "p row tiles"])
def test_the_model_sees_a_swapped_operand(wrong, d):
    """The model is not vacuous: one operand's lane addressing swapped (above), Q's two row tiles exchanged in
    Q K^T, K's two n8 tiles of an ldmatrix.x4 exchanged, or P's row tiles exchanged in P V, each gives a
    different answer, at both D (Q held or read again)."""
    q, k, v, causal = _model_inputs((1, 1, 1, 40, 70, d), seed=3)
    operand = wrong.split()[0]
    if wrong.endswith("address"):
        got = kernel_model(q.numpy(), k.numpy(), v.numpy(), causal, {**ADDRESSES, operand: SWAPPED_ADDRESSES[operand]})
    else:
        got = kernel_model(q.numpy(), k.numpy(), v.numpy(), causal, swap=wrong)
    assert not np.allclose(got, spec.reference(q, k, v, causal).numpy(), rtol=1e-3, atol=1e-3)


def test_the_model_uses_the_kernels_formulas():
    flat = _flat(SOURCE)
    for text in KERNEL_TEXT:
        assert _flat(text) in flat, f"v06_mma_sync.cu no longer says {text!r}: update the model with it"


def test_fragments_of_one_mma_are_the_ptx_layout():
    """One m16n8k16 of integer matrices through ldmatrix (A: plain, B from a k-major tile: .trans) equals A B
    exactly, and the C fragment's round trip is the identity."""
    rng = np.random.default_rng(1)
    a, b = rng.integers(-4, 5, (16, 16)).astype(float), rng.integers(-4, 5, (16, 8)).astype(float)
    shared = np.concatenate([a.ravel(), b.ravel()])
    a_regs = ldmatrix_x4(shared, (LANES % 16) * 16 + (LANES // 16) * 8)
    # B (16 x 8) row-major: matrices 0, 1 are k rows 0-7 and 8-15 at columns 0-7 (lanes 16-31 repeat them).
    b_regs = ldmatrix_x4(shared, 256 + (LANES % 16) * 8, trans=True)
    d = mma_m16n8k16(np.zeros((32, 4)), a_regs, b_regs[:, 0], b_regs[:, 1])
    np.testing.assert_array_equal(c_matrix(d), a @ b)
    np.testing.assert_array_equal(c_matrix(c_fragment(a @ b)), a @ b)


# ------------------------------------------------------------------------------------ shared memory banks

BANKS, BANK_BYTES = 32, 4


def phase_ways(byte_addresses, width: int) -> int:
    """The most distinct 4-byte words one bank serves for one phase of an access (1: conflict-free)."""
    words: dict[int, set[int]] = {}
    for address in byte_addresses:
        for word in range(address // BANK_BYTES, (address + width) // BANK_BYTES):
            words.setdefault(word % BANKS, set()).add(word)
    return max(len(found) for found in words.values())


def ldmatrix_phases(d: int, pad: int):
    """Every ldmatrix phase (8 lanes, 16 bytes each) the kernel issues for Q, K and V, as byte addresses
    from the start of dynamic shared memory, stages and parts included."""
    stride = d + pad
    k_base = TILES["BlockRows"] * stride
    v_base = k_base + TILES["Stages"] * TILES["TileKeys"] * stride
    stage = TILES["TileKeys"] * stride
    calls = [ADDRESSES["q"](warp, m, step, stride) for warp in range(TILES["Warps"])
             for m in range(TILES["RowTiles"]) for step in range(d // 16)]
    for s in range(TILES["Stages"]):
        for part in range(TILES["TileKeys"] // TILES["ScoreKeys"]):
            rows = s * stage + part * TILES["ScoreKeys"] * stride
            calls += [k_base + rows + ADDRESSES["k"](j, step, stride)
                      for j in range(0, TILES["ScoreKeys"] // 8, 2) for step in range(d // 16)]
            calls += [v_base + rows + ADDRESSES["v"](kk, j, stride)
                      for kk in range(TILES["ScoreKeys"] // 16) for j in range(0, d // 8, 2)]
    return [2 * call[8 * phase:8 * phase + 8] for call in calls for phase in range(4)]


@pytest.mark.parametrize("d", spec.HEAD_DIMS)
def test_padded_rows_make_every_ldmatrix_conflict_free(d):
    """Each of the kernel's ldmatrix phases reads 8 rows of 16 bytes in 8 different 16-byte bank groups:
    1 way; every row address 16-byte aligned, as ldmatrix requires. Unpadded rows (256 or 128 bytes) put
    all 8 rows of a phase in one group: 8 ways."""
    phases = ldmatrix_phases(d, TILES["Pad"])
    assert all(int(address) % 16 == 0 for phase in phases for address in phase)
    assert max(phase_ways(phase, 16) for phase in phases) == 1
    assert max(phase_ways(phase, 16) for phase in ldmatrix_phases(d, 0)) == 8


@pytest.mark.parametrize("d", spec.HEAD_DIMS)
def test_cp_async_pieces_cover_each_tile_once_without_conflicts(d):
    """copy_rows_async: the block's passes (thread x: piece x % (D / 8) of row x / (D / 8) + pass x kRowsPerPass)
    write each of a tile's elements once, never the padding, and each 8-thread phase of a pass's 16-byte
    stores is conflict-free."""
    stride, threads = d + TILES["Pad"], TILES["Threads"]
    pieces_per_row = d // 8
    rows_per_pass = threads // pieces_per_row
    for rows in (TILES["BlockRows"], TILES["TileKeys"]):
        assert threads % pieces_per_row == 0 and rows % rows_per_pass == 0
        written = np.zeros(rows * stride, dtype=int)
        for copy_pass in range(rows // rows_per_pass):
            addresses = []
            for thread in range(threads):
                row, c = thread // pieces_per_row + copy_pass * rows_per_pass, (thread % pieces_per_row) * 8
                written[row * stride + c:row * stride + c + 8] += 1
                addresses.append(2 * (row * stride + c))
            assert max(phase_ways(addresses[i:i + 8], 16) for i in range(0, threads, 8)) == 1
        layout = written.reshape(rows, stride)
        assert (layout[:, :d] == 1).all() and (layout[:, d:] == 0).all()


def test_shared_memory_fits_two_blocks_an_sm_on_the_h200():
    """104,448 bytes at D = 128 (55,296 at 64): under the 163 KiB a block may opt into on sm_80 and the
    227 KiB of sm_90, and two blocks (the header's occupancy) fit in the H200's 228 KiB an SM with 1 KiB
    reserved a block; the launcher's count is the kernel's (shared_elements<D>() x 2 bytes)."""
    assert launcher.shared_bytes(128) == (128 + 2 * 2 * 64) * 136 * 2 == 104_448
    assert launcher.shared_bytes(64) == 55_296
    assert launcher.shared_bytes(128) <= 166_912 and launcher.shared_bytes(128) <= 232_448
    assert 2 * (launcher.shared_bytes(128) + 1024) <= 228 * 1024
    assert TILES == {"Warps": 4, "Threads": 128, "RowTiles": 2, "BlockRows": 128, "TileKeys": 64, "ScoreKeys": 32,
                     "Stages": 2, "Pad": 8}


def test_shared_bytes_per_flop_are_the_headers(monkeypatch):
    """The header's count, from the model's own calls: one 64-key tile at D = 128 (4 warps, one block) is, per
    warp, 256 mma.sync (1.05 MFLOP) and 96 ldmatrix.x4 (48 KiB: Q twice, K, V), 0.75x the shared bytes per
    FLOP of 16 rows a warp (the same FLOPs took two warps, each reading the tile's 32 KiB of K and V)."""
    calls = {"ldmatrix": 0, "mma": 0}

    def counted(name, function):
        def call(*arguments, **keywords):
            calls[name] += 1
            return function(*arguments, **keywords)
        return call

    monkeypatch.setattr(sys.modules[__name__], "ldmatrix_x4", counted("ldmatrix", ldmatrix_x4))
    monkeypatch.setattr(sys.modules[__name__], "mma_m16n8k16", counted("mma", mma_m16n8k16))
    q, k, v, causal = _model_inputs((1, 1, 1, 128, 64, 128), seed=5)
    kernel_model(q.numpy(), k.numpy(), v.numpy(), causal)
    warps = TILES["Warps"]
    assert (calls["ldmatrix"] / warps, calls["mma"] / warps) == (96, 256)
    bytes_read, flops = calls["ldmatrix"] / warps * 512, calls["mma"] / warps * 2 * 16 * 8 * 16
    assert bytes_read == 48 * 1024 and flops == 4 * 32 * 64 * 128
    sixteen_rows = 2 * (2 * 64 * 128 * 2)
    assert bytes_read / sixteen_rows == 0.75


# ------------------------------------------------------------------------------------ machine code, no GPU


def test_the_rung_declares_nvidia_sm_80_and_16_bit_inputs():
    assert RUNG.route == "cuda" and RUNG.metadata.target == ("nvidia", "sm_80")
    assert RUNG.metadata.parent_id == "v04_causal_block_skipping"
    assert RUNG.metadata.dtypes == ("bfloat16", "float16") and not RUNG.supports("float32")


def _sass_or_skip(kernel) -> str:
    try:
        return kernel.asm("sass")
    except FileNotFoundError as error:            # no cuobjdump / nvdisasm here: say so, never pass unchecked
        pytest.skip(f"SASS not checked: {error}")


def _ptxas_report(log: str, lowered_name: str) -> dict[str, int]:
    section = ptxas_section(log, lowered_name)
    assert f"Compiling entry function '{lowered_name}'" in section and "Used " in section, \
        f"ptxas reported nothing for {lowered_name}: spills unchecked"
    return parse_ptxas_report(section)


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_nvrtc_compiles_both_head_sizes_to_hmma_fed_by_ldsm_without_spills(arch, dtype):
    """The binaries hello-gpu builds (NVRTC), the D = 128 entry and its D = 64 sibling as the launcher picks
    them: no spills, D = 64 in fewer registers than D = 128 (its own kernel, not D = 128's budget), and each
    one's SASS multiplies on the tensor cores (HMMA 16816 with float32 sums), loads fragments by LDSM (plain
    for Q and K, .MT88 transposed for V), copies tiles by LDGSTS (cp.async) and exponentiates on MUFU.EX2."""
    entry = RUNG.kernel(arch=arch, dtype=dtype)
    registers = {}
    for d in spec.HEAD_DIMS:
        kernel = launcher.kernel_for(entry, d)
        assert kernel.arch == arch
        binary = kernel.compile()
        report = _ptxas_report(binary.log, binary.lowered_name)
        assert report["spill_stores"] == 0 and report["spill_loads"] == 0, (d, report)
        registers[d] = report["registers"]
        sass = _sass_or_skip(kernel)
        hmma = "HMMA.16816.F32.BF16" if dtype == "bfloat16" else "HMMA.16816.F32 "
        for instruction in (hmma, "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS", "MUFU.EX2"):
            assert instruction in sass, f"{instruction.strip()} missing from the D = {d} {arch} {dtype} SASS"
    assert registers[64] < registers[128] <= 255, registers


def test_the_launcher_picks_the_kernel_of_each_head_size():
    """kernel_for: D = 128 is the entry itself, D = 64 the sibling of the entry's dtype; both take the
    arguments run() passes, in that order (compiled for sm_90 here: no GPU needed)."""
    names = ["q", "k", "v", "out", "heads", "kv_heads", "q_len", "kv_len", "scale_log2", "causal"]
    for dtype, suffix in (("bfloat16", "bfloat16"), ("float16", "half")):
        entry = RUNG.kernel(arch="sm_90", dtype=dtype)
        assert launcher.kernel_for(entry, 128) is entry
        sibling = launcher.kernel_for(entry, 64)
        assert sibling.entry == f"attention_mma_sync_d64_{suffix}" and sibling.arch == entry.arch
        for kernel in (entry, sibling):
            assert [p.name for p in kernel.signature.parameters] == names
            assert [p.name for p in kernel.signature.parameters if p.is_output] == ["out"]


NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, /usr/local/cuda/bin): the nvcc build is not checked")
@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_nvcc_builds_the_same_source_to_hmma_and_ldsm_without_spills(tmp_path, arch):
    """The rung is plain CUDA: nvcc -cubin -Xptxas -v with the standard headers builds its four kernels (the
    D = 128 template for both dtypes, the two D = 64 kernels) without spills, and cuobjdump -sass shows
    HMMA and LDSM (plain and transposed) in each."""
    from hello_gpu.runtime.kernel import _tool
    cuobjdump = _tool("cuobjdump")
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (CUDA toolkit, triton's copy, PATH): nvcc's SASS not checked")
    (tmp_path / "standard.h").write_text("#include <cstdint>\n#include <cmath>\n#include <cuda_fp16.h>\n"
                                         "#include <cuda_bf16.h>\n")
    arguments = "const T*, const T*, const T*, T*, int, int, int, int, float, int"
    (tmp_path / "all.cu").write_text(f'#include "{RUNG.path.name}"\n' + "".join(
        f"template __global__ void attention_mma_sync_d128<{t}>({arguments.replace('T', t)});\n"
        for t in ("__half", "__nv_bfloat16")))
    cubin = tmp_path / "all.cubin"
    built = subprocess.run([NVCC, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-include", str(tmp_path / "standard.h"),
                            f"-I{RUNG.path.parent}", "-o", str(cubin), str(tmp_path / "all.cu")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    log = built.stdout + built.stderr
    entries = re.findall(r"Compiling entry function '(\w+)'", log)
    assert len(entries) == 4 and sum("d64" in name for name in entries) == 2, entries
    for name in entries:
        report = _ptxas_report(log, name)
        assert report["spill_stores"] == 0 and report["spill_loads"] == 0, (name, report)
    sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, timeout=60).stdout
    functions = re.split(r"\n\s*Function : ", sass)[1:]
    assert len(functions) == 4, sass[:2000]
    for function in functions:
        for instruction in ("HMMA.16816.F32", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS"):
            assert instruction in function, f"{instruction} missing from {function.splitlines()[0]}"


# ------------------------------------------------------------------------------------ the launcher


def _cpu_inputs(shape=(1, 4, 2, 5, 7, 64), dtype="bfloat16"):
    return spec.make_inputs(shape, dtype, seed=0)


def test_the_launcher_refuses_what_the_kernel_cannot_read():
    """Each refusal names the problem before the kernel is touched (None stands in for it)."""
    run = launcher.run
    q, k, v, causal = _cpu_inputs()
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        run(None, q.float(), k.float(), v.float(), causal)
    with pytest.raises(ValueError, match="D=96"):
        run(None, *(torch.zeros(1, 2, 5, 96, dtype=torch.bfloat16) for _ in range(3)), False)
    with pytest.raises(ValueError, match="must be contiguous"):
        run(None, q.transpose(1, 2).contiguous().transpose(1, 2), k, v, causal)
    with pytest.raises(ValueError, match="multiple of H_kv"):
        run(None, q[:, :3].contiguous(), k, v, causal)
    with pytest.raises(ValueError, match="16-byte boundary"):
        shifted = torch.empty(q.numel() + 1, dtype=q.dtype)[1:].view(q.shape)
        run(None, shifted, k, v, causal)
    with pytest.raises(ValueError, match="out must be"):
        run(None, q, k, v, causal, out=torch.empty(q.shape, dtype=torch.float16))
    with pytest.raises(TypeError, match="causal must be True or False"):
        run(None, q, k, v, 1)


def test_the_built_rung_refuses_a_dtype_its_header_leaves_out_before_compiling():
    """The H200 failure (records/nvidia-h200/gpu-tests.test_attention_mma.xml): float32 reached NVRTC, which
    instantiated the 16-bit mma.sync template for float and failed on mma<float>. The built rung refuses first,
    by name, on any machine; no kernel is compiled for float32. Every compiled attention rung with a dtypes line
    refuses the dtypes it leaves out the same way."""
    for rung in ATTENTION.rungs:
        declared = rung.metadata.dtypes
        if rung.route not in ("hip", "cuda") or not declared or set(declared) == set(spec.DTYPES):
            continue
        built = rung.build()                              # compiles nothing yet on a machine without a GPU
        for dtype in sorted(set(spec.DTYPES) - set(declared)):
            q, k, v, causal = _cpu_inputs(dtype=dtype)
            with pytest.raises(ValueError, match=f"takes bfloat16 or float16 .*not {dtype}: refused before compiling"):
                built(q, k, v, causal)
            kernels = built.function.__closure__
            compiled = [cell.cell_contents for cell in kernels if type(cell.cell_contents).__name__ == "_KernelsByDtype"]
            assert compiled and dtype not in compiled[0].kernels, rung.id


# ------------------------------------------------------------------------------------ GPU tier

# Beyond the spec's edge shapes (test_ops_ladders checks those for every rung): many key tiles with a
# partial last one, causal and not, at both D; a decode row against 4096 keys; query blocks past the first
# with S_q > S_kv; Llama 3's 32 / 8 heads; 129 rows (a second block of one row); S_kv - S_q = 1, where a part
# is seen by one row of a warp alone, at both D; causal S_q < S_kv over 33 tiles, no GQA (H = H_kv).
GPU_SHAPES = ((1, 4, 1, 4097, 4097, 128, 1), (2, 8, 2, 1000, 4097, 64), (1, 2, 2, 1, 4096, 128, 1),
              (1, 4, 2, 2000, 300, 128, 1), (1, 32, 8, 512, 512, 128, 1), (3, 6, 3, 129, 129, 64),
              (1, 2, 1, 127, 127, 128), (1, 2, 1, 1023, 1024, 128, 1), (1, 2, 1, 1023, 1024, 64, 1),
              (2, 4, 4, 777, 2049, 64, 1))


def _gpu_rung():
    if RUNG.skip_reason():
        pytest.fail(f"v06_mma_sync cannot run here: {RUNG.skip_reason()} (the H200 must run it)")
    return RUNG.build()


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_agrees_with_float64_on_poisoned_outputs_and_fresh_seeds(dtype):
    """Every edge shape and the shapes above, normal and large inputs, three fresh seeds: the output, written
    into a NaN-filled tensor, is within the spec's tolerance of float64, fully masked rows exactly 0, and
    a second call gives the same bits."""
    from hello_gpu.ops.checking import fresh_seeds, output_failure
    built = _gpu_rung()
    for shape in (*spec.EDGE_SHAPES, *GPU_SHAPES):
        for seed in fresh_seeds():
            for distribution in spec.DISTRIBUTIONS:
                inputs = spec.make_inputs(shape, dtype, seed=seed, distribution=distribution, device="cuda")
                out = torch.full_like(inputs[0], float("nan"))
                result = built(*inputs, out=out)
                assert result is out
                where = (shape, dtype, seed, distribution)
                assert output_failure(spec, inputs, result, dtype) is None, (where, output_failure(
                    spec, inputs, result, dtype))
                assert spec.invariants(inputs, result) == [], where
                assert torch.equal(built(*inputs), result), where


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_the_checker_passes_it_past_the_edge_shapes(dtype):
    """The ladder's own checker (block probe, layouts, determinism) at the shapes above."""
    report = check_rung(RUNG, ATTENTION, shapes=list(GPU_SHAPES), dtypes=[dtype])
    assert report.skipped is None and report.passed, report.reason


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_float32_is_refused_on_the_gpu_too():
    q, k, v, causal = spec.make_inputs((1, 2, 1, 16, 16, 64), "float32", seed=1, device="cuda")
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        _gpu_rung()(q, k, v, causal)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_the_module_the_gpu_loads_runs_on_hmma(dtype):
    """The kernels the rung builds here (for this GPU's own arch: an sm_80 cubin does not load on sm_90), the
    D = 128 entry and the D = 64 sibling, are the tensor-core code: HMMA fed by LDSM, tiles by LDGSTS."""
    from hello_gpu.runtime.device import device_info
    entry = RUNG.kernel(dtype=dtype)
    for d in spec.HEAD_DIMS:
        kernel = launcher.kernel_for(entry, d)
        assert kernel.compile().arch == device_info().arch
        inputs = spec.make_inputs((1, 2, 1, 64, 64, d, 1), dtype, seed=2, device="cuda")
        launcher.run(entry, *inputs)                  # loaded and launched, not only compiled
        sass = _sass_or_skip(kernel)
        for instruction in ("HMMA.16816.F32", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS"):
            assert instruction in sass, (d, instruction)
