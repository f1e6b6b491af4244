"""benchmarks/gemv_sweep.py's kernels (the Triton interpreter on a machine without a GPU): every tile and
split, and every 16-row tl.dot tile, computes the GEMV its figures are credited with, and the check refuses
one that drops a tile of K."""

import pytest
import torch

from benchmark_scripts import load

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the sweep itself checks every launch on the GPU")

@pytest.fixture(scope="module")
def sweep():
    return load("gemv_sweep")


def _operands(n, k, seed):
    generator = torch.Generator().manual_seed(seed)
    weight = (torch.randn(n, k, generator=generator) * 0.02).to(torch.bfloat16)
    return weight, torch.randn(k, generator=generator).to(torch.bfloat16)


@pytest.mark.parametrize("block_n, block_k", [(8, 512), (32, 256)])
@pytest.mark.parametrize("split", [1, 2, 4])
def test_every_tile_and_split_computes_the_gemv(sweep, block_n, block_k, split):
    # 37 rows (a partial row block) and 1536 columns: split 2 rounds its share up to 1024, so the second
    # split's last tile runs past K and must be masked
    weight, x = _operands(37, 1536, seed=block_n * 10 + split)
    out = torch.empty(37, dtype=torch.float32)
    sweep.check(sweep.tiled_launch(x, weight, out, block_n, block_k, split), out, x, weight)


def test_the_check_refuses_a_gemv_that_drops_a_tile(sweep):
    weight, x = _operands(37, 1536, seed=3)
    damaged = weight.clone()
    damaged[5, 512:1024] = 0                         # one row's second tile never read
    out = torch.empty(37, dtype=torch.float32)
    with pytest.raises(AssertionError, match="row 5: "):
        sweep.check(sweep.tiled_launch(x, damaged, out, 8, 512, 1), out, x, weight)


def test_the_read_floor_reads_every_tile_once(sweep):
    weight, _ = _operands(4, 4096, seed=4)
    partials = torch.empty(2, dtype=torch.float32)
    sweep.read_floor_launch(weight, partials)()
    expected = weight.double().reshape(2, -1).sum(dim=1)
    torch.testing.assert_close(partials.double(), expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="whole tiles of 8192 elements"):
        sweep.read_floor_launch(weight[:, :100], torch.empty(1))


@pytest.mark.parametrize("rows", [16, 5])
@pytest.mark.parametrize("block_n, block_k", [(16, 256), (64, 128)])
def test_every_dot_tile_computes_the_16_row_gemv(sweep, rows, block_n, block_k):
    # float16: the interpreter's bfloat16 dot is not exact; 37 weight rows (a partial block), K = 1100 (a
    # partial last tile), 5 rows of x (11 of the 16 masked)
    generator = torch.Generator().manual_seed(rows * 100 + block_n)
    weight = (torch.randn(37, 1100, generator=generator) * 0.02).half()
    x = torch.randn(rows, 1100, generator=generator).half()
    out = torch.empty(rows, 37, dtype=torch.float32)
    sweep.check(sweep.dot_launch(x, weight, out, block_n, block_k, stages=3), out, x, weight)


def test_the_check_names_the_x_row_of_a_16_row_gemv_that_drops_a_tile(sweep):
    generator = torch.Generator().manual_seed(16)
    weight = (torch.randn(37, 1100, generator=generator) * 0.02).half()
    x = torch.randn(16, 1100, generator=generator).half()
    damaged = weight.clone()
    damaged[9, 256:512] = 0
    out = torch.empty(16, 37, dtype=torch.float32)
    with pytest.raises(AssertionError, match=r"x row \d+, row 9: "):
        sweep.check(sweep.dot_launch(x, damaged, out, 16, 256, stages=3), out, x, weight)
    with pytest.raises(ValueError, match="holds 16 rows of x"):
        sweep.dot_launch(torch.empty(17, 8).half(), weight[:, :8], torch.empty(17, 37), 16, 256, 3)


def test_every_load_configuration_computes_the_gemv(sweep):
    """--loads: each tile with and without the pipeline and with each eviction policy (a hint: the interpreter
    takes it and ignores it), on 37 rows and a K that cuts the widest tile."""
    weight, x = _operands(37, 2600, seed=20)
    out = torch.empty(37, dtype=torch.float32)
    configurations = list(sweep.configurations(1, x, weight, out, loads=True))
    assert len(configurations) == len(sweep.LOAD_TILES) * len(sweep.LOAD_STAGES) * len(sweep.EVICTIONS)
    for fields, launch in configurations:
        sweep.check(launch, out, x, weight)
        assert fields["evict"] in ("default", "evict_first") and fields["stages"] in sweep.LOAD_STAGES


def test_every_warps_configuration_computes_the_gemv(sweep):
    """--warps: each one-row tile at one stage, evict-first, with 4, 8 and 16 warps (the interpreter runs a program
    whatever its warps), on 37 rows and a K that cuts the wide tiles; a tile wider than the row is left out."""
    weight, x = _operands(37, 4200, seed=22)
    out = torch.empty(37, dtype=torch.float32)
    configurations = list(sweep.configurations(1, x, weight, out, warps=True))
    assert len(configurations) == len(sweep.WARP_TILES) * len(sweep.WARP_COUNTS)
    assert {fields["warps"] for fields, _ in configurations} == {4, 8, 16}
    for fields, launch in configurations:
        assert fields["stages"] == 1 and fields["evict"] == "evict_first"
        if fields["warps"] == 16:            # the interpreter is slow: one count of warps computes each tile
            sweep.check(launch, out, x, weight)
    short = list(sweep.configurations(1, x[:2048], weight[:, :2048].contiguous(), out, warps=True))
    assert {fields["block_k"] for fields, _ in short} == {1024, 2048}, "a [1, 4096] step past a 2048 row is left out"


def test_every_16_row_load_configuration_computes_the_gemv(sweep):
    """--rows 16 --loads: each tl.dot tile with 1 and 3 stages, each policy, and split-K (2, 4) where the row blocks
    are few (here all are: 37 rows): a split's share rounds up to whole tiles, so the last split runs past K and
    must be masked, and the atomics add into the zeroed output."""
    generator = torch.Generator().manual_seed(21)
    weight = (torch.randn(37, 2200, generator=generator) * 0.02).half()
    x = torch.randn(16, 2200, generator=generator).half()
    out = torch.empty(16, 37, dtype=torch.float32)
    configurations = list(sweep.configurations(16, x, weight, out, loads=True))
    splits = {fields["split"] for fields, _ in configurations}
    assert splits == {1, 2, 4}, splits
    assert {fields["stages"] for fields, _ in configurations} == set(sweep.LOAD_STAGES)
    for fields, launch in configurations:
        if fields["block_k"] > 256:          # the interpreter is slow: every split and policy on the small tiles
            continue
        sweep.check(launch, out, x, weight)


def test_the_evict_first_read_floor_sums_every_row(sweep):
    """linear t04's loop without x: 37 rows (a partial pair) and a K that cuts the last 2048-wide tile."""
    weight, _ = _operands(37, 4100, seed=22)
    sums = torch.full((37,), -1.0)
    sweep.evict_read_launch(weight, sums)()
    torch.testing.assert_close(sums.double(), weight.double().sum(dim=1), rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="one sum a row"):
        sweep.evict_read_launch(weight, torch.empty(36))
