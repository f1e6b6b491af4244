"""The scripted policy on matmul, the compute-bound operator (issue 21): its moves on the real rungs and
the moves it picks for an analysis.

CPU tier: the Triton moves' sources are checked in the Triton interpreter (one child process, small edge
shapes, float32 and float16: bfloat16 arithmetic is wrong in the interpreter); the SIMT moves' sources
compile with NVRTC for sm_90 (every static_assert of warp_tiling.h holds) with launchers that agree; a
short agent loop runs a matmul Triton search end to end in the interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hello_gpu.agent.candidate import Candidate
from hello_gpu.agent.policies import ScriptedPolicy
from hello_gpu.agent.policies.actions import LadderStep
from hello_gpu.agent.policies.matmul_actions import (
    SHARED_BYTES_PER_BLOCK,
    SIZE_NAMES,
    WARP_TILE_NAMES,
    constexpr_sites,
    hip_matmul_actions,
    python_constant_sites,
    render_triton,
    shared_bytes,
    template_sizes,
    triton_matmul_actions,
    warp_tiles_valid,
)
from hello_gpu.agent.task import Task
from hello_gpu.ops.registry import load_op

OP = load_op("matmul")
SQUARE = "4096x4096x4096"
DECODE = "1x14336x4096"


def rung_text(rung_id):
    rung = OP.rung(rung_id)
    return rung.path.read_text(), rung.companion.read_text() if rung.companion else None


def current(rung_id, route):
    source, companion = rung_text(rung_id)
    return Candidate(id=1, parent_id=None, route=route, source=source, companion=companion, state="accepted")


def propose(rung_id, route, analysis, dtype="bfloat16", per_round=1, candidate=None, history=()):
    task = Task("matmul", rung_id, route, dtypes=(dtype,))
    start = candidate or current(rung_id, route)
    policy = ScriptedPolicy(per_round=per_round)
    proposals = policy.propose({"task": task, "current": start, "history": [start, *history],
                                "analysis": analysis, "round": 1, "seed": 0})
    return proposals, policy


def triton_move(name, dtype="bfloat16", shape=(4096, 4096, 4096)):
    t01, _ = rung_text("t01_block_tile")
    return next(a for a in triton_matmul_actions(t01, dtype, shape) if a.name == name)


# --------------------------------------------------------------------------------------------- Triton sources
def test_the_first_move_rewrites_t01_with_its_own_sizes_and_moves_only_the_timed_class():
    t01, _ = rung_text("t01_block_tile")
    new, _, description = triton_move("BLOCK_N up").apply(t01)
    table = template_sizes(new)
    assert table["float32"] == {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "SPLIT_K": 1,
                                "num_warps": 4, "num_stages": 3}          # t01's sizes, Triton's defaults
    assert table["16-bit"] == {**table["float32"], "BLOCK_N": 128}
    assert description.startswith("BLOCK_N 64 -> 128 (16-bit); t01's kernel rewritten")
    # float32 keeps IEEE products: TF32 would err by ~5e-4, 50x the float32 bound
    assert 'input_precision="ieee"' in new and "IEEE=a.dtype == torch.float32" in new
    # the hypothesis names the FLOPs per byte and the traffic, the prediction a figure
    header = new.split('"""')[1]
    assert "FLOP/B of tile (was 32)" in header and "43 FLOP/B" in header and "GB (was" in header
    assert "prediction: tile traffic 1.33x lower" in header


def test_moves_chain_from_a_written_source_and_a_hand_edited_one_is_left_alone():
    t01, _ = rung_text("t01_block_tile")
    first, _, _ = triton_move("BLOCK_M up").apply(t01)
    second, _, description = triton_move("GROUP_M up").apply(first)
    assert description == "GROUP_M 1 -> 8 (16-bit)"
    assert template_sizes(second)["16-bit"]["GROUP_M"] == 8 and template_sizes(second)["16-bit"]["BLOCK_M"] == 128
    edited = second.replace("acc = tl.dot(a, b, acc)\n", "acc = tl.dot(a, b, acc) * 1\n")
    assert edited != second and template_sizes(edited) is None
    assert not triton_move("GROUP_M up").applies(edited)


def test_a_wider_tile_brings_its_warps_and_the_budgets_hold():
    table = {"16-bit": dict(zip(SIZE_NAMES, (128, 128, 64, 8, 1, 4, 3))),
             "float32": dict(zip(SIZE_NAMES, (64, 64, 32, 1, 1, 4, 3)))}
    source = render_triton(table, "c", "h", "p")
    new, _, description = triton_move("BLOCK_N up").apply(source)
    assert description == "BLOCK_N 128 -> 256, num_warps 4 -> 8 (keeps 128 accumulators a thread) (16-bit)"
    # 128x256x64 bf16: 48 KiB a stage; 4 stages fit the 227 KiB, 5 do not
    sizes = template_sizes(new)["16-bit"]
    stages_up = triton_move("num_stages up")
    four, _, _ = stages_up.apply(new)
    assert template_sizes(four)["16-bit"]["num_stages"] == 4
    assert shared_bytes(template_sizes(four)["16-bit"], 2) <= SHARED_BYTES_PER_BLOCK
    assert shared_bytes({**sizes, "num_stages": 5}, 2) > SHARED_BYTES_PER_BLOCK
    assert not stages_up.applies(four)
    # the same sizes in float32 (4-byte tiles) would not fit: the float32 class refuses what 16-bit takes
    assert not triton_move("num_stages up", dtype="float32").applies(
        render_triton({"16-bit": sizes, "float32": {**sizes, "num_stages": 4}}, "c", "h", "p"))


# One child: Triton's interpreter is chosen when triton is first imported (see test_ops_ladders.py).
_INTERPRETER_SCRIPT = """
import json, sys, tempfile
from pathlib import Path
from hello_gpu.agent.sandbox import materialize
from hello_gpu.agent.task import Task
from hello_gpu.ops import check_rung
from hello_gpu.ops.shapes import numel
sources = json.loads(sys.stdin.read())
task = Task("matmul", "t01_block_tile", "triton")
op, names = materialize(task, {label: {"route": "triton", "source": text} for label, (text, _) in sources.items()},
                        Path(tempfile.mkdtemp()))
shapes = [s for s in op.spec.EDGE_SHAPES if numel(s) <= 2**16]
results = {}
for label, stem in names.items():
    for dtype in sources[label][1]:
        report = check_rung(op.rung(stem), op, shapes=shapes, dtypes=[dtype], device="cpu")
        results[f"{label}/{dtype}"] = {"status": report.status, "reason": report.reason, "cases": len(report.ran)}
print(json.dumps(results))
"""


def _small(sizes):
    """Small tiles, so the interpreter's edge shapes cross tile and K-slice boundaries."""
    return {**sizes, "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16}


def test_written_sources_are_correct_in_the_interpreter():
    t01, _ = rung_text("t01_block_tile")
    rewritten, _, _ = triton_move("BLOCK_N down", dtype="float32").apply(t01)         # t01 -> BLOCK_N 32 (float32)
    base = _small(template_sizes(rewritten)["float32"])
    grouped = render_triton({"16-bit": {**base, "GROUP_M": 8}, "float32": {**base, "GROUP_M": 8}}, "c", "h", "p")
    split = triton_move("SPLIT_K up", dtype="float32", shape=(1, 1025, 517)).apply(grouped)[0]
    assert template_sizes(split)["float32"]["SPLIT_K"] == 2
    deep_split = render_triton({"16-bit": {**base, "SPLIT_K": 16}, "float32": {**base, "SPLIT_K": 16}}, "c", "h", "p")
    sources = {"rewritten": (rewritten, ["float32"]), "grouped": (grouped, ["float32", "float16"]),
               "split": (split, ["float32"]), "deep_split": (deep_split, ["float32", "float16"])}
    done = subprocess.run([sys.executable, "-c", _INTERPRETER_SCRIPT], input=json.dumps(sources), capture_output=True,
                          text=True, env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == 6
    for case, result in results.items():
        assert result["status"] == "pass" and result["cases"] >= 12, (case, result)


# --------------------------------------------------------------------------------------------- HIP sources
def _warp_tiled_neighbours():
    """v07 and every configuration one or two HIP moves away from it (source, companion, description)."""
    source, companion = rung_text("v07_warp_tiling")
    seen, frontier, found = {source}, [(source, companion, "v07")], []
    for _ in range(2):
        following = []
        for text, launcher, path in frontier:
            for action in hip_matmul_actions():
                if action.applies(text, launcher):
                    new, new_launcher, description = action.apply(text, launcher)
                    if new not in seen:
                        seen.add(new)
                        following.append((new, new_launcher, f"{path} / {description}"))
        found += following
        frontier = following
    return found


def test_warp_tile_moves_compile_for_sm_90_with_launchers_that_agree():
    from hello_gpu import hip
    from hello_gpu.ops.rung import include_dirs_for
    rung = OP.rung("v07_warp_tiling")
    neighbours = _warp_tiled_neighbours()
    assert len(neighbours) >= 20
    threads_up = [n for n in neighbours if n[2] == "v07 / warp-tiled sizes: kWN 64 -> 32, kWNITER 4 -> 2, kThreads 128 -> 256"]
    assert threads_up, "from v07, 'threads up' reaches v08's default configuration"
    for source, companion, description in neighbours[:12] + threads_up:   # NVRTC takes ~2 s each
        tiles = {name: site.value for name, site in constexpr_sites(source).items() if name in WARP_TILE_NAMES}
        launcher = {name: site.value for name, site in python_constant_sites(companion, "companion").items()}
        assert warp_tiles_valid(tiles), description
        assert (launcher["TILE_M"], launcher["TILE_N"], launcher["THREADS"]) == \
            (tiles["kBM"], tiles["kBN"], tiles["kThreads"]), description
        kernel = hip(source, entry="matmul_warp_tiling", arch="sm_90", name=rung.path.name,
                     include_dirs=include_dirs_for(rung.path))
        kernel.compile()
        assert kernel.resources.spill_store_bytes == 0, (description, kernel.resources)


def test_the_python_mirror_of_the_static_asserts_is_not_too_lax():
    """A configuration the mirror refuses for a static_assert reason must fail to compile too."""
    from hello_gpu import hip
    from hello_gpu.ops.rung import include_dirs_for
    from hello_gpu.runtime.errors import CompileError
    rung = OP.rung("v07_warp_tiling")
    source, _ = rung_text("v07_warp_tiling")
    bad = source.replace("kWNITER = 4", "kWNITER = 8")       # sub-tiles of 8 columns: 2 lanes across, not 32 threads
    tiles = {name: site.value for name, site in constexpr_sites(bad).items() if name in WARP_TILE_NAMES}
    assert tiles["kWNITER"] == 8 and not warp_tiles_valid(tiles)
    with pytest.raises(CompileError):
        hip(bad, entry="matmul_warp_tiling", arch="sm_90", name=rung.path.name,
            include_dirs=include_dirs_for(rung.path)).compile()


# --------------------------------------------------------------------------------------------- the policy's choices
def test_compute_bound_simt_climbs_the_tiling_rungs_then_tunes_the_warp_tiles():
    analysis = {"bound": "compute", "fraction_of_attainable": 0.02, "shape": SQUARE, "dtype": "float32"}
    (first,), policy = propose("v01_naive", "hip", analysis, dtype="float32")
    assert first.action.startswith("ladder step to v03_shared_tiles")        # tiles before coalescing alone
    order = [c.action.split(":")[0] for c in propose("v03_shared_tiles", "hip", analysis, "float32", per_round=10)[0]]
    assert order[:3] == ["ladder step to v04_register_blocking_1d", "ladder step to v05_register_blocking_2d",
                         "ladder step to v07_warp_tiling"]
    analysis = {**analysis, "fraction_of_attainable": 0.7}
    proposals, policy = propose("v07_warp_tiling", "hip", analysis, dtype="float32", per_round=20)
    sizes = [p for p in proposals if p.action.startswith("warp-tiled sizes:")]
    steps = [p.action for p in proposals if p not in sizes]
    assert sizes and proposals[0] in sizes
    # the structural moves left below the tensor cores: v17's prefetch and double buffer, a ladder rung of its own,
    # nearest first, then its child v19 (8x16 sums a thread in the same loop)
    assert [step.split(":")[0] for step in steps] == ["ladder step to v17_prefetch_double_buffer",
                                                      "ladder step to v19_thread_tile_8x16"], steps
    assert not any("threads per block" in p.action for p in proposals)       # the generic move would break asserts
    assert "FMAs a load" in proposals[0].hypothesis and "Prediction" in proposals[0].hypothesis
    assert any("mma.sync" in text and "v09_mma_sync" in text for text in policy.suggestions)


def test_compute_bound_triton_raises_the_tile_first_and_never_splits_k_on_a_square():
    analysis = {"bound": "compute", "fraction_of_attainable": 0.4, "shape": SQUARE, "dtype": "bfloat16"}
    proposals, policy = propose("t01_block_tile", "triton", analysis, per_round=40)
    actions = [p.action for p in proposals]
    assert actions[0].startswith(("BLOCK_M 64 -> 128", "BLOCK_N 64 -> 128"))
    assert actions[2].startswith("BLOCK_K 32 -> 64")
    assert actions[3].startswith("GROUP_M 1 -> 8") and actions[4].startswith("num_stages 3 -> 4")
    assert not any(a.startswith("SPLIT_K") for a in actions)                 # 1024 tiles fill 132 SMs
    assert not any("num_warps 4 -> 8" in a and "(16-bit)" in a and a.startswith("num_warps") for a in actions[:4])
    assert policy.suggestions == []                                          # Triton reaches the tensor cores itself


def test_decode_shrinks_the_rows_then_splits_k():
    analysis = {"bound": "memory", "fraction_of_attainable": 0.3, "shape": DECODE, "dtype": "bfloat16"}
    proposals, _ = propose("t01_block_tile", "triton", analysis, per_round=6)
    actions = [p.action for p in proposals]
    assert actions[0].startswith("BLOCK_M 64 -> 32")                        # 63 of 64 rows wasted at M = 1
    assert actions[1].startswith("SPLIT_K 1 -> 2")                          # 224 tiles for 132 SMs
    assert not any(a.startswith(("BLOCK_M 64 -> 128", "GROUP_M")) for a in actions)
    assert "programs for 132 SMs" in proposals[1].hypothesis


def test_spills_shrink_before_the_bound_rules():
    analysis = {"bound": "compute", "fraction_of_attainable": 0.4, "shape": SQUARE, "dtype": "bfloat16",
                "resources": {"registers_per_thread": 255, "spill_bytes": 512}}
    (first,), _ = propose("t01_block_tile", "triton", analysis)
    assert first.action.startswith(("BLOCK_M 64 -> 32", "BLOCK_N 64 -> 32", "BLOCK_K 32 -> 16", "num_stages 3 -> 2"))
    # low occupancy alone is how register-tiled matmuls run: not a reason to shrink when compute-bound
    analysis = {"bound": "compute", "shape": SQUARE, "dtype": "bfloat16", "counters": {"achieved_occupancy_pct": 12.0}}
    (first,), _ = propose("t01_block_tile", "triton", analysis)
    assert first.action.startswith(("BLOCK_M 64 -> 128", "BLOCK_N 64 -> 128"))


def test_the_matmul_policy_never_repeats_and_exhausts():
    analysis = {"bound": "compute", "shape": SQUARE, "dtype": "bfloat16"}
    task = Task("matmul", "t01_block_tile", "triton", dtypes=("bfloat16",))
    start = current("t01_block_tile", "triton")
    policy, history = ScriptedPolicy(), [start]
    for round_number in range(1, 60):
        proposals = policy.propose({"task": task, "current": start, "history": list(history), "analysis": analysis,
                                    "round": round_number, "seed": 3})
        if not proposals:
            break
        proposals[0].id, proposals[0].state = len(history) + 1, "rejected"
        history.append(proposals[0])
    assert policy.exhausted and 8 <= len(history) < 60
    assert len({c.source_sha256 for c in history}) == len(history)
    # t02..t04 load t01 (not standalone): the one Triton ladder step is to t05, a kernel of its own
    steps = [a for a in policy.actions_for("triton", "matmul") if isinstance(a, LadderStep)]
    assert [step.target_id for step in steps] == ["t05_persistent_tma"]


def test_a_ladder_step_is_offered_only_for_the_dtypes_its_target_runs():
    """t05 takes bfloat16 and float16: a float32 task (or one checking every dtype of the spec) would see the
    step's candidate refused by its own header and fail its check, a round spent on nothing."""
    (step,) = [a for a in ScriptedPolicy().actions_for("triton", "matmul") if isinstance(a, LadderStep)]
    assert step.target_dtypes == ("bfloat16", "float16")
    assert step.covers(("bfloat16",)) and step.covers(("float16", "bfloat16"))
    assert not step.covers(("float32",)) and not step.covers(("bfloat16", "float32")) and not step.covers(())
    analysis = {"bound": "compute", "shape": SQUARE, "dtype": "float32"}
    start = current("t01_block_tile", "triton")
    for dtypes, offered in ((("float32",), False), (("bfloat16",), True)):
        policy = ScriptedPolicy(per_round=64)
        task = Task("matmul", "t01_block_tile", "triton", dtypes=dtypes)
        proposals = policy.propose({"task": task, "current": start, "history": [start], "analysis": analysis,
                                    "round": 1, "seed": 3})
        assert any(p.action.startswith("ladder step to t05") for p in proposals) is offered, dtypes


# --------------------------------------------------------------------------------------------- the loop, on the CPU
def test_a_matmul_triton_search_runs_end_to_end_in_the_interpreter(tmp_path):
    """Two candidates after the start, float32, small shapes: compile -> check -> compare -> accept on the
    CPU (the wall clock decides nothing a GPU would; this tests the plumbing of the moves)."""
    from hello_gpu.agent.loop import run_agent
    from hello_gpu.agent.store import CandidateStore
    task = Task("matmul", "t01_block_tile", "triton", dtypes=("float32",), check_shapes=((1, 1, 1), (39, 41, 37)),
                bench_shape=(64, 64, 64))
    result = run_agent(task, "scripted", tmp_path / "run", rounds=2, seed=0,
                       timeouts={"bench_seconds": 0.3, "compare_seconds": 0.6, "counters": False})
    with CandidateStore(tmp_path / "run") as store:
        candidates = store.list()
    assert len(candidates) == 3, [(c.action, c.state, c.reason) for c in candidates]
    for candidate in candidates[1:]:
        assert candidate.state in ("accepted", "rejected"), (candidate.action, candidate.state, candidate.reason)
        assert template_sizes(candidate.source) is not None and "FLOP/B" in candidate.hypothesis
    assert result.stop_reason
