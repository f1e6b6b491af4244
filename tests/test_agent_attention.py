"""The scripted agent on attention (issue 22: the Triton prefill route from its naive rung), on the CPU: the
search's plumbing in Triton's interpreter (the causal flag travels in the shape, the candidates are checked on
fully masked rows and S_q != S_kv, timed and accepted or rejected). The wall clock here decides nothing a GPU
would; the GPU run is `scripts/gpu_session.sh agent:attention:triton:t01_materialised_scores:SHAPE:bfloat16`."""

from __future__ import annotations

from hello_gpu.agent.loop import run_agent
from hello_gpu.agent.store import CandidateStore
from hello_gpu.agent.task import Task


def test_an_attention_triton_search_runs_end_to_end_in_the_interpreter(tmp_path):
    """From t01 (three kernels, materialised scores): the first proposal is the ladder's next structural step
    (t02, one fused kernel with online softmax), which must pass the checker on a causal shape with fully masked
    rows and be timed against the start; every later candidate ends accepted or rejected with its reason."""
    task = Task("attention", "t01_materialised_scores", "triton", dtypes=("float32",),
                check_shapes=((1, 2, 1, 1, 1, 64), (1, 1, 1, 33, 31, 64, 1)), bench_shape=(1, 2, 1, 64, 64, 64, 1))
    result = run_agent(task, "scripted", tmp_path / "run", rounds=2, seed=0,
                       timeouts={"bench_seconds": 0.3, "compare_seconds": 0.6, "counters": False})
    with CandidateStore(tmp_path / "run") as store:
        candidates = store.list()
    assert candidates[0].state == "accepted" and len(candidates) >= 2, [(c.action, c.state) for c in candidates]
    assert candidates[1].action.startswith("ladder step to t02_fused_online_softmax"), candidates[1].action
    for candidate in candidates[1:]:
        assert candidate.state in ("accepted", "rejected"), (candidate.action, candidate.state, candidate.reason)
        assert candidate.reason, candidate.action
        assert "incorrect" not in candidate.reason.lower(), (candidate.action, candidate.reason)
    assert result.stop_reason
