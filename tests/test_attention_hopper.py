"""attention v07 (wgmma + TMA, sm_90a): its layouts and its algorithm checked on the CPU, its SASS from two
compilers, its launcher's refusals; GPU tier (``-m gpu``, an sm_90 GPU): the float64 reference on shapes that
cut every tile, causal and not, GQA, poisoned outputs, and the SASS of the module it launched.

The layout models follow the PTX ISA's definitions for wgmma.mma_async.m64nNk16 (the accumulator fragment, the
register fragment of A, the canonical K-major and MN-major layouts of the 128-byte swizzle that the matrix
descriptors describe); the swizzle, TMA and descriptor readers are the matmul tests' (one model of the hardware,
tests/test_matmul_tensor_cores.py). The kernel's own formulas are written once more here on purpose (a model that
imported them could not disagree with them), and tied to the source by the string checks below.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

from hello_gpu.ops import load_op
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.compiler import ptxas_section
from hello_gpu.runtime.device import gpu_vendor
from hello_gpu.runtime.resources import parse_ptxas_report
from test_matmul_tensor_cores import _opcodes, descriptor, tma_write, wgmma_read_a, wgmma_read_b

HAS_GPU = gpu_vendor() is not None
ATTENTION = load_op("attention")
RUNG = ATTENTION.rung("v07_wgmma_tma")
SOURCE = RUNG.path.read_text()
HEADER = (ATTENTION.path / "hopper_attention.cuh").read_text()
launcher = load_module(RUNG.companion, "test_attention_v07_launcher")
TILES = launcher.TILES
BLOCK_M, BLOCK_N, STAGES = TILES["BlockM"], TILES["BlockN"], TILES["Stages"]
PANEL_BYTES = 128 * 128            # a 128-row x 64-column box of 16-bit elements
ATOM = 1024


# ---------------------------------------------------------------- the PTX ISA's fragments of m64nNk16


def accumulator_positions(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of accumulator register i of thread 32 w + 4 g + t, shape (128, n / 2): PTX's D fragment of
    wgmma.m64nNk16 (row 16 w + g, + 8 for i % 4 >= 2; column 8 (i // 4) + 2 t + i % 2)."""
    thread, i = np.arange(128)[:, None], np.arange(n // 2)[None, :]
    warp, g, t = thread // 32, (thread % 32) // 4, thread % 4
    return 16 * warp + g + 8 * ((i % 4) >= 2), 8 * (i // 4) + 2 * t + i % 2


def a_fragment_positions() -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of element a_i (i = 0..7, two to a 32-bit register, a_0 in the low half) of thread
    32 w + 4 g + t in the register A fragment of wgmma.m64nNk16 (.f16/.bf16): warp w holds rows 16 w .. 16 w + 15
    as mma.m16n8k16 does: row g for a0, a1, a4, a5 and g + 8 for the others; column 2 t + i % 2, + 8 for i >= 4."""
    thread, i = np.arange(128)[:, None], np.arange(8)[None, :]
    warp, g, t = thread // 32, (thread % 32) // 4, thread % 4
    return 16 * warp + g + 8 * ((i % 4) >= 2), 2 * t + i % 2 + 8 * (i >= 4)


def xor_shuffle(values: np.ndarray, mask: int) -> np.ndarray:
    """__shfl_xor_sync over the 128 threads (4 warps; masks below 32 stay within a warp)."""
    return values[np.arange(128) ^ mask]


def test_a_row_lives_in_the_four_threads_two_xor_shuffles_reach():
    """Each row of an m64n128 accumulator is held by the 4 lanes 4 g .. 4 g + 3 of one warp (32 values each, the
    registers 4 j + 2 h + e the kernel reads as row h, column 8 j + 2 t + e), and xor 1 then xor 2 visit exactly
    those lanes: the kernel's two-shuffle row maximum and row sum see the whole row and nothing else."""
    rows, columns = accumulator_positions(128)
    thread, register = np.arange(128)[:, None], np.arange(64)[None, :]
    j, h, e = register // 4, (register % 4) // 2, register % 2
    assert np.array_equal(rows, (16 * (thread // 32) + (thread % 32) // 4) + 8 * h)
    assert np.array_equal(columns, 8 * j + 2 * (thread % 4) + e)
    for row in range(64):
        holders = sorted(set(np.nonzero(rows == row)[0]))
        assert len(holders) == 4 and holders[0] % 4 == 0 and holders == list(range(holders[0], holders[0] + 4))
        assert sorted(set(columns[rows == row])) == list(range(128))                   # all 128 keys, once each
        for lane in holders:
            assert {lane, lane ^ 1, lane ^ 2, lane ^ 1 ^ 2} == set(holders)
    assert "float& x = s[4 * j + 2 * h + e];" in SOURCE and "key0 + 8 * j + 2 * t + e >= rows.visible_end[h]" in SOURCE
    assert "__shfl_xor_sync(0xffffffffu, row_max, 1)" in SOURCE and "__shfl_xor_sync(0xffffffffu, row_max, 2)" in SOURCE


def test_the_accumulators_of_a_k16_slice_are_the_a_fragment_of_that_slice():
    """pack_weights makes register i of the A operand from accumulators 2 i and 2 i + 1, and the k16 slice kk reads
    registers 4 kk .. 4 kk + 3: for every thread, the elements land where PTX's A fragment puts them, so the
    weights P of the scores S are the A operand of P V without any exchange between threads."""
    s_rows, s_columns = accumulator_positions(128)
    a_rows, a_columns = a_fragment_positions()
    for kk in range(8):
        for element in range(8):
            accumulator = 2 * (4 * kk + element // 2) + element % 2        # register 4 kk + element // 2, its half
            assert np.array_equal(s_rows[:, accumulator], a_rows[:, element])
            assert np.array_equal(s_columns[:, accumulator], 16 * kk + a_columns[:, element])
    assert "TensorCore<T>::two(s[2 * i], s[2 * i + 1])" in SOURCE
    assert "const uint32_t a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};" in SOURCE


def test_the_fragment_model_is_not_vacuous():
    """Packing the pairs across the two 8-column blocks of a slice (accumulators 8 kk + {0, 1, 4, 5, ...}) instead
    would put row g + 8's values where PTX wants row g's."""
    s_rows, _ = accumulator_positions(128)
    a_rows, _ = a_fragment_positions()
    wrong = [0, 1, 4, 5, 2, 3, 6, 7]
    assert not all(np.array_equal(s_rows[:, wrong[element]], a_rows[:, element]) for element in range(8))


# ---------------------------------------------------------------- shared memory: what TMA writes, what wgmma reads


def k_major_descriptor(rows: int, kk: int) -> int:
    """hopper_attention.cuh's k_major_descriptor: panel kk / 4, 32 (kk % 4) bytes into the rows, SBO 1024."""
    return descriptor(rows + (kk // 4) * PANEL_BYTES + 32 * (kk % 4), 16, ATOM)


def v_descriptor(tile: int, kk: int) -> int:
    """hopper_attention.cuh's v_descriptor: 16 keys (2048 bytes) a slice, LBO a panel, SBO 1024."""
    return descriptor(tile + 2048 * kk, PANEL_BYTES, ATOM)


def read_k_major(shared: np.ndarray, desc: int, rows: int) -> np.ndarray:
    """A K-major operand of ``rows`` rows (64 for A, 128 keys for B of Q K^T), 16 wide: row r at (r // 8) SBO +
    (r % 8) 128 bytes, as PTX's canonical K-major layout has it; 64 rows at a time through the matmul model."""
    return np.vstack([wgmma_read_a(shared, desc + ((64 * 128 * block) >> 4)) for block in range(rows // 64)])


def test_the_descriptors_are_the_headers():
    assert "return a_descriptor(rows + (kk / 4) * kPanelBytes, kk % 4);" in HEADER
    assert "return matrix_descriptor(tile + 2048 * kk, kPanelBytes, kAtomBytes);" in HEADER
    assert "constexpr uint32_t kPanelBytes = kTileRows * 128;" in HEADER and "constexpr int kTileRows = 128;" in HEADER
    # S: A and B from descriptors, both K-major (imm-trans-a = imm-trans-b = 0); P V: A from registers, B MN-major.
    assert '"%64, %65, accumulate, 1, 1, 0, 0;\\n"' in HEADER
    assert '", accumulate, 1, 1, 1;\\n"' in HEADER and '"{%64, %65, %66, %67}, %68", "%69"' in HEADER


def _write_tile(shared: np.ndarray, base: int, tile: np.ndarray) -> None:
    """One 128-row tile of Q, K or V as the producer loads it: D / 64 boxes of 128 x 64, a panel each."""
    for panel in range(tile.shape[1] // 64):
        tma_write(shared, base + panel * PANEL_BYTES, tile[:, 64 * panel:64 * panel + 64])


@pytest.mark.parametrize("head_dim", (64, 128))
def test_q_k_and_v_tiles_read_through_the_descriptors_are_the_tiles(head_dim):
    """Q's rows of each consumer (A, K-major), the K tile (B of Q K^T, K-major, 128 keys) and the V tile (B of P V,
    MN-major across D / 64 panels) read back exactly, every k16 slice, from the swizzled shared memory."""
    rng = np.random.default_rng(head_dim)
    tile_bytes = 128 * head_dim * 2
    base = 3 * ATOM                                    # a 1024-aligned base, not 0
    shared = np.full((base + 3 * tile_bytes) // 2 + 64, np.nan)
    q, k, v = (rng.integers(-8, 9, (128, head_dim)).astype(np.float64) for _ in range(3))
    q_base, k_base, v_base = base, base + tile_bytes, base + 2 * tile_bytes
    for tile_base, tile in ((q_base, q), (k_base, k), (v_base, v)):
        _write_tile(shared, tile_base, tile)
    for consumer in range(2):
        rows = q_base + 64 * consumer * 128
        for kk in range(head_dim // 16):
            assert np.array_equal(read_k_major(shared, k_major_descriptor(rows, kk), 64),
                                  q[64 * consumer:64 * consumer + 64, 16 * kk:16 * kk + 16])
    for kk in range(head_dim // 16):
        assert np.array_equal(read_k_major(shared, k_major_descriptor(k_base, kk), 128).T, k[:, 16 * kk:16 * kk + 16].T)
    for kk in range(BLOCK_N // 16):
        assert np.array_equal(wgmma_read_b(shared, v_descriptor(v_base, kk), head_dim), v[16 * kk:16 * kk + 16])


def test_the_v_descriptor_model_is_not_vacuous():
    """matmul's B descriptor (64-key boxes: LBO 8192) or V read as a K-major B (imm-trans-b = 0) gives other
    numbers."""
    rng = np.random.default_rng(3)
    v = rng.integers(-8, 9, (128, 128)).astype(np.float64)
    shared = np.full(2 * PANEL_BYTES // 2 + 64, np.nan)
    _write_tile(shared, 0, v)
    assert np.array_equal(wgmma_read_b(shared, v_descriptor(0, 1)), v[16:32])
    with np.errstate(invalid="ignore"):
        assert not np.array_equal(wgmma_read_b(shared, descriptor(2048, 8192, ATOM)), v[16:32])
    assert not np.array_equal(read_k_major(shared, descriptor(0, 16, ATOM), 128).T, v[:16])


# ---------------------------------------------------------------- one consumer warpgroup, register by register


def warpgroup_model(q: np.ndarray, k: np.ndarray, v: np.ndarray, consumer: int, first_row: int, q_len: int,
                    kv_len: int, causal: bool) -> np.ndarray:
    """A consumer warpgroup's 64 output rows, computed as the kernel does, thread by thread: the tiles written by
    TMA into the swizzled stages of a 2-slot ring, S = Q K^T read through the descriptors into PTX's accumulator
    layout, the online softmax on each thread's registers (row maxima and sums completed by the two xor-shuffles),
    the weights packed into A fragments (float64 here: the layout, not the rounding, is under test), P V read
    through the V descriptor, O rescaled before each P V, stored through the accumulator positions."""
    head_dim = q.shape[1]
    tile_bytes = 128 * head_dim * 2
    base = ATOM
    shared = np.full((base + (1 + 2 * STAGES) * tile_bytes) // 2 + 64, np.nan)
    _write_tile(shared, base, np.vstack([q[first_row:first_row + 128],
                                         np.zeros((max(0, first_row + 128 - q.shape[0]), head_dim))]))
    stages = base + tile_bytes
    rows, columns = accumulator_positions(128)
    o_rows, o_columns = accumulator_positions(head_dim)
    a_rows, a_columns = a_fragment_positions()
    lane_t = np.arange(128) % 4
    row0 = first_row + 64 * consumer + 16 * (np.arange(128) // 32) + (np.arange(128) % 32) // 4
    offset = kv_len - q_len
    last_row = min(first_row + 128, q_len) - 1
    end, whole = kv_len, kv_len
    if causal:
        end = min(kv_len, max(0, last_row + offset + 1))
        whole = min(kv_len, max(0, first_row + offset + 1))
    tiles = -(-end // BLOCK_N)
    visible_end = [np.minimum(kv_len, row0 + 8 * h + offset + 1) if causal else np.full(128, kv_len) for h in (0, 1)]
    maximum, total, rescale = np.full((2, 128), -np.inf), np.zeros((2, 128)), np.zeros((2, 128))
    o = np.zeros((128, head_dim // 2))
    weights = None

    def multiply_values(slot: int) -> None:
        for kk in range(BLOCK_N // 16):
            a = np.full((64, 16), np.nan)
            for element in range(8):
                register = 4 * kk + element // 2
                a[a_rows[:, element], a_columns[:, element]] = weights[:, 2 * register + element % 2]
            product = a @ wgmma_read_b(shared, v_descriptor(stages + slot * 2 * tile_bytes + tile_bytes, kk), head_dim)
            o[:] += product[o_rows, o_columns]

    for i in range(tiles):
        slot, key0 = i % STAGES, (tiles - 1 - i) * BLOCK_N
        k_tile = np.zeros((128, head_dim))
        v_tile = np.zeros((128, head_dim))
        k_tile[:max(0, min(128, kv_len - key0))] = k[key0:key0 + 128]     # TMA's zeros past S_kv
        v_tile[:max(0, min(128, kv_len - key0))] = v[key0:key0 + 128]
        _write_tile(shared, stages + slot * 2 * tile_bytes, k_tile)
        _write_tile(shared, stages + slot * 2 * tile_bytes + tile_bytes, v_tile)
        scores = sum(read_k_major(shared, k_major_descriptor(base + 64 * consumer * 128, kk), 64)
                     @ read_k_major(shared, k_major_descriptor(stages + slot * 2 * tile_bytes, kk), 128).T
                     for kk in range(head_dim // 16))
        s = scores[rows, columns]                                           # each thread's 64 registers
        if i > 0:
            o *= rescale[(np.arange(head_dim // 2) % 4) // 2].T
            multiply_values((i - 1) % STAGES)
        scale_log2 = math.log2(math.e) / math.sqrt(head_dim)
        for h in (0, 1):
            mine = (np.arange(64) % 4) // 2 == h
            if key0 + BLOCK_N > whole:
                keys = key0 + 8 * (np.arange(64) // 4)[None, :] + 2 * lane_t[:, None] + (np.arange(64) % 2)[None, :]
                s[:, mine] = np.where(keys[:, mine] >= visible_end[h][:, None], -np.inf, s[:, mine])
            row_max = np.maximum(maximum[h], s[:, mine].max(axis=1))
            row_max = np.maximum(row_max, xor_shuffle(row_max, 1))
            row_max = np.maximum(row_max, xor_shuffle(row_max, 2))
            subtracted = np.where(row_max == -np.inf, 0.0, row_max * scale_log2)
            rescale[h] = np.exp2(maximum[h] * scale_log2 - subtracted)
            maximum[h] = row_max
            s[:, mine] = np.exp2(s[:, mine] * scale_log2 - subtracted[:, None])
            total[h] = total[h] * rescale[h] + s[:, mine].sum(axis=1)
        weights = s
    if tiles:
        o *= rescale[(np.arange(head_dim // 2) % 4) // 2].T
        multiply_values((tiles - 1) % STAGES)
    out = np.full((64, head_dim), np.nan)              # store_rows writes each of the 64 x D outputs once
    for h in (0, 1):
        full = total[h] + xor_shuffle(total[h], 1)
        full = full + xor_shuffle(full, 2)
        inverse = np.where(full > 0, 1 / np.where(full > 0, full, 1), 0.0)
        mine = (np.arange(head_dim // 2) % 4) // 2 == h
        kernel_rows = row0 + 8 * h - first_row - 64 * consumer            # store_rows: row0, row0 + 8
        assert np.array_equal(o_rows[:, mine], np.broadcast_to(kernel_rows[:, None], o_rows[:, mine].shape))
        out[o_rows[:, mine], o_columns[:, mine]] = o[:, mine] * inverse[:, None]
    return out


def attention_rows(q, k, v, rows: slice, q_len: int, causal: bool) -> np.ndarray:
    """float64 attention of query rows ``rows`` (spec.py's definition; rows that see nothing are 0)."""
    scores = q[rows] @ k.T / math.sqrt(q.shape[1])
    if causal:
        visible = np.arange(k.shape[0])[None, :] <= np.arange(rows.start, rows.stop)[:, None] + k.shape[0] - q_len
        scores = np.where(visible, scores, -np.inf)
    maximum = scores.max(axis=1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(maximum), maximum, 0))
    totals = weights.sum(axis=1, keepdims=True)
    return np.where(totals > 0, weights @ v / np.where(totals > 0, totals, 1), 0.0)


# (q_len, kv_len, causal, head_dim, first_row, consumer): 3 key tiles (a partial last one, masked; a full one), the
# causal diagonal through the block, S_q > S_kv with rows that see nothing, a block of one partial query tile.
WARPGROUP_CASES = ((130, 300, False, 128, 0, 1), (256, 300, True, 64, 128, 0), (256, 300, True, 128, 128, 1),
                   (300, 100, True, 64, 128, 0), (70, 1, False, 128, 0, 0))


@pytest.mark.parametrize("q_len, kv_len, causal, head_dim, first_row, consumer", WARPGROUP_CASES, ids=str)
def test_a_consumer_warpgroup_register_by_register_computes_its_rows(q_len, kv_len, causal, head_dim, first_row,
                                                                      consumer):
    rng = np.random.default_rng(q_len + kv_len)
    q, k, v = (rng.standard_normal((n, head_dim)) for n in (q_len, kv_len, kv_len))
    got = warpgroup_model(q, k, v, consumer, first_row, q_len, kv_len, causal)
    first = first_row + 64 * consumer
    stop = min(first + 64, q_len)
    want = attention_rows(q, k, v, slice(first, stop), q_len, causal)
    np.testing.assert_allclose(got[:stop - first], want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- the kernel's walk over key tiles, per block


def block_walk(q_len: int, kv_len: int, causal: bool, first_row: int) -> tuple[int, int]:
    """attention_block's (tiles, whole): key tiles [0, tiles) reach every key some row of the block sees; a tile
    inside keys [0, whole), seen whole by every row, skips the mask."""
    last_row = min(first_row + BLOCK_M, q_len) - 1
    end, whole = kv_len, kv_len
    if causal:
        end = min(kv_len, max(0, last_row + (kv_len - q_len) + 1))
        whole = min(kv_len, max(0, first_row + (kv_len - q_len) + 1))
    return -(-end // BLOCK_N), whole


def kernel_model(q, k, v, causal: bool, walk=block_walk) -> np.ndarray:
    """The whole kernel's arithmetic in float64, a 128-row block at a time (rows vectorised): each block's key tiles
    last to first, the mask on tiles past ``whole`` only, O rescaled before adding the previous tile's P V, the
    guards of rows that have seen no key. q (S_q, D), k and v (S_kv, D) of one head."""
    q_len, head_dim = q.shape
    kv_len = k.shape[0]
    scale_log2 = math.log2(math.e) / math.sqrt(head_dim)
    out = np.full((q_len, head_dim), np.nan)
    for first_row in range(0, q_len, BLOCK_M):
        block = np.zeros((BLOCK_M, head_dim))
        block[:min(BLOCK_M, q_len - first_row)] = q[first_row:first_row + BLOCK_M]
        rows = first_row + np.arange(BLOCK_M)
        visible_end = np.minimum(kv_len, rows + kv_len - q_len + 1) if causal else np.full(BLOCK_M, kv_len)
        tiles, whole = walk(q_len, kv_len, causal, first_row)
        maximum, total, rescale = np.full(BLOCK_M, -np.inf), np.zeros(BLOCK_M), np.zeros(BLOCK_M)
        o = np.zeros((BLOCK_M, head_dim))
        previous = None
        for i in range(tiles):
            key0 = (tiles - 1 - i) * BLOCK_N
            keys = key0 + np.arange(BLOCK_N)
            k_tile, v_tile = np.zeros((BLOCK_N, head_dim)), np.zeros((BLOCK_N, head_dim))
            k_tile[:max(0, min(BLOCK_N, kv_len - key0))] = k[key0:key0 + BLOCK_N]
            v_tile[:max(0, min(BLOCK_N, kv_len - key0))] = v[key0:key0 + BLOCK_N]
            s = block @ k_tile.T
            if previous is not None:
                o = o * rescale[:, None] + previous[0] @ previous[1]
            if key0 + BLOCK_N > whole:
                s = np.where(keys[None, :] >= visible_end[:, None], -np.inf, s)
            row_max = np.maximum(maximum, s.max(axis=1))
            subtracted = np.where(row_max == -np.inf, 0.0, row_max * scale_log2)
            rescale = np.exp2(maximum * scale_log2 - subtracted)
            maximum = row_max
            p = np.exp2(s * scale_log2 - subtracted[:, None])
            total = total * rescale + p.sum(axis=1)
            previous = (p, v_tile)
        if previous is not None:
            o = o * rescale[:, None] + previous[0] @ previous[1]
        result = np.where(total[:, None] > 0, o / np.where(total > 0, total, 1)[:, None], 0.0)
        out[first_row:first_row + BLOCK_M] = result[:min(BLOCK_M, q_len - first_row)]
    return out


def test_the_walk_is_the_kernels():
    for line in ("end = min(kv_len, max(0, last_row + (kv_len - q_len) + 1));",
                 "whole = min(kv_len, max(0, first_row + (kv_len - q_len) + 1));",
                 "const int tiles = (end + kBlockN - 1) / kBlockN;",
                 "const int key0 = (tiles - 1 - i) * kBlockN;                  // the last tile first",
                 "key0 = (tiles - 1 - i) * kBlockN;",
                 "if (key0 + kBlockN > whole) online_softmax<true>(s, rows, key0, scale_log2);",
                 "rows.visible_end[h] = causal ? min(kv_len, row0 + 8 * h + (kv_len - q_len) + 1) : kv_len;",
                 "const int first_row = (static_cast<int>(gridDim.y) - 1 - static_cast<int>(blockIdx.y)) * kBlockM;",
                 "const int kv_plane = (bh / heads) * kv_heads + (bh % heads) / (heads / kv_heads);"):
        assert line in SOURCE, line
    loop = SOURCE[SOURCE.index("for (int i = 1; i < tiles; ++i) {"):]
    order = [loop.index(step) for step in ("issue_scores<", "rescale_output(o, rows);", "issue_values<",
                                           "wgmma_wait<1>();", "online_softmax<true>", "wgmma_wait<0>();",
                                           "pack_weights<T>(p, s);")]
    assert order == sorted(order), "S_i, rescale, P_{i-1} V_{i-1}, wait S_i, softmax, wait P V, pack P_i"


# The spec's edge shapes and the lengths (1, 127, 1000, 4097 rows; S_q != S_kv both ways), one head each.
MODEL_SHAPES = ((1, 1, False, 128), (127, 127, True, 64), (1000, 1000, True, 128), (1000, 127, True, 64),
                (127, 1000, False, 128), (100, 300, True, 64), (1, 4097, True, 64), (4097, 300, True, 64),
                (300, 4097, True, 64), (4097, 129, False, 64), (256, 256, True, 64), (33, 31, True, 64))


@pytest.mark.parametrize("q_len, kv_len, causal, head_dim", MODEL_SHAPES, ids=str)
def test_the_kernels_arithmetic_is_attention(q_len, kv_len, causal, head_dim):
    rng = np.random.default_rng(q_len * 7 + kv_len)
    q, k, v = (rng.standard_normal((n, head_dim)) for n in (q_len, kv_len, kv_len))
    q *= 3.0                                                     # scores of std ~3: a real maximum to track
    want = attention_rows(q, k, v, slice(0, q_len), q_len, causal)
    np.testing.assert_allclose(kernel_model(q, k, v, causal), want, rtol=1e-11, atol=1e-12)


def test_a_walk_that_forgets_the_diagonal_is_caught():
    """The comparison above can fail: masking only S_kv's end (whole = S_kv) lets the causal diagonal through."""
    def tail_only(q_len, kv_len, causal, first_row):
        return block_walk(q_len, kv_len, causal, first_row)[0], kv_len
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((256, 64)) for _ in range(3))
    want = attention_rows(q, k, v, slice(0, 256), 256, True)
    assert not np.allclose(kernel_model(q, k, v, True, walk=tail_only), want, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- the ring of stages: mbarrier phases, in any order


class Barrier:
    """An mbarrier as PTX defines it: a phase completes when its expected arrivals have arrived (a full barrier's one
    arrival stands for the producer's arrive.expect_tx plus the bytes landing); try_wait.parity(p) succeeds while
    the current phase's parity differs from p, that is once the phase of parity p has completed."""

    def __init__(self, arrivals: int):
        self.arrivals, self.pending, self.completed = arrivals, arrivals, 0

    def arrive(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self.completed, self.pending = self.completed + 1, self.arrivals

    def passes(self, parity: int) -> bool:
        return self.completed % 2 != parity


def ring_schedule(tiles: int, seed: int, empty_parity=lambda use: (use - 1) & 1) -> list[str]:
    """The producer and the two consumer warpgroups of attention_block, as generators that yield where the kernel
    waits, run in a random interleaving; TMA writes land at random later steps. Returns the problems seen: a slot
    overwritten while a wgmma reads it, a wgmma reading another tile than its own, a deadlock."""
    rng = np.random.default_rng(seed)
    k_full, v_full = [Barrier(1) for _ in range(STAGES)], [Barrier(1) for _ in range(STAGES)]
    k_empty, v_empty = [Barrier(8) for _ in range(STAGES)], [Barrier(8) for _ in range(STAGES)]
    slots = {("k", s): None for s in range(STAGES)} | {("v", s): None for s in range(STAGES)}
    readers = {slot: 0 for slot in slots}
    landing, problems = [], []

    def producer():
        for i in range(tiles):
            slot, use = i % STAGES, i // STAGES
            for kind, full, empty in (("k", k_full, k_empty), ("v", v_full, v_empty)):
                if use > 0:
                    yield empty[slot], empty_parity(use)
                landing.append(((kind, slot), i, full[slot]))

    def read(kind, slot, tile):
        if slots[(kind, slot)] != tile:
            problems.append(f"{kind} slot {slot} holds tile {slots[(kind, slot)]}, the wgmma wanted {tile}")
        readers[(kind, slot)] += 1

    def done(kind, slot, empty):
        readers[(kind, slot)] -= 1
        for _ in range(4):                                     # the warpgroup's 4 warps arrive
            empty[slot].arrive()

    def consumer():
        yield k_full[0], 0
        read("k", 0, 0)
        done("k", 0, k_empty)
        for i in range(1, tiles):
            slot, previous = i % STAGES, (i - 1) % STAGES
            yield k_full[slot], (i // STAGES) & 1
            read("k", slot, i)
            yield v_full[previous], ((i - 1) // STAGES) & 1
            read("v", previous, i - 1)
            yield None                                         # wgmma_wait<1>: S_i complete
            done("k", slot, k_empty)
            yield None                                         # wgmma_wait<0>: P_{i-1} V_{i-1} complete
            done("v", previous, v_empty)
        last = (tiles - 1) % STAGES
        yield v_full[last], ((tiles - 1) // STAGES) & 1
        read("v", last, tiles - 1)
        readers[("v", last)] -= 1

    agents = [producer(), consumer(), consumer()]
    waiting = [None] * len(agents)
    while agents or landing:
        ready = [n for n, w in enumerate(waiting) if w is None or w[0] is None or w[0].passes(w[1])]
        if landing and (not ready or rng.random() < 0.3):
            where, tile, barrier = landing.pop(int(rng.integers(len(landing))))
            if readers[where]:
                problems.append(f"tile {tile} landed in {where} while a wgmma read it")
            slots[where] = tile
            barrier.arrive()
            continue
        if not ready:
            return problems + ["deadlock"]
        n = ready[int(rng.integers(len(ready)))]
        try:
            waiting[n] = next(agents[n])
        except StopIteration:
            agents.pop(n)
            waiting.pop(n)
    return problems


@pytest.mark.parametrize("tiles", (1, 2, 3, 4, 7, 32))
def test_the_ring_hands_each_tile_to_its_readers_in_any_interleaving(tiles):
    for seed in range(40):
        assert ring_schedule(tiles, seed) == [], (tiles, seed)
    for line in ("if (use > 0) mbarrier_wait(&k_empty[slot], (use - 1) & 1);",
                 "if (use > 0) mbarrier_wait(&v_empty[slot], (use - 1) & 1);",
                 "mbarrier_wait(&k_full[slot], (i / kStages) & 1);",
                 "mbarrier_wait(&v_full[previous], ((i - 1) / kStages) & 1);",
                 "mbarrier_wait(&v_full[last], ((tiles - 1) / kStages) & 1);",
                 "mbarrier_init(&k_empty[s], kConsumerWarps);", "constexpr int kConsumerWarps = 8;"):
        assert line in SOURCE, line


def test_the_ring_model_sees_a_wrong_parity():
    """Waiting on the empty barrier's parity of this use instead of the previous one lets the producer overwrite a
    slot before its readers are done: the schedule reports it."""
    assert any(ring_schedule(4, seed, empty_parity=lambda use: use & 1) for seed in range(40))


# ---------------------------------------------------------------- resources, from the source


def test_registers_shared_memory_and_barriers_fit_one_block_an_sm():
    constants = dict(re.findall(r"k(ProducerRegisters|ConsumerRegisters|ConsumerWarps) = (\d+)", SOURCE))
    producer, consumer = int(constants["ProducerRegisters"]), int(constants["ConsumerRegisters"])
    assert TILES["Threads"] == 384 and producer * 128 + 2 * consumer * 128 == 168 * 384      # setmaxnreg's pool
    assert producer % 8 == 0 and consumer % 8 == 0 and 24 <= producer and consumer <= 256
    assert "__launch_bounds__(kThreads, 1)" in SOURCE             # ptxas must know the entry's 168 registers
    limit = 232_448                                                # 227 KiB: one block's most on sm_90
    assert launcher.shared_bytes(128) == 5 * 32768 + 256 + 1024 <= limit
    assert launcher.shared_bytes(64) == 5 * 16384 + 256 + 1024
    barriers = 1 + 4 * STAGES                                      # q_full, then k/v full/empty per stage
    matmul_header = (ATTENTION.path.parent / "matmul" / "wgmma_tma.cuh").read_text()
    assert barriers * 8 <= 256 and "kBarrierBytes = 256" in matmul_header


# ---------------------------------------------------------------- compiled: NVRTC (the module the rung loads) and nvcc


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_it_compiles_for_sm_90a_without_spills_or_a_serialised_wgmma_pipeline(dtype):
    binary = RUNG.kernel(arch="sm_90a", dtype=dtype).compile()
    section = ptxas_section(binary.log, binary.lowered_name)
    report = parse_ptxas_report(section)
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, binary.log
    # ptxas says so when it serialises the wgmma pipeline or ignores setmaxnreg ("Potential Performance Loss").
    assert "warning" not in binary.log.lower() and "Performance Loss" not in binary.log, binary.log


def _sass_checks(sass: str, mnemonic: str) -> None:
    """HGMMA (S from two descriptors; P V with A in registers, B transposed, n128 and n64), UTMALDG.3D, SYNCS
    (mbarriers) and USETMAXREG; no HMMA fallback, no local-memory spill."""
    opcodes = _opcodes(sass)
    assert {"HGMMA", "UTMALDG", "USETMAXREG"} <= opcodes, sorted(opcodes)
    assert any(op.startswith("SYNCS") for op in opcodes) and "HMMA" not in opcodes and "STL" not in opcodes
    assert re.search(rf"HGMMA\.64x128x16\.F32{mnemonic} R\d+, gdesc\[UR\d+\], R", sass)
    assert re.search(rf"HGMMA\.64x128x16\.F32{mnemonic} R\d+, R\d+, gdesc\[UR\d+\]\.tnspB", sass)
    assert re.search(rf"HGMMA\.64x64x16\.F32{mnemonic} R\d+, R\d+, gdesc\[UR\d+\]\.tnspB", sass)
    assert "UTMALDG.3D" in sass


MNEMONICS = {"bfloat16": r"\.BF16", "float16": ""}        # cuobjdump writes the f16 HGMMA without a type suffix


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_the_nvrtc_module_runs_on_hgmma_fed_by_tma(dtype):
    kernel = RUNG.kernel(arch="sm_90a", dtype=dtype)
    try:
        sass = kernel.asm("sass")
    except FileNotFoundError as error:
        pytest.skip(f"SASS not checked: {error}")
    _sass_checks(sass, MNEMONICS[dtype])


def _cuobjdump() -> str | None:
    from hello_gpu.runtime.kernel import _tool
    return _tool("cuobjdump")


def test_nvcc_compiles_it_for_sm_90a_to_hgmma_and_utmaldg(tmp_path):
    """An independent toolchain: nvcc -arch=sm_90a -cubin on the rung file (both dtypes instantiated), then
    cuobjdump -sass."""
    nvcc = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")
    cuobjdump = _cuobjdump()
    if nvcc is None or cuobjdump is None:
        pytest.skip(f"needs nvcc and cuobjdump: nvcc {nvcc or 'not found'}, cuobjdump {cuobjdump or 'not found'}")
    wrapper = tmp_path / "v07_instances.cu"
    arguments = "const int64_t*, {T}*, int, int, int, int, int, float, int"
    wrapper.write_text("#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include <cstdint>\n"
                       f'#include "{RUNG.path}"\n'
                       + "".join(f"template __global__ void attention_wgmma_tma<{t}>({arguments.format(T=t)});\n"
                                 for t in ("__nv_bfloat16", "__half")))
    cubin = tmp_path / "v07.cubin"
    done = subprocess.run([nvcc, "-arch=sm_90a", "-cubin", "-O3", "-std=c++17", "-Xptxas=-v", "-o", str(cubin),
                           str(wrapper)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "0 bytes spill stores" in done.stderr and " bytes spill stores" in done.stderr
    assert len(re.findall(r"\b0 bytes spill stores, 0 bytes spill loads", done.stderr)) == 2, done.stderr
    sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, timeout=120).stdout
    for name, dtype in (("13__nv_bfloat16", "bfloat16"), ("6__half", "float16")):
        function = sass[sass.index(f"Function : _Z19attention_wgmma_tmaI{name}"):]
        function = function[:function.find("Function :", 10)] if "Function :" in function[10:] else function
        _sass_checks(function, MNEMONICS[dtype])


# ---------------------------------------------------------------- the launcher, on the CPU


def _inputs(shape, dtype="bfloat16"):
    return ATTENTION.spec.make_inputs(shape, dtype, seed=4)


def test_the_launcher_refuses_what_the_kernel_cannot_read_before_touching_it():
    """The kernel argument is never reached (None stands in for it): each refusal names the problem."""
    run = launcher.run
    q, k, v, causal = _inputs((1, 4, 2, 8, 8, 128))
    with pytest.raises(ValueError, match="takes bfloat16 or float16"):
        run(None, q.float(), k.float(), v.float(), causal)
    with pytest.raises(ValueError, match="runs on an NVIDIA sm_90 GPU"):
        run(None, q, k, v, causal)
    with pytest.raises(ValueError, match=r"head size D=96"):
        run(None, torch.ones(1, 4, 8, 96, dtype=torch.bfloat16), torch.ones(1, 2, 8, 96, dtype=torch.bfloat16),
            torch.ones(1, 2, 8, 96, dtype=torch.bfloat16), False)
    with pytest.raises(TypeError, match="causal must be True or False"):
        run(None, q, k, v, torch.tensor(True))
    with pytest.raises(ValueError, match="must be contiguous"):
        run(None, q.transpose(1, 2).contiguous().transpose(1, 2), k, v, causal)
    with pytest.raises(ValueError, match="H must be a multiple of H_kv"):
        run(None, q[:, :3].contiguous(), k, v, causal)
    with pytest.raises(ValueError, match="out must be a contiguous"):
        run(None, q, k, v, causal, out=torch.empty(1, 4, 8, 64, dtype=torch.bfloat16))
    buffer = torch.zeros(q.numel() + 1, dtype=torch.bfloat16)
    shifted = buffer[1:].view(q.shape)                         # 2 bytes into the allocation
    with pytest.raises(ValueError, match="q starts at address .* not 16-byte aligned"):
        run(None, shifted, k, v, causal)


def test_the_tensor_maps_see_each_head_as_its_own_rows():
    """(B, heads, S, D) as 3-D: D columns, S rows, B x heads planes; boxes 64 x 128 x 1, so a box past a head's last
    row reads TMA's zeros, never the next head."""
    q = torch.empty(2, 4, 1000, 128, dtype=torch.bfloat16)
    assert launcher.sequence_map_parameters(q, 128) == {"dims": (128, 1000, 8), "strides": (256, 256_000),
                                                        "box": (64, 128, 1)}
    k = torch.empty(3, 1, 1, 64, dtype=torch.float16)
    assert launcher.sequence_map_parameters(k, 128) == {"dims": (64, 1, 3), "strides": (128, 128), "box": (64, 128, 1)}
    assert "tma_load_box_3d(q_tile + p * kPanelBytes, q_map, q_full, p * kPanelColumns, first_row, bh);" in SOURCE
    assert "p * kPanelColumns, key0, kv_plane);" in SOURCE


# ---------------------------------------------------------------- GPU tier (an sm_90 GPU: the H200)


def _hopper_or_skip() -> None:
    if not HAS_GPU:
        pytest.skip("needs a GPU")
    reason = RUNG.skip_reason()
    if reason:
        pytest.skip(f"v07 runs on sm_90 only: {reason}")


# (B, H, H_kv, S_q, S_kv, D[, causal]): the lengths 1, 127, 1000, 4097 (multiples of no tile), S_q != S_kv
# both ways (causal: fully masked rows at S_q > S_kv), GQA 32/8 and 4/1 (and 2/2), both head sizes, batches 1-2.
GPU_SHAPES = ((1, 32, 8, 1, 1, 128), (1, 32, 8, 127, 127, 128, 1), (2, 4, 1, 1000, 1000, 128),
              (1, 4, 1, 1000, 1000, 128, 1), (1, 32, 8, 4097, 4097, 128, 1), (1, 4, 1, 4097, 4097, 64),
              (2, 32, 8, 127, 1000, 128, 1), (1, 4, 1, 1000, 127, 128, 1), (1, 4, 1, 4097, 1, 64, 1),
              (1, 32, 8, 1, 4097, 128, 1), (2, 2, 2, 300, 4097, 64, 1), (1, 4, 1, 1000, 127, 64),
              (1, 32, 8, 256, 256, 128, 1))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_v07_agrees_with_the_float64_reference(shape, dtype):
    _hopper_or_skip()
    from hello_gpu.ops.checking import output_failure
    spec = ATTENTION.spec
    built = RUNG.build()
    for seed, distribution in ((101, "normal"), (202, "large")):          # fresh inputs each time
        inputs = spec.make_inputs(shape, dtype, seed=seed, distribution=distribution, device="cuda")
        out = torch.full_like(inputs[0], float("nan"))                     # poisoned: an unwritten element fails
        result = built(*inputs, out=out)
        assert result is out
        failure = output_failure(spec, inputs, result, dtype)
        assert failure is None, (shape, dtype, distribution, failure)
        assert spec.invariants(inputs, result) == [], (shape, dtype, distribution)


@pytest.mark.gpu
def test_v07_refuses_a_misaligned_view_on_the_gpu():
    _hopper_or_skip()
    q, k, v, causal = ATTENTION.spec.make_inputs((1, 2, 1, 64, 64, 64), "bfloat16", seed=5, device="cuda")
    shifted = torch.zeros(q.numel() + 8, dtype=q.dtype, device="cuda")[1:q.numel() + 1].view(q.shape)
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        RUNG.build()(shifted, k, v, causal)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_the_module_it_launched_runs_on_hgmma_fed_by_tma(dtype):
    """The kernel object the launcher was handed (the cubin loaded on the GPU), after a correct launch."""
    _hopper_or_skip()
    from hello_gpu.ops.checking import output_failure
    kernel = RUNG.kernel(arch="sm_90a", dtype=dtype)
    inputs = ATTENTION.spec.make_inputs((1, 4, 1, 300, 300, 128, 1), dtype, seed=9, device="cuda")
    out = launcher.run(kernel, *inputs, out=torch.full_like(inputs[0], float("nan")))
    assert output_failure(ATTENTION.spec, inputs, out, dtype) is None
    _sass_checks(kernel.asm("sass"), MNEMONICS[dtype])
