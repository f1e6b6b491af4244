"""The scripted policy's actions on the real rungs, and the rule table that orders them.

Every parameter action is applied to every rung file of vector_add, reduce_sum, softmax and rms_norm it
applies to; the result must parse (Triton, launchers) or compile with NVRTC for sm_90 on the CPU (HIP),
and differ from the original only in the integers the action moves (or the keyword it inserts). A few
edited Triton rungs are run in the Triton interpreter and checked against the operator's reference.
"""

import difflib
import re

import pytest

from hello_gpu.agent.candidate import Candidate
from hello_gpu.agent.policies import ScriptedPolicy, make_policy
from hello_gpu.agent.policies.actions import (
    ActionError,
    HipScaled,
    LadderStep,
    catalogue,
    grid_divisor_edits,
    apply_edits,
    hip_actions,
    mask_c_comments,
    structure_signature,
    triton_actions,
)
from hello_gpu.agent.policies.scripted import RULES, kind_order
from hello_gpu.agent.task import Task
from hello_gpu.ops.header import parse_header
from hello_gpu.ops.registry import load_op
from hello_gpu.ops.rung import C_TYPES, load_module

OPS = ("vector_add", "reduce_sum", "softmax", "rms_norm")


def rung_files(op_name, rung_id):
    rung = load_op(op_name).rung(rung_id)
    return rung, rung.path.read_text(), rung.companion.read_text() if rung.companion else None


def named(action_name, route="hip"):
    return next(a for a in (hip_actions() if route == "hip" else triton_actions()) if a.name == action_name)


def act(op_name, rung_id, action_name, route="hip"):
    """(source, companion, new source, new companion, description) of one action on one rung."""
    _, source, companion = rung_files(op_name, rung_id)
    return (source, companion, *named(action_name, route).apply(source, companion))


def all_rungs(route):
    for op_name in OPS:
        for rung in load_op(op_name).rungs:
            if rung.route == route:
                yield op_name, rung


def applied(route):
    """(op, rung, action, new source, new companion, description) for every parameter action that applies."""
    actions = triton_actions() if route == "triton" else hip_actions()
    for op_name, rung in all_rungs(route):
        source = rung.path.read_text()
        companion = rung.companion.read_text() if rung.companion else None
        for action in actions:
            if action.applies(source, companion):
                new_source, new_companion, description = action.apply(source, companion)
                yield op_name, rung, action, source, companion, new_source, new_companion, description


def only_integers_moved(old: str, new: str, inserted: tuple[str, ...] = ()) -> list[str]:
    """The changed lines that differ in more than integer literals (and the allowed insertions)."""
    problems = []
    matcher = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag != "replace" or a1 - a0 != b1 - b0:
            problems.append(f"lines {a0}-{a1} {tag}")
            continue
        for before, after in zip(old.splitlines()[a0:a1], new.splitlines()[b0:b1]):
            for text in inserted:          # a keyword or argument the action added (absent before)
                if re.search(text, after) and not re.search(text, before):
                    after = re.sub(text, "", after)
            if re.sub(r"\d+", "#", before) != re.sub(r"\d+", "#", after):
                problems.append(f"{before!r} -> {after!r}")
    return problems


INSERTIONS = (r",? ?num_warps=\d+", r",? ?num_stages=\d+", r", \d+(?=\))")


# --------------------------------------------------------------------------------------------- every action, every rung
def test_triton_actions_on_every_rung_parse_and_change_only_their_integers():
    seen = set()
    for op_name, rung, action, source, _, new_source, _, description in applied("triton"):
        compile(new_source, f"{rung.id}:{description}", "exec")       # parses as Python
        assert new_source != source
        problems = only_integers_moved(source, new_source, INSERTIONS)
        assert not problems, (op_name, rung.id, description, problems)
        assert re.search(r"\d+ -> \d+", description), description
        seen.add(action.name)
    # The catalogue reaches every kind of Triton parameter somewhere in the four ladders.
    assert {"tile up", "tile down", "num_warps up", "num_warps down", "num_stages up", "elements per program up",
            "rows per program up", "programs per SM up", "finish tile up", "values per thread up"} <= seen


def _entry(rung, source, dtype):
    entry = rung.metadata.entry
    if entry is None:
        entry = re.search(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)", mask_c_comments(source)).group(1)
    return entry.replace("{T}", C_TYPES[dtype])


def test_hip_actions_on_every_rung_compile_for_sm_90_and_change_only_their_integers(tmp_path):
    from hello_gpu import hip
    from hello_gpu.ops.rung import include_dirs_for
    seen, compiled = set(), 0
    for op_name, rung, action, source, companion, new_source, new_companion, description in applied("hip"):
        problems = only_integers_moved(source, new_source, INSERTIONS)
        assert not problems, (op_name, rung.id, description, problems)
        if new_companion is not None:
            compile(new_companion, f"{rung.id}.py:{description}", "exec")
            assert not only_integers_moved(companion, new_companion), (rung.id, description)
        # The header still parses, and what it says matches the kernel.
        path = tmp_path / rung.path.name
        path.write_text(new_source)
        header = parse_header(path)
        if header.grid is not None:
            header.grid_for(1 << 20, sm_count=132, itemsize=2)
        dtype = (rung.metadata.dtypes or load_op(op_name).spec.DTYPES)[-1]    # bfloat16 where templated
        kernel = hip(new_source, entry=_entry(rung, new_source, dtype), arch="sm_90", name=rung.path.name,
                     include_dirs=include_dirs_for(rung.path))
        assert kernel is not None
        compiled += 1
        seen.add(action.name)
    assert compiled > 50
    assert {"threads per block up", "threads per block down", "kPerThread up", "kPacksPerThread up", "kUnroll up",
            "UNROLL up", "blocks per SM up", "launch bounds up", "vector width down", "kChunk up"} <= seen


# --------------------------------------------------------------------------------------------- exact edits
def test_vector_add_v01_block_size_moves_header_block_and_grid_together():
    _, _, new_source, new_companion, description = act("vector_add", "v01_thread_per_element",
                                                       "threads per block down")
    assert description == "threads per block 256 -> 128"
    assert "\nblock: 128\n" in new_source and "\ngrid: ceil(n / 128)\n" in new_source
    assert new_companion is None
    # Going up from 1024 is past the hardware limit: the action does not apply there.
    at_limit = new_source.replace("block: 128", "block: 1024").replace("ceil(n / 128)", "ceil(n / 1024)")
    up = named("threads per block up")
    assert not up.applies(at_limit)
    with pytest.raises(ActionError):
        up.apply(at_limit)


def test_vector_add_v06_packs_per_thread_scale_the_grid():
    _, _, new_source, _, description = act("vector_add", "v06_tile_per_block", "kPacksPerThread down")
    assert description == "kPacksPerThread 2 -> 1"
    assert "constexpr int kPacksPerThread = 1;" in new_source
    # half the tile: twice the blocks, all elements covered (the grid counts bytes: 8192 a block before)
    assert "\ngrid: ceil(n * itemsize / 4096)\n" in new_source


def test_reduce_sum_v06_block_size_moves_kernel_and_launcher_together():
    _, _, new_source, new_companion, description = act("reduce_sum", "v06_grid_stride_vectorized",
                                                       "threads per block up")
    assert description == "threads per block 256 -> 512"
    assert "__launch_bounds__(512)" in new_source and "__launch_bounds__(256)" not in new_source
    assert "\nBLOCK = 512 " in new_companion and "\nMIN_ELEMENTS_PER_BLOCK = 8192 " in new_companion
    assert "BLOCKS_PER_SM = 4 " in new_companion


def test_reduce_sum_v04_block_size_moves_elements_per_block():
    _, _, new_source, new_companion, _ = act("reduce_sum", "v04_first_add_during_load", "threads per block down")
    assert "constexpr int BLOCK = 128;" in new_source
    assert "\nBLOCK = 128 " in new_companion and "\nELEMENTS_PER_BLOCK = 256 " in new_companion


def test_launch_bounds_min_blocks_caps_registers():
    source, _, new_source, _, description = act("vector_add", "v06_tile_per_block", "launch bounds up")
    action = named("launch bounds up")
    assert "__launch_bounds__(kBlock, 2)" in new_source
    assert description == "min blocks per SM in __launch_bounds__ 1 -> 2"
    again, _, _ = action.apply(new_source)
    assert "__launch_bounds__(kBlock, 4)" in again
    back, _, _ = named("launch bounds down").apply(new_source)
    assert back == source


def test_triton_num_warps_moves_every_branch_and_inserts_where_missing():
    _, _, new_source, _, description = act("softmax", "t01_row_per_program", "num_warps up", route="triton")
    up = named("num_warps up", "triton")
    assert "num_warps = 16 if block >= 2048 else 8" in new_source
    assert description == "num_warps 8 -> 16, 4 -> 8"
    _, source, _ = rung_files("reduce_sum", "t01_two_stage")
    new_source, _, description = up.apply(source)
    assert new_source.count("num_warps=8") == 2 and description == "num_warps 4 -> 8"
    compile(new_source, "t01", "exec")


def test_num_stages_only_where_a_kernel_loops():
    stages = next(a for a in triton_actions() if a.name == "num_stages up")
    assert stages.applies(rung_files("softmax", "t02_online_tiles")[1])
    assert not stages.applies(rung_files("vector_add", "t01_tile_1024")[1])     # no loop to pipeline


def test_parameters_that_disagree_or_sit_in_comments_are_not_moved():
    _, source, companion = rung_files("softmax", "v02_block_per_row_shared")
    up = next(a for a in hip_actions() if a.name == "threads per block up")
    assert up.applies(source, companion)
    assert not up.applies(source, companion.replace("BLOCK = 256", "BLOCK = 128"))   # kernel 256, launcher 128
    commented = "/*\nparent: none\nchange: x\nhypothesis: y\n*/\n// constexpr int kBlock = 128;\n" \
                "__global__ void k(float* out) { out[0] = 1.0f; }\n"
    assert not up.applies(commented)
    # A kernel that sizes an array with a bare 256 assumes the block: its launcher's BLOCK must not move.
    assumed = source.replace("__shared__", "__shared__ float assumed[256];\n  __shared__", 1)
    assert assumed != source and not up.applies(assumed, companion)


def test_a_launcher_borrowing_another_rungs_constants_is_left_alone():
    _, source, companion = rung_files("rms_norm", "v06_rows_per_block")
    packs = next(a for a in hip_actions() if a.name == "kPacksPerThread up")
    assert "kPacksPerThread" in source
    assert not packs.applies(source, companion)           # v06's launcher takes its sizes from v05's module
    # v03's launcher borrows only the shared input checks (launch.py), which have no PER_THREAD: kPerThread may
    # move. (v04 includes v03's .hip, so its kPerThread lives in v03's file.)
    _, source, companion = rung_files("rms_norm", "v03_warp_shuffle_registers")
    assert "from hello_gpu.ops.rms_norm.launch import" in companion
    assert named("kPerThread up").applies(source, companion)


def test_grid_divisor_prefers_the_moved_factor():
    text = "grid: ceil(n / (256 * 16))"
    edits = grid_divisor_edits(text, 6, text[6:], 2, 1, prefer=16)
    assert apply_edits(text, edits) == "grid: ceil(n / (256 * 32))"
    edits = grid_divisor_edits(text, 6, text[6:], 1, 2, prefer=256)
    assert apply_edits(text, edits) == "grid: ceil(n / (128 * 16))"
    assert grid_divisor_edits("ceil(n / x)", 0, "ceil(n / x)", 2, 1, prefer=None) is None


def test_structure_signature_ignores_parameters_not_code():
    _, t02, _ = rung_files("vector_add", "t02_tile_4096")
    _, t03, _ = rung_files("vector_add", "t03_eight_warps")
    _, t01, _ = rung_files("softmax", "t01_row_per_program")
    assert structure_signature(t02, None, "triton") == structure_signature(t03, None, "triton")
    assert structure_signature(t02, None, "triton") != structure_signature(t01, None, "triton")


def test_ladder_steps_go_down_and_across_never_back():
    steps = [a for a in catalogue("triton", "softmax") if isinstance(a, LadderStep)]
    _, t04, _ = rung_files("softmax", "t04_rows_per_program")
    offered = {s.target_id: s.distance(t04, None) for s in steps if s.applies(t04)}
    assert offered["t03_sixteen_warps"] == 2                # t04's sibling under t01: up one, down one
    assert "t01_row_per_program" not in offered             # never back to an ancestor
    hip_steps = [a for a in catalogue("hip", "vector_add") if isinstance(a, LadderStep)]
    _, v04, _ = rung_files("vector_add", "v04_vector_128bit")
    assert {s.target_id for s in hip_steps if s.applies(v04)} == {"v05_loads_in_flight", "v06_tile_per_block"}
    source, companion, description = next(s for s in hip_steps if s.target_id == "v05_loads_in_flight").apply(v04)
    assert source == rung_files("vector_add", "v05_loads_in_flight")[1] and companion is None
    assert description.startswith("ladder step to v05_loads_in_flight: unroll")


def test_ladder_steps_skip_negative_examples_and_sibling_loaders():
    steps = [a for a in catalogue("hip", "vector_add") if isinstance(a, LadderStep)]
    assert "v02_strided_chunks" not in {s.target_id for s in steps}          # the header calls it a negative example
    triton = {s.target_id for s in catalogue("triton", "softmax") if isinstance(s, LadderStep)}
    assert {"t02_online_tiles", "t04_rows_per_program"} <= triton
    assert not triton & {"t05_dispatch_by_width", "t06_registers_to_32768", "t07_short_rows_tuned"}


TWO_TILES_RUNG = '''"""Two tiles per program: half the programs.

parent: t01_block_per_program
change: each program adds two consecutive tiles of 1024 elements (a static loop), so the grid halves
hypothesis: fewer programs to schedule; a test fixture for ladder steps in a user's operator folder
deterministic: yes, one writer per element
"""

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def add_two_tiles(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for tile in tl.static_range(2):
        offsets = (tl.program_id(0) * 2 + tile) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask),
                 mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    add_two_tiles[(triton.cdiv(a.numel(), 2 * BLOCK),)](a, b, out, a.numel(), BLOCK=BLOCK)
    return out
'''


def test_ladder_steps_come_from_the_tasks_own_operator_folder(tmp_path):
    """--ops-root: a user's operator folder has a ladder too; its negative example is never a target."""
    import shutil
    from pathlib import Path

    from hello_gpu.agent.policies.scripted import ScriptedPolicy
    from hello_gpu.agent.loop import start_candidate
    from hello_gpu.agent.task import Task
    toy = Path(__file__).parent / "fixtures" / "ops" / "toy_add"
    shutil.copytree(toy, tmp_path / "toy_add")
    two_tiles = TWO_TILES_RUNG
    (tmp_path / "toy_add" / "t03_two_tiles.py").write_text(two_tiles, encoding="utf-8")
    assert [s.target_id for s in catalogue("triton", "toy_add") if isinstance(s, LadderStep)] == []
    steps = [s for s in catalogue("triton", "toy_add", str(tmp_path)) if isinstance(s, LadderStep)]
    assert [s.target_id for s in steps] == ["t03_two_tiles"]            # t02_drops_last is a negative example
    task = Task("toy_add", "t01_block_per_program", "triton", dtypes=("float32",), extra={"ops_root": str(tmp_path)})
    current = start_candidate(task)
    proposals = ScriptedPolicy(per_round=50).propose({"task": task, "current": current, "history": [current],
                                                       "analysis": {"bound": "memory"}, "round": 1, "seed": 0})
    [step] = [c for c in proposals if c.action.startswith("ladder step to t03_two_tiles")]
    assert step.source == two_tiles


# --------------------------------------------------------------------------------------------- edited Triton rungs still compute
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # masked -inf rows, never stored
@pytest.mark.parametrize("op_name, rung_id, action_name", [
    ("vector_add", "t01_tile_1024", "tile down"),
    ("vector_add", "t03_eight_warps", "num_warps down"),
    ("reduce_sum", "t02_two_stage_fewer_programs", "programs per SM up"),
    ("reduce_sum", "t01_two_stage", "finish tile down"),
    ("softmax", "t04_rows_per_program", "elements per program up"),
    ("rms_norm", "t03_rows_per_program", "values per thread up"),
])
def test_edited_triton_rungs_match_the_reference_in_the_interpreter(monkeypatch, tmp_path, op_name, rung_id, action_name):
    import torch
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    op = load_op(op_name)
    _, source, _ = rung_files(op_name, rung_id)
    action = next(a for a in triton_actions() if a.name == action_name)
    new_source, _, _ = action.apply(source)
    path = tmp_path / f"{rung_id}.py"
    path.write_text(new_source)
    module = load_module(path, f"edited_{rung_id}")
    shape = {"vector_add": (3000,), "reduce_sum": (70000,), "softmax": (5, 300), "rms_norm": (5, 300)}[op_name]
    inputs = op.spec.make_inputs(shape, "float32", seed=1, device="cpu")
    got = module.run(*inputs)
    expected = op.spec.reference(*inputs)
    torch.testing.assert_close(got.double(), expected.double().reshape(got.shape), rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------------------------- the policy
def start(op_name, rung_id, route):
    rung, source, companion = rung_files(op_name, rung_id)
    return (Task(op=op_name, start=rung_id, route=route),
            Candidate(id=1, parent_id=None, route=route, source=source, companion=companion, state="accepted"))


def search(policy, task, current, analysis, rounds=40, seed=0):
    """Propose round after round, rejecting everything (the current never changes)."""
    history, actions = [current], []
    for round_number in range(1, rounds + 1):
        proposals = policy.propose({"task": task, "current": current, "history": list(history),
                                    "analysis": analysis, "round": round_number, "seed": seed})
        if not proposals:
            break
        for candidate in proposals:
            candidate.id = len(history) + 1
            candidate.state, candidate.reason = "rejected", "within noise"
            history.append(candidate)
            actions.append(candidate.action)
    return history, actions


def test_memory_bound_vectorises_first():
    task, current = start("vector_add", "v03_grid_stride", "hip")
    (candidate,) = make_policy("scripted").propose({"task": task, "current": current, "history": [current],
                                                    "analysis": {"bound": "memory", "fraction_of_attainable": 0.8},
                                                    "round": 1, "seed": 0})
    assert candidate.action.startswith("ladder step to v04_vector_128bit")
    assert candidate.parent_id == 1 and candidate.route == "hip"
    assert "80% of the attainable roof" in candidate.hypothesis and "1.25x" in candidate.hypothesis
    assert "128-bit" in candidate.source or "Pack" in candidate.source


def test_latency_bound_launches_less_first():
    task, current = start("reduce_sum", "v06_grid_stride_vectorized", "hip")
    (candidate,) = ScriptedPolicy().propose({"task": task, "current": current, "history": [current],
                                             "analysis": {"bound": "latency", "fraction_of_attainable": None},
                                             "round": 1, "seed": 0})
    assert candidate.action.startswith("ladder step to v07_single_pass_last_block")


def test_compute_bound_tiles_first_and_occupancy_limits_come_before_the_bound():
    task, current = start("softmax", "t02_online_tiles", "triton")
    (candidate,) = ScriptedPolicy().propose({"task": task, "current": current, "history": [current],
                                             "analysis": {"bound": "compute"}, "round": 1, "seed": 0})
    assert candidate.action.startswith("TILE 4096 -> ")
    task, current = start("vector_add", "v06_tile_per_block", "hip")
    (candidate,) = ScriptedPolicy().propose({"task": task, "current": current, "history": [current],
                                             "analysis": {"bound": "memory", "occupancy_pct": 30.0},
                                             "round": 1, "seed": 0})
    assert candidate.action.startswith(("threads per block", "min blocks per SM"))
    assert kind_order({"bound": "memory", "spills": 8})[:3] == RULES["occupancy"]
    # the analyze tool's resources: the launched kernels' spills (compiler report or Triton's JIT cache)
    assert kind_order({"bound": "memory", "resources": {"registers_per_thread": 255, "spill_bytes": 64}})[:3] == \
        RULES["occupancy"]
    assert kind_order({"bound": "memory", "resources": {"registers_per_thread": 32, "spill_bytes": 0}}) == RULES["memory"]
    assert kind_order({"bound": "memory", "counters": {"achieved_occupancy_pct": 20.0}})[:3] == RULES["occupancy"]
    assert kind_order({"bound": "memory", "counters": {"achieved_occupancy_pct": 90.0}}) == RULES["memory"]


@pytest.mark.parametrize("op_name, rung_id, route", [
    ("vector_add", "v01_thread_per_element", "hip"), ("softmax", "t01_row_per_program", "triton"),
    ("reduce_sum", "t02_two_stage_fewer_programs", "triton"), ("rms_norm", "v03_warp_shuffle_registers", "hip"),
])
def test_never_repeats_a_source_and_exhausts(op_name, rung_id, route):
    task, current = start(op_name, rung_id, route)
    policy = make_policy("scripted")
    history, actions = search(policy, task, current, {"bound": "memory", "fraction_of_attainable": 0.5})
    hashes = [candidate.source_sha256 for candidate in history]
    assert len(hashes) == len(set(hashes)) > 2
    assert policy.exhausted
    assert all(candidate.parent_id == 1 and candidate.hypothesis for candidate in history[1:])
    # A fresh policy given that history proposes nothing either: the history, not memory, rules out repeats.
    assert ScriptedPolicy().propose({"task": task, "current": current, "history": history,
                                     "analysis": {"bound": "memory"}, "round": 99, "seed": 0}) == []


def test_deterministic_for_a_seed():
    task, current = start("vector_add", "t01_tile_1024", "triton")
    analysis = {"bound": "unknown"}
    first = search(ScriptedPolicy(), task, current, analysis, seed=7)[1]
    again = search(ScriptedPolicy(), task, current, analysis, seed=7)[1]
    assert first == again
    orders = {tuple(search(ScriptedPolicy(), task, current, analysis, seed=seed)[1]) for seed in range(8)}
    assert len(orders) > 1                         # the seed breaks ties, so some seeds order them differently
    assert all(sorted(order) == sorted(first) for order in orders)     # ... but every seed tries the same set


def test_per_round_and_kernelbench_tasks_without_a_ladder():
    task, current = start("vector_add", "v03_grid_stride", "hip")
    proposals = ScriptedPolicy(per_round=3).propose({"task": task, "current": current, "history": [current],
                                                     "analysis": {}, "round": 1, "seed": 0})
    assert len(proposals) == 3 and len({p.source_sha256 for p in proposals}) == 3
    problem = Task(op="kb_add", start="problem", route="hip", problem_path="/x/kb_add.py")
    proposals = ScriptedPolicy(per_round=50).propose({"task": problem, "current": current, "history": [current],
                                                      "analysis": {}, "round": 1, "seed": 0})
    assert proposals and not any(p.action.startswith("ladder step") for p in proposals)


def test_exhausted_when_nothing_applies():
    task = Task(op="vector_add", start="t01_tile_1024", route="triton")
    bare = Candidate(id=1, parent_id=None, route="triton", source="import torch\n\n\ndef run(a, b):\n    return a\n")
    policy = ScriptedPolicy()
    assert not policy.exhausted
    assert policy.propose({"task": task, "current": bare, "history": [bare], "analysis": {}, "round": 1, "seed": 0}) == []
    assert policy.exhausted


def test_unknown_policy_name():
    with pytest.raises(ValueError, match="known: scripted, llm"):
        make_policy("genetic")
    with pytest.raises(ValueError, match="per_round"):
        make_policy("scripted", per_round=0)
    with pytest.raises(ValueError, match="takes no option modle; its options: .*model"):
        make_policy("llm", modle="x")


def test_hip_scaled_needs_a_parameter():
    assert not HipScaled(name="x", route="hip", kind="block_size").applies("__global__ void k() {}\n")
