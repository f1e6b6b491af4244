"""KernelBench-style problem files become agent tasks whose reference is the Model's forward in float64."""

from pathlib import Path

import pytest
import torch

from hello_gpu.agent.kernelbench import ProblemError, load_problem, make_inputs, make_model, reference

FIXTURES = Path(__file__).parent / "fixtures" / "agent"
SOFTMAX = FIXTURES / "kb_scaled_softmax.py"
RMS_NORM = FIXTURES / "kb_rms_norm_weight.py"


def test_softmax_problem_becomes_a_task():
    task, module = load_problem(SOFTMAX, route="hip")
    assert task.op == "kb_scaled_softmax"
    assert task.route == "hip"
    assert task.problem_path == str(SOFTMAX.resolve())
    assert task.check_shapes == (((8, 96),),)
    assert task.bench_shape == ((8, 96),)
    assert task.dtypes == ("float32",)
    assert callable(module.get_inputs) and issubclass(module.Model, torch.nn.Module)


def test_softmax_reference_is_float64_and_matches_torch():
    _, module = load_problem(SOFTMAX)
    (x,) = make_inputs(module, seed=3)
    expected = reference(module, [x])
    assert expected.dtype == "float64" and expected.output.dtype == torch.float64
    # Computed independently of the problem file: softmax(x / 0.5) in float64.
    independent = torch.softmax(x.double() / 0.5, dim=-1)
    torch.testing.assert_close(expected.output, independent, rtol=1e-12, atol=1e-15)
    # And the float32 forward the problem describes is within float32 rounding of it.
    float32 = make_model(module)(x)
    torch.testing.assert_close(float32.double(), expected.output, rtol=1e-5, atol=1e-6)
    assert torch.allclose(expected.output.sum(dim=-1), torch.ones(8, dtype=torch.float64))


def test_inputs_are_fresh_per_seed_and_repeatable():
    _, module = load_problem(SOFTMAX)
    first, again, other = make_inputs(module, 1)[0], make_inputs(module, 1)[0], make_inputs(module, 2)[0]
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_weights_come_from_the_seed_and_the_reference_uses_them():
    _, module = load_problem(RMS_NORM)
    (x,) = make_inputs(module, seed=0)
    expected = reference(module, [x], seed=5)
    weight = make_model(module, seed=5, dtype=torch.float64).weight.detach()
    assert torch.equal(weight, make_model(module, seed=5, dtype=torch.float64).weight.detach())
    assert not torch.equal(weight, make_model(module, seed=6, dtype=torch.float64).weight.detach())
    xd = x.double()
    independent = xd / torch.sqrt(xd.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight
    torch.testing.assert_close(expected.output, independent, rtol=1e-12, atol=1e-12)
    # A different weight seed gives a different reference: the seed is not ignored.
    assert not torch.allclose(reference(module, [x], seed=6).output, expected.output)


def test_a_problem_without_get_inputs_is_refused_by_name():
    with pytest.raises(ProblemError, match="kb_missing_inputs.py.*missing: get_inputs"):
        load_problem(FIXTURES / "kb_missing_inputs.py")


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(ProblemError, match="no such problem file"):
        load_problem(tmp_path / "nope.py")


def test_model_must_be_a_module(tmp_path):
    path = tmp_path / "not_a_module.py"
    path.write_text("class Model:\n    pass\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n")
    with pytest.raises(ProblemError, match="torch.nn.Module"):
        load_problem(path)


def test_parameters_are_converted_too():
    _, module = load_problem(FIXTURES / "kb_linear_relu.py")
    (x,) = make_inputs(module, seed=2)
    expected = reference(module, [x], seed=4)
    assert expected.dtype == "float64" and not expected.note
    linear = make_model(module, seed=4, dtype=torch.float64).linear
    independent = torch.relu(x.double() @ linear.weight.detach().T + linear.bias.detach())
    torch.testing.assert_close(expected.output, independent, rtol=1e-12, atol=1e-12)
    assert (expected.output == 0).any() and (expected.output > 0).any()     # both sides of the relu seen


# ------------------------------------------------------------------ the problem as an operator folder


def test_a_problem_becomes_an_operator_folder_the_checker_uses(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from hello_gpu.agent.kernelbench import write_operator
    from hello_gpu.ops import check_rung, load_op
    task, folder = write_operator(RMS_NORM, FIXTURES / "t01_kb_rms_norm_start.py", tmp_path)
    assert folder == tmp_path / "kb_rms_norm_weight" and task.route == "triton"
    assert task.start == "t01_kb_rms_norm_start" and task.extra["ops_root"] == str(tmp_path.resolve())
    op = load_op("kb_rms_norm_weight", root=tmp_path)
    assert op.spec.EDGE_SHAPES == ((16, 64),) and op.spec.DTYPES == ("float32",)
    # The weight is an input of the kernel, fresh per seed, and the reference uses the one given.
    x, weight = op.spec.make_inputs((16, 64), "float32", seed=4)
    other = op.spec.make_inputs((16, 64), "float32", seed=5)[1]
    assert weight.shape == (64,) and not torch.equal(weight, other)
    xd = x.double()
    expected = xd * torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.double()
    torch.testing.assert_close(op.spec.reference(x, weight), expected, rtol=1e-12, atol=1e-12)
    assert op.spec.work((16, 64), "float32").bytes == (16 * 64 * 2 + 64) * 4
    start = check_rung(op.rung("t01_kb_rms_norm_start"), op, seeds=[1, 2, 3])
    assert start.passed, start.reason
    baseline = check_rung(op.rung("v00_torch"), op, seeds=[1, 2, 3])
    assert baseline.passed, baseline.reason


def test_a_kernel_that_drops_the_parameter_fails_the_check(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from hello_gpu.agent.kernelbench import write_operator
    from hello_gpu.ops import check_rung, load_op
    write_operator(RMS_NORM, FIXTURES / "t02_kb_rms_norm_ignores_weight.py", tmp_path)
    op = load_op("kb_rms_norm_weight", root=tmp_path)
    report = check_rung(op.rung("t02_kb_rms_norm_ignores_weight"), op, seeds=[1, 2, 3])
    assert not report.passed


def test_bad_problem_and_start_files_are_refused_by_name(tmp_path):
    from hello_gpu.agent.kernelbench import write_operator
    with pytest.raises(ProblemError, match="no such starting kernel"):
        write_operator(RMS_NORM, tmp_path / "missing.py", tmp_path)
    other = tmp_path / "kernel.cu"
    other.write_text("// not a rung\n")
    with pytest.raises(ProblemError, match="Triton .py or a HIP .hip"):
        write_operator(RMS_NORM, other, tmp_path)
    with pytest.raises(ProblemError, match="no such problem file"):
        write_operator(tmp_path / "nope.py", FIXTURES / "t01_kb_rms_norm_start.py", tmp_path)
    assert not (tmp_path / "nope").exists()


@pytest.fixture(scope="module")
def command_line_run(tmp_path_factory):
    """One agent run on the RMS norm problem through the command line, shared by the tests below: two
    refused starts, a first round, then ``agent resume`` for a second (a run costs ~25 s a round of CPU
    here, so the command line and the end-to-end test share it). The exit codes and printed text of
    each call, and the run folder."""
    import contextlib
    import io

    from hello_gpu.cli import main
    run_dir = tmp_path_factory.mktemp("kernelbench-agent") / "run"
    start = str(FIXTURES / "t01_kb_rms_norm_start.py")
    calls = [["agent", str(RMS_NORM), "--from", str(FIXTURES / "nope.py"), "--run-dir", str(run_dir)],
             ["agent", str(RMS_NORM), "--from", start, "--route", "hip", "--run-dir", str(run_dir)],
             ["agent", str(RMS_NORM), "--from", start, "--rounds", "1", "--no-counters", "--run-dir", str(run_dir)],
             ["agent", "resume", str(run_dir), "--rounds", "2"]]
    outcomes = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        for words in calls:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                status = main(words)
            outcomes.append((status, printed.getvalue()))
    return run_dir, outcomes


def test_the_command_line_takes_a_problem_file(command_line_run):
    from hello_gpu.agent.store import CandidateStore
    run_dir, ((missing, missing_text), (hip, hip_text), (first, first_text), (resumed, _)) = command_line_run
    assert missing == 2 and "no such starting kernel" in missing_text
    assert hip == 2 and "is a triton kernel, not hip" in hip_text
    assert first == 0 and "stopped: max rounds" in first_text
    assert (run_dir / "report.md").is_file() and (run_dir / "ops" / "kb_rms_norm_weight" / "spec.py").is_file()
    with CandidateStore(run_dir) as store:
        assert store.list()[0].state == "accepted"
        assert store.run_info()["extra"]["settings"]["timeouts"] == {"counters": False}
    assert resumed == 0                                          # the ops/ folder is found again


def test_the_agent_runs_a_problem_end_to_end_on_the_cpu(command_line_run):
    from hello_gpu.agent.store import CandidateStore
    run_dir, _ = command_line_run
    with CandidateStore(run_dir) as store:
        candidates = store.list()
        rounds_done = store.run_info()["stop_reason"]
    assert candidates[0].action == "start" and candidates[0].state == "accepted", candidates[0].reason
    assert len(candidates) >= 3, rounds_done       # the scripted policy found a parameter move in each round
    assert all(c.state in ("accepted", "rejected", "compile-failed", "incorrect") for c in candidates[1:])
