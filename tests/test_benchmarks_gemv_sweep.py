"""benchmarks/gemv_sweep.py's kernels (the Triton interpreter on a machine without a GPU): every tile and
split computes the GEMV its figures are credited with, and the check refuses one that drops a tile of K."""

import importlib.util
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the sweep itself checks every launch on the GPU")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sweep():
    spec = importlib.util.spec_from_file_location("gemv_sweep", ROOT / "benchmarks" / "gemv_sweep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
