"""matmul v17_prefetch_double_buffer and v19_thread_tile_8x16 without a GPU: their tile assignment,
shared-memory banks, global sectors and double-buffered schedule, modelled in Python from the tile sizes
each .hip file declares.

The thread -> element formulas of the .hip files are written once more here on purpose (as in
tests/test_matmul_tensor_cores.py): a model that imported them could not disagree with them. Both rungs
share one loop and differ in sizes: v17 runs 256 threads with 8x8 sums each (2 x 2 sub-tiles of 4x4),
v19 128 threads with 8x16 (2 x 4), so one model with each file's sizes covers both, and each file's
formula lines are checked to be the ones modelled. The schedule model runs the kernel's block loop on
float64 NumPy arrays, a block at a time, with every shared-memory store of a barrier interval applied
before any load of it (the worst order the hardware may pick), so a buffer read and overwritten between
the same two barriers gives a wrong C here.
GPU tier: each rung itself on shapes that cross every tile edge, on its 16-byte and its scalar path.
"""

from __future__ import annotations

import dataclasses
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
BANKS, WORD = 32, 4


@dataclasses.dataclass(frozen=True)
class Layout:
    """One rung's sizes (its .hip file's constexpr lines) and its thread -> element formulas."""

    rung_id: str
    BM: int
    BN: int
    BK: int
    THREADS: int
    LANES: int
    WM: int
    WN: int
    TM: int
    TN: int
    SUB_M: int
    SUB_N: int
    A_STRIDE: int
    a_rows_per_pass: int      # A: 2 lanes a row, THREADS / 2 rows a pass
    b_rows_per_pass: int      # B: BN / 4 lanes a row, THREADS / (BN / 4) rows a pass

    @classmethod
    def of(cls, rung_id: str) -> "Layout":
        tiles = tile_constants(MATMUL.rung(rung_id).path)
        threads, bn = tiles["Threads"], tiles["BN"]
        return cls(rung_id, tiles["BM"], bn, tiles["BK"], threads, tiles["WarpLanes"], tiles["WM"], tiles["WN"],
                   tiles["TM"], tiles["TN"], tiles["SubM"], tiles["SubN"], tiles["BM"] + tiles["APad"],
                   threads // 2, threads // (bn // 4))

    @property
    def a_loads(self) -> int:
        return self.BM * self.BK // 4 // self.THREADS

    @property
    def b_loads(self) -> int:
        return self.BK * self.BN // 4 // self.THREADS

    def thread_rows(self, t: int) -> list[int]:
        """The rows of the block tile thread t sums: WM / SUB_M sub-tiles of TM, SUB_M apart."""
        warp, lane = divmod(t, self.LANES)
        my_row = (warp // (self.BN // self.WN)) * self.WM + (lane // (self.SUB_N // self.TN)) * self.TM
        return [my_row + wm * self.SUB_M + i for wm in range(self.WM // self.SUB_M) for i in range(self.TM)]

    def thread_columns(self, t: int) -> list[int]:
        warp, lane = divmod(t, self.LANES)
        my_column = (warp % (self.BN // self.WN)) * self.WN + (lane % (self.SUB_N // self.TN)) * self.TN
        return [my_column + wn * self.SUB_N + j for wn in range(self.WN // self.SUB_N) for j in range(self.TN)]

    def a_pieces(self, t: int) -> list[tuple[int, int]]:
        """(row, first k) of the float4s of A thread t stages: row t / 2 + a_rows_per_pass (j / 2), piece
        t % 2 + 2 (j % 2) (v17: j < 2, so rows t / 2 and pieces t % 2 and t % 2 + 2)."""
        return [(t // 2 + self.a_rows_per_pass * (j // 2), 4 * (t % 2 + 2 * (j % 2))) for j in range(self.a_loads)]

    def b_pieces(self, t: int) -> list[tuple[int, int]]:
        """(k, first column) of the float4s of B: rows t / (BN / 4) + b_rows_per_pass j, piece t % (BN / 4)."""
        return [(t // (self.BN // 4) + self.b_rows_per_pass * j, 4 * (t % (self.BN // 4))) for j in range(self.b_loads)]


# Each rung: its sizes, and the lines of its .hip file whose formulas the Layout methods restate.
SOURCE_LINES = {
    "v17_prefetch_double_buffer": (
        (128, 128, 16, 256, 64, 32, 4, 4, 32, 16),
        ("kAStride = kBM + kAPad;", "float As[2][kBK][kAStride]",
         "load_four(A, M, K, row0 + a_row, k0 + 4 * (threadIdx.x % 2 + 2 * j), vectorized)",
         "const int a_row = threadIdx.x / 2, b_piece = threadIdx.x % (kBN / 4);",
         "k0 + threadIdx.x / (kBN / 4) + 8 * j, column0 + 4 * b_piece",
         "&Bs[threadIdx.x / (kBN / 4) + 8 * j][4 * b_piece]")),
    "v19_thread_tile_8x16": (
        (128, 128, 16, 128, 64, 64, 4, 4, 32, 16),
        ("kAStride = kBM + kAPad;", "float As[2][kBK][kAStride]",
         "int a_row_of(int j) { return threadIdx.x / 2 + kARowsPerPass * (j / 2); }",
         "int a_k_of(int j) { return 4 * (threadIdx.x % 2 + 2 * (j % 2)); }",
         "constexpr int kARowsPerPass = kThreads / 2;", "constexpr int kBRowsPerPass = kThreads / (kBN / 4);",
         "k0 + threadIdx.x / (kBN / 4) + kBRowsPerPass * j, column0 + 4 * b_piece",
         "&Bs[threadIdx.x / (kBN / 4) + kBRowsPerPass * j][4 * b_piece]")),
}
LAYOUTS = {rung_id: Layout.of(rung_id) for rung_id in SOURCE_LINES}
BOTH = pytest.mark.parametrize("layout", LAYOUTS.values(), ids=list(LAYOUTS))
# Both rungs share the formulas for the thread's first row / column and the sub-tile steps.
SHARED_LINES = ("const int my_row = (warp / (kBN / kWN)) * kWM + (lane / kLaneColumns) * kTM;",
                "const int my_column = (warp % (kBN / kWN)) * kWN + (lane % kLaneColumns) * kTN;",
                "&As[current][k][my_row + wm * kSubM]", "&Bs[current][k][my_column + wn * kSubN]",
                "const int row = row0 + my_row + (i / kTM) * kSubM + i % kTM;",
                "column0 + my_column + wn * kSubN")


@BOTH
def test_the_model_reads_the_sources_tiles(layout):
    rung = MATMUL.rung(layout.rung_id)
    source = rung.path.read_text(encoding="utf-8")
    sizes, lines = SOURCE_LINES[layout.rung_id]
    for line in (*lines, *SHARED_LINES):
        assert line in source, line
    L = layout
    assert (L.BM, L.BN, L.BK, L.THREADS, L.WM, L.WN, L.TM, L.TN, L.SUB_M, L.SUB_N) == sizes
    launcher = load_module(rung.companion, f"test_matmul_{layout.rung_id}_launcher")
    assert (launcher.TILE_M, launcher.TILE_N, launcher.THREADS) == (L.BM, L.BN, L.THREADS)


# ---------------------------------------------------------------- who owns what (the .hip files' formulas)


def owners(layout: Layout) -> np.ndarray:
    found = np.zeros((layout.BM, layout.BN), dtype=int)
    for t in range(layout.THREADS):
        found[np.ix_(layout.thread_rows(t), layout.thread_columns(t))] += 1
    return found


def staged(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """How many times each element of an A tile and a B tile is staged."""
    a, b = np.zeros((layout.BM, layout.BK), dtype=int), np.zeros((layout.BK, layout.BN), dtype=int)
    for t in range(layout.THREADS):
        for row, k in layout.a_pieces(t):
            if row < layout.BM:
                a[row, k:k + 4] += 1
        for k, column in layout.b_pieces(t):
            if k < layout.BK:
                b[k, column:column + 4] += 1
    return a, b


@BOTH
def test_each_element_of_the_block_tile_is_one_threads(layout):
    assert (owners(layout) == 1).all()
    assert len(layout.thread_rows(0)) * len(layout.thread_columns(0)) == layout.BM * layout.BN // layout.THREADS


@BOTH
def test_the_staging_covers_each_element_of_a_tile_once(layout):
    a, b = staged(layout)
    assert (a == 1).all() and (b == 1).all()


def test_v19_with_v17s_b_passes_fails_the_model():
    """The model can fail: v17's 8 B rows a pass (256 threads) copied into v19 (128 threads: 4 a pass)
    stages B rows 0-3, 8-11, 16-19 and 24-27, misses 4-7 and 12-15; v17's sub-tile count (2 across a warp
    of 64 columns instead of 4) leaves half the warp tile without an owner."""
    slip = dataclasses.replace(LAYOUTS["v19_thread_tile_8x16"], b_rows_per_pass=8)
    a, b = staged(slip)
    assert (a == 1).all() and (b[4:8] == 0).all() and (b[12:16] == 0).all()
    narrow = dataclasses.replace(LAYOUTS["v19_thread_tile_8x16"], WN=32)
    assert (owners(narrow) == 0).any()


# ---------------------------------------------------------------- shared-memory banks and global sectors


def wavefronts(word_addresses) -> tuple[int, int]:
    """(wavefronts a warp's access takes, the fewest it could take): the most distinct words one bank
    serves, against the distinct words over 32 banks. Equal: conflict-free."""
    words = set(word_addresses)
    per_bank: dict[int, set[int]] = {}
    for word in words:
        per_bank.setdefault(word % BANKS, set()).add(word)
    return max(len(found) for found in per_bank.values()), math.ceil(len(words) / BANKS)


def a_reads(layout: Layout, k: int, wm: int, warp: int, row_of=None) -> list[int]:
    """Words of As a warp's LDS.128 of sub-tile wm at k reads (one float4 a lane)."""
    row_of = row_of or layout.thread_rows
    lanes = range(warp * layout.LANES, (warp + 1) * layout.LANES)
    return [k * layout.A_STRIDE + row_of(t)[wm * layout.TM] + e for t in lanes for e in range(4)]


def v08_rows(t: int) -> list[int]:
    """v08's thread rows (a warp tile 64 high, 8 consecutive rows a lane row): the layout v17 replaces."""
    warp, lane = divmod(t, 32)
    return [(warp // 4) * 64 + (lane // 4) * 8 + i for i in range(8)]


WARPS = [(layout, warp) for layout in LAYOUTS.values() for warp in range(layout.THREADS // layout.LANES)]


@pytest.mark.parametrize("layout, warp", WARPS, ids=[f"{layout.rung_id}-warp{warp}" for layout, warp in WARPS])
def test_every_shared_access_of_a_warp_is_conflict_free(layout, warp):
    L = layout
    lanes = range(warp * L.LANES, (warp + 1) * L.LANES)
    for k in range(L.BK):
        for wm in range(L.WM // L.SUB_M):
            assert wavefronts(a_reads(L, k, wm, warp)) == (1, 1)
        for wn in range(L.WN // L.SUB_N):
            b_words = [k * L.BN + L.thread_columns(t)[wn * L.TN] + e for t in lanes for e in range(4)]
            assert wavefronts(b_words) == (1, 1)
    for j in range(L.a_loads):
        for e in range(4):                       # A's transposed scalar stores: As[k + e][row]
            stores = [(L.a_pieces(t)[j][1] + e) * L.A_STRIDE + L.a_pieces(t)[j][0] for t in lanes]
            assert wavefronts(stores) == (1, 1)
            unpadded = [(L.a_pieces(t)[j][1] + e) * L.BM + L.a_pieces(t)[j][0] for t in lanes]
            assert wavefronts(unpadded) == (2, 1)            # what the 4 floats of padding remove
    for j in range(L.b_loads):
        b_stores = [L.b_pieces(t)[j][0] * L.BN + L.b_pieces(t)[j][1] + e for t in lanes for e in range(4)]
        assert wavefronts(b_stores) == (4, 4)                # 512 bytes: 4 wavefronts, the fewest
    if L.rung_id == "v17_prefetch_double_buffer":
        # v08's 8 consecutive rows a lane put lane rows r and r + 4 on the same banks: 2 wavefronts a read.
        assert wavefronts(a_reads(L, 0, 0, warp, v08_rows)) == (2, 1)


@BOTH
@pytest.mark.parametrize("k_size", [4096, 520])
def test_a_warps_global_loads_use_whole_32_byte_sectors(layout, k_size):
    """Row-major A of K columns (a multiple of 4, 16-byte aligned base): each LDG.128 of a warp reads
    whole sectors (2 lanes a row: 16 rows x 32 bytes); B's read 512 contiguous bytes of one row."""
    L = layout
    for warp in range(L.THREADS // L.LANES):
        lanes = range(warp * L.LANES, (warp + 1) * L.LANES)
        for j in range(L.a_loads):
            a_bytes = {4 * (row * k_size + k) + byte for row, k in (L.a_pieces(t)[j] for t in lanes) for byte in range(16)}
            sectors = {byte // 32 for byte in a_bytes}
            assert len(a_bytes) == 32 * len(sectors) == 32 * 16
        for j in range(L.b_loads):
            b_bytes = sorted(4 * (k * 4096 + column) + byte for k, column in (L.b_pieces(t)[j] for t in lanes)
                             for byte in range(16))
            assert b_bytes == list(range(b_bytes[0], b_bytes[0] + 512))


# ---------------------------------------------------------------- the block loop, run on the CPU


def emulate(layout: Layout, a: np.ndarray, b: np.ndarray, buffers: int = 2) -> np.ndarray:
    """C as the kernel computes it, block by block; ``buffers=1`` is the same schedule with one shared
    buffer (the race the second buffer removes). Elements past the matrix load as zeros (load_four);
    C starts as NaN and every element a thread owns inside the matrix is written once (store_four)."""
    L = layout
    m, k_size = a.shape
    n = b.shape[1]
    tiles = max(1, math.ceil(k_size / L.BK))
    a_pad = np.zeros((math.ceil(m / L.BM) * L.BM, tiles * L.BK + L.BK))
    a_pad[:m, :k_size] = a
    b_pad = np.zeros((tiles * L.BK + L.BK, math.ceil(n / L.BN) * L.BN))
    b_pad[:k_size, :n] = b
    rows = np.array([L.thread_rows(t) for t in range(L.THREADS)])             # (threads, 8)
    columns = np.array([L.thread_columns(t) for t in range(L.THREADS)])       # (threads, 8 or 16)
    # Every element a thread's float4s carry: A's (row, k) and B's (k, column), four a piece.
    a_rows, a_ks = np.array([[row, k + e] for t in range(L.THREADS) for row, k in L.a_pieces(t) for e in range(4)]).T
    b_ks, b_columns = np.array([[k, n + e] for t in range(L.THREADS) for k, n in L.b_pieces(t) for e in range(4)]).T
    c = np.full((m, n), np.nan)
    written = np.zeros((m, n), dtype=int)

    def stage(shared_a, shared_b, row0, column0, k0):
        shared_a[a_ks, a_rows] = a_pad[row0 + a_rows, k0 + a_ks]            # transposed: As[k][m]
        shared_b[b_ks, b_columns] = b_pad[k0 + b_ks, column0 + b_columns]

    for row0 in range(0, m, L.BM):
        for column0 in range(0, n, L.BN):
            shared_a = np.full((buffers, L.BK, L.A_STRIDE), np.nan)
            shared_b = np.full((buffers, L.BK, L.BN), np.nan)
            stage(shared_a[0], shared_b[0], row0, column0, 0)                # prologue, then a barrier
            sums = np.zeros((L.THREADS, len(rows[0]), len(columns[0])))
            for tile in range(tiles):
                current, other = tile % buffers, (tile + 1) % buffers
                if tile + 1 < tiles:                  # stores first: the worst order within the interval
                    stage(shared_a[other], shared_b[other], row0, column0, (tile + 1) * L.BK)
                a_values = shared_a[current][:, rows]                         # (BK, threads, rows)
                b_values = shared_b[current][:, columns]                      # (BK, threads, columns)
                sums += a_values.transpose(1, 2, 0) @ b_values.transpose(1, 0, 2)
            at_rows = np.broadcast_to((rows + row0)[:, :, None], sums.shape)
            at_columns = np.broadcast_to((columns + column0)[:, None, :], sums.shape)
            inside = (at_rows < m) & (at_columns < n)
            c[at_rows[inside], at_columns[inside]] = sums[inside]
            np.add.at(written, (at_rows[inside], at_columns[inside]), 1)
    assert (written == 1).all()
    return c


@BOTH
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 517), (39, 41, 37), (1, 4095, 17), (4095, 7, 3),
                                   (130, 260, 48), (1823, 781, 517), (1000, 1000, 1000)],
                         ids=lambda s: "x".join(map(str, s)))
def test_the_double_buffered_schedule_computes_c(layout, shape):
    m, n, k = shape
    a, b = MATMUL.spec.make_inputs(shape, "float32", seed=sum(shape))
    a64, b64 = a.double().numpy(), b.double().numpy()
    c = emulate(layout, a64, b64)
    np.testing.assert_allclose(c, a64 @ b64, rtol=1e-12, atol=1e-12 * math.sqrt(k))


@BOTH
def test_one_shared_buffer_with_one_barrier_a_tile_fails_the_model(layout):
    """The model can fail: with one buffer, tile t + 1's stores overwrite tile t before it is read."""
    a, b = MATMUL.spec.make_inputs((130, 260, 48), "float32", seed=3)
    a64, b64 = a.double().numpy(), b.double().numpy()
    wrong = emulate(layout, a64, b64, buffers=1)
    assert np.linalg.norm(wrong - a64 @ b64) > 0.1 * np.linalg.norm(a64 @ b64)


# ------------------------------------------------------------------------------------------ GPU tier


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@BOTH
@pytest.mark.parametrize("shape", [(1, 1, 1), (129, 131, 33), (257, 132, 52), (1823, 781, 517), (1000, 1000, 1000),
                                   (4095, 4095, 4095), (4096, 4096, 4096)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "offset-one-float"])
def test_the_rung_on_both_load_paths(layout, shape, offset):
    """offset 1: A and B start 4 bytes past a 16-byte boundary, so vectorizable() sends even K = 52 and
    N = 132 down the scalar path; offset 0 takes the 16-byte path wherever K and N are multiples of 4."""
    run = MATMUL.rung(layout.rung_id).build()
    for seed in (1, 2):
        a, b = MATMUL.spec.make_inputs(shape, "float32", seed=seed, device="cuda")
        if offset:
            a = torch.cat([a.new_zeros(offset), a.flatten()])[offset:].view(a.shape)
            b = torch.cat([b.new_zeros(offset), b.flatten()])[offset:].view(b.shape)
            assert a.data_ptr() % 16 and b.data_ptr() % 16
        out = torch.full((shape[0], shape[1]), float("nan"), device="cuda")
        assert output_failure(MATMUL.spec, (a, b), run(a, b, out=out), "float32") is None, (shape, offset, seed)
