"""The agent pointed at a model (issue 23 part 5, hello_gpu.agent.model), on the CPU with the tiny config:

- the arithmetic and the maps alone (fast): Amdahl bounds, operations -> ladders (none faked), the
  ranking and the target of a profile, the check shapes in the interpreter, the agent's kernel wrapped
  for the model (the model's eps passed, or a fixed eps refused);
- the whole flow once through the command line (``hello-gpu agent --model tiny``, one round of the
  scripted policy in the Triton interpreter, ~2 minutes on a loaded 2-core machine): the report's
  every part, "not GPU measurements", the registry's "not measured";
- the same run's kernel forced into the model: it runs there and matches eager;
- a wrong kernel planted as the run's accepted best is refused by the checker before any swap.

The GPU tier (``pytest -m gpu``) runs the flow on the 1B-sized model in bf16 on the H200.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from hello_gpu.agent.candidate import Candidate
from hello_gpu.agent.model import (GRAPH_ONLY, LADDERS, OPERATOR_RUN, ModelAgentError, Swap, Target, amdahl,
                                   check_shapes, choose_target, model_function, optimise_model, prepare_swap,
                                   rank_operations, registry_with, remeasure)
from hello_gpu.agent.store import CandidateStore
from hello_gpu.models.backends import REPLACEMENTS, make_runner
from hello_gpu.models.llama import CONFIGS, build_model
from hello_gpu.models.logits import compare_greedy
from hello_gpu.models.profile import HOST, ModelProfile
from hello_gpu.ops import INTERPRETER_MAX_ELEMENTS, load_op, numel
from hello_gpu.runtime.device import gpu_vendor

TINY = CONFIGS["tiny"]
FAST = {"bench_seconds": 0.5, "compare_seconds": 1.0, "counters": False}
cpu_only = pytest.mark.skipif(gpu_vendor() is not None, reason="the interpreter tier; the GPU tier runs on the GPU")


def float64_rms_norm(x, weight, eps):
    wide = x.double()
    return wide * torch.rsqrt(wide.square().mean(-1, keepdim=True) + eps) * weight.double()


# ------------------------------------------------------------------------------------------ arithmetic and maps


def test_amdahl_bounds():
    assert amdahl(0.5) == pytest.approx(2.0)
    assert amdahl(0.5, 2.0) == pytest.approx(4 / 3)
    assert amdahl(0.1) == pytest.approx(1 / 0.9)
    assert amdahl(0.0) == 1.0


def _profile(seconds: dict[str, float], wall: float, steps: int = 4) -> ModelProfile:
    """A profile as profile_llama makes it on the CPU: each operation's total over ``steps`` steps."""
    profile = ModelProfile("synthetic", "cpu", steps, wall, operations=dict(seconds))
    profile.categories[HOST] = wall - sum(seconds.values())
    return profile


def test_operations_are_ranked_by_share_and_only_real_ladders_are_named():
    model = build_model(TINY, dtype=torch.float32, seed=1)
    profile = _profile({"linear": 0.4, "attention": 0.2, "add_rms_norm": 0.12, "rms_norm": 0.02, "rope": 0.06,
                        "swiglu": 0.04, "embed": 0.01, "cache_write": 0.03}, wall=1.0)
    ranking = rank_operations(profile, model, batch=3, tokens=1, cache_length=20)
    assert [row.name for row in ranking] == ["linear", "attention", "add_rms_norm", "rope", "swiglu", "cache_write",
                                             "rms_norm", "embed"]
    by_name = {row.name: row for row in ranking}
    assert by_name["linear"].share == pytest.approx(0.4) and by_name["linear"].seconds_per_step == pytest.approx(0.1)
    assert by_name["linear"].bound_if_free == pytest.approx(1 / 0.6)
    assert by_name["linear"].bound_if_2x == pytest.approx(1 / 0.8)
    assert by_name["add_rms_norm"].calls_per_step == 2 * TINY.num_layers
    # linear: the backend swaps ops.linear in, but the agent has no map to the linear ladder: no ladder, never faked
    assert by_name["linear"].ladder is None and by_name["linear"].note.startswith("no ladder for the agent yet")
    assert "hello_gpu.ops.linear" in by_name["linear"].note
    for name, module in (("rope", "rope_kernel"), ("swiglu", "swiglu_kernel"), ("attention", "decode_attention_kernel"),
                         ("cache_write", "cache_write_kernel")):
        # the model's own kernels: swapped in by the backend, no ladder
        assert by_name[name].ladder is None and by_name[name].note.startswith("no ladder for the agent yet")
        assert f"hello_gpu.models.{module}" in by_name[name].note
    assert by_name["embed"].ladder is None and by_name["embed"].note.startswith("no ladder yet"), by_name["embed"]
    assert by_name["rms_norm"].ladder == by_name["add_rms_norm"].ladder == "rms_norm"
    assert "with the residual add a torch add, where the backend's fused add + RMSNorm kernel is not" in by_name["add_rms_norm"].note

    target = choose_target(ranking, model, rows=3)
    assert target.operation == "add_rms_norm" and target.ladder == "rms_norm" and target.replaces == "rms_norm"
    assert target.shape == (3, TINY.hidden_size) and target.dtype == "float32"
    assert sorted(target.covered) == ["add_rms_norm", "rms_norm"]
    assert target.covered_share == pytest.approx(0.14) and target.share == pytest.approx(0.12)
    data = target.to_dict()
    assert data["shape"] == f"3x{TINY.hidden_size}"
    assert data["bound_if_free"] == pytest.approx(1 / 0.88) and data["covered_bound_if_2x"] == pytest.approx(1 / 0.93)


def test_no_target_when_no_ranked_operation_has_a_ladder():
    model = build_model(TINY, dtype=torch.float32, seed=1)
    ranking = rank_operations(_profile({"linear": 0.5, "attention": 0.3}, wall=1.0), model, batch=1, tokens=1,
                              cache_length=8)
    assert choose_target(ranking, model, rows=1) is None


def test_every_mapped_ladder_exists_and_replaces_a_registered_operation():
    for name, mapping in LADDERS.items():
        assert load_op(mapping.ladder).name == mapping.ladder
        assert mapping.replaces in REPLACEMENTS and REPLACEMENTS[mapping.replaces].load is not None, name


def test_check_shapes_keep_the_models_shape_and_drop_only_what_the_interpreter_cannot_run():
    spec = load_op("rms_norm").spec
    shapes, note = check_shapes(spec, (5, 48), interpreted=False)
    assert shapes == (*spec.EDGE_SHAPES, (5, 48)) and note == ""
    shapes, note = check_shapes(spec, (5, 48), interpreted=True)
    assert (5, 48) in shapes and all(numel(s) <= INTERPRETER_MAX_ELEMENTS for s in shapes)
    dropped = [s for s in spec.EDGE_SHAPES if numel(s) > INTERPRETER_MAX_ELEMENTS]
    assert dropped and all(s not in shapes for s in dropped)
    assert "1823x781" in note and "only on a GPU" in note
    assert check_shapes(spec, (1, 1), interpreted=False)[0] == spec.EDGE_SHAPES       # already an edge shape


@cpu_only
def test_the_agents_kernel_gets_the_models_eps_or_is_refused():
    op = load_op("rms_norm")
    generator = torch.Generator().manual_seed(11)
    # Rows of mean square ~1e-6: eps 1e-5 and the spec's 1e-6 give results ~2x apart, so a kernel that
    # ignored the eps it is given could not pass.
    x = 1e-3 * torch.randn(2, 3, TINY.hidden_size, generator=generator)
    weight = 1 + 0.1 * torch.randn(TINY.hidden_size, generator=generator)
    with_eps, why = model_function(op.rung("t07_static_width").build(), spec_eps=op.spec.EPS, model_eps=1e-5)
    assert why == ""
    got = with_eps(x, weight, 1e-5)
    expected = float64_rms_norm(x, weight, 1e-5)
    assert got.shape == x.shape and got.dtype == x.dtype
    torch.testing.assert_close(got.double(), expected, rtol=2e-5, atol=0)
    assert not torch.allclose(expected, float64_rms_norm(x, weight, op.spec.EPS), rtol=0.1)

    fixed = op.rung("t01_row_per_program").build()                 # its run() has no eps: the spec's 1e-6
    refused, why = model_function(fixed, spec_eps=op.spec.EPS, model_eps=1e-5)
    assert refused is None and "takes no eps" in why and "1e-05" in why
    same, why = model_function(fixed, spec_eps=op.spec.EPS, model_eps=op.spec.EPS)
    torch.testing.assert_close(same(x, weight, op.spec.EPS).double(), float64_rms_norm(x, weight, op.spec.EPS),
                               rtol=2e-5, atol=0)


def test_the_registry_gets_the_agents_kernel_or_leaves_the_operation_out():
    target = Target("add_rms_norm", "rms_norm", "rms_norm", (1, 48), "float32", 0.1, ["add_rms_norm", "rms_norm"], 0.12)

    def kernel(x, weight, eps):
        return x
    registry = registry_with(Swap(7, "ab" * 32, function=kernel), target, Path("run"))
    assert registry["rms_norm"].load() is kernel and "candidate 7" in registry["rms_norm"].description
    assert registry["rms_norm"].example is REPLACEMENTS["rms_norm"].example           # checked as the registry checks
    assert {name: entry for name, entry in registry.items() if name != "rms_norm"} == \
        {name: entry for name, entry in REPLACEMENTS.items() if name != "rms_norm"}
    refused = registry_with(Swap(7, "ab" * 32, refused="wrong"), target, Path("run"))
    assert refused["rms_norm"].load is None and "refused: wrong" in refused["rms_norm"].missing


def test_the_flow_refuses_what_it_cannot_run(tmp_path):
    model = build_model(TINY, dtype=torch.float32, seed=1)
    with pytest.raises(ModelAgentError, match="exceed the model's 256 positions"):
        optimise_model(model, tmp_path, prompt=250, new=10)
    with pytest.raises(ModelAgentError, match="--phase"):
        optimise_model(model, tmp_path, phase="train")
    double = build_model(TINY, dtype=torch.float64, seed=1)
    with pytest.raises(ModelAgentError, match="float64; the rms_norm ladder is defined for"):
        optimise_model(double, tmp_path / "fp64", prompt=8, new=4, steps=1)


def test_the_command_line_says_what_goes_with_model(capsys, tmp_path):
    from hello_gpu.cli import main

    assert main(["agent"]) == 2
    assert "give an operator, a problem file, 'resume RUN' / 'report RUN', or --model CONFIG" in capsys.readouterr().out
    assert main(["agent", "softmax", "--model", "tiny"]) == 2
    assert "give an operator or --model, not both" in capsys.readouterr().out
    assert main(["agent", "--model", "tiny", "--shape", "4x48"]) == 2
    assert "the operator's shape is the one the model calls it with" in capsys.readouterr().out
    assert main(["agent", "--model", "huge", "--run-dir", str(tmp_path / "run")]) == 2
    assert "no model configuration 'huge'" in capsys.readouterr().out
    assert main(["agent", "--model", "tiny", "--prompt", "300", "--run-dir", str(tmp_path / "run")]) == 2
    assert "exceed the model's 256 positions" in capsys.readouterr().out
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------ the whole flow


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    """``hello-gpu agent --model tiny`` once, as a user types it: one round in the interpreter."""
    from hello_gpu.cli import main

    if gpu_vendor() is not None:
        pytest.skip("the interpreter tier; the GPU tier runs the flow on the GPU")
    run_dir = tmp_path_factory.mktemp("agent-model") / "run"
    status = main(["agent", "--model", "tiny", "--prompt", "12", "--new", "6", "--steps", "3", "--rounds", "1",
                   "--no-counters", "--run-dir", str(run_dir)])
    return run_dir, status


def test_the_flow_runs_end_to_end_and_reports_every_part(model_run):
    run_dir, status = model_run
    assert status == 0
    data = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    markdown = (run_dir / "report.md").read_text(encoding="utf-8")
    assert data["kind"] == "agent-model" and data["model"]["name"] == "tiny" and data["phase"] == "decode"
    # the CPU figures are labelled as what they are
    assert data["gpu_measurements"] is False and "model tokens/s" in data["not_gpu_measurements"]
    assert "Not GPU measurements" in markdown
    # (1) the ranking: every labelled operation of a decode step, largest share first
    shares = [row["share"] for row in data["ranking"]]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1
    names = {row["name"] for row in data["ranking"]}
    assert names == {"embed", "rms_norm", "add_rms_norm", "linear", "rope", "cache_write", "attention", "swiglu"}
    for row in data["ranking"]:
        assert row["bound_if_free"] == pytest.approx(1 / (1 - row["share"]))
        assert (row["ladder"] == "rms_norm") == (row["name"] in ("rms_norm", "add_rms_norm")), row
    # (2)-(3) the target at the model's shape and dtype, the agent's run on it
    target = data["target"]
    assert target["ladder"] == "rms_norm" and target["shape"] == f"1x{TINY.hidden_size}" and target["dtype"] == "float32"
    assert target["bound_if_free"] == pytest.approx(1 / (1 - target["share"]))
    assert target["covered_bound_if_2x"] == pytest.approx(1 / (1 - target["covered_share"] / 2))
    agent = data["agent"]
    assert agent["task"]["start"] == "t07_static_width" and agent["task"]["bench_shape"] == [1, TINY.hidden_size]
    assert agent["best_id"] is not None and (run_dir / OPERATOR_RUN / "report.md").is_file()
    assert agent["final"] is None or agent["final"].get("clock") in (None, "wall")
    # (4) re-checked, then the registry's decision: not measured on the CPU
    assert data["swap"]["rechecked"]["passed"] is True and len(data["swap"]["rechecked"]["seeds"]) >= 3
    assert data["swap"]["refused"] == "" and Path(data["swap"]["file"]).is_file()
    assert data["choice"]["used"] is False and data["choice"]["reason"].startswith("not measured")
    # (5) the model re-measured: eager and hello-gpu, same tokens; no graph-only run without a GPU
    runs = {run["backend"]: run for run in data["model_run"]["runs"]}
    assert set(runs) == {"eager", "hello-gpu"} and runs["hello-gpu"]["agreement"] == "same"
    assert data["graph_only"] is None
    assert data["speedups"]["measured"] > 0 and data["speedups"]["predicted"] is None
    assert any(line.startswith("No GPU here") for line in data["limits"])
    assert any(line.startswith("Amdahl: the rms_norm kernel replaces") for line in data["limits"])
    # every operation without a ladder that outweighs the target is named with its share (which ones do is
    # where this CPU spent its time: a timing, so the test holds the report to its own ranking)
    bigger = [row["name"] for row in data["ranking"] if row["ladder"] is None and row["share"] > target["share"]]
    named = [line.split(" takes ")[0] for line in data["limits"] if " takes " in line and "% of a step" in line]
    assert named == bigger
    for heading in ("## 1. Operations by time share", "## 2. The operation optimised", "## 3. What the agent reached",
                    "## 4. The swap", "## 5. The model, re-measured", "## What limits it"):
        assert heading in markdown


def test_the_agents_kernel_forced_into_the_model_runs_there_and_matches_eager(model_run):
    run_dir, _ = model_run
    with CandidateStore(run_dir / OPERATOR_RUN) as store:
        task = store.task()
    model = build_model(TINY, dtype=torch.float32, seed=0)
    swap = prepare_swap(run_dir, task, model_eps=TINY.rms_norm_eps, recheck=False)      # checked by the run above
    assert swap.function is not None, swap.refused
    target = Target("add_rms_norm", "rms_norm", "rms_norm", (2, 48), "float32", 0.1, ["add_rms_norm", "rms_norm"], 0.1)
    registry = registry_with(swap, target, run_dir)
    result, graph_only = remeasure(model, registry, batch=2, prompt=5, new=4, seed=3, force=True, replaces="rms_norm")
    hello = next(run for run in result.runs if run.backend == "hello-gpu")
    assert hello.used == ["rms_norm"] and hello.agreement == "same" and graph_only is None
    assert next(c for c in hello.choices if c["name"] == "rms_norm")["reason"].startswith("forced")
    # It really runs in the model: logits close to eager's at every step, and not the same bits.
    prompt = torch.randint(0, TINY.vocab_size, (2, 5), generator=torch.Generator().manual_seed(4))
    eager = make_runner(model, "eager", batch=2, max_seq=10)
    ours = make_runner(model, "hello-gpu", batch=2, max_seq=10, force=["rms_norm"], replacements=registry)
    comparison = compare_greedy(eager, ours, prompt, 5)
    assert comparison.ok and comparison.first_divergence is None, comparison.summary()
    assert 0 < max(comparison.gaps) < 1e-4 * max(comparison.scales)


def test_a_wrong_kernel_planted_as_the_best_is_refused_before_any_swap(model_run, tmp_path):
    run_dir, _ = model_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir / OPERATOR_RUN, copy / OPERATOR_RUN)
    with CandidateStore(copy / OPERATOR_RUN) as store:
        task, best = store.task(), store.best_accepted()
        # The weight never multiplied in (t07's "x * scale * weight", t03's "* weight[None, :]"): a kernel
        # that runs and is wrong by 10% (the checker's weights are 1 + 0.1 N(0, 1)).
        wrong = re.sub(r" \* weight(\[[^\]]*\])?\)", ")", best.source)
        assert wrong != best.source
        store.add(Candidate(None, best.id, "triton", wrong, action="planted", state="accepted"), 9)
    swap = prepare_swap(copy, task, model_eps=TINY.rms_norm_eps)
    assert swap.function is None and swap.refused.startswith("the agent's checker refuses it now"), swap
    assert swap.rechecked["passed"] is False and swap.file is None       # never written as a rung, never imported
    assert swap.rechecked["status"] == "ok" and "raised" not in swap.rechecked["reason"]   # wrong, not crashed
    assert "elements outside rtol" in swap.rechecked["reason"]


# ------------------------------------------------------------------------------------------ GPU tier


@pytest.mark.gpu
@pytest.mark.skipif(gpu_vendor() is None, reason="needs a GPU")
def test_the_agent_on_the_1b_model_decode_on_the_gpu(tmp_path):
    """The 1B-sized model, bf16, batch 1 decode: ranked by kernel time, the agent on rms_norm at 1x2048,
    the kernel swapped in only by measurement, the model re-measured three ways."""
    model = build_model("1b", device="cuda", dtype=torch.bfloat16, seed=0)
    result = optimise_model(model, tmp_path / "run", phase="decode", batch=1, prompt=512, new=64, rounds=2,
                            timeouts={"counters": False})
    data = json.loads((tmp_path / "run" / "report.json").read_text(encoding="utf-8"))
    assert data["gpu_measurements"] is True and result.profile.device == "gpu"
    assert data["ranking"][0]["name"] == "linear" and data["ranking"][0]["ladder"] is None   # the GEMVs lead
    assert data["target"]["ladder"] == "rms_norm" and data["target"]["shape"] == "1x2048"
    assert data["target"]["dtype"] == "bfloat16"
    assert data["agent"]["best_id"] is not None
    final = data["agent"]["final"]
    assert final["remeasured"] is None or final["clock"] == "device-events"
    assert data["swap"]["rechecked"]["passed"] is True
    choice = data["choice"]
    if data["swap"]["refused"]:
        assert choice["used"] is False
    else:
        assert choice["speedup"] is not None and choice["ci95"] is not None, choice       # decided by a timing
        assert choice["used"] == choice["reason"].startswith("faster"), choice
    runs = {run["backend"]: run for run in data["model_run"]["runs"]}
    assert set(runs) == {"eager", "hello-gpu"} and data["graph_only"]["backend"] == GRAPH_ONLY
    assert all(run["decode_tokens_per_s"] > 0 and run["peak_memory_bytes"] for run in runs.values())
    speed = data["speedups"]
    assert speed["measured"] > 0 and speed["graph_part"] > 0
    assert (speed["predicted"] is not None) == choice["used"]
    assert not any(line.startswith("No GPU here") for line in data["limits"])
