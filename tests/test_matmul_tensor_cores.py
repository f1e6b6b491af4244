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
MMA_SYNC_RUNGS = ("v09_mma_sync", "v10_cp_async_pipeline", "v11_large_warp_tiles")
WGMMA_RUNGS = ("v12_wgmma_tma", "v13_warp_specialized", "v14_persistent_grouped", "v18_tma_store_epilogue")
TENSOR_CORE_RUNGS = MMA_SYNC_RUNGS + WGMMA_RUNGS
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
@pytest.mark.parametrize("rung_id", MMA_SYNC_RUNGS)
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
    assert tiles["Threads"] % 128 == 0 or rung_id in MMA_SYNC_RUNGS


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
