"""The tensor-core rungs of matmul (v09-v14 and v18, CUDA dialect): their index arithmetic, checked on the CPU
against a Python model of the hardware's data layouts; their SASS (HMMA / HGMMA present, no spills);
their launchers' operand handling. GPU tier: each rung against float64 on shapes that cross every tile
edge. Every rung's correctness on the spec's edge shapes is also checked by
tests/test_ops_ladders.py::test_rung_is_correct_on_the_gpu.

The models follow the PTX ISA's definitions (fragments of mma.m16n8k16, ldmatrix, the 128-byte swizzle
of TMA and wgmma's shared-memory matrix descriptors); the address formulas are those of the .cuh files,
written once more here on purpose: a model that imported them could not disagree with them.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from hello_gpu.ops import load_op
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.compiler import ptxas_section
from hello_gpu.runtime.device import gpu_vendor
from hello_gpu.runtime.resources import parse_ptxas_report

HAS_GPU = gpu_vendor() is not None
MATMUL = load_op("matmul")
MMA_SYNC_RUNGS = ("v09_mma_sync", "v10_cp_async_pipeline", "v11_large_warp_tiles")   # padded rows, mma_sync.cuh's loop
SWIZZLED_RUNGS = ("v16_swizzled_double_buffered",)                                      # XOR-swizzled stages, own loop
HMMA_RUNGS = MMA_SYNC_RUNGS + SWIZZLED_RUNGS
WGMMA_RUNGS = ("v12_wgmma_tma", "v13_warp_specialized", "v14_persistent_grouped", "v18_tma_store_epilogue")
TENSOR_CORE_RUNGS = HMMA_RUNGS + WGMMA_RUNGS
tensor_cores = load_module(MATMUL.path / "tensor_cores.py", "test_matmul_tensor_cores_module")


def _tiles(rung_id: str) -> dict[str, int]:
    return tensor_cores.tile_constants(MATMUL.rung(rung_id).path)


# ---------------------------------------------------------------- mma.sync: ldmatrix and m16n8k16 model


def ldmatrix_x4(shared: np.ndarray, addresses: list[int], trans: bool) -> list[list[tuple]]:
    """Registers [lane][i] of ldmatrix.x4 (.trans): lanes 8i..8i+7 address matrix i's 8 rows of 8 elements;
    lane 4g + t gets row g, elements 2t, 2t+1 (.trans: column g, rows 2t, 2t+1)."""
    matrices = [np.stack([shared[addresses[8 * i + r]:addresses[8 * i + r] + 8] for r in range(8)]) for i in range(4)]
    registers = []
    for lane in range(32):
        g, t = lane // 4, lane % 4
        if trans:
            registers.append([(m[2 * t, g], m[2 * t + 1, g]) for m in matrices])
        else:
            registers.append([(m[g, 2 * t], m[g, 2 * t + 1]) for m in matrices])
    return registers


def mma_m16n8k16(a_regs, b_regs) -> list[list[float]]:
    """D = A B for one m16n8k16, from each lane's fragments as PTX defines them; returns each lane's c[0..3]."""
    a, b = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for index, (row, column) in enumerate(((g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8))):
            a[row, column:column + 2] = a_regs[lane][index]
        for index, k in enumerate((2 * t, 2 * t + 8)):
            b[k:k + 2, g] = b_regs[lane][index]
    d = a @ b
    return [[d[lane // 4, 2 * (lane % 4)], d[lane // 4, 2 * (lane % 4) + 1],
             d[lane // 4 + 8, 2 * (lane % 4)], d[lane // 4 + 8, 2 * (lane % 4) + 1]] for lane in range(32)]


def warp_tile_model(a_tile: np.ndarray, b_tile: np.ndarray, mi: int, ni: int, sa: int, sb: int) -> np.ndarray:
    """mma_sync.cuh's warp_tile_mma and store_warp_tile for one warp whose tile starts at row 0, column 0:
    A (16 mi, BK) and B (BK, 8 ni) laid in padded shared rows of sa and sb elements."""
    bk = a_tile.shape[1]
    a_shared = np.zeros(a_tile.shape[0] * sa)
    b_shared = np.zeros(bk * sb)
    for r in range(a_tile.shape[0]):
        a_shared[r * sa:r * sa + bk] = a_tile[r]
    for r in range(bk):
        b_shared[r * sb:r * sb + b_tile.shape[1]] = b_tile[r]
    sums = np.zeros((mi, ni, 32, 4))
    for kk in range(0, bk, 16):
        a = [ldmatrix_x4(a_shared, [(16 * i + lane % 16) * sa + kk + (lane // 16) * 8 for lane in range(32)], False)
             for i in range(mi)]
        b = [None] * ni
        for j in range(0, ni, 2):
            r = ldmatrix_x4(b_shared, [(kk + lane % 16) * sb + 8 * j + (lane // 16) * 8 for lane in range(32)], True)
            b[j] = [(regs[0], regs[1]) for regs in r]
            b[j + 1] = [(regs[2], regs[3]) for regs in r]
        for i in range(mi):
            for j in range(ni):
                sums[i, j] += np.array(mma_m16n8k16(a[i], b[j]))
    c = np.full((16 * mi, 8 * ni), np.nan)
    for i in range(mi):
        for j in range(ni):
            for lane in range(32):
                g, t = lane // 4, lane % 4
                row, column = 16 * i + g, 8 * j + 2 * t
                c[row, column:column + 2] = sums[i, j, lane, 0:2]
                c[row + 8, column:column + 2] = sums[i, j, lane, 2:4]
    return c


@pytest.mark.parametrize("rung_id", MMA_SYNC_RUNGS)
def test_warp_tile_fragments_compute_the_warp_tile_product(rung_id):
    """The ldmatrix addresses, fragment registers and store positions of a warp tile of each rung's size
    give exactly A B for its BK slab (integers: the float64 model is exact)."""
    tiles = _tiles(rung_id)
    mi, ni = tiles["WM"] // 16, tiles["WN"] // 8
    rng = np.random.default_rng(7)
    a = rng.integers(-4, 5, (16 * mi, tiles["BK"])).astype(np.float64)
    b = rng.integers(-4, 5, (tiles["BK"], 8 * ni)).astype(np.float64)
    got = warp_tile_model(a, b, mi, ni, tiles["BK"] + 8, tiles["BN"] + 8)
    np.testing.assert_array_equal(got, a @ b)


def test_the_model_sees_a_wrong_address():
    """The model is not vacuous: swapping the two k halves of the A addresses (lane / 16) breaks it."""
    rng = np.random.default_rng(8)
    a = rng.integers(-4, 5, (16, 16)).astype(np.float64)
    b = rng.integers(-4, 5, (16, 8)).astype(np.float64)
    shared = np.zeros(16 * 24)
    for r in range(16):
        shared[r * 24:r * 24 + 16] = a[r]
    wrong = ldmatrix_x4(shared, [(lane % 16) * 24 + (1 - lane // 16) * 8 for lane in range(32)], False)
    right = ldmatrix_x4(shared, [(lane % 16) * 24 + (lane // 16) * 8 for lane in range(32)], False)
    b_shared = np.zeros(16 * 16)
    for r in range(16):
        b_shared[r * 16:r * 16 + 8] = b[r]
    b_regs = [(regs[0], regs[1]) for regs in ldmatrix_x4(b_shared, [(lane % 16) * 16 for lane in range(32)], True)]
    d = np.array(mma_m16n8k16(right, b_regs))
    assert d[0, 0] == (a @ b)[0, 0]
    assert not np.array_equal(np.array(mma_m16n8k16(wrong, b_regs)), d)


@pytest.mark.parametrize("rung_id", MMA_SYNC_RUNGS)
def test_padded_rows_make_ldmatrix_conflict_free(rung_id):
    """Each 8-lane phase of an ldmatrix reads 8 rows of 16 bytes; with rows padded by 16 bytes the 8 rows
    start in 8 different 4-bank groups (32 banks of 4 bytes), so no phase is replayed. Unpadded rows
    (64 bytes apart for A at BK = 32) would put 2 rows on each group: a 2-way conflict at best."""
    tiles = _tiles(rung_id)

    def groups(stride_elements: int) -> set[int]:
        return {((row * stride_elements * 2) // 16) % 8 for row in range(8)}
    assert len(groups(tiles["BK"] + 8)) == 8 and len(groups(tiles["BN"] + 8)) == 8
    assert len(groups(tiles["BK"])) < 8


# ---------------------------------------------------------------- mma.sync over XOR-swizzled stages (v16)
# The v16 kernel's layouts and schedule, written once more in Python: the copy of each thread's chunks into
# a stage, the 128-byte XOR swizzle, the ldmatrix addresses, the two fragment buffers, the cp.async groups
# and barriers of the 4-stage pipeline, and the epilogue through shared memory.

V16 = "v16_swizzled_double_buffered"
V16_SOURCE = MATMUL.rung(V16).path.read_text()


def swizzled(row: int, chunk: int, chunks: int) -> int:
    """v16's swizzled<CHUNKS>: element offset of 16-byte chunk ``chunk`` of ``row`` (``chunks`` a row), moved
    inside its 128-byte line by XOR with the line's row number mod 8 (64-byte rows: two a line, row // 2)."""
    rows_per_line = 1 if chunks >= 8 else 8 // chunks
    return 8 * ((row * chunks + chunk) ^ ((row // rows_per_line) % 8))


def unswizzled(row: int, chunk: int, chunks: int) -> int:
    return 8 * (row * chunks + chunk)


def wavefronts(byte_addresses, width: int) -> int:
    """Shared-memory passes one access of ``width``-byte pieces takes (32 banks of 4 bytes, 128 bytes a pass):
    16-byte pieces go 8 lanes a phase (each call here is one phase), a phase needing one pass per distinct
    piece in its busiest 16-byte bank group; 4-byte pieces go 32 lanes at once, one pass per distinct word
    in the busiest bank. The same piece read twice is one broadcast."""
    groups: dict[int, set[int]] = {}
    for address in byte_addresses:
        groups.setdefault((address // width) % (128 // width), set()).add(address // width)
    return max(len(pieces) for pieces in groups.values())


def v16_geometry(layout=swizzled) -> dict:
    """Every shared-memory address v16 forms, in bytes from the start of a stage (or of the C tile)."""
    t = _tiles(V16)
    bm, bn, bk, wm, wn, threads = t["BM"], t["BN"], t["BK"], t["WM"], t["WN"], t["Threads"]
    chunks_a, chunks_b, tile_a = bk // 8, bn // 8, bm * bk
    copies = {"A": [], "B": []}                   # [thread][copy] -> (row, chunk, byte offset)
    for thread in range(threads):
        copies["A"].append([(thread // chunks_a + c * (threads // chunks_a), thread % chunks_a) for c in
                            range(bm * chunks_a // threads)])
        copies["B"].append([(thread // chunks_b + c * (threads // chunks_b), thread % chunks_b) for c in
                            range(bk * chunks_b // threads)])
    a_to = [[2 * layout(r, ch, chunks_a) for r, ch in per] for per in copies["A"]]
    b_to = [[2 * tile_a + 2 * layout(r, ch, chunks_b) for r, ch in per] for per in copies["B"]]
    fragments = {}                                # (warp, step) -> {"A": [i][lane], "B": [j // 2][lane]}
    for warp in range(threads // 32):
        warp_row, warp_column = (warp // (bn // wn)) * wm, (warp % (bn // wn)) * wn
        for step in range(bk // 16):
            a_at = [2 * layout(warp_row + lane % 16, 2 * step + lane // 16, chunks_a) for lane in range(32)]
            fragments[warp, step] = {
                "A": [[address + i * 16 * 2 * bk for address in a_at] for i in range(wm // 16)],
                "B": [[2 * tile_a + 2 * layout(16 * step + lane % 16, warp_column // 8 + j + lane // 16, chunks_b)
                       for lane in range(32)] for j in range(0, wn // 8, 2)]}
    return {"tiles": t, "copies": copies, "a_to": a_to, "b_to": b_to, "fragments": fragments}


def test_v16_formulas_are_the_kernels():
    """The model's address formulas are the ones v16 writes (a drift in either fails here)."""
    for line in ("return 8 * ((row * CHUNKS + chunk) ^ ((row / kRowsPerLine) % 8));",
                 "constexpr int kRowsPerLine = CHUNKS >= 8 ? 1 : 8 / CHUNKS;",
                 "const int row = threadIdx.x / kChunksA + c * (kThreads / kChunksA);",
                 "const int row = threadIdx.x / kChunksB + c * (kThreads / kChunksB);",
                 "a_to[c] = 2 * swizzled<kChunksA>(row, a_chunk);",
                 "b_to[c] = 2 * kTileA + 2 * swizzled<kChunksB>(row, b_chunk);",
                 "a_at[s] = 2 * swizzled<kChunksA>(warp_row + lane % 16, 2 * s + lane / 16);",
                 "b_at[s][j / 2] = 2 * kTileA + 2 * swizzled<kChunksB>(16 * s + lane % 16, warp_column / 8 + j + lane "
                 "/ 16);",
                 "ldmatrix_x4(a[buffer][i], stage + a_at[step] + i * 16 * 2 * kBK);",
                 "cp_async_wait<kStages - 2>();", "cp_async_wait<kStages - 3>();",
                 "if (t + kStages - 1 < tiles) copy_next_tile(slot == 0 ? kStages - 1 : slot - 1);",
                 "load_fragments(0, 0, shared_base + next_slot * kStageBytes);",
                 "const bool whole_chunks = N % 8 == 0 && (reinterpret_cast<uintptr_t>(C) & 15) == 0;"):
        assert line in V16_SOURCE, line


@pytest.mark.parametrize("chunks, rows", ((4, 128), (32, 32)), ids=("A 128x32", "B 32x256"))
def test_the_swizzle_permutes_chunks_within_their_128_byte_line(chunks, rows):
    places = [swizzled(r, c, chunks) // 8 for r in range(rows) for c in range(chunks)]
    assert sorted(places) == list(range(rows * chunks))
    assert all(place // 8 == (r * chunks + c) // 8 for place, (r, c) in
               zip(places, ((r, c) for r in range(rows) for c in range(chunks))))


def test_v16_ldmatrix_phases_are_conflict_free_and_unswizzled_rows_would_not_be():
    """Every 8-lane phase of every ldmatrix of every warp is one pass over the banks. The same addresses
    without the XOR (unpadded rows) would take 4 passes for A (64-byte rows: 8 rows on 2 bank groups) and 8
    for B (512-byte rows: all 8 rows on one group), v09-v11's reason to pad."""
    for layout, expected in ((swizzled, {"A": {1}, "B": {1}}), (unswizzled, {"A": {4}, "B": {8}})):
        seen = {"A": set(), "B": set()}
        for per_step in v16_geometry(layout)["fragments"].values():
            for operand in ("A", "B"):
                for addresses in per_step[operand]:
                    seen[operand] |= {wavefronts(addresses[8 * p:8 * p + 8], 16) for p in range(4)}
        assert seen == expected, layout.__name__


def test_v16_copies_and_epilogue_are_conflict_free():
    """cp.async: each warp's 8-thread phases write 8 chunks on 8 bank groups. Epilogue: a warp's 4-byte
    stores of a pair (rows g, words t) hit 32 different banks; its 16-byte reads of C rows, one pass a phase."""
    geometry = v16_geometry()
    tiles = geometry["tiles"]
    for operand in ("a_to", "b_to"):
        for warp in range(tiles["Threads"] // 32):
            per_thread = geometry[operand][32 * warp:32 * warp + 32]
            for c in range(len(per_thread[0])):
                addresses = [offsets[c] for offsets in per_thread]
                assert {wavefronts(addresses[8 * p:8 * p + 8], 16) for p in range(4)} == {1}, (operand, warp, c)
    chunks = tiles["BN"] // 8
    for warp in range(tiles["Threads"] // 32):
        across = tiles["BN"] // tiles["WN"]
        warp_row, warp_column = (warp // across) * tiles["WM"], (warp % across) * tiles["WN"]
        for i in range(tiles["WM"] // 16):
            for j in range(tiles["WN"] // 8):
                for half in (0, 8):
                    stores = [2 * (swizzled(warp_row + 16 * i + lane // 4 + half, (warp_column + 8 * j) // 8, chunks)
                                   + 2 * (lane % 4)) for lane in range(32)]
                    assert wavefronts(stores, 4) == 1
    for warp in range(tiles["Threads"] // 32):
        for c in range(tiles["BM"] * chunks // tiles["Threads"]):
            reads = [2 * swizzled(thread // chunks + c * (tiles["Threads"] // chunks), thread % chunks, chunks)
                     for thread in range(32 * warp, 32 * warp + 32)]
            assert {wavefronts(reads[8 * p:8 * p + 8], 16) for p in range(4)} == {1}


class StageModel:
    """The stages as cp.async and the barriers make them visible. A copy lands only when a wait_group
    covers its commit group, and other warps see it only after the next barrier; a slot copied into and
    read between the same two barriers is a race, whichever came first in program order."""

    def __init__(self, count: int, elements: int):
        self.memory = np.full((count, elements), np.nan)
        self.open, self.committed = [], []
        self.in_flight, self.unpublished, self.read, self.written = set(), set(), set(), set()

    def copy(self, slot: int, offset: int, values: np.ndarray) -> None:
        assert slot not in self.read, f"slot {slot} copied into while it may still be read"
        self.written.add(slot)
        self.in_flight.add(slot)
        self.open.append((slot, offset, values))

    def commit(self) -> None:
        self.committed.append(self.open)
        self.open = []

    def wait(self, pending: int) -> None:
        while len(self.committed) > pending:
            for slot, offset, values in self.committed.pop(0):
                self.memory[slot, offset:offset + len(values)] = values
                self.unpublished.add(slot)
        self.in_flight = {slot for group in self.committed + [self.open] for slot, _, _ in group}

    def barrier(self) -> None:
        self.unpublished, self.read, self.written = set(), set(), set()

    def view(self, slot: int) -> np.ndarray:
        assert not {slot} & (self.in_flight | self.unpublished | self.written), f"slot {slot} read before it landed"
        self.read.add(slot)
        return self.memory[slot]


def v16_block_model(a: np.ndarray, b: np.ndarray, n: int, block: tuple[int, int]) -> np.ndarray:
    """C (M x n, NaN where not written) after the block at grid (y, x) = ``block`` of v16, statement by
    statement in the kernel's order. a: M x K and b: K x ldb as the launcher hands them (K and ldb multiples
    of 8, n <= ldb); n a multiple of 8 takes the shared-memory epilogue (C aligned), else the pair stores."""
    geometry = v16_geometry()
    t = geometry["tiles"]
    bk, stages, threads = t["BK"], t["Stages"], t["Threads"]
    m, k = a.shape
    ldb = b.shape[1]
    row0, column0 = block[0] * t["BM"], block[1] * t["BN"]
    warps, steps, mi, ni = threads // 32, bk // 16, t["WM"] // 16, t["WN"] // 8
    model = StageModel(stages, t["BM"] * bk + bk * t["BN"])
    tiles = -(-k // bk)

    def copy_next_tile(slot: int, tile: int) -> None:
        k_left = k - tile * bk
        for thread in range(threads):
            for (row, chunk), to in zip(geometry["copies"]["A"][thread], geometry["a_to"][thread]):
                inside = row0 + row < m and 8 * chunk < k_left
                values = a[row0 + row, tile * bk + 8 * chunk:tile * bk + 8 * chunk + 8] if inside else np.zeros(8)
                model.copy(slot, to // 2, values)
            for (row, chunk), to in zip(geometry["copies"]["B"][thread], geometry["b_to"][thread]):
                inside = column0 + 8 * chunk < ldb and row < k_left
                values = b[tile * bk + row, column0 + 8 * chunk:column0 + 8 * chunk + 8] if inside else np.zeros(8)
                model.copy(slot, to // 2, values)

    def load_fragments(warp: int, step: int, slot: int):
        shared = model.view(slot)
        at = geometry["fragments"][warp, step]
        a_regs = [ldmatrix_x4(shared, [x // 2 for x in addresses], False) for addresses in at["A"]]
        b_regs = []
        for addresses in at["B"]:
            r = ldmatrix_x4(shared, [x // 2 for x in addresses], True)
            b_regs += [[(regs[0], regs[1]) for regs in r], [(regs[2], regs[3]) for regs in r]]
        return a_regs, b_regs

    for s in range(stages - 1):
        if s < tiles:
            copy_next_tile(s, s)
        model.commit()
    model.wait(stages - 2)
    model.barrier()
    fragments = [[load_fragments(w, 0, 0), None] for w in range(warps)]
    sums = np.zeros((warps, mi, ni, 32, 4))
    slot = 0
    for tile in range(tiles):
        next_slot = 0 if slot + 1 == stages else slot + 1
        for step in range(steps):
            if step + 1 < steps:
                for w in range(warps):
                    fragments[w][(step + 1) % 2] = load_fragments(w, step + 1, slot)
            else:
                model.wait(stages - 3)
                model.barrier()
                if tile + stages - 1 < tiles:
                    copy_next_tile(stages - 1 if slot == 0 else slot - 1, tile + stages - 1)
                model.commit()
                for w in range(warps):
                    fragments[w][0] = load_fragments(w, 0, next_slot)
            for w in range(warps):
                a_regs, b_regs = fragments[w][step % 2]
                for i in range(mi):
                    for j in range(ni):
                        sums[w, i, j] += np.array(mma_m16n8k16(a_regs[i], b_regs[j]))
        slot = next_slot
    model.wait(0)

    chunks = t["BN"] // 8
    c = np.full((m, n), np.nan)
    if n % 8:                                    # store_warp_tile: pairs, each element inside C
        for w in range(warps):
            warp_row, warp_column = (w // (t["BN"] // t["WN"])) * t["WM"], (w % (t["BN"] // t["WN"])) * t["WN"]
            for i, j, lane in np.ndindex(mi, ni, 32):
                row, column = row0 + warp_row + 16 * i + lane // 4, column0 + warp_column + 8 * j + 2 * (lane % 4)
                for half, values in ((0, sums[w, i, j, lane, 0:2]), (8, sums[w, i, j, lane, 2:4])):
                    if row + half < m and column < n:
                        c[row + half, column:min(column + 2, n)] = values[:min(2, n - column)]
        return c
    tile_c = np.full(t["BM"] * t["BN"], np.nan)
    for w in range(warps):
        warp_row, warp_column = (w // (t["BN"] // t["WN"])) * t["WM"], (w % (t["BN"] // t["WN"])) * t["WN"]
        for i in range(mi):
            for j in range(ni):
                for lane in range(32):
                    row, chunk = warp_row + 16 * i + lane // 4, (warp_column + 8 * j) // 8
                    for half, values in ((0, sums[w, i, j, lane, 0:2]), (8, sums[w, i, j, lane, 2:4])):
                        at = swizzled(row + half, chunk, chunks) + 2 * (lane % 4)
                        tile_c[at:at + 2] = values
    for thread in range(threads):
        for copy in range(t["BM"] * chunks // threads):
            row, chunk = thread // chunks + copy * (threads // chunks), thread % chunks
            if row0 + row < m and column0 + 8 * chunk < n:
                at = swizzled(row, chunk, chunks)
                c[row0 + row, column0 + 8 * chunk:column0 + 8 * chunk + 8] = tile_c[at:at + 8]
    return c


@pytest.mark.parametrize("shape, block", (((100, 200, 72), (0, 0)), ((128, 256, 160), (0, 0)),
                                          ((1823, 781, 517), (14, 3))),
                         ids=("partial-tiles", "5-k-tiles", "1823x781x517"))
def test_v16_block_model_gives_the_product(shape, block):
    """One block of v16, modelled from the copies to the epilogue, gives its part of A @ B exactly (small
    integers) and writes nothing else. The first shape leaves rows, columns and the last k tile partly
    outside (zero-filled chunks, rows not stored); the second takes 5 k tiles through 4 stages, so every slot
    is refilled while others are read; the third is the spec's edge shape at its last block (31 rows, 13
    columns: K and N padded to 520 and 784 as the launcher does, 17 k tiles, the pair-store epilogue)."""
    m, n, k = shape
    rng = np.random.default_rng(17)
    a = rng.integers(-3, 4, (m, k)).astype(np.float64)
    b = rng.integers(-3, 4, (k, n)).astype(np.float64)
    k8, n8 = -(-k // 8) * 8, -(-n // 8) * 8
    a_used, b_used = np.zeros((m, k8)), np.zeros((k8, n8))
    a_used[:, :k], b_used[:k, :n] = a, b
    got = v16_block_model(a_used, b_used, n, block)
    t = _tiles(V16)
    rows = slice(block[0] * t["BM"], min(m, block[0] * t["BM"] + t["BM"]))
    columns = slice(block[1] * t["BN"], min(n, block[1] * t["BN"] + t["BN"]))
    np.testing.assert_array_equal(got[rows, columns], (a @ b)[rows, columns])
    got[rows, columns] = np.nan
    assert np.isnan(got).all(), "an element outside the block was written"


def test_the_stage_model_catches_a_wait_one_group_short():
    """The model is not vacuous. After the prologue (tiles 0-2 in groups 0-2, wait 2: tile 0 landed), the end
    of tile 0 waits for kStages - 3 = 1 pending group so that tile 1 has landed; waiting for 2 leaves it in
    flight. A copy into a slot read since the last barrier is refused too."""
    model = StageModel(4, 8)
    for slot in range(3):
        model.copy(slot, 0, np.ones(8))
        model.commit()
    model.wait(2)
    model.barrier()
    model.view(0)
    model.wait(2)
    model.barrier()
    with pytest.raises(AssertionError, match="read before it landed"):
        model.view(1)
    model.wait(1)
    model.barrier()
    np.testing.assert_array_equal(model.view(1), np.ones(8))
    with pytest.raises(AssertionError, match="copied into while it may still be read"):
        model.copy(1, 0, np.zeros(8))


def test_v16_fits_one_block_an_sm_with_no_local_memory():
    """The launcher's dynamic shared memory is the kernel's 4 stages (98,304 bytes, under the 227 KiB a block
    may take); at 255 registers a thread one block of 256 threads fits an SM (8 warps, as v11), and nothing
    lives in local memory (the two fragment buffers are indexed by compile-time constants only)."""
    launcher = load_module(MATMUL.rung(V16).companion, "test_matmul_v16_launcher")
    t = _tiles(V16)
    assert launcher.SHARED_BYTES == 2 * t["Stages"] * (t["BM"] * t["BK"] + t["BK"] * t["BN"]) == 98_304
    assert launcher.SHARED_BYTES + 1024 <= 232_448
    assert "require_dynamic_shared(kStages * kStageBytes);" in V16_SOURCE
    kernel = MATMUL.rung(V16).kernel(arch="sm_90", dtype="bfloat16")
    resources = kernel.resources
    assert resources.local_bytes == 0 and resources.spill_store_bytes == 0, resources
    occupancy = kernel.occupancy(t["Threads"], shared_mem=launcher.SHARED_BYTES)
    assert (occupancy.blocks_per_sm, occupancy.warps_per_sm) == (1, 8), str(occupancy)


def test_v16_main_loop_is_mostly_hmma():
    """The compiler evidence for v16's hypothesis, on sm_90 as the H200 builds it: the k loop holds one
    tile's 64 HMMA, 16 LDSM and 6 LDGSTS and fewer than 3 instructions per HMMA (v10: 14.3, v11: 8.5 by the
    same count), with no local-memory traffic anywhere in the kernel."""
    evidence = load_module(Path(__file__).resolve().parents[1] / "benchmarks" / "matmul_sass_evidence.py",
                           "test_matmul_sass_evidence_module")
    rung = MATMUL.rung(V16)
    try:
        sass = rung.kernel(arch="sm_90", dtype="bfloat16").asm("sass")
    except FileNotFoundError as error:
        pytest.skip(f"SASS not checked: {error}")
    body = evidence.main_loop(evidence.instructions(sass))
    ops = [instruction["op"].split(".")[0] for instruction in body]
    assert (ops.count("HMMA"), ops.count("LDSM"), ops.count("LDGSTS")) == (64, 16, 6), sorted(set(ops))
    assert len(body) / ops.count("HMMA") < 3.0, len(body)
    assert not re.search(r"\b(LDL|STL)\b", sass)


# ---------------------------------------------------------------- Hopper: TMA swizzle and wgmma descriptors

tensor_maps = load_module(MATMUL.path / "tensor_maps.py", "test_matmul_tensor_maps_module")
WGMMA_HEADER = (MATMUL.path / "wgmma_tma.cuh").read_text()


def swizzle_128(address: int) -> int:
    """The 128-byte swizzle of a shared-memory byte address: bits 4-6 (16-byte piece of a 128-byte row)
    XOR bits 7-9 (row within a 1024-byte atom)."""
    return address ^ (((address >> 7) & 7) << 4)


def tma_write(shared: np.ndarray, base: int, box: np.ndarray) -> None:
    """A TMA box (rows x 64 16-bit elements) landing at ``base`` with CU_TENSOR_MAP_SWIZZLE_128B."""
    for row in range(box.shape[0]):
        for column in range(box.shape[1]):
            shared[swizzle_128(base + row * 128 + column * 2) // 2] = box[row, column]


def descriptor(address: int, leading: int, stride: int) -> int:
    """wgmma_tma.cuh's matrix_descriptor."""
    return ((address & 0x3FFFF) >> 4) | ((leading >> 4) << 16) | ((stride >> 4) << 32) | (1 << 62)


def fields(desc: int) -> tuple[int, int, int, int]:
    """(start, leading, stride) bytes and the swizzle mode, as the hardware decodes a descriptor."""
    return (desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4, desc >> 62


def wgmma_read_a(shared: np.ndarray, desc: int) -> np.ndarray:
    """A (64 x 16) of a K-major, 128-byte swizzled operand: row m in 8-row atoms SBO apart, 128 bytes a row."""
    start, _, stride, mode = fields(desc)
    assert mode == 1
    return np.array([[shared[swizzle_128(start + (m // 8) * stride + (m % 8) * 128 + 2 * k) // 2] for k in range(16)]
                     for m in range(64)])


def wgmma_read_b(shared: np.ndarray, desc: int, n: int = 128) -> np.ndarray:
    """B (16 x n) of an MN-major, 128-byte swizzled operand: 64-column blocks LBO apart, 8-row k atoms SBO apart."""
    start, leading, stride, mode = fields(desc)
    assert mode == 1
    return np.array([[shared[swizzle_128(start + (j // 64) * leading + (k // 8) * stride + (k % 8) * 128
                                         + 2 * (j % 64)) // 2] for j in range(n)] for k in range(16)])


def test_the_descriptors_are_the_headers():
    """The model's offsets are the ones wgmma_tma.cuh passes (a drift in either fails here)."""
    assert "matrix_descriptor(static_cast<const char*>(rows) + 32 * kk, 16, kAtomBytes)" in WGMMA_HEADER
    assert ("matrix_descriptor(static_cast<const char*>(columns) + 2048 * kk, kColumnBlockBytes, kAtomBytes)"
            in WGMMA_HEADER)
    assert "kAtomBytes = 1024" in WGMMA_HEADER and "kColumnBlockBytes = kTileK * 128" in WGMMA_HEADER
    assert f"kBarrierBytes = {tensor_maps.BARRIER_BYTES};" in WGMMA_HEADER


@pytest.mark.parametrize("rung_id", WGMMA_RUNGS)
def test_tma_tiles_read_through_the_descriptors_give_the_tile_product(rung_id):
    """One stage of each Hopper rung, in the second slot of a 1024-aligned buffer: TMA writes A (BM x 64)
    and B (64 x BN in 64-column boxes 8192 bytes apart), swizzled; each consumer's wgmmas read their 64
    rows and 128-column halves through the descriptors the kernel builds; the sums are A B exactly."""
    tiles = _tiles(rung_id)
    bm, bn, bk = tiles["BM"], tiles["BN"], tiles["BK"]
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (bm, bk)).astype(np.float64)
    b = rng.integers(-3, 4, (bk, bn)).astype(np.float64)
    stage = 2 * (bm * bk + bk * bn)
    assert stage % 1024 == 0, "every slot starts on a swizzle atom"
    base = 3 * 1024 + stage                           # slot 1 of a buffer aligned to 1024 at 3072
    shared = np.full((base + stage) // 2 + 64, np.nan)
    tma_write(shared, base, a)
    for block in range(bn // 64):
        tma_write(shared, base + 2 * bm * bk + block * 64 * 128, b[:, 64 * block:64 * block + 64])
    product = np.zeros((bm, bn))
    for rows in range(0, bm, 64):                   # a consumer warpgroup (v12: one warpgroup, both halves)
        for half in range(bn // 128):
            for kk in range(bk // 16):
                a_desc = descriptor(base + rows * 128 + 32 * kk, 16, 1024)
                b_desc = descriptor(base + 2 * bm * bk + half * 2 * 64 * 128 + 2048 * kk, 64 * 128, 1024)
                product[rows:rows + 64, 128 * half:128 * half + 128] += wgmma_read_a(shared, a_desc) @ wgmma_read_b(
                    shared, b_desc)
    np.testing.assert_array_equal(product, a @ b)


def test_the_swizzle_model_is_not_vacuous():
    """Reading the B operand as K-major (no LBO jump) or without the swizzle gives a different matrix."""
    rng = np.random.default_rng(6)
    b = rng.integers(-3, 4, (64, 128)).astype(np.float64)
    shared = np.full(64 * 128 + 64, np.nan)
    for block in range(2):
        tma_write(shared, block * 8192, b[:, 64 * block:64 * block + 64])
    assert np.array_equal(wgmma_read_b(shared, descriptor(0, 8192, 1024)), b[:16])
    assert not np.array_equal(wgmma_read_b(shared, descriptor(0, 1024, 8192)), b[:16])
    plain = [[shared[(j // 64) * 4096 + k * 64 + j % 64] for j in range(128)] for k in range(16)]
    assert not np.array_equal(np.array(plain), b[:16])


def test_wgmma_accumulator_stores_cover_the_block_once():
    """store_wgmma_block's positions for the 128 threads x 64 registers: each of the 64 x 128 outputs once,
    and the position PTX gives register i of the m64nNk16 D fragment (row 16 w + g + 8 [i % 4 >= 2],
    column 8 (i // 4) + 2 t + i % 2)."""
    seen = {}
    for thread in range(128):
        warp, lane = thread // 32, thread % 32
        g, t = lane // 4, lane % 4
        for j in range(16):
            for index, (row, column) in zip((4 * j, 4 * j + 1, 4 * j + 2, 4 * j + 3),
                                            ((16 * warp + g, 8 * j + 2 * t), (16 * warp + g, 8 * j + 2 * t + 1),
                                             (16 * warp + g + 8, 8 * j + 2 * t), (16 * warp + g + 8, 8 * j + 2 * t + 1))):
                ptx = (16 * warp + g + 8 * ((index % 4) >= 2), 8 * (index // 4) + 2 * t + index % 2)
                assert (row, column) == ptx
                seen[(row, column)] = seen.get((row, column), 0) + 1
    assert len(seen) == 64 * 128 and set(seen.values()) == {1}


def tile_order(tile: int, tiles_m: int, tiles_n: int, group: int) -> tuple[int, int]:
    """wgmma_tma.cuh's block_tile for a persistent block (v14)."""
    per_group = group * tiles_n
    first_row = (tile // per_group) * group
    rows = min(tiles_m - first_row, group)
    in_group = tile % per_group
    return first_row + in_group % rows, in_group // rows


@pytest.mark.parametrize("tiles_m, tiles_n", ((32, 16), (64, 32), (13, 5), (1, 502), (9, 1), (8, 3)))
def test_grouped_order_visits_every_tile_once(tiles_m, tiles_n):
    group = _tiles("v14_persistent_grouped")["GroupRows"]
    assert "const int rows = min(tiles_m - first_row, kGroupRows);" in WGMMA_HEADER
    order = [tile_order(tile, tiles_m, tiles_n, group) for tile in range(tiles_m * tiles_n)]
    assert sorted(order) == [(m, n) for m in range(tiles_m) for n in range(tiles_n)]
    if tiles_m >= group:
        assert {m for m, _ in order[:group * min(2, tiles_n)]} == set(range(group))     # down a group's rows first


def test_shared_memory_fits_the_sm_and_blocks_per_sm_are_as_the_headers_say():
    """227 KiB is the most one block may take on sm_90 (232,448 bytes); v10 is said to fit two blocks,
    v12 two, v11, v13 and v14 one (228 KiB an SM, 1 KiB of it reserved per block)."""
    limit, per_sm = 232_448, 233_472
    for rung_id, blocks in (("v10_cp_async_pipeline", 2), ("v11_large_warp_tiles", 1)):
        shared = tensor_cores.pipelined_shared_bytes(_tiles(rung_id))
        assert shared <= limit and blocks * (shared + 1024) <= per_sm, rung_id
    for rung_id, blocks in (("v12_wgmma_tma", 2), ("v13_warp_specialized", 1), ("v14_persistent_grouped", 1)):
        shared = tensor_maps.hopper_shared_bytes(_tiles(rung_id))
        assert shared <= limit and blocks * (shared + 1024) <= per_sm, rung_id
    assert tensor_maps.hopper_shared_bytes(_tiles("v13_warp_specialized")) == 4 * 49152 + 256 + 1024


def test_tensor_map_parameters_and_refusals():
    a = torch.empty(1000, 520, dtype=torch.bfloat16)
    assert tensor_maps.map_parameters(a, 64, 128) == {"dims": (520, 1000), "strides": (1040,), "box": (64, 128)}
    with pytest.raises(ValueError, match="16-byte aligned rows"):
        tensor_maps.map_parameters(torch.empty(4, 517, dtype=torch.bfloat16), 64, 128)
    with pytest.raises(ValueError, match="contiguous 2-D"):
        tensor_maps.map_parameters(torch.empty(16, 8, dtype=torch.bfloat16).t(), 64, 128)
    with pytest.raises(ValueError, match="at most 128 bytes"):
        tensor_maps.map_parameters(a, 128, 64)


# ---------------------------------------------------------------- SASS and registers, no GPU needed


def _declared_arch(rung) -> str:
    return rung.metadata.target[1]


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
@pytest.mark.parametrize("rung_id", TENSOR_CORE_RUNGS)
def test_tensor_core_rung_compiles_for_its_arch_without_spills(rung_id, dtype):
    rung = MATMUL.rung(rung_id)
    assert rung.route == "cuda" and rung.metadata.target[0] == "nvidia"
    arch = _declared_arch(rung)
    assert arch == ("sm_90a" if rung_id in WGMMA_RUNGS else "sm_80")
    binary = rung.kernel(arch=arch, dtype=dtype).compile()
    report = parse_ptxas_report(ptxas_section(binary.log, binary.lowered_name))
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, f"{rung.path} {dtype}: {report}"


def _sass(rung_id: str, dtype: str) -> str:
    rung = MATMUL.rung(rung_id)
    try:
        return rung.kernel(arch=_declared_arch(rung), dtype=dtype).asm("sass")
    except FileNotFoundError as error:        # no cuobjdump / nvdisasm here: say so, never pass unchecked
        pytest.skip(f"SASS not checked: {error}")


def _opcodes(sass: str) -> set[str]:
    return set(re.findall(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass, re.M))


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
@pytest.mark.parametrize("rung_id", HMMA_RUNGS)
def test_mma_sync_rung_runs_on_hmma_fed_by_ldsm(rung_id, dtype):
    """The issue's evidence that a rung uses the tensor cores: HMMA in its SASS (and LDSM, ldmatrix)."""
    opcodes = _opcodes(_sass(rung_id, dtype))
    assert {"HMMA", "LDSM"} <= opcodes, sorted(opcodes)
    if rung_id != "v09_mma_sync":
        assert "LDGSTS" in opcodes, "cp.async compiles to LDGSTS"


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
@pytest.mark.parametrize("rung_id", WGMMA_RUNGS)
def test_wgmma_rung_runs_on_hgmma_fed_by_tma(rung_id, dtype):
    """HGMMA (wgmma), UTMALDG (TMA tile loads) and SYNCS (mbarrier) in the SASS; no HMMA fallback."""
    opcodes = _opcodes(_sass(rung_id, dtype))
    assert {"HGMMA", "UTMALDG"} <= opcodes, sorted(opcodes)
    assert any(op.startswith("SYNCS") for op in opcodes), sorted(opcodes)


# ---------------------------------------------------------------- launchers


def test_operands_are_used_as_they_are_when_the_kernels_can_read_them():
    a, b = torch.randn(5, 16).bfloat16(), torch.randn(16, 24).bfloat16()
    a_used, b_used = tensor_cores.kernel_operands(a, b)
    assert a_used is a and b_used is b


@pytest.mark.parametrize("shape", ((1, 1, 1), (3, 5, 517), (39, 41, 37), (4095, 7, 3)), ids=str)
def test_other_shapes_run_on_zero_padded_copies_with_the_same_product(shape):
    m, n, k = shape
    a, b = MATMUL.spec.make_inputs(shape, "bfloat16", seed=3)
    a_used, b_used = tensor_cores.kernel_operands(a, b)
    assert a_used.shape == (m, -(-k // 8) * 8) and b_used.shape == (a_used.shape[1], -(-n // 8) * 8)
    assert a_used.is_contiguous() and b_used.is_contiguous()
    product = a_used.double() @ b_used.double()
    assert torch.equal(product[:, :n], a.double() @ b.double()) and not product[:, n:].any()


def test_a_misaligned_view_is_copied():
    buffer = torch.randn(4 * 16 + 1).half()
    a = buffer[1:].view(4, 16)                   # starts 2 bytes into the allocation
    b = torch.randn(16, 8).half()
    a_used, _ = tensor_cores.kernel_operands(a, b)
    assert a_used is not a and a_used.data_ptr() % 16 == 0 and torch.equal(a_used, a)


def test_tensor_core_launchers_refuse_float32_and_transposed_b_by_name():
    run = load_module(MATMUL.rung("v09_mma_sync").companion, "test_matmul_v09_refusals").run
    with pytest.raises(ValueError, match="these kernels take bfloat16, float16"):
        run(None, torch.randn(3, 8), torch.randn(8, 8))
    with pytest.raises(ValueError, match="b must be contiguous row-major"):
        run(None, torch.randn(3, 8).bfloat16(), torch.randn(8, 8).bfloat16().t())


@pytest.mark.parametrize("rung_id", TENSOR_CORE_RUNGS)
def test_tile_constants_are_read_from_the_kernel_file(rung_id):
    tiles = _tiles(rung_id)
    assert {"BM", "BN", "BK", "Threads"} <= set(tiles)
    assert tiles["Threads"] % 128 == 0 or rung_id in HMMA_RUNGS


# ---------------------------------------------------------------- GPU tier

# Beyond the spec's edge shapes: whole tiles only; many K tiles with partial M, N and K tiles; one column;
# a tall one that crosses the grouped order's group boundary; a decode row.
GPU_SHAPES = ((256, 256, 256), (257, 391, 1032), (130, 8, 4104), (2049, 520, 64), (1, 14336, 4096),
              (1024, 1024, 4096))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
@pytest.mark.parametrize("rung_id", TENSOR_CORE_RUNGS)
def test_tensor_core_rung_is_correct_across_tile_edges(rung_id, dtype, monkeypatch):
    from hello_gpu.ops.checking import output_failure
    rung = MATMUL.rung(rung_id)
    if rung.skip_reason():
        pytest.fail(f"{rung_id} cannot run here: {rung.skip_reason()} (the lead's H200 must run it)")
    built = rung.build()
    for shape in GPU_SHAPES:
        inputs = MATMUL.spec.make_inputs(shape, dtype, seed=11, device="cuda")
        out = torch.full((shape[0], shape[1]), float("nan"), dtype=inputs[0].dtype, device="cuda")
        result = built(*inputs, out=out)
        assert result is out
        assert output_failure(MATMUL.spec, inputs, result, dtype) is None, (rung_id, dtype, shape)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_v16_both_epilogues_are_correct(dtype):
    """v16 stores C through shared memory in 16-byte chunks when N is a multiple of 8 and C 16-byte aligned,
    else pair by pair: the same product both ways, and no element outside C written (a poisoned guard)."""
    from hello_gpu.ops.checking import output_failure
    built = MATMUL.rung(V16).build()
    shape = (300, 520, 264)                               # 3 row tiles (the last partial), 3 column tiles
    inputs = MATMUL.spec.make_inputs(shape, dtype, seed=12, device="cuda")
    m, n = shape[0], shape[1]
    for offset in (0, 1):                                 # elements: 0 is 16-byte aligned, 1 is 2 bytes on
        buffer = torch.full((m * n + 16,), float("nan"), dtype=inputs[0].dtype, device="cuda")
        out = buffer[offset:offset + m * n].view(m, n)
        result = built(*inputs, out=out)
        assert result is out
        assert output_failure(MATMUL.spec, inputs, result, dtype) is None, offset
        assert buffer[:offset].isnan().all() and buffer[offset + m * n:].isnan().all(), offset

