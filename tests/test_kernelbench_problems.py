"""The field's real problems (issue 17, part 8): KernelBench level-1 softmax, RMSNorm, sum over a middle
dimension and a square matmul, as problem files of the benchmark's sizes (tests/fixtures/kernelbench).

On the CPU the same files run with their size constants shrunk (the code path is the one the H200
takes); tests/gpu/test_kernelbench_gpu.py runs them at full size. What is checked here: describing a
6.4 GB problem costs no data, the checker's reference comes in row chunks and still catches a wrong
row, a start kernel is taken with the parent its header names, and the agent runs each problem.
"""

import re
from pathlib import Path

import pytest
import torch

from hello_gpu.agent.kernelbench import ProblemError, ProblemSpec, write_operator
from hello_gpu.ops import checking, check_rung, load_op

HERE = Path(__file__).parent
PROBLEMS = HERE / "fixtures" / "kernelbench"
SOFTMAX_START = HERE.parent / "src" / "hello_gpu" / "ops" / "softmax" / "t02_online_tiles.py"

# problem file, start kernel, the sizes the CPU runs (module constants of the problem file)
CASES = {
    "softmax": ("level1_23_softmax.py", SOFTMAX_START, {"batch_size": 8, "dim": 5000}),
    "rms_norm": ("level1_36_rms_norm.py", PROBLEMS / "t01_rms_norm_dim1.py",
                 {"batch_size": 5, "features": 8, "dim1": 6, "dim2": 7}),
    "sum": ("level1_47_sum_reduction.py", PROBLEMS / "t01_sum_dim1.py", {"batch_size": 6, "dim1": 70, "dim2": 33}),
    "matmul": ("level1_1_square_matmul.py", PROBLEMS / "t01_square_matmul.py", {"N": 40}),
}


def shrunk(name: str, folder: Path) -> Path:
    """The problem file with its size constants replaced: the same Model, get_inputs and code path."""
    file_name, _, sizes = CASES[name]
    text = (PROBLEMS / file_name).read_text()
    for constant, value in sizes.items():
        text, count = re.subn(rf"^{constant} = .*$", f"{constant} = {value}", text, flags=re.M)
        assert count == 1, constant
    path = folder / file_name
    path.write_text(text)
    return path


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def test_full_size_problems_are_described_without_making_their_data():
    """A 6.4 GB softmax, a 7.5 GB RMSNorm, an 8.6 GB sum: shapes and work from the meta device, at once."""
    softmax = ProblemSpec(PROBLEMS / "level1_23_softmax.py")
    assert softmax.shape == (4096, 393216) and softmax.output_shape == (4096, 393216)
    work = softmax.work(softmax.shape, "float32")
    assert work.read_bytes == work.written_bytes == 4096 * 393216 * 4
    rms = ProblemSpec(PROBLEMS / "level1_36_rms_norm.py")
    assert rms.shape == (112, 64, 512, 512) and rms.parameter_names == []
    total = ProblemSpec(PROBLEMS / "level1_47_sum_reduction.py")
    assert total.output_shape == (128, 1, 4095)
    assert total.work(total.shape, "float32").written_fraction < 1e-3       # read-dominated: held against reads
    matmul = ProblemSpec(PROBLEMS / "level1_1_square_matmul.py")
    assert matmul.work(matmul.shape, "float32").flops == 2 * 4096**3      # counted, so the compute roof is armed
    with pytest.raises(ValueError, match="fixes its input shape"):
        softmax.work((8, 8), "float32")


@pytest.mark.parametrize("name", list(CASES))
def test_reference_chunks_match_the_whole_forward_in_float64(name, tmp_path):
    spec = ProblemSpec(shrunk(name, tmp_path))
    tensors = spec.make_inputs(spec.shape, "float32", seed=3)
    chunked = spec.reference_chunks(*tensors, max_bytes=512)           # a few rows a chunk: several chunks
    assert chunked.dtype == "float64" and chunked.rtol_factor == 1.0 and not chunked.note
    pieces = list(chunked.chunks())
    assert len(pieces) > 1 and pieces[0][0] == 0 and pieces[-1][1] == spec.output_shape[0]
    assert all(expected.dtype == torch.float64 for _, _, expected in pieces)
    model = spec.module.Model(*spec.module.get_init_inputs()).double()
    independent = model(*[t.double() for t in tensors])
    torch.testing.assert_close(torch.cat([expected for _, _, expected in pieces]), independent, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(spec.reference(*tensors), independent, rtol=1e-12, atol=1e-12)


class _MixesRows(torch.nn.Module):
    def forward(self, x):
        return x - x.mean(dim=0, keepdim=True)


def test_a_forward_that_mixes_rows_is_not_chunked_and_says_how_it_was_computed(tmp_path):
    path = tmp_path / "mixes_rows.py"
    path.write_text("import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                    "        return x - x.mean(dim=0, keepdim=True)\n\n"
                    "def get_inputs():\n    return [torch.randn(12, 10)]\n\ndef get_init_inputs():\n    return []\n")
    spec = ProblemSpec(path)
    (x,) = spec.make_inputs(spec.shape, "float32", seed=1)
    expected = _MixesRows()(x.double())
    exact = spec.reference_chunks(x, max_bytes=8 * 12 * 10)           # the float64 output fits: float64, whole
    assert exact.dtype == "float64" and exact.rtol_factor == 1.0
    torch.testing.assert_close(torch.cat([e for _, _, e in exact.chunks()]), expected, rtol=1e-12, atol=1e-12)
    rounded = spec.reference_chunks(x, max_bytes=8 * 10)              # it does not: the input's dtype, rtol widened
    assert rounded.dtype == "float32" and rounded.rtol_factor == 2.0 and "float32" in rounded.note
    got = torch.cat([e for _, _, e in rounded.chunks()])
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-6)


def test_the_checker_compares_chunk_by_chunk_and_names_the_rows_of_a_wrong_one(tmp_path, interpreter, monkeypatch):
    monkeypatch.setattr(checking, "CHECK_CHUNK_BYTES", 8 * 2**10)      # 1 KiB of float64 a chunk: several chunks
    problem = shrunk("sum", tmp_path)
    write_operator(problem, CASES["sum"][1], tmp_path / "ops")
    wrong = tmp_path / "t02_sum_skips_last_batch.py"
    text = CASES["sum"][1].read_text().replace(
        "sum_dim1_kernel[(triton.cdiv(inner, BLOCK), batch)]", "out.zero_()\n    sum_dim1_kernel[(triton.cdiv(inner, BLOCK), batch - 1)]")
    wrong.write_text(text)
    write_operator(problem, wrong, tmp_path / "ops")
    op = load_op(problem.stem, root=tmp_path / "ops")
    good = check_rung(op.rung("t01_sum_dim1"), op, seeds=[1])
    assert good.passed, good.reason
    bad = check_rung(op.rung("t02_sum_skips_last_batch"), op, seeds=[1])
    assert not bad.passed and re.search(r"in output rows \d+:6 of 6", bad.reason), bad.reason


def test_the_checker_keeps_its_memory_bound_in_its_docs_and_numbers():
    footprint = 2 * 4096 * 393216 * 4                                 # softmax: input and output, 12.9 GB
    assert checking.memory_bound(footprint) == 3 * footprint + checking.CHECK_CHUNK_BYTES
    assert "3 x footprint + 1 GiB" in checking.__doc__


def test_a_start_from_another_operator_is_taken_with_its_parent(tmp_path):
    """softmax/t02_online_tiles.py names t01_row_per_program as its parent; the problem's operator lacks it."""
    problem = shrunk("softmax", tmp_path)
    task, folder = write_operator(problem, SOFTMAX_START, tmp_path / "ops")
    assert task.start == "t02_online_tiles" and task.extra["start_parent"] == "t01_row_per_program"
    op = load_op(problem.stem, root=tmp_path / "ops")
    start = op.rung("t02_online_tiles")
    assert start.metadata.parent_id == "v00_torch" and "t01_row_per_program" in start.metadata.description
    # The kernel itself is what the user wrote: only the header's parent line differs.
    original, copy = SOFTMAX_START.read_text().splitlines(), (folder / SOFTMAX_START.name).read_text().splitlines()
    assert [line for line in copy if line not in original] == [
        "parent: v00_torch", "(the start's own header named parent t01_row_per_program, a rung of the operator "
        "it came from; this problem's operator has only its baseline before it)"]


def test_a_start_the_registry_refuses_is_refused_by_name_not_by_traceback(tmp_path):
    problem = shrunk("softmax", tmp_path)
    start = tmp_path / "t05_broken.py"
    start.write_text('"""No header fields at all."""\n\ndef run(x):\n    return x\n')
    with pytest.raises(ProblemError, match="t05_broken.py.*rung header"):
        write_operator(problem, start, tmp_path / "ops")


def _agent_run(name: str, folder: Path):
    from hello_gpu.agent.loop import run_agent
    from hello_gpu.agent.store import CandidateStore
    task, _ = write_operator(shrunk(name, folder), CASES[name][1], folder / "run" / "ops")
    # rounds=0: the start's own evaluation (compile, check, bench, compare, accept) and the report; the
    # rounds after it are the agent's ordinary loop, tested elsewhere (2.5 CPU minutes a round here).
    result = run_agent(task, "scripted", folder / "run", rounds=0, patience=1, final_remeasure=False,
                       timeouts={"bench_seconds": 0.2, "compare_seconds": 0.4, "counters": False})
    with CandidateStore(folder / "run") as store:
        return folder, store.get(result.start_id)


@pytest.fixture(scope="module")
def agent_runs(side_by_side, tmp_path_factory):
    """The agent on each problem, two at a time (a run is ~15 s of a parent waiting on its step's child);
    the interpreter is on until all have finished."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        futures = {name: side_by_side(_agent_run, name, tmp_path_factory.mktemp(f"agent-{name}")) for name in CASES}
        for future in futures.values():
            future.exception()                      # wait for every run before the variable is restored
        yield futures


@pytest.mark.parametrize("name", list(CASES))
def test_each_problem_runs_end_to_end_through_the_agent(name, agent_runs):
    folder, start = agent_runs[name].result()
    assert start.state == "accepted", start.reason
    assert start.results["check"]["passed"]
    bench = start.results["bench"].get("raw") or {}
    assert bench["work"]["written_bytes"] is not None                   # the read/write split reached the bench
    assert (folder / "run" / "report.md").is_file()
