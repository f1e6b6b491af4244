"""benchmarks/decode_floor.py on a machine without a GPU: the step's reads are the bytes the bandwidth bound counts,
and its read kernel (the Triton interpreter) sums every row it is credited with reading."""

import pytest
import torch

from hello_gpu.models import config_named
from hello_gpu.models.run import decode_bound

from benchmark_scripts import load

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the benchmark checks its reads on the GPU")

@pytest.fixture(scope="module")
def floor():
    return load("decode_floor")


@pytest.mark.parametrize("name", ["1b", "8b"])
def test_the_steps_reads_are_the_bounds_bytes(floor, name):
    """All the bound counts but the norms' gains and the embedding's one row (a few KB of ~2.5 or ~16 GB)."""
    config = config_named(name)
    prompt, new = 512, 256
    bound = decode_bound(config, torch.bfloat16, batch=1, prompt=prompt, new=new)
    reads = floor.step_reads(config, context=prompt + new // 2)
    gains = (2 * config.num_layers + 1) * config.hidden_size
    assert 2 * sum(read.elements for read in reads) == bound.bytes_per_step - 2 * (gains + config.hidden_size)
    assert len(reads) == 5 * config.num_layers + 1 and reads[-1].label == "head"
    assert floor.empty_launches(config) == 3 * config.num_layers + 5
    # folded: the merge a layer; the embedding, two gathers, the mask and the last layer's norm a step
    assert floor.empty_launches(config, folded=True) == config.num_layers + 5


def test_the_read_kernel_sums_every_row(floor):
    read_rows, _empty = floor._kernels()
    rows = 5                                          # two rows a program: the last program's second row masked
    values = torch.randn(rows, floor.ROW, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    sums = torch.full((rows,), -1.0)
    read_rows[(3,)](values, sums, rows, BLOCK_N=2, BLOCK_K=floor.ROW)
    torch.testing.assert_close(sums, values.float().sum(dim=1), rtol=1e-5, atol=1e-3)
