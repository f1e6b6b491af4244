"""matmul v17_prefetch_double_buffer without a GPU: its tile assignment, shared-memory banks, global
sectors and double-buffered schedule, modelled in Python from the tile sizes its .hip file declares.

The thread -> element formulas of the .hip file are written once more here on purpose (as in
tests/test_matmul_tensor_cores.py): a model that imported them could not disagree with them. The
schedule model runs the kernel's block loop on float64 NumPy arrays, a block at a time, with every
shared-memory store of a barrier interval applied before any load of it (the worst order the hardware
may pick), so a buffer read and overwritten between the same two barriers gives a wrong C here.
GPU tier: the rung itself on shapes that cross every tile edge, on its 16-byte and its scalar path.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hello_gpu.ops import load_op
from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.matmul.tensor_cores import tile_constants
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.device import gpu_vendor

HAS_GPU = gpu_vendor() is not None
MATMUL = load_op("matmul")
RUNG = MATMUL.rung("v17_prefetch_double_buffer")
TILES = tile_constants(RUNG.path)
BM, BN, BK, THREADS, LANES = TILES["BM"], TILES["BN"], TILES["BK"], TILES["Threads"], TILES["WarpLanes"]
WM, WN, TM, TN, SUB_M, SUB_N = TILES["WM"], TILES["WN"], TILES["TM"], TILES["TN"], TILES["SubM"], TILES["SubN"]
A_STRIDE = BM + TILES["APad"]
BANKS, WORD = 32, 4


def test_the_model_reads_the_sources_tiles():
    source = RUNG.path.read_text(encoding="utf-8")
    assert "kAStride = kBM + kAPad;" in source and "float As[2][kBK][kAStride]" in source
    assert (BM, BN, BK, THREADS, WM, WN, TM, TN, SUB_M, SUB_N) == (128, 128, 16, 256, 64, 32, 4, 4, 32, 16)
    launcher = load_module(RUNG.companion, "test_matmul_v17_launcher")
    assert (launcher.TILE_M, launcher.TILE_N, launcher.THREADS) == (BM, BN, THREADS)


# ---------------------------------------------------------------- who owns what (the .hip file's formulas)


def thread_rows(t: int) -> list[int]:
    """The 8 rows of the block tile thread t sums: 2 sub-tiles of 4, kSubM apart."""
    warp, lane = divmod(t, LANES)
    my_row = (warp // (BN // WN)) * WM + (lane // (SUB_N // TN)) * TM
    return [my_row + wm * SUB_M + i for wm in range(WM // SUB_M) for i in range(TM)]


def thread_columns(t: int) -> list[int]:
    warp, lane = divmod(t, LANES)
    my_column = (warp % (BN // WN)) * WN + (lane % (SUB_N // TN)) * TN
    return [my_column + wn * SUB_N + j for wn in range(WN // SUB_N) for j in range(TN)]


def a_pieces(t: int) -> list[tuple[int, int]]:
    """(row, first k) of the float4s of A thread t stages: row t / 2, pieces t % 2 and t % 2 + 2."""
    return [(t // 2, 4 * (t % 2 + 2 * j)) for j in range(2)]


def b_pieces(t: int) -> list[tuple[int, int]]:
    """(k, first column) of the float4s of B: rows t / 32 and t / 32 + 8, piece t % 32."""
    return [(t // (BN // 4) + 8 * j, 4 * (t % (BN // 4))) for j in range(2)]


def test_each_element_of_the_block_tile_is_one_threads():
    owners = np.zeros((BM, BN), dtype=int)
    for t in range(THREADS):
        owners[np.ix_(thread_rows(t), thread_columns(t))] += 1
    assert (owners == 1).all()


def test_the_staging_covers_each_element_of_a_tile_once():
    a, b = np.zeros((BM, BK), dtype=int), np.zeros((BK, BN), dtype=int)
    for t in range(THREADS):
        for row, k in a_pieces(t):
            a[row, k:k + 4] += 1
        for k, column in b_pieces(t):
            b[k, column:column + 4] += 1
    assert (a == 1).all() and (b == 1).all()


# ---------------------------------------------------------------- shared-memory banks and global sectors


def wavefronts(word_addresses) -> tuple[int, int]:
    """(wavefronts a warp's access takes, the fewest it could take): the most distinct words one bank
    serves, against the distinct words over 32 banks. Equal: conflict-free."""
    words = set(word_addresses)
    per_bank: dict[int, set[int]] = {}
    for word in words:
        per_bank.setdefault(word % BANKS, set()).add(word)
    return max(len(found) for found in per_bank.values()), math.ceil(len(words) / BANKS)


def a_reads(k: int, wm: int, warp: int, row_of=thread_rows) -> list[int]:
    """Words of As a warp's LDS.128 of sub-tile wm at k reads (one float4 a lane)."""
    return [k * A_STRIDE + row_of(t)[wm * TM] + e for t in range(warp * LANES, (warp + 1) * LANES) for e in range(4)]


def v08_rows(t: int) -> list[int]:
    """v08's thread rows (a warp tile 64 high, 8 consecutive rows a lane row): the layout v17 replaces."""
    warp, lane = divmod(t, LANES)
    return [(warp // 4) * 64 + (lane // 4) * 8 + i for i in range(8)]


@pytest.mark.parametrize("warp", range(THREADS // LANES))
def test_every_shared_access_of_a_warp_is_conflict_free(warp):
    lanes = range(warp * LANES, (warp + 1) * LANES)
    for k in range(BK):
        for wm in range(WM // SUB_M):
            assert wavefronts(a_reads(k, wm, warp)) == (1, 1)
        for wn in range(WN // SUB_N):
            b_words = [k * BN + thread_columns(t)[wn * TN] + e for t in lanes for e in range(4)]
            assert wavefronts(b_words) == (1, 1)
    for j in range(2):
        for e in range(4):                       # A's transposed scalar stores: As[k + e][row]
            stores = [(a_pieces(t)[j][1] + e) * A_STRIDE + a_pieces(t)[j][0] for t in lanes]
            assert wavefronts(stores) == (1, 1)
            unpadded = [(a_pieces(t)[j][1] + e) * BM + a_pieces(t)[j][0] for t in lanes]
            assert wavefronts(unpadded) == (2, 1)            # what the 4 floats of padding remove
        b_stores = [b_pieces(t)[j][0] * BN + b_pieces(t)[j][1] + e for t in lanes for e in range(4)]
        assert wavefronts(b_stores) == (4, 4)                # 512 bytes: 4 wavefronts, the fewest
    # v08's 8 consecutive rows a lane put lane rows r and r + 4 on the same banks: 2 wavefronts a read.
    assert wavefronts(a_reads(0, 0, warp, v08_rows)) == (2, 1)


@pytest.mark.parametrize("k_size", [4096, 520])
def test_a_warps_global_loads_use_whole_32_byte_sectors(k_size):
    """Row-major A of K columns (a multiple of 4, 16-byte aligned base): each LDG.128 of a warp reads
    whole sectors (2 lanes a row: 16 rows x 32 bytes); B's read 512 contiguous bytes of one row."""
    for warp in range(THREADS // LANES):
        lanes = range(warp * LANES, (warp + 1) * LANES)
        for j in range(2):
            a_bytes = {4 * (row * k_size + k) + byte for row, k in (a_pieces(t)[j] for t in lanes) for byte in range(16)}
            sectors = {byte // 32 for byte in a_bytes}
            assert len(a_bytes) == 32 * len(sectors) == 32 * 16
            b_bytes = sorted(4 * (k * 4096 + column) + byte for k, column in (b_pieces(t)[j] for t in lanes)
                             for byte in range(16))
            assert b_bytes == list(range(b_bytes[0], b_bytes[0] + 512))


# ---------------------------------------------------------------- the block loop, run on the CPU


def emulate(a: np.ndarray, b: np.ndarray, buffers: int = 2) -> np.ndarray:
    """C as the kernel computes it, block by block; ``buffers=1`` is the same schedule with one shared
    buffer (the race the second buffer removes). Elements past the matrix load as zeros (load_four);
    C starts as NaN and every element a thread owns inside the matrix is written once (store_four)."""
    m, k_size = a.shape
    n = b.shape[1]
    tiles = max(1, math.ceil(k_size / BK))
    a_pad = np.zeros((math.ceil(m / BM) * BM, tiles * BK + BK))
    a_pad[:m, :k_size] = a
    b_pad = np.zeros((tiles * BK + BK, math.ceil(n / BN) * BN))
    b_pad[:k_size, :n] = b
    rows = np.array([thread_rows(t) for t in range(THREADS)])              # (256, 8)
    columns = np.array([thread_columns(t) for t in range(THREADS)])
    # Every element a thread's float4s carry: A's (row, k) and B's (k, column), four a piece.
    a_rows, a_ks = np.array([[row, k + e] for t in range(THREADS) for row, k in a_pieces(t) for e in range(4)]).T
    b_ks, b_columns = np.array([[k, n + e] for t in range(THREADS) for k, n in b_pieces(t) for e in range(4)]).T
    c = np.full((m, n), np.nan)
    written = np.zeros((m, n), dtype=int)

    def stage(shared_a, shared_b, row0, column0, k0):
        shared_a[a_ks, a_rows] = a_pad[row0 + a_rows, k0 + a_ks]            # transposed: As[k][m]
        shared_b[b_ks, b_columns] = b_pad[k0 + b_ks, column0 + b_columns]

    for row0 in range(0, m, BM):
        for column0 in range(0, n, BN):
            shared_a = np.full((buffers, BK, A_STRIDE), np.nan)
            shared_b = np.full((buffers, BK, BN), np.nan)
            stage(shared_a[0], shared_b[0], row0, column0, 0)                # prologue, then a barrier
            sums = np.zeros((THREADS, len(rows[0]), len(columns[0])))
            for tile in range(tiles):
                current, other = tile % buffers, (tile + 1) % buffers
                if tile + 1 < tiles:                  # stores first: the worst order within the interval
                    stage(shared_a[other], shared_b[other], row0, column0, (tile + 1) * BK)
                a_values = shared_a[current][:, rows]                         # (BK, 256, 8)
                b_values = shared_b[current][:, columns]
                sums += a_values.transpose(1, 2, 0) @ b_values.transpose(1, 0, 2)      # (256, 8, BK) @ (256, BK, 8)
            at_rows = np.broadcast_to((rows + row0)[:, :, None], sums.shape)
            at_columns = np.broadcast_to((columns + column0)[:, None, :], sums.shape)
            inside = (at_rows < m) & (at_columns < n)
            c[at_rows[inside], at_columns[inside]] = sums[inside]
            np.add.at(written, (at_rows[inside], at_columns[inside]), 1)
    assert (written == 1).all()
    return c


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 517), (39, 41, 37), (1, 4095, 17), (4095, 7, 3),
                                   (130, 260, 48), (1823, 781, 517), (1000, 1000, 1000)],
                         ids=lambda s: "x".join(map(str, s)))
def test_the_double_buffered_schedule_computes_c(shape):
    m, n, k = shape
    a, b = MATMUL.spec.make_inputs(shape, "float32", seed=sum(shape))
    a64, b64 = a.double().numpy(), b.double().numpy()
    c = emulate(a64, b64)
    np.testing.assert_allclose(c, a64 @ b64, rtol=1e-12, atol=1e-12 * math.sqrt(k))


def test_one_shared_buffer_with_one_barrier_a_tile_fails_the_model():
    """The model can fail: with one buffer, tile t + 1's stores overwrite tile t before it is read."""
    a, b = MATMUL.spec.make_inputs((130, 260, 48), "float32", seed=3)
    a64, b64 = a.double().numpy(), b.double().numpy()
    wrong = emulate(a64, b64, buffers=1)
    assert np.linalg.norm(wrong - a64 @ b64) > 0.1 * np.linalg.norm(a64 @ b64)


# ------------------------------------------------------------------------------------------ GPU tier


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("shape", [(129, 131, 33), (257, 132, 52), (1823, 781, 517), (4096, 4096, 4096)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "offset-one-float"])
def test_the_rung_on_both_load_paths(shape, offset):
    """offset 1: A and B start 4 bytes past a 16-byte boundary, so vectorizable() sends even K = 52 and
    N = 132 down the scalar path; offset 0 takes the 16-byte path wherever K and N are multiples of 4."""
    run = RUNG.build()
    for seed in (1, 2):
        a, b = MATMUL.spec.make_inputs(shape, "float32", seed=seed, device="cuda")
        if offset:
            a = torch.cat([a.new_zeros(offset), a.flatten()])[offset:].view(a.shape)
            b = torch.cat([b.new_zeros(offset), b.flatten()])[offset:].view(b.shape)
            assert a.data_ptr() % 16 and b.data_ptr() % 16
        out = torch.full((shape[0], shape[1]), float("nan"), device="cuda")
        assert output_failure(MATMUL.spec, (a, b), run(a, b, out=out), "float32") is None, (shape, offset, seed)
