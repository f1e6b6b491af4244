"""matmul t06_warp_specialized (Triton: t05's persistent TMA loop, warp-specialised). CPU tier: every
configuration of its autotuner in the interpreter on shapes that cross tile edges and group boundaries and
walk several tiles a program (the interpreter runs the loop's meaning; warp_specialize is a compiler
transformation it ignores); each configuration compiled for sm_90 (no GPU needed) into warpgroups of
their own (ttg.warp_specialize, setmaxnreg) on wgmma and TMA with no spills; the zero-padded path; the
scratch allocator kept to the launch; the refusals. GPU tier: every configuration against float64, and
the autotuner naming its winner. The ladder's own check (tests/test_ops_ladders.py) covers the rung as
the registry runs it, on every edge shape."""

from __future__ import annotations

import json

import pytest
import triton
from test_matmul_persistent_tma import (GPU_SHAPES, HAS_GPU, INTERPRETER_SHAPES, MATMUL,
                                        assert_a_misaligned_out_is_written_through_a_padded_c,
                                        assert_configuration_is_correct,
                                        assert_float32_and_transposed_b_are_refused_by_name,
                                        assert_on_wgmma_and_tma_without_spills,
                                        assert_the_autotuned_rung_names_its_winner, compiled_lines)
from triton.runtime import _allocation

from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.rung import load_module, triton_interpreter_on

RUNG = MATMUL.rung("t06_warp_specialized")


@pytest.fixture(scope="module")
def module():
    return load_module(RUNG.path, "test_matmul_t06")


@pytest.mark.skipif(not triton_interpreter_on(), reason="a GPU machine: the GPU tier checks every configuration")
@pytest.mark.parametrize("index", range(3))
def test_every_configuration_is_correct_in_the_interpreter(module, index):
    """float16 only: bfloat16 arithmetic is wrong in the Triton interpreter (the GPU tier checks it). t05's
    shapes: 18-27 tiles for 3 interpreter programs, K and N not multiples of 8, tiles cut on every side."""
    assert_configuration_is_correct(module, module.CONFIGS[index], "float16", "cpu", INTERPRETER_SHAPES)


@pytest.mark.skipif(not triton_interpreter_on(), reason="a GPU machine: the GPU tier checks the padded path")
def test_a_misaligned_out_is_written_through_a_padded_c(module):
    assert_a_misaligned_out_is_written_through_a_padded_c(module)


def test_the_callers_allocator_is_left_as_it_was(module):
    """The launch sets Triton's scratch allocator (a ContextVar) for its descriptors in a copied context:
    whatever the caller had set is still there afterwards."""
    def callers(size, alignment, stream):
        raise AssertionError("the caller's allocator was asked for scratch")

    device = "cuda" if HAS_GPU and not triton_interpreter_on() else "cpu"
    a, b = MATMUL.spec.make_inputs((40, 24, 32), "float16", seed=6, device=device)
    before = _allocation._allocator.get()
    try:
        triton.set_allocator(callers)
        out = module.run(a, b)
        assert _allocation._allocator.get() is callers
    finally:
        triton.set_allocator(before)
    assert output_failure(MATMUL.spec, (a, b), out, "float16") is None


def test_float32_and_transposed_b_are_refused_by_name(module):
    assert_float32_and_transposed_b_are_refused_by_name(module)
    assert RUNG.metadata.dtypes == ("bfloat16", "float16")
    assert RUNG.metadata.parent_id == "t05_persistent_tma"


def test_every_configuration_compiles_for_sm_90_into_warpgroups_without_spills():
    """Compiled ahead of time in a child process (the CPU tier imports Triton in interpreter mode), with
    the Triton installed here (the GPU machine's on the GPU tier run): the loop is split into warpgroups
    (a ttg.warp_specialize region; setmaxnreg gives the producer 40 registers and the two consumers 232)
    on the tensor cores (HGMMA) and TMA (UTMALDG, UTMASTG), never cp.async (LDGSTS), with no local memory
    and within sm_90's 227 KiB of shared memory. Where the compiler stops specialising (another Triton,
    another loop shape), the rung would run as one group of 4 warps, short of its purpose: this fails instead."""
    lines = compiled_lines("warp_specialized_lines")
    assert len(lines) == 3
    for line in lines:
        assert "warp_specialize True" in line, line
        registers = json.loads(line.split("setmaxnreg ")[1].split("]")[0] + "]")
        assert 40 in registers and 232 in registers, line
        assert_on_wgmma_and_tma_without_spills(line)


# ------------------------------------------------------------------------------------------ GPU tier

@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
@pytest.mark.parametrize("index", range(3))
def test_every_configuration_is_correct_on_the_gpu(index, dtype, monkeypatch):
    """The ladder checks whichever configuration the autotuner picks at each edge shape; this checks each
    one on shapes that cross every tile edge (M = 1: one consumer's rows all past M), including the 4096^3
    the ladder times."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    module = load_module(RUNG.path, "test_matmul_t06_gpu")
    assert_configuration_is_correct(module, module.CONFIGS[index], dtype, "cuda", GPU_SHAPES + ((1, 1, 1),))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_the_autotuned_rung_names_its_winner(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert_the_autotuned_rung_names_its_winner(load_module(RUNG.path, "test_matmul_t06_winner"))
