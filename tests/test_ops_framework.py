"""The ladder framework (CPU tier): discovery, headers, the tree, specs, the checker, records and the CLI.

Rungs come from the fixture operator ``tests/fixtures/ops/toy_add`` (the package ships no rung without a
measured GPU record). Its Triton rungs run in the interpreter: ``TRITON_INTERPRET=1`` is read when a
``@triton.jit`` function is decorated, and the registry imports a rung's module afresh on every build,
so setting the variable (``interpreter`` fixture) before building is enough.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import torch
from rich.console import Console

import hello_gpu.ops

from hello_gpu.bench.records import validate_record
from hello_gpu.cli import main
from hello_gpu.ops import (HeaderError, SpecError, check_rung, evaluate_grid, list_ops, load_op, ops_root,
                           parse_header)
from hello_gpu.ops.checking import INTERPRETER_BFLOAT16, LAYOUTS
from hello_gpu.ops.ladder import LadderResult, _time_shape, _write, check_ladder, ladder_record, run_ladder
from hello_gpu.ops.rung import parse_requires, requirement_unmet
from hello_gpu.runtime.device import gpu_vendor

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "ops"
HAS_GPU = gpu_vendor() is not None
no_gpu_here = pytest.mark.skipif(HAS_GPU, reason="tests the no-GPU behaviour")


@pytest.fixture
def op():
    return load_op("toy_add", FIXTURES)


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.fixture
def op_copy(tmp_path):
    """A private copy of the fixture operator, for tests that add or break files."""
    shutil.copytree(FIXTURES / "toy_add", tmp_path / "toy_add")
    return tmp_path


# ------------------------------------------------------------------------------------------ discovery


def test_rungs_are_discovered_by_file_name_in_ladder_order(op):
    assert [(rung.id, rung.route) for rung in op.rungs] == [
        ("v00_torch", "torch"), ("v00_torch_compile", "torch"), ("v01_thread_per_element", "hip"),
        ("v02_grid_stride", "hip"), ("t01_block_per_program", "triton"), ("t02_drops_last", "triton")]
    compiled = op.rung("v00_torch_compile")
    assert compiled.path == op.rung("v00_torch").path and compiled.metadata.parent == "v00_torch"
    assert "torch.compile" in compiled.metadata.change
    assert op.spec.NAME == "toy_add" and op.baseline is op.rung("v00_torch")
    with pytest.raises(KeyError, match="toy_add has no rung 'v09_missing'; its rungs: v00_torch"):
        op.rung("v09_missing")


def test_ops_root_and_list_ops():
    assert ops_root() == Path(hello_gpu.ops.__file__).resolve().parent
    assert {"vector_add", "reduce_sum"} <= set(list_ops())
    assert list_ops(FIXTURES) == ["toy_add", "toy_scale"]
    for name in ("vector_add", "reduce_sum"):
        assert load_op(name).baseline is not None
    with pytest.raises(SpecError, match="no operator 'nope'"):
        load_op("nope", FIXTURES)


def test_a_new_file_is_a_new_rung_and_strays_are_errors(op_copy):
    folder = op_copy / "toy_add"
    (folder / "t03_again.py").write_text((folder / "t01_block_per_program.py").read_text())
    assert "t03_again" in [rung.id for rung in load_op("toy_add", op_copy).rungs]
    (folder / "v05_orphan.py").write_text('"""parent: none\nchange: x\nhypothesis: y\n"""\n')
    with pytest.raises(SpecError, match=r"v05_orphan.py: a vNN_name.py must sit beside its vNN_name.hip"):
        load_op("toy_add", op_copy)
    (folder / "v05_orphan.py").unlink()
    (folder / "t03_again.py").write_text('"""parent: t07_gone\nchange: x\nhypothesis: y\n"""\n')
    with pytest.raises(HeaderError, match=r"t03_again.py: parent 't07_gone' is not a rung of toy_add"):
        load_op("toy_add", op_copy)


# ------------------------------------------------------------------------------------------ headers


def test_header_reads_every_key_and_joins_continued_lines(op):
    header = op.rung("v02_grid_stride").metadata
    assert header.parent == "v01_thread_per_element"
    assert header.change.startswith("a grid of 8 blocks per multiprocessor")
    assert header.hypothesis == ("fewer blocks to schedule; for a bandwidth-bound add the launch of 2^20 blocks "
                                 "costs little, so expect within noise of v01 (0.98x to 1.02x)")
    assert header.prediction == "1.0x v01_thread_per_element at 2^28"
    assert header.outcome == "not measured yet"
    assert header.requires.startswith("nvidia sm_90a")
    assert header.deterministic and header.entry == "toy_add_grid_stride"
    assert header.dtypes == ("float32",) and header.block == 256
    assert header.grid == "min(ceil(n / 256), sm_count * 8)"
    assert header.grid_for(1000, sm_count=132) == (4,)
    assert header.grid_for(10**6, sm_count=132) == (1056,)
    assert header.description.startswith("The fixture's second HIP rung")
    assert op.rung("t01_block_per_program").metadata.parent == "v00_torch"     # a .py docstring header
    assert op.rung("v01_thread_per_element").metadata.grid_for(1000) is None


def _write_rung(path: Path, header: str) -> Path:
    path.write_text(f"/*\n{header}*/\n__global__ void k(float* out) {{ out[0] = 1.0f; }}\n")
    return path


def test_header_errors_name_the_file(tmp_path):
    missing = _write_rung(tmp_path / "v01_missing.hip", "parent: none\nchange: one thing\n")
    with pytest.raises(HeaderError, match=r"v01_missing.hip: header is missing hypothesis"):
        parse_header(missing)
    typo = _write_rung(tmp_path / "v02_typo.hip", "parent: none\nchange: x\nhypothsis: y\n")
    with pytest.raises(HeaderError, match=r"v02_typo.hip: unknown header key 'hypothsis'"):
        parse_header(typo)
    no_comment = tmp_path / "v03_bare.hip"
    no_comment.write_text("__global__ void k(float* out) {}\n")
    with pytest.raises(HeaderError, match=r"v03_bare.hip: must begin with a /\* ... \*/ comment"):
        parse_header(no_comment)
    python = tmp_path / "t01_nodoc.py"
    python.write_text("x = 1\n")
    with pytest.raises(HeaderError, match=r"t01_nodoc.py: no module docstring"):
        parse_header(python)
    evil = _write_rung(tmp_path / "v04_evil.hip", "parent: none\nchange: x\nhypothesis: y\ngrid: n * secret\n")
    with pytest.raises(HeaderError, match=r"v04_evil.hip: grid .* uses the name 'secret'"):
        parse_header(evil)


def test_grid_expressions_are_arithmetic_on_allowed_names_only():
    assert evaluate_grid("min(ceil(n / 256), 132 * 8)", n=4097) == (17,)
    assert evaluate_grid("max(1, n // 1024)", n=10) == (1,)
    assert evaluate_grid("(ceil(n / 128), 4)", n=1000) == (8, 4)
    # A grid in bytes: 8192 bytes a block is 2048 float32 or 4096 bfloat16 elements.
    assert evaluate_grid("ceil(n * itemsize / 8192)", n=2**28, itemsize=4) == (2**17,)
    assert evaluate_grid("ceil(n * itemsize / 8192)", n=2**28, itemsize=2) == (2**16,)
    with pytest.raises(HeaderError, match="needs itemsize"):
        evaluate_grid("ceil(n * itemsize / 8192)", n=10)
    with pytest.raises(HeaderError, match="needs sm_count"):
        evaluate_grid("min(ceil(n / 256), sm_count * 8)", n=10, itemsize=4)
    for forbidden, message in (("open('x')", "only ceil"), ("__import__('os')", "only ceil"), ("n.real", "Attribute"),
                               ("[n for n in n]", "ListComp"), ("m * 2", "the name 'm'"), ("'a' * n", "numbers")):
        with pytest.raises(HeaderError, match=message):
            evaluate_grid(forbidden, n=1)
    with pytest.raises(HeaderError, match="wrap a division in ceil"):
        evaluate_grid("n / 256", n=1000)
    with pytest.raises(HeaderError, match="needs sm_count"):
        evaluate_grid("sm_count * 8", n=1000)


# ------------------------------------------------------------------------------------------ tree, skips


def test_tree_from_parent_links(op):
    assert [rung.id for rung in op.roots()] == ["v00_torch"]
    assert [rung.id for rung in op.rung("v00_torch").children()] == [
        "v00_torch_compile", "v01_thread_per_element", "t01_block_per_program"]
    assert [rung.id for rung in op.rung("v01_thread_per_element").children()] == ["v02_grid_stride"]
    assert [rung.id for rung in op.rung("t01_block_per_program").children()] == ["t02_drops_last"]
    assert op.rung("t02_drops_last").parent is op.rung("t01_block_per_program")
    assert op.rung("v00_torch").parent is None


def test_requirements_are_understood_and_explained():
    assert parse_requires("nvidia sm_90a (wgmma)", "f") == ("nvidia", "sm_90a")
    assert parse_requires("amd", "f") == ("amd", None)
    with pytest.raises(HeaderError, match="requires 'intel xe' is not understood"):
        parse_requires("intel xe", "f")
    assert requirement_unmet("nvidia sm_90a", "nvidia", "sm_90") is None
    assert requirement_unmet("nvidia sm_80", "nvidia", "sm_90") is None
    assert requirement_unmet("nvidia sm_90a", "nvidia", "sm_100") == "requires nvidia sm_90a; this GPU is sm_100"
    assert requirement_unmet("amd gfx1201", "nvidia", "sm_90") == "requires amd gfx1201; this GPU is nvidia sm_90"
    assert requirement_unmet("amd gfx1201", None, None) == "requires amd gfx1201; no GPU here"


@no_gpu_here
def test_rungs_that_cannot_run_here_say_why(op, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert op.rung("v02_grid_stride").skip_reason().startswith("requires nvidia sm_90a")
    assert op.rung("v01_thread_per_element").skip_reason().startswith("no GPU")
    assert "TRITON_INTERPRET=1" in op.rung("t01_block_per_program").skip_reason()
    assert op.rung("v00_torch").skip_reason() is None
    report = check_rung(op.rung("v01_thread_per_element"))
    assert report.status == "skipped" and report.reason.startswith("no GPU") and not report.passed


def test_fixture_hip_rungs_compile_for_sm_90(op):
    for rung in op.rungs:
        if rung.route == "hip":
            binary = rung.kernel(arch="sm_90").compile()
            assert binary.arch == "sm_90" and binary.image


# ------------------------------------------------------------------------------------------ the real specs

SPECS = ("vector_add", "reduce_sum")


def _native(name: str, inputs):
    """What PyTorch computes in the operator's own dtype: the tolerance must admit it."""
    return torch.add(*inputs) if name == "vector_add" else inputs[0].sum().reshape(1)


@pytest.mark.parametrize("name", SPECS)
def test_spec_reference_is_float64_and_agrees_with_torch(name):
    spec = load_op(name).spec
    for dtype in spec.DTYPES:
        for distribution in ("normal", "large", "near_overflow"):
            for shape in (1, 4097, (37, 29)):
                inputs = spec.make_inputs(shape, dtype, seed=11, distribution=distribution, device="cpu")
                expected = spec.reference(*inputs)
                assert expected.dtype == torch.float64 and torch.isfinite(expected).all()
                exact = (inputs[0].double() + inputs[1].double() if name == "vector_add"
                         else torch.tensor([math.fsum(inputs[0].double().flatten().tolist())], dtype=torch.float64))
                assert torch.allclose(expected, exact, rtol=1e-12, atol=0)
                rtol, atol = spec.tolerance(inputs, dtype) if hasattr(spec, "tolerance") else spec.TOLERANCE[dtype]
                error = (_native(name, inputs).double() - expected).abs()
                assert bool((error <= atol + rtol * expected.abs()).all()), (dtype, distribution, shape)


@pytest.mark.parametrize("name", SPECS)
def test_spec_inputs_are_fresh_per_seed_and_never_zero(name):
    spec = load_op(name).spec
    for dtype in spec.DTYPES:
        for distribution in ("normal", "large", "near_overflow"):
            first = spec.make_inputs(4097, dtype, seed=1, distribution=distribution, device="cpu")
            again = spec.make_inputs(4097, dtype, seed=1, distribution=distribution, device="cpu")
            other = spec.make_inputs(4097, dtype, seed=2, distribution=distribution, device="cpu")
            for a, b, c in zip(first, again, other):
                assert a.dtype == getattr(torch, dtype) and a.shape == (4097,)
                assert bool((a != 0).all()) and torch.isfinite(a).all()
                assert torch.equal(a, b) and not torch.equal(a, c)
        with pytest.raises(ValueError, match="unknown distribution"):
            spec.make_inputs(31, dtype, seed=1, distribution="zeros", device="cpu")


@pytest.mark.parametrize("name", SPECS)
def test_spec_shapes_tolerances_and_work(name):
    spec = load_op(name).spec
    assert {1, 31, 4097} <= set(spec.EDGE_SHAPES)
    two_d = [shape for shape in spec.EDGE_SHAPES if isinstance(shape, tuple)]
    assert two_d and all(dim % 32 for shape in two_d for dim in shape)
    assert min(spec.BENCH_SHAPES) >= 2**20 and max(spec.BENCH_SHAPES) >= 2**28
    assert set(spec.DTYPES) <= set(spec.TOLERANCE)
    n = 2**24
    for dtype in spec.DTYPES:
        work = spec.work(n, dtype)
        itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
        assert work.bytes == (3 * n * itemsize if name == "vector_add" else 4 * n + 4)
        assert work.flops == n and work.dtype == dtype
    assert spec.work((1823, 781), spec.DTYPES[0]).flops == 1823 * 781


def test_vector_add_spec_dtypes_and_determinism():
    spec = load_op("vector_add").spec
    assert spec.DTYPES == ("float32", "bfloat16") and spec.DETERMINISTIC_REQUIRED


def test_reduce_sum_invariants_and_scaled_tolerance():
    spec = load_op("reduce_sum").spec
    (x,) = spec.make_inputs(4097, "float32", seed=3, device="cpu")
    assert spec.invariants((x,), x.sum().reshape(1)) == []
    assert "shape (2,)" in spec.invariants((x,), x[:2].clone())[0]
    assert "float32 was expected" in spec.invariants((x,), x.sum().reshape(1).double())[0]
    rtol, atol = spec.tolerance((x,), "float32")
    expected = 2 * math.sqrt(4097) * torch.finfo(torch.float32).eps * float(x.double().abs().sum())
    assert atol == pytest.approx(expected)
    assert atol < 0.1          # loose for rounding, yet a lost element (|x| ~ 0.8 on average) shows at 4097


# ------------------------------------------------------------------------------------------ the checker


def test_correct_triton_rung_passes_in_the_interpreter(op, interpreter):
    report = check_rung(op.rung("t01_block_per_program"))
    assert report.passed and report.status == "pass", report.reason
    assert len(report.seeds) == 3 and len(set(report.seeds)) == 3
    # shapes x distributions x seeds, float32; then the layout cases: strided at the 4 shapes of more than
    # one element, transposed at 37x29 (toy_add has no block probe).
    assert len(report.ran) == len(op.spec.EDGE_SHAPES) * 2 * 3 + 4 + 1
    assert report.evidence()["layouts_refused"] == sorted(LAYOUTS)
    assert {case.shape for case in report.ran} == {"1", "31", "1000", "4097", "37x29"}
    bf16 = [case for case in report.cases if case.dtype == "bfloat16"]
    assert len(bf16) == 1 and bf16[0].skipped and bf16[0].reason == INTERPRETER_BFLOAT16
    assert report.deterministic_checked and report.evidence()["max_rel_error"] <= 2**-23
    again = check_rung(op.rung("t01_block_per_program"), shapes=[31], dtypes=["float32"])
    assert set(again.seeds).isdisjoint(report.seeds)                    # fresh seeds every run


def test_rung_that_drops_the_last_element_fails(op, interpreter):
    report = check_rung(op.rung("t02_drops_last"), shapes=[4097, (37, 29)], dtypes=["float32"], seeds=[5])
    assert report.status == "FAIL" and not report.passed
    unwritten = "output elements never written (still NaN poison)"
    assert [case.reason for case in report.failures] == [f"1 of 4097 {unwritten}"] * 2 + [f"1 of 1073 {unwritten}"] * 2
    assert report.reason.startswith("4097 float32 normal seed 5: 1 of 4097")


WRITES_INPUT = '''"""A wrong rung: it stores the sum into its first input too.

parent: t01_block_per_program
change: also writes the result into a (deliberately wrong)
hypothesis: none; the checker must reject a rung that writes into its inputs
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    total = tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, total, mask=mask)
    tl.store(a_ptr + offsets, total, mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), BLOCK=1024)
    return out
'''


def test_rung_that_writes_into_its_input_fails(op_copy, interpreter):
    (op_copy / "toy_add" / "t03_writes_input.py").write_text(WRITES_INPUT)
    op = load_op("toy_add", op_copy)
    report = check_rung(op.rung("t03_writes_input"), shapes=[1000], dtypes=["float32"], seeds=[7])
    assert report.status == "FAIL"
    assert {case.reason for case in report.failures} == {"wrote into its input(s) [0]: inputs must be read-only"}


BASELINE_HEADER = '"""parent: none\nchange: a test double of the baseline\nhypothesis: none\ndeterministic: yes\n"""\n'


def test_output_dtype_and_bitwise_repeat_are_checked(op_copy):
    baseline = op_copy / "toy_add" / "v00_torch.py"
    # No out= parameter (the rung allocates), and a float32 answer to bfloat16 inputs: twice the bytes.
    baseline.write_text(BASELINE_HEADER + "def run(a, b):\n    return a.float() + b.float()\n")
    report = check_rung(load_op("toy_add", op_copy).rung("v00_torch"), shapes=[31], seeds=[1])
    assert {case.dtype for case in report.ran if case.passed} == {"float32"}
    assert {case.reason for case in report.failures} == {
        "output is (31,) torch.float32; expected (31,) torch.bfloat16 (the reference's shape, the input's dtype)"}
    # Right on the first call of each case, off on the second: "deterministic: yes" must catch it.
    baseline.write_text(BASELINE_HEADER + "import itertools\ncalls = itertools.count(1)\n\n\n"
                        "def run(a, b):\n    return a + b if next(calls) % 2 else (a + b) * 2\n")
    report = check_rung(load_op("toy_add", op_copy).rung("v00_torch"), shapes=[31], dtypes=["float32"], seeds=[1])
    assert {case.reason for case in report.failures} == {
        "declared deterministic, but a second run on the same inputs differs in 31 of 31 elements"}


def test_torch_baseline_is_checked_on_both_dtypes_on_the_cpu(op):
    report = check_rung(op.rung("v00_torch"), shapes=[31, (37, 29)], seeds=[1, 2])
    assert report.passed and {case.dtype for case in report.ran} == {"float32", "bfloat16"}


def test_check_ladder_shares_seeds_and_limits_sizes(op, interpreter):
    reports = check_ladder(op, route="triton", dtypes=["float32"], max_elements=1100)
    assert list(reports) == ["v00_torch", "v00_torch_compile", "t01_block_per_program", "t02_drops_last"]
    assert len({report.seeds for report in reports.values()}) == 1
    assert {case.shape for case in reports["t01_block_per_program"].ran} == {"1", "31", "1000", "37x29"}
    assert reports["t02_drops_last"].status == "FAIL" and reports["t01_block_per_program"].status == "pass"


# ------------------------------------------------------------------------------------------ shared cases


def _counting(monkeypatch, module, name: str) -> list:
    """Count the calls of ``module.name`` (the real function still runs): one entry per call."""
    calls, real = [], getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_ladder_makes_each_case_once_for_all_its_rungs(op, interpreter, monkeypatch):
    """check_ladder draws the inputs and computes the reference of each (shape, seed, distribution) once,
    whatever the number of rungs (issue 22: 19 attention rungs rebuilt them 19 times)."""
    made, referenced = _counting(monkeypatch, op.spec, "make_inputs"), _counting(monkeypatch, op.spec, "reference")
    reports = check_ladder(op, route="triton", dtypes=["float32"], max_elements=1100, seeds=[1, 2, 3])
    ran = [rung for rung in op.rungs if rung.id in reports and reports[rung.id].ran]
    assert [rung.id for rung in ran] == ["v00_torch", "t01_block_per_program", "t02_drops_last"]
    devices = len({rung.device() for rung in ran})       # the CPU tier: one; a GPU machine: the interpreter's too
    # Shapes 1, 31, 1000 and 37x29, two distributions x three seeds: 24 draws; the layout cases re-lay out
    # the kept "normal" inputs. References: those 24, strided at 31, 1000, 37x29 and transposed at 37x29.
    assert (len(made), len(referenced)) == (24 * devices, 28 * devices)
    assert reports["t01_block_per_program"].passed and len(reports["t01_block_per_program"].ran) == 28
    assert reports["t02_drops_last"].status == "FAIL"


WRITES_INPUT_ON_REPEAT = (BASELINE_HEADER + "import itertools\ncalls = itertools.count(1)\n\n\n"
                          "def run(a, b):\n    out = a + b\n    if next(calls) % 2 == 0:\n        a.add_(1)\n    return out\n")


@pytest.mark.parametrize("writer, reason", [
    ("t03_writes_input", "wrote into its input(s) [0]: inputs must be read-only"),
    ("v00_torch", "wrote into its input(s) [0] on its second call (the bitwise repeat): inputs must be read-only")])
def test_a_rung_that_writes_its_shared_inputs_fails_and_the_next_rung_sees_them_restored(writer, reason, op_copy,
                                                                                         interpreter):
    """Shared cases (check_ladder): the writer fails, the kept copy is put back, the next rung passes. A write
    on the bitwise repeat only: alone a case is dropped after its rung, shared it would reach the next one."""
    folder = op_copy / "toy_add"
    (folder / "t03_writes_input.py").write_text(WRITES_INPUT)
    (folder / "v00_torch.py").write_text(WRITES_INPUT_ON_REPEAT)
    (folder / "t04_again.py").write_text((folder / "t01_block_per_program.py").read_text())
    op = load_op("toy_add", op_copy)
    reports = check_ladder(op, rungs=[op.rung(writer), op.rung("t04_again")], dtypes=["float32"], seeds=[7],
                           max_elements=1100)
    assert {case.reason for case in reports[writer].failures} == {reason}
    assert reports["t04_again"].passed, reports["t04_again"].reason


WRITES_INPUT_WHEN_TIMED = WRITES_INPUT.replace("stores the sum into its first input too", "stores the sum into its "
                                               "first input when called without out= (as the timer calls it)").replace(
    "    tl.store(a_ptr + offsets, total, mask=mask)\n",
    "    if WRITE_INPUT:\n        tl.store(a_ptr + offsets, total, mask=mask)\n").replace(
    "BLOCK: tl.constexpr)", "WRITE_INPUT: tl.constexpr, BLOCK: tl.constexpr)").replace(
    "    out = torch.empty_like(a) if out is None else out\n",
    "    timed = out is None\n    out = torch.empty_like(a) if out is None else out\n").replace(
    "a.numel(), BLOCK=1024)", "a.numel(), WRITE_INPUT=timed, BLOCK=1024)")


def test_a_rung_that_writes_its_inputs_only_when_timed_is_not_timed(op_copy, interpreter):
    """The timed inputs are the shape's shared "normal" case: proven unchanged after each rung's timing,
    restored for the next rung (whose check would fail on changed inputs)."""
    assert "if WRITE_INPUT:" in WRITES_INPUT_WHEN_TIMED and "WRITE_INPUT=timed" in WRITES_INPUT_WHEN_TIMED
    folder = op_copy / "toy_add"
    (folder / "t03_writes_when_timed.py").write_text(WRITES_INPUT_WHEN_TIMED)
    (folder / "t04_again.py").write_text((folder / "t01_block_per_program.py").read_text())
    op = load_op("toy_add", op_copy)
    rungs = [op.rung(rung_id) for rung_id in ("v00_torch", "t03_writes_when_timed", "t04_again")]
    built = {rung.id: rung.build() for rung in rungs}
    result = LadderResult(op, "float32", [1024], {})
    _time_shape(op, "float32", 1024, rungs, built, result, lambda: None, device="cpu", seconds=0.1)
    assert result.not_timed == [("t03_writes_when_timed", "2^10",
                                 "wrote into its input(s) [0] while timed: inputs must be read-only")]
    assert [timed.rung.id for timed in result.timed] == ["v00_torch", "t04_again"]
    assert all(timed.check.passed for timed in result.timed)


# ------------------------------------------------------------------------------------------ records


def test_ladder_record_from_real_timings_validates_and_is_written_with_its_plot(op, interpreter, tmp_path):
    """The timing path on the CPU (wall clock; the GPU tier does it with device events)."""
    rungs = [op.rung("v00_torch"), op.rung("t01_block_per_program"), op.rung("t02_drops_last")]
    built = {rung.id: rung.build() for rung in rungs}
    checks = check_ladder(op, rungs=rungs, shapes=[31], dtypes=["float32"], built=built)
    result = LadderResult(op, "float32", [1024], checks)
    correct = [rung for rung in rungs if checks[rung.id].passed]
    assert [rung.id for rung in correct] == ["v00_torch", "t01_block_per_program"]
    _time_shape(op, "float32", 1024, correct, built, result, lambda: None, device="cpu", seconds=0.2)
    assert [timed.rung.id for timed in result.timed] == ["v00_torch", "t01_block_per_program"]
    triton_rung = result.timed[1]
    assert triton_rung.vs_torch is not None and triton_rung.vs_parent is triton_rung.vs_torch

    device = {"slug": "cpu-test", "name": "CPU (test)", "arch": "x86_64"}
    record = ladder_record(result, device=device, name="toy_add.float32")
    assert validate_record(record) == []
    baseline, candidate = record["entries"]
    assert baseline["role"] == "baseline" and candidate["role"] == "candidate"
    assert candidate["source"]["path"] == "tests/fixtures/ops/toy_add/t01_block_per_program.py"
    assert set(candidate["speedups"]) == {"v00_torch"}
    assert candidate["extra"]["speedup_vs_parent"]["parent"] == "v00_torch"
    assert candidate["correctness"]["passed"] and candidate["correctness"]["timed_shape"]["shapes"] == ["2^10"]
    assert candidate["work"]["bytes"] == 3 * 1024 * 4 and candidate["derived"]["gb_per_s"] > 0
    assert candidate["extra"]["hypothesis"].startswith("bandwidth-bound")

    result.record = record
    _write(result, tmp_path)
    assert result.record_path == tmp_path / "cpu-test" / "toy_add.float32.json"
    assert sorted(path.name for path in result.plot_paths) == ["toy_add.float32.png", "toy_add.float32.svg"]
    assert all(path.stat().st_size > 0 for path in result.plot_paths)
    console = Console(record=True, width=200)
    console.print(result.table())
    text = console.export_text()
    assert "t01_block_per_program" in text and "GB/s" in text and "slower" in text


# ------------------------------------------------------------------------------------------ the CLI


def test_cli_list_prints_the_tree(capsys):
    assert main(["list", "toy_add", "--root", str(FIXTURES)]) == 0
    out = capsys.readouterr().out
    assert "toy_add (6 rungs)" in out and "└── v00_torch [torch] torch.add" in out
    assert out.index("v01_thread_per_element") < out.index("v02_grid_stride")
    assert "t02_drops_last [triton] the mask stops one element short" in out
    assert "(requires nvidia sm_90a" in out
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "vector_add (" in out and "reduce_sum (" in out and "└── v00_torch [torch]" in out
    assert main(["list", "nope", "--root", str(FIXTURES)]) == 2


@no_gpu_here
def test_cli_run_and_ladder_need_a_gpu(capsys):
    assert main(["ladder", "toy_add", "--root", str(FIXTURES)]) == 2
    assert "no GPU here" in capsys.readouterr().out
    assert main(["run", "toy_add", "t01_block_per_program", "--shape", "2**10", "--root", str(FIXTURES)]) == 2
    assert "no GPU here" in capsys.readouterr().out
    assert main(["run", "toy_add", "v09_nope", "--root", str(FIXTURES)]) == 2
    assert "toy_add has no rung 'v09_nope'" in capsys.readouterr().out


def test_a_clean_flush_is_for_the_screen_not_for_records(capsys, tmp_path):
    # Refused before any GPU question: the records (and every target) hold cold timings.
    assert main(["ladder", "toy_add", "--cache", "cold-clean", "--record", str(tmp_path), "--root", str(FIXTURES)]) == 2
    assert "--record keeps cold timings only" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())
    with pytest.raises(ValueError, match="records hold cold timings"):
        run_ladder("toy_add", record_dir=tmp_path, cache="cold-clean", root=FIXTURES)
    with pytest.raises(ValueError, match="cache must be 'cold' or 'cold-clean', got 'warm'"):
        run_ladder("toy_add", cache="warm", root=FIXTURES)
    with pytest.raises(SystemExit):
        main(["run", "toy_add", "t01_block_per_program", "--cache", "lukewarm", "--root", str(FIXTURES)])
    assert "invalid choice: 'lukewarm'" in capsys.readouterr().err


@no_gpu_here
def test_cli_ladder_check_only_runs_triton_in_the_interpreter(capsys, interpreter, monkeypatch):
    monkeypatch.setenv("COLUMNS", "240")          # one line a row: the reason below is not folded
    assert main(["ladder", "toy_add", "--check-only", "--route", "triton", "--dtype", "float32",
                 "--shapes", "1000", "37x29", "--root", str(FIXTURES)]) == 1      # t02 is wrong on purpose
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "pass" in rows["t01_block_per_program"] and "pass" in rows["v00_torch"]
    assert "FAIL" in rows["t02_drops_last"] and "skipped" in rows["v00_torch_compile"]
    assert "never written" in out


def test_cli_shapes_parse():
    from hello_gpu.cli import _parse_shape
    assert _parse_shape("4097") == 4097 and _parse_shape("2**24") == 2**24 and _parse_shape("2^10") == 1024
    assert _parse_shape("1823x781") == (1823, 781)


# ------------------------------------------------------------------------------------------ GPU tier


@pytest.mark.gpu
def test_fixture_ladder_on_the_gpu(op, tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from hello_gpu.ops import run_ladder
    result = run_ladder(op, shapes=[2**20], progress=False)
    assert result.checks["v01_thread_per_element"].passed, result.checks["v01_thread_per_element"].reason
    assert result.checks["t01_block_per_program"].passed
    assert result.checks["t02_drops_last"].status == "FAIL"
    timed = {entry.rung.id for entry in result.timed}
    assert {"v00_torch", "v01_thread_per_element", "t01_block_per_program"} <= timed and "t02_drops_last" not in timed
    assert validate_record(result.record) == []


def test_shape_labels_read_at_a_glance():
    from hello_gpu.ops.shapes import shape_label
    assert shape_label(2**28) == "2^28" and shape_label(4097) == "4097" and shape_label(1) == "1"
    assert shape_label(512) == "512" and shape_label((1823, 781)) == "1823x781" and shape_label((8192, 8192)) == "8192x8192"


def test_a_nan_the_reference_defines_must_be_matched():
    from hello_gpu.ops.checking import compare_outputs
    expected = torch.tensor([float("nan"), 0.5, 0.25], dtype=torch.float64)
    assert compare_outputs(torch.tensor([float("nan"), 0.5, 0.25]), expected, 1e-6, 0.0)[2] is None
    failure = compare_outputs(torch.tensor([0.0, 0.5, 0.25]), expected, 1e-6, 0.0)[2]
    assert failure.startswith("1 of 3 elements") and "flat index 0" in failure and "expected nan" in failure
    assert "flat index 2" in compare_outputs(torch.tensor([float("nan"), 0.5, float("nan")]), expected, 1e-6, 0.0)[2]


# ------------------------------------------------------------------------------------------ peers

PEER = '''"""A peer: a library a user would pick instead.

parent: none
change: {change}
hypothesis: as fast as torch.add
{package}"""

import torch


def run(a, b):
    return torch.add(a, b)
'''


def test_peers_are_baselines_ordered_after_torch_and_skipped_without_their_package(op_copy):
    folder = op_copy / "toy_add"
    (folder / "peer_stdlib.py").write_text(PEER.format(change="calls torch.add", package="package: json\n"))
    (folder / "peer_absent.py").write_text(PEER.format(change="calls a library that is not installed",
                                                       package="package: surely_not_installed_xyz\n"))
    (folder / "peer_unnamed.py").write_text(PEER.format(change="names no package", package=""))
    op = load_op("toy_add", op_copy)
    assert [rung.id for rung in op.rungs][:5] == ["v00_torch", "v00_torch_compile", "peer_absent", "peer_stdlib",
                                                  "peer_unnamed"]
    assert all(op.rung(name).route == "peer" and op.rung(name).is_baseline
               for name in ("peer_absent", "peer_stdlib", "peer_unnamed"))
    assert op.rung("peer_stdlib").metadata.package == "json"
    assert op.rung("peer_absent").skip_reason() == ("needs the Python package surely_not_installed_xyz, "
                                                    "which is not installed here")
    assert "names no package" in op.rung("peer_unnamed").skip_reason()
    if not HAS_GPU:
        assert op.rung("peer_stdlib").skip_reason() == "no GPU: peers are checked and timed on the GPU"
    from hello_gpu.ops.ladder import select_rungs
    assert "peer_stdlib" in [rung.id for rung in select_rungs(op, "hip")]     # a route keeps every baseline


def test_the_best_rung_of_each_route_is_compared_with_every_other_baseline(op_copy, interpreter, monkeypatch):
    """The targets (">= 1.0x the peer") need the best rung paired with the peer and with torch.compile."""
    from hello_gpu.ops.rung import Rung
    gpu_rule = Rung.skip_reason
    # This peer calls torch.add, which runs on the CPU: let it past the no-GPU rule for peers.
    monkeypatch.setattr(Rung, "skip_reason", lambda rung: None if rung.route == "peer" else gpu_rule(rung))
    folder = op_copy / "toy_add"
    (op_copy / "pyproject.toml").write_text("")         # records name files relative to a repository root
    (folder / "peer_torch_again.py").write_text(PEER.format(change="calls torch.add", package="package: torch\n"))
    op = load_op("toy_add", op_copy)
    rungs = [op.rung(name) for name in ("v00_torch", "peer_torch_again", "t01_block_per_program")]
    built = {rung.id: rung.build() for rung in rungs}
    checks = check_ladder(op, rungs=rungs, shapes=[31], dtypes=["float32"], built=built)
    result = LadderResult(op, "float32", [1024], checks)
    _time_shape(op, "float32", 1024, rungs, built, result, lambda: None, device="cpu", seconds=0.2)
    by_id = {timed.rung.id: timed for timed in result.timed}
    assert set(by_id["t01_block_per_program"].vs_baselines) == {"peer_torch_again"}
    assert by_id["peer_torch_again"].vs_torch is not None and not by_id["peer_torch_again"].vs_baselines
    record = ladder_record(result, device={"slug": "cpu-test", "name": "CPU (test)", "arch": "x86_64"},
                           name="toy_add.float32")
    assert validate_record(record) == []
    entries = {entry["variant"]: entry for entry in record["entries"]}
    assert entries["peer_torch_again"]["role"] == "baseline"
    assert set(entries["t01_block_per_program"]["speedups"]) == {"v00_torch", "peer_torch_again"}
    console = Console(record=True, width=250)
    console.print(result.table())
    assert "peer_torch_again:" in console.export_text()


@no_gpu_here
def test_ladder_profile_table_says_why_there_are_no_counters(op, interpreter):
    """``ladder --profile``: one row per timed rung at the largest shape; without a GPU, the reason."""
    from hello_gpu.cli import _ladder_counters_table
    rungs = [op.rung("v00_torch"), op.rung("t01_block_per_program")]
    built = {rung.id: rung.build() for rung in rungs}
    checks = check_ladder(op, rungs=rungs, shapes=[31], dtypes=["float32"], built=built)
    result = LadderResult(op, "float32", [64, 1024], checks)
    for shape in result.shapes:
        _time_shape(op, "float32", shape, rungs, built, result, lambda: None, device="cpu", seconds=0.1)
    console = Console(record=True, width=250)
    console.print(_ladder_counters_table(result))
    text = console.export_text()
    assert "toy_add counters at 2^10 float32" in text
    assert "t01_block_per_program" in text and "v00_torch" in text
    assert "no GPU here: hardware counters are read on the GPU that runs the kernel" in text


def test_interpreter_switched_on_after_triton_was_imported_is_refused_by_name():
    """TRITON_INTERPRET=1 set after Triton was imported in compiled mode leaves tl.sum compiled; the rung
    build says so and how to fix it, instead of Triton's "Cannot call @triton.jit'd outside ...". In a
    child process: the mode is fixed per process at the first import."""
    import os
    import subprocess
    import sys
    script = ("import os\n"
              "os.environ.pop('TRITON_INTERPRET', None)\n"
              "import triton.language\n"
              "os.environ['TRITON_INTERPRET'] = '1'\n"
              "from hello_gpu.ops import load_op\n"
              "from hello_gpu.ops.rung import RungError\n"
              "try:\n"
              "    load_op('softmax').rung('t01_row_per_program').build()\n"
              "except RungError as error:\n"
              "    print(error)\n")
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    environment.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "TRITON_INTERPRET=1 was set after Triton was imported in compiled mode" in done.stdout
    assert "before anything imports triton" in done.stdout


def test_the_rungs_close_behind_a_routes_best_are_paired_with_the_baselines_too():
    """A route's best by 0.6% is a coin toss: its contenders are every rung within 3%, three at most."""
    from types import SimpleNamespace

    from hello_gpu.ops.ladder import contenders

    def entry(name, speedup):
        return SimpleNamespace(name=name, vs_torch=SimpleNamespace(speedup=SimpleNamespace(value=speedup)))

    ranked = [entry.name for entry in contenders([entry("t03", 1.250), entry("t01", 1.10), entry("t07", 1.243)])]
    assert ranked == ["t03", "t07"]
    crowd = [entry(f"t0{i}", 1.0 + i / 1000) for i in range(5)]
    assert [e.name for e in contenders(crowd)] == ["t04", "t03", "t02"]
    assert [e.name for e in contenders([entry("alone", 0.5)])] == ["alone"]
    assert contenders([]) == []
