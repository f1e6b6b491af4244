"""matmul t05_persistent_tma (Triton: persistent programs, TMA tensor descriptors). CPU tier: every
configuration of its autotuner in the interpreter on shapes that cross tile edges and group boundaries
and walk several tiles a program; each compiled for sm_90 (no GPU needed) onto wgmma and TMA with no
spills; the zero-padded path for K or N not a multiple of 8 and for a misaligned out; its refusals.
GPU tier: every configuration against float64, and the autotuner naming its winner. The ladder's own
check (tests/test_ops_ladders.py) covers the rung as the registry runs it, on every edge shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from hello_gpu.ops import load_op
from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.rung import load_module, triton_interpreter_on
from hello_gpu.runtime.device import gpu_vendor

HAS_GPU = gpu_vendor() is not None
MATMUL = load_op("matmul")
RUNG = MATMUL.rung("t05_persistent_tma")
ROOT = Path(__file__).resolve().parents[1]
# 9 tile rows of 128 (a group of 8 and a short one; 5 of 256), 2-3 tile columns, one K step: 18-27 tiles
# for 3 interpreter programs; then K and N not multiples of 8 (padded copies) and tiles cut on every side.
INTERPRETER_SHAPES = ((1100, 264, 24), (3, 5, 517), (39, 41, 37), (130, 200, 136))


@pytest.fixture(scope="module")
def module():
    return load_module(RUNG.path, "test_matmul_t05")


def _poisoned_out(shape, dtype, device):
    return torch.full((shape[0], shape[1]), float("nan"), dtype=getattr(torch, dtype), device=device)


@pytest.mark.skipif(not triton_interpreter_on(), reason="a GPU machine: the GPU tier checks every configuration")
@pytest.mark.parametrize("index", range(4))
def test_every_configuration_is_correct_in_the_interpreter(module, index):
    """float16 only: bfloat16 arithmetic is wrong in the Triton interpreter (the GPU tier checks it)."""
    config = module.CONFIGS[index]
    for seed, shape in enumerate(INTERPRETER_SHAPES):
        inputs = MATMUL.spec.make_inputs(shape, "float16", seed=seed)
        out = _poisoned_out(shape, "float16", "cpu")
        assert module.launch(*inputs, out=out, config=config) is out
        assert output_failure(MATMUL.spec, inputs, out, "float16") is None, (config, shape)
        assert not MATMUL.spec.invariants(inputs, out), (config, shape)


@pytest.mark.skipif(not triton_interpreter_on(), reason="a GPU machine: the GPU tier checks the padded path")
def test_a_misaligned_out_is_written_through_a_padded_c(module):
    """TMA stores need a 16-byte aligned C: an out that starts 2 bytes into its storage gets a scratch C."""
    a, b = MATMUL.spec.make_inputs((40, 24, 32), "float16", seed=5)
    storage = torch.full((40 * 24 + 1,), float("nan"), dtype=torch.float16)
    out = storage[1:].view(40, 24)
    assert out.data_ptr() % 16 and out.is_contiguous()
    assert module.run(a, b, out=out) is out
    assert output_failure(MATMUL.spec, (a, b), out, "float16") is None
    assert torch.isnan(storage[0])                       # nothing written before out


def test_float32_and_transposed_b_are_refused_by_name(module):
    a, b = torch.randn(8, 16), torch.randn(16, 8)
    with pytest.raises(ValueError, match="these kernels take bfloat16, float16"):
        module.run(a, b)
    weight = torch.randn(8, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"b must be contiguous row-major.*use the linear operator"):
        module.run(a.half(), weight.t())
    assert RUNG.metadata.dtypes == ("bfloat16", "float16")


_COMPILE = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import matmul_sass_evidence
    print(json.dumps(matmul_sass_evidence.persistent_tma_lines()))
''')


def test_every_configuration_compiles_for_sm_90_onto_wgmma_and_tma_without_spills():
    """Compiled ahead of time in a child process (the CPU tier imports Triton in interpreter mode): the
    issue's evidence that the rung runs on the tensor cores (HGMMA) and TMA (UTMALDG, UTMASTG) rather
    than cp.async (LDGSTS), with no local memory (spills) and within sm_90's 227 KiB of shared memory."""
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    environment.update(PYTHONPATH=str(ROOT / "src"), TRITON_DEFAULT_FP_FUSION="1")
    done = subprocess.run([sys.executable, "-c", _COMPILE, str(ROOT / "benchmarks")], capture_output=True,
                          text=True, timeout=600, env=environment)
    if done.returncode and "SASS needs cuobjdump or nvdisasm" in done.stderr:
        pytest.skip("SASS not checked: no cuobjdump / nvdisasm here")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(lines) == 4
    for line in lines:
        counts = dict(part.rsplit(" ", 1) for part in line.split("whole kernel ")[1].split(", "))
        assert int(counts["HGMMA"]) and int(counts["UTMALDG"]) and int(counts["UTMASTG"]), line
        assert counts["LDGSTS"] == counts["STL"] == counts["LDL"] == "0", line
        assert ", 0 B local;" in line, line
        shared = int(line.split(" B shared")[0].rsplit(" ", 1)[1])
        assert shared <= 232_448, line


# ------------------------------------------------------------------------------------------ GPU tier

GPU_SHAPES = ((256, 256, 256), (257, 391, 1032), (130, 8, 4104), (2049, 520, 64), (1, 14336, 4096),
              (1823, 781, 517), (1000, 1000, 1000), (4095, 7, 3), (4096, 4096, 4096))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
@pytest.mark.parametrize("index", range(4))
def test_every_configuration_is_correct_on_the_gpu(index, dtype, monkeypatch):
    """The ladder checks whichever configuration the autotuner picks at each edge shape; this checks each
    one on shapes that cross every tile edge, including the 4096^3 the ladder times."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    module = load_module(RUNG.path, "test_matmul_t05_gpu")
    config = module.CONFIGS[index]
    for seed, shape in enumerate(GPU_SHAPES):
        inputs = MATMUL.spec.make_inputs(shape, dtype, seed=seed, device="cuda")
        out = _poisoned_out(shape, dtype, "cuda")
        assert module.launch(*inputs, out=out, config=config) is out
        assert output_failure(MATMUL.spec, inputs, out, dtype) is None, (config, dtype, shape)
        assert not MATMUL.spec.invariants(inputs, out), (config, dtype, shape)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_the_autotuned_rung_names_its_winner(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    module = load_module(RUNG.path, "test_matmul_t05_winner")
    a, b = MATMUL.spec.make_inputs((512, 384, 256), "bfloat16", seed=4, device="cuda")
    assert output_failure(MATMUL.spec, (a, b), module.run(a, b), "bfloat16") is None
    winners = module.winners()
    assert len(winners) == 1 and "BLOCK_M" in next(iter(winners.values()))
