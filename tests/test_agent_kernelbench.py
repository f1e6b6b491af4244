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
