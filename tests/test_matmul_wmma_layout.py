"""matmul v15_rdna4_wmma, the AMD RDNA4 rung, checked without an AMD GPU: a NumPy model of the gfx12 WMMA
fragment layout (wave32, 16x16x16) against what AMD documents, the rung's own index arithmetic run on that
model against float64, and the gfx1201 compile gate emitting the WMMA instructions.

The layout, as documented in the "AMD RDNA 4 Instruction Set Architecture Reference Guide" (its WMMA
matrix layouts) and in AMD GPUOpen's "Using the Matrix Cores of AMD RDNA 4 architecture GPUs" (T. Harada
and A. Yoshimura, 2025, https://gpuopen.com/learn/using_matrix_core_amd_rdna4/): a wave of 32 lanes holds
each 16x16 matrix as 8 elements a lane (8 x 32 = 256, each element once: RDNA3 duplicated A and B across
the two halves of the wave, "it is removed for RDNA 4"); with laneWrapped = lane % 16 and
laneGroup = lane / 16 (the article's names), "B, C, and D matrices are row major while A is transposed
thus column major": one VGPR across the 16 lanes of a half holds a row of B, C and D and a column of A.
16-bit values are packed two a VGPR, so element e of a lane's 8 is in VGPR e / 2; C and D (float32) take
one VGPR an element.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from hello_gpu.ops import load_op
from hello_gpu.ops.matmul.tensor_cores import tile_constants

MATMUL = load_op("matmul")
RUNG = MATMUL.rung("v15_rdna4_wmma")
LANES, ELEMENTS = 32, 8


def a_slot(lane: int, e: int) -> tuple[int, int]:
    """(m, k) of A that element e of ``lane`` holds: row laneWrapped, k from the lane's group."""
    return lane % 16, 8 * (lane // 16) + e


def b_slot(lane: int, e: int) -> tuple[int, int]:
    """(k, n) of B: column laneWrapped, the same k as A's element e (the two are summed together)."""
    return 8 * (lane // 16) + e, lane % 16


def c_slot(lane: int, e: int) -> tuple[int, int]:
    """(m, n) of C and D: row 8 laneGroup + e, column laneWrapped."""
    return 8 * (lane // 16) + e, lane % 16


def gather(matrix: np.ndarray, slot) -> np.ndarray:
    """The (32, 8) registers of a wave holding ``matrix`` (16 x 16) in the layout ``slot``."""
    return np.array([[matrix[slot(lane, e)] for e in range(ELEMENTS)] for lane in range(LANES)])


def scatter(registers: np.ndarray, slot) -> np.ndarray:
    """The 16 x 16 matrix a wave's (32, 8) registers hold in the layout ``slot``."""
    matrix = np.full((16, 16), np.nan)
    for lane in range(LANES):
        for e in range(ELEMENTS):
            matrix[slot(lane, e)] = registers[lane, e]
    return matrix


def wmma(a_registers, b_registers, c_registers, a_layout=a_slot, b_layout=b_slot) -> np.ndarray:
    """v_wmma_f32_16x16x16_{f16,bf16} as the ISA defines it: D = A B + C of the matrices the registers
    hold, D returned as registers in C's layout (float64 sums here; the hardware's are float32)."""
    d = scatter(a_registers, a_layout) @ scatter(b_registers, b_layout) + scatter(c_registers, c_slot)
    return gather(d, c_slot)


# ------------------------------------------------------------------------------------------ the layout


@pytest.mark.parametrize("slot", [a_slot, b_slot, c_slot], ids=["A", "B", "C"])
def test_each_element_of_a_matrix_is_held_once_in_eight_elements_a_lane(slot):
    held = [slot(lane, e) for lane in range(LANES) for e in range(ELEMENTS)]
    assert len(held) == len(set(held)) == 256
    assert {coordinate for pair in held for coordinate in pair} == set(range(16))


def test_a_vgpr_holds_a_row_of_b_c_d_and_a_column_of_a():
    """"B, C, and D matrices are row major while A is transposed thus column major": one VGPR across the
    16 lanes of a half holds 16 elements of one row (B, C, D) or one column (A). 16-bit A and B pack
    elements 2v and 2v + 1 into VGPR v; float32 C and D have one element a VGPR."""
    for half in (range(16), range(16, 32)):
        for vgpr in range(4):
            for e in (2 * vgpr, 2 * vgpr + 1):
                a = [a_slot(lane, e) for lane in half]
                b = [b_slot(lane, e) for lane in half]
                assert len({k for _, k in a}) == 1 and [m for m, _ in a] == list(range(16))      # a column of A
                assert len({k for k, _ in b}) == 1 and [n for _, n in b] == list(range(16))      # a row of B
        for e in range(ELEMENTS):
            c = [c_slot(lane, e) for lane in half]
            assert len({m for m, _ in c}) == 1 and [n for _, n in c] == list(range(16))         # a row of C
    # the two halves of the wave hold different k of A and B (no RDNA3-style duplication) and rows 0-7 / 8-15 of C
    assert {a_slot(lane, e)[1] for lane in range(16) for e in range(8)} == set(range(8))
    assert {a_slot(lane, e)[1] for lane in range(16, 32) for e in range(8)} == set(range(8, 16))
    assert {c_slot(lane, e)[0] for lane in range(16, 32) for e in range(8)} == set(range(8, 16))


def test_the_model_multiplies_and_a_layout_mistake_fails():
    """The model is A @ B + C; loading B with another k order than A (or swapping the lane halves of C)
    gives a wrong answer, so the model can tell a right fragment load from a wrong one. A k order shared
    by A and B changes nothing: the products are paired by (lane half, element), whatever k they carry."""
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    a, b, c = rng.standard_normal((3, 16, 16))
    expected = a @ b + c
    d = wmma(gather(a, a_slot), gather(b, b_slot), gather(c, c_slot))
    assert np.allclose(scatter(d, c_slot), expected, rtol=1e-12, atol=1e-12)

    def shuffled_k(slot):
        order = [4, 5, 6, 7, 0, 1, 2, 3]                          # element e carries the k of element order[e]
        return lambda lane, e: slot(lane, order[e])
    same_order = wmma(gather(a, shuffled_k(a_slot)), gather(b, shuffled_k(b_slot)), gather(c, c_slot))
    assert np.allclose(scatter(same_order, c_slot), expected, rtol=1e-12, atol=1e-12)
    # hardware pairs register slots, not k: registers filled for B in another k order than A's
    mismatched = wmma(gather(a, a_slot), gather(b, shuffled_k(b_slot)), gather(c, c_slot))
    assert not np.allclose(scatter(mismatched, c_slot), expected, rtol=1e-3, atol=1e-3)
    swapped_halves = lambda lane, e: c_slot((lane + 16) % 32, e)     # noqa: E731 - rows 0-7 and 8-15 exchanged
    assert not np.allclose(scatter(d, swapped_halves), expected, rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------------------------------ the rung on the model


TILES = tile_constants(RUNG.path)


def run_the_rung_on_the_model(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """v15_rdna4_wmma's kernel, its index arithmetic line by line, with the WMMA model for the instruction:
    every block, k step, wave and lane of the grid the launcher makes."""
    bm, bn, bk, wm, wn, pad, threads = (TILES[name] for name in ("BM", "BN", "BK", "WM", "WN", "Pad", "Threads"))
    row_stride = bk + pad                                          # kRow
    m_size, k_size = a.shape
    n_size = b.shape[1]
    c = np.full((m_size, n_size), np.nan)
    for block_y in range(-(-m_size // bm)):
        for block_x in range(-(-n_size // bn)):
            row0, column0 = block_y * bm, block_x * bn
            sums = np.zeros((threads // 32, 2, 2, LANES, ELEMENTS))     # per wave: Float8 sums[2][2] per lane
            for k0 in range(0, k_size, bk):
                tile_a = np.zeros(bm * row_stride)                 # As[m * kRow + k]
                tile_b = np.zeros(bn * row_stride)                 # Bt[n * kRow + k]
                for i in range(bm * bk):
                    m, k = i // bk, i % bk
                    if row0 + m < m_size and k0 + k < k_size:
                        tile_a[m * row_stride + k] = a[row0 + m, k0 + k]
                for i in range(bk * bn):
                    k, n = i // bn, i % bn
                    if k0 + k < k_size and column0 + n < n_size:
                        tile_b[n * row_stride + k] = b[k0 + k, column0 + n]
                for wave in range(threads // 32):
                    wave_row, wave_column = (wave // (bn // wn)) * wm, (wave % (bn // wn)) * wn
                    fragments_a = np.zeros((2, LANES, ELEMENTS))
                    fragments_b = np.zeros((2, LANES, ELEMENTS))
                    for lane in range(LANES):
                        r, g = lane % 16, lane // 16
                        for t in range(2):
                            start_a = (wave_row + 16 * t + r) * row_stride + 8 * g
                            start_b = (wave_column + 16 * t + r) * row_stride + 8 * g
                            fragments_a[t, lane] = tile_a[start_a:start_a + 8]
                            fragments_b[t, lane] = tile_b[start_b:start_b + 8]
                    for i in range(2):
                        for j in range(2):
                            sums[wave, i, j] = wmma(fragments_a[i], fragments_b[j], sums[wave, i, j])
            for wave in range(threads // 32):
                wave_row, wave_column = (wave // (bn // wn)) * wm, (wave % (bn // wn)) * wn
                for lane in range(LANES):
                    r, g = lane % 16, lane // 16
                    for i in range(2):
                        for j in range(2):
                            column = column0 + wave_column + 16 * j + r
                            for e in range(ELEMENTS):
                                row = row0 + wave_row + 16 * i + 8 * g + e
                                if row < m_size and column < n_size:
                                    c[row, column] = sums[wave, i, j, lane, e]
    return c


@pytest.mark.parametrize("shape", [(1, 1, 1), (16, 16, 16), (3, 5, 17), (70, 33, 40), (65, 129, 31)],
                         ids=lambda s: "x".join(map(str, s)))
def test_the_rungs_index_arithmetic_on_the_model_is_a_matmul(shape):
    """Every element written once, each the float64 product of float16-rounded inputs (the model sums in
    float64): a wrong fragment offset, lane half or store row fails here, edges included."""
    m, n, k = shape
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    a = rng.standard_normal((m, k)).astype(np.float16).astype(np.float64)
    b = rng.standard_normal((k, n)).astype(np.float16).astype(np.float64)
    got = run_the_rung_on_the_model(a, b)
    assert not np.isnan(got).any()
    assert np.allclose(got, a @ b, rtol=1e-12, atol=1e-12)


def test_the_model_reads_the_constants_the_kernel_declares():
    source = RUNG.path.read_text()
    assert TILES == {"BM": 64, "BN": 64, "BK": 16, "Threads": 128, "WM": 32, "WN": 32, "Pad": 8}
    # the fragment loads and the stores the model copies, as written in the kernel
    assert "(wave_row + 16 * t + r) * kRow + 8 * g" in source and "(wave_column + 16 * t + r) * kRow + 8 * g" in source
    assert "row0 + wave_row + 16 * i + 8 * g + e" in source and "column0 + wave_column + 16 * j + r" in source
    assert "const int r = lane % 16, g = lane / 16;" in source


# ------------------------------------------------------------------------------------------ the rung's target


def test_the_rung_declares_amd_gfx1201_and_is_skipped_elsewhere_with_the_reason():
    from hello_gpu.ops.rung import requirement_unmet
    assert RUNG.route == "hip" and RUNG.metadata.target == ("amd", "gfx1201")
    assert RUNG.metadata.parent_id == "v08_tuned_tiles" and RUNG.supports("bfloat16") and not RUNG.supports("float32")
    assert requirement_unmet(RUNG.metadata.requires, "nvidia", "sm_90") == "requires amd gfx1201; this GPU is nvidia sm_90"
    assert "gfx1201" in requirement_unmet(RUNG.metadata.requires, "amd", "gfx1100")
    assert requirement_unmet(RUNG.metadata.requires, "amd", "gfx1201") is None
    assert RUNG.skip_reason() is not None                # this session has no AMD GPU: never run, never a pass


def test_the_gfx1201_gate_emits_one_wmma_per_tile_product():
    from hello_gpu.runtime.clang_hip import compile_for_amd, find_clang
    if find_clang() is None or not os.path.isfile("/usr/include/hip/hip_runtime.h"):
        pytest.skip("no clang-19 / HIP headers here (scripts/install_amd_compile_tools.sh)")
    from hello_gpu.ops.rung import include_dirs_for
    source = RUNG.path.read_text() + "".join(
        f"\ntemplate __global__ void matmul_rdna4_wmma<{t}>(const {t}*, const {t}*, {t}*, int, int, int);"
        for t in ("hip_bfloat16", "__half"))
    result = compile_for_amd(source, name=RUNG.path.name, arch="gfx1201", include_dirs=include_dirs_for(RUNG.path))
    assert result.ok, result.log
    # 2 x 2 accumulators a k step: 4 WMMAs per instantiation in the loop body
    assert len(re.findall(r"\bv_wmma_f32_16x16x16_bf16\b", result.assembly)) == 4
    assert len(re.findall(r"\bv_wmma_f32_16x16x16_f16\b", result.assembly)) == 4
    assert re.search(r"\bds_load_b128\b", result.assembly), "fragments read from LDS 16 bytes at a time"
