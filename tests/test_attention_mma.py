"""attention's tensor-core rung v06_mma_sync (CUDA dialect, sm_80): its layouts and control flow checked on
the CPU against a model of the hardware, its machine code, its launcher; on the GPU, its answers.

The model follows the PTX ISA's definitions: the fragments of mma.m16n8k16 (which lane holds which
element of A, B and C) and what ldmatrix / ldmatrix.trans deliver to each lane from the 8 row addresses
each 8-lane group gives. Driven by the kernel's address formulas and its block / warp / tile bounds, it
computes attention in float64 from a model of the block's shared memory (padding and stale stages NaN,
so a read of either shows), and must equal spec.reference. The formulas are written here once more on
purpose (a model that imported them could not disagree with them); test_the_model_uses_the_kernels_formulas
ties each to the kernel's text. Tile sizes are read from the kernel file, as the launcher reads them.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
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

# The kernel's ldmatrix addresses in elements from the tile's first element, per lane (v06_mma_sync.cu).
ADDRESSES = {
    "q": lambda warp, step, stride: (16 * warp + LANES % 16) * stride + 16 * step + (LANES // 16) * 8,
    "k": lambda j, step, stride: (8 * j + (LANES // 16) * 8 + LANES % 8) * stride + 16 * step + ((LANES // 8) % 2) * 8,
    "v": lambda kk, j, stride: (16 * kk + LANES % 16) * stride + 8 * j + (LANES // 16) * 8,
}
# The same, in the kernel's words (whitespace aside).
KERNEL_TEXT = (
    "(16 * warp + lane % 16) * kStride + 16 * step + (lane / 16) * 8",
    "(8 * j + (lane / 16) * 8 + lane % 8) * kStride + 16 * step + ((lane / 8) % 2) * 8",
    "(16 * kk + lane % 16) * kStride + 8 * j + (lane / 16) * 8",
    "const int key = start + 8 * j + 2 * t + e % 2, row = row0 + g + 8 * (e / 2);",
    "const int r = p / kPiecesPerRow, c = (p % kPiecesPerRow) * 8;",
    "const int kv_head = (bh / heads) * kv_heads + (bh % heads) / (heads / kv_heads);",
    "const int first_row = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kBlockRows;",
    "const int end = causal ? min(kv_len, max(0, last_row + offset + 1)) : kv_len;",
    "const int warp_end = causal ? min(kv_len, max(0, min(row0 + 15, q_len - 1) + offset + 1)) : kv_len;",
    "const int warp_whole = causal ? min(kv_len, max(0, row0 + offset + 1)) : kv_len;",
    "if (start + kTileKeys <= warp_whole) {",
    "return (kBlockRows + 2 * kStages * kTileKeys) * (D + kPad);",
    "T* k_tiles = q_tile + kBlockRows * kStride;",
    "T* v_tiles = k_tiles + kStages * kStageElements;",
    "copy_rows_async<T, D, kTileKeys>(k_tiles + next * kStageElements, k_head, start + kTileKeys, kv_len);",
    "copy_rows_async<T, D, kTileKeys>(v_tiles + next * kStageElements, v_head, start + kTileKeys, kv_len);",
    "const T* k_tile = k_tiles + stage * kStageElements;",
    "const T* v_tile = v_tiles + stage * kStageElements;",
    "if (key >= kv_len || (causal && key > row + offset)) s[j][e] = -INFINITY;",
    "scaled_max[r] = m == -INFINITY ? 0.0f : m * scale_log2;",
    "correction[r] = exp2_approx(rows.max[r] * scale_log2 - scaled_max[r]);",
    "s[j][e] = exp2_approx(fmaf(s[j][e], scale_log2, -scaled_max[e / 2]));",
    "const uint32_t a[4] = {pack<T>(s[2 * kk][0], s[2 * kk][1]), pack<T>(s[2 * kk][2], "
    "s[2 * kk][3]), pack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack<T>(s[2 * kk + 1][2], "
    "s[2 * kk + 1][3])};",
    "const float inverse = total > 0.0f ? 1.0f / total : 0.0f;",
    "*reinterpret_cast<uint32_t*>(out_head + static_cast<int64_t>(row) * D + 8 * j + 2 * t) = "
    "pack<T>(rows.acc[j][2 * r] * inverse, rows.acc[j][2 * r + 1] * inverse);",
)


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def copy_rows(shared: np.ndarray, base: int, matrix: np.ndarray, row0: int, rows: int, count: int, stride: int):
    """copy_rows_async: piece p (16 bytes, 8 elements) of the block's passes goes to row p / (D / 8), column
    8 (p % (D / 8)); rows past ``rows`` are zero-filled."""
    d = matrix.shape[1]
    for p in range(count * d // 8):
        r, c = p // (d // 8), (p % (d // 8)) * 8
        inside = row0 + r < rows
        shared[base + r * stride + c:base + r * stride + c + 8] = matrix[row0 + r, c:c + 8] if inside else 0.0


def attend_tile(state: dict, shared, k_base, v_base, row0, start, kv_len, offset, causal, scale_log2, masked,
                stride, d, addresses):
    """attend_tile for one warp: lane arrays throughout, float64, with exp2 exact (the kernel's ex2.approx
    and its rounding of P to 16 bits are what the GPU tier's tolerance covers)."""
    tile_keys = TILES["TileKeys"]
    s = np.zeros((tile_keys // 8, 32, 4))
    for step in range(d // 16):
        for j in range(0, tile_keys // 8, 2):
            b = ldmatrix_x4(shared, k_base + addresses["k"](j, step, stride))
            s[j] = mma_m16n8k16(s[j], state["q"][step], b[:, 0], b[:, 1])
            s[j + 1] = mma_m16n8k16(s[j + 1], state["q"][step], b[:, 2], b[:, 3])
    if masked:
        for j in range(tile_keys // 8):
            for e in range(4):
                key, row = start + 8 * j + 2 * T + e % 2, row0 + G + 8 * (e // 2)
                hidden = (key >= kv_len) | (causal & (key > row + offset))
                s[j, hidden, e] = -np.inf
    scaled_max, correction = np.zeros((32, 2)), np.zeros((32, 2))
    for r in range(2):
        m = np.maximum(state["max"][:, r], s[:, :, 2 * r:2 * r + 2].max(axis=(0, 2)))
        m = np.maximum(m, shuffle_xor(m, 1))
        m = np.maximum(m, shuffle_xor(m, 2))
        scaled_max[:, r] = np.where(m == -np.inf, 0.0, m * scale_log2)
        correction[:, r] = np.exp2(state["max"][:, r] * scale_log2 - scaled_max[:, r])
        state["max"][:, r] = m
    s = np.exp2(s * scale_log2 - scaled_max[None, :, [0, 0, 1, 1]])
    shares = np.stack([s[:, :, 0:2].sum(axis=(0, 2)), s[:, :, 2:4].sum(axis=(0, 2))], axis=1)     # (lane, row)
    state["sum"] = state["sum"] * correction + shares
    state["acc"] *= correction[None, :, [0, 0, 1, 1]]
    for kk in range(tile_keys // 16):
        # pack(x, y): x in the low half. a[0] = tile 2kk's c[0], c[1]; a[1] its c[2], c[3]; a[2], a[3] tile 2kk+1's.
        a = np.stack([s[2 * kk][:, 0:2], s[2 * kk][:, 2:4], s[2 * kk + 1][:, 0:2], s[2 * kk + 1][:, 2:4]], axis=1)
        for j in range(0, d // 8, 2):
            b = ldmatrix_x4(shared, v_base + addresses["v"](kk, j, stride), trans=True)
            state["acc"][j] = mma_m16n8k16(state["acc"][j], a, b[:, 0], b[:, 1])
            state["acc"][j + 1] = mma_m16n8k16(state["acc"][j + 1], a, b[:, 2], b[:, 3])


def kernel_model(q, k, v, causal: bool, addresses=ADDRESSES) -> np.ndarray:
    """v06_mma_sync's grid, blocks, warps and tiles on float64 arrays q (B, H, S_q, D), k, v (B, H_kv, S_kv, D)."""
    batch, heads, q_len, d = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    block_rows, tile_keys, stages, warps = TILES["BlockRows"], TILES["TileKeys"], TILES["Stages"], TILES["Warps"]
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
                row0 = first_row + 16 * warp
                states.append({
                    "q": [ldmatrix_x4(shared, addresses["q"](warp, step, stride)) for step in range(d // 16)],
                    "acc": np.zeros((d // 8, 32, 4)), "max": np.full((32, 2), -np.inf), "sum": np.zeros((32, 2)),
                    "row0": row0,
                    "end": min(kv_len, max(0, min(row0 + 15, q_len - 1) + offset + 1)) if causal else kv_len,
                    "whole": min(kv_len, max(0, row0 + offset + 1)) if causal else kv_len})
            for tile in range(tiles):
                stage, start = tile % stages, tile * tile_keys
                if tile + 1 < tiles:
                    following = (tile + 1) % stages * tile_keys * stride
                    for base, heads_of in ((k_base, k_heads), (v_base, v_heads)):
                        copy_rows(shared, base + following, heads_of[kv_head], start + tile_keys, kv_len, tile_keys,
                                  stride)
                for state in states:
                    if start < state["end"]:
                        attend_tile(state, shared, k_base + stage * tile_keys * stride,
                                    v_base + stage * tile_keys * stride, state["row0"], start, kv_len, offset, causal,
                                    scale_log2, start + tile_keys > state["whole"], stride, d, addresses)
            for state in states:                                                  # write_rows
                for r in range(2):
                    total = state["sum"][:, r] + shuffle_xor(state["sum"][:, r], 1)
                    total = total + shuffle_xor(total, 2)
                    inverse = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)
                    rows = state["row0"] + G + 8 * r
                    live = rows < q_len
                    for j in range(d // 8):
                        for h in (0, 1):
                            out_heads[bh, rows[live], (8 * j + 2 * T + h)[live]] = \
                                (state["acc"][j][:, 2 * r + h] * inverse)[live]
    return out


# Every branch of the kernel: one key and one query; tiles cut mid-row; fully masked rows (S_q > S_kv, causal),
# a whole block of them (200 x 70: rows 0..127 see nothing, the block loads no tile); both query blocks of a
# head (the reversed order); a warp skipping a tile, masked and unmasked tiles (127 x 127); the causal offset
# S_kv - S_q > 0 over 5 tiles; batch 2 with GQA groups of 2 and 4, D = 64 and 128.
MODEL_SHAPES = ((1, 2, 1, 1, 1, 128), (1, 2, 1, 33, 31, 64, 1), (1, 2, 2, 127, 127, 64, 1),
                (1, 2, 1, 200, 70, 64, 1), (1, 2, 1, 100, 300, 64, 1), (2, 4, 2, 5, 200, 128), (2, 4, 1, 3, 65, 64, 1))


def _model_inputs(shape, seed: int):
    q, k, v, causal = spec.make_inputs(shape, "float32", seed=seed)
    return q.double(), k.double(), v.double(), causal


@pytest.mark.parametrize("shape", MODEL_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_kernels_layouts_and_bounds_compute_attention(shape):
    """The model of v06 (fragments, ldmatrix addresses, masks, skipped tiles, online softmax, stores) equals
    the float64 reference to rounding; the rows that see no key are exactly 0; every output is written."""
    q, k, v, causal = _model_inputs(shape, seed=sum(shape))
    got = kernel_model(q.numpy(), k.numpy(), v.numpy(), causal)
    expected = spec.reference(q, k, v, causal).numpy()
    assert not np.isnan(got).any(), "an output element no lane writes (or a read of padding / a stale stage)"
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    empty = spec.first_visible_rows(spec.dims(shape))
    assert (got[:, :, :empty] == 0).all()


@pytest.mark.parametrize("wrong", ["k", "v", "q"])
def test_the_model_sees_a_wrong_address(wrong):
    """The model is not vacuous: swapping which lane bit picks the row half and which the column half
    (lanes 8-15 against 16-31) in one operand's addresses gives a different answer."""
    swapped = {
        "q": lambda warp, step, stride: (16 * warp + LANES % 8 + ((LANES // 16) * 8)) * stride + 16 * step
        + ((LANES // 8) % 2) * 8,
        "k": lambda j, step, stride: (8 * j + ((LANES // 8) % 2) * 8 + LANES % 8) * stride + 16 * step
        + (LANES // 16) * 8,
        "v": lambda kk, j, stride: (16 * kk + LANES % 8 + (LANES // 16) * 8) * stride + 8 * j + ((LANES // 8) % 2) * 8,
    }
    q, k, v, causal = _model_inputs((1, 1, 1, 20, 40, 64), seed=3)
    got = kernel_model(q.numpy(), k.numpy(), v.numpy(), causal, {**ADDRESSES, wrong: swapped[wrong]})
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
    from the start of dynamic shared memory, stages included."""
    stride = d + pad
    k_base = TILES["BlockRows"] * stride
    v_base = k_base + TILES["Stages"] * TILES["TileKeys"] * stride
    stage = TILES["TileKeys"] * stride
    calls = [ADDRESSES["q"](warp, step, stride) for warp in range(TILES["Warps"]) for step in range(d // 16)]
    for s in range(TILES["Stages"]):
        calls += [k_base + s * stage + ADDRESSES["k"](j, step, stride)
                  for j in range(0, TILES["TileKeys"] // 8, 2) for step in range(d // 16)]
        calls += [v_base + s * stage + ADDRESSES["v"](kk, j, stride)
                  for kk in range(TILES["TileKeys"] // 16) for j in range(0, d // 8, 2)]
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
    """copy_rows_async: the block's passes (thread, p = thread + pass x threads) write each of a tile's
    elements once, never the padding, and each 8-thread phase of a pass's 16-byte stores is conflict-free."""
    stride, threads = d + TILES["Pad"], TILES["Threads"]
    for rows in (TILES["BlockRows"], TILES["TileKeys"]):
        pieces = rows * d // 8
        assert pieces % threads == 0
        written = np.zeros(rows * stride, dtype=int)
        for first in range(0, pieces, threads):
            addresses = []
            for p in range(first, first + threads):
                r, c = p // (d // 8), (p % (d // 8)) * 8
                written[r * stride + c:r * stride + c + 8] += 1
                addresses.append(2 * (r * stride + c))
            assert max(phase_ways(addresses[i:i + 8], 16) for i in range(0, threads, 8)) == 1
        layout = written.reshape(rows, stride)
        assert (layout[:, :d] == 1).all() and (layout[:, d:] == 0).all()


def test_shared_memory_fits_sm_80_and_sm_90():
    """104,448 bytes at D = 128 (55,296 at 64): under the 163 KiB a block may opt into on sm_80 and the
    227 KiB of sm_90; the launcher's count is the kernel's (shared_elements<D>() x 2 bytes)."""
    assert launcher.shared_bytes(128) == (128 + 2 * 2 * 64) * 136 * 2 == 104_448
    assert launcher.shared_bytes(64) == 55_296
    assert launcher.shared_bytes(128) <= 166_912 and launcher.shared_bytes(128) <= 232_448
    assert TILES == {"Warps": 8, "Threads": 256, "BlockRows": 128, "TileKeys": 64, "Stages": 2, "Pad": 8}


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


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_nvrtc_compiles_hmma_fed_by_ldsm_without_spills(arch, dtype):
    """The binary hello-gpu builds (NVRTC): no spills, and its SASS multiplies on the tensor cores (HMMA
    16816 with float32 sums), loads fragments by LDSM (plain for Q and K, .MT88 transposed for V), copies
    tiles by LDGSTS (cp.async) and exponentiates on MUFU.EX2."""
    kernel = RUNG.kernel(arch=arch, dtype=dtype)
    binary = kernel.compile()
    section = ptxas_section(binary.log, binary.lowered_name)
    assert "Used " in section, "ptxas reported nothing: spills unchecked"
    report = parse_ptxas_report(section)
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report
    sass = _sass_or_skip(kernel)
    hmma = "HMMA.16816.F32.BF16" if dtype == "bfloat16" else "HMMA.16816.F32 "
    for instruction in (hmma, "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS", "MUFU.EX2"):
        assert instruction in sass, f"{instruction.strip()} missing from the {arch} {dtype} SASS"


NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, /usr/local/cuda/bin): the nvcc build is not checked")
def test_nvcc_builds_the_same_source_to_hmma_and_ldsm(tmp_path):
    """The rung is plain CUDA: nvcc -arch=sm_90 -cubin with the standard headers builds both instantiations,
    and cuobjdump -sass shows HMMA and LDSM (plain and transposed) in each."""
    from hello_gpu.runtime.kernel import _tool
    cuobjdump = _tool("cuobjdump")
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (CUDA toolkit, triton's copy, PATH): nvcc's SASS not checked")
    (tmp_path / "standard.h").write_text("#include <cstdint>\n#include <cmath>\n#include <cuda_fp16.h>\n"
                                         "#include <cuda_bf16.h>\n")
    arguments = "const T*, const T*, const T*, T*, int, int, int, int, int, float, int"
    (tmp_path / "both.cu").write_text(f'#include "{RUNG.path.name}"\n' + "".join(
        f"template __global__ void attention_mma_sync<{t}>({arguments.replace('T', t)});\n"
        for t in ("__half", "__nv_bfloat16")))
    cubin = tmp_path / "both.cubin"
    built = subprocess.run([NVCC, "-arch=sm_90", "-cubin", "-include", str(tmp_path / "standard.h"),
                            f"-I{RUNG.path.parent}", "-o", str(cubin), str(tmp_path / "both.cu")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, timeout=60).stdout
    functions = re.split(r"\n\s*Function : ", sass)[1:]
    assert len(functions) == 2, sass[:2000]
    for function in functions:
        for instruction in ("HMMA.16816.F32", "LDSM.16.M88.4", "LDSM.16.MT88.4"):
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


# ------------------------------------------------------------------------------------ GPU tier

# Beyond the spec's edge shapes (test_ops_ladders checks those for every rung): many key tiles with a
# partial last one, causal and not; a decode row against 4096 keys; query blocks past the first with
# S_q > S_kv; Llama 3's 32 / 8 heads; 129 rows (a second block of one row).
GPU_SHAPES = ((1, 4, 1, 4097, 4097, 128, 1), (2, 8, 2, 1000, 4097, 64), (1, 2, 2, 1, 4096, 128, 1),
              (1, 4, 2, 2000, 300, 128, 1), (1, 32, 8, 512, 512, 128, 1), (3, 6, 3, 129, 129, 64),
              (1, 2, 1, 127, 127, 128))


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
    """The kernel the rung builds here (for this GPU's own arch: an sm_80 cubin does not load on sm_90)
    is the tensor-core code: HMMA fed by LDSM, tiles by LDGSTS."""
    from hello_gpu.runtime.device import device_info
    kernel = RUNG.kernel(dtype=dtype)
    assert kernel.compile().arch == device_info().arch
    inputs = spec.make_inputs((1, 2, 1, 64, 64, 128, 1), dtype, seed=2, device="cuda")
    launcher.run(kernel, *inputs)                     # loaded and launched, not only compiled
    sass = _sass_or_skip(kernel)
    for instruction in ("HMMA.16816.F32", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS"):
        assert instruction in sass, instruction
