"""The agent's GPU tier (``pytest -m gpu``): what the CPU tests (tests/test_agent_*.py) cannot show.

On the real device, every candidate step in the sandbox's child process as the loop runs it:

1. A HIP candidate whose kernel writes 2^30 elements past its output faults the child's CUDA context:
   check and bench fail ("crashed") naming the fault, the parent's CUDA still computes right, and the
   unmodified rung then passes its check in a new child.
2. The cheating candidates of tests/agent_cheats/ are each rejected under their own tag; the honest
   control passes, with device evidence (its kernel in a profiled trace, the timed stream, a launch
   in every counted call).
3. A kernel that spins forever is killed at the step's time limit ("timeout"); the parent is unharmed.
4. ``tools.compare`` times two real rungs with device events: v04 (128-bit loads) against v01 at 2^24.
5. A short ``run_agent`` with the scripted policy ends cleanly, accepts only checked candidates,
   re-measures start against best in a fresh process, and writes a report and a record naming the GPU.
6. A KernelBench-style problem file runs as a task on the device, and a kernel that drops the
   Model's weight fails its check there.

Each step is a child process that pays for Python, torch, a CUDA context and (Triton) the JIT: a few
seconds each. The candidates are written here, inline, so the repository's compile gate and records
check, which sweep files, never see a deliberately broken kernel.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from hello_gpu.agent import tools
from hello_gpu.agent.anticheat import (
    CACHED,
    CONCURRENCY,
    INPUT_WRITE,
    LIBRARY,
    LOW_PRECISION,
    NO_LAUNCH,
    PARTIAL_WRITE,
    TAMPER,
    TIMER,
)
from hello_gpu.agent.candidate import FINAL_STATES, Candidate
from hello_gpu.agent.report import AGREEMENT
from hello_gpu.agent.session import LEFT_RUNNING_MIN_S
from hello_gpu.agent.task import Task

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: the agent's GPU tier")]

HERE = Path(__file__).resolve().parent
CHEATS = HERE / "agent_cheats"
HONEST = "t99_honest.py"
# The cheat each file commits, as in tests/test_agent_core.py (the tags are hello_gpu.agent.anticheat's).
CHEAT_TAGS = {"t90_": LIBRARY, "t91_": CONCURRENCY, "t92_": CACHED, "t93_": PARTIAL_WRITE, "t94_": INPUT_WRITE,
              "t95_": LOW_PRECISION, "t96_": NO_LAUNCH, "t97_": TIMER, "v90_": LIBRARY, "v91_": LIBRARY}

# Small shapes: sizes that are multiples of no tile (1, 31, 1000) and a 2-D one, as the CPU tier uses.
CHECK_SHAPES = (1, 31, 1000, (37, 29))
CHECK_TIMEOUT_S = 240.0            # a bound for honest steps: only a hung step would reach it
FAULT_TIMEOUT_S = 90.0             # a faulting child should end in seconds; a hang there is a finding too


def hip_task(start: str = "v01_thread_per_element", bench_shape=2**20) -> Task:
    return Task("vector_add", start, "hip", dtypes=("float32",), check_shapes=CHECK_SHAPES, bench_shape=bench_shape)


def triton_task(start: str = "t01_tile_1024", bench_shape=2**20) -> Task:
    return Task("vector_add", start, "triton", dtypes=("float32",), check_shapes=CHECK_SHAPES,
                bench_shape=bench_shape)


def rung_candidate(task: Task) -> Candidate:
    """The task's start rung, unmodified, as the loop's first candidate."""
    from hello_gpu.agent.loop import start_candidate
    return start_candidate(task)


@pytest.fixture(autouse=True)
def _compiled_triton(monkeypatch):
    """The children must compile Triton for the GPU: a TRITON_INTERPRET=1 left in this process's
    environment (by another test module) would be inherited and put them on the CPU."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def assert_parent_cuda_healthy() -> None:
    """This process (the agent's) computes right on the GPU: the child's fault or hang did not reach it."""
    n = 1 << 20
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    doubled = x + x
    total = int(x.to(torch.int64).sum())
    torch.cuda.synchronize()
    assert torch.equal(doubled.cpu(), torch.arange(n, dtype=torch.float32) * 2)
    assert total == n * (n - 1) // 2


def everything_said(result) -> str:
    """A tool result's reason, notes, failures and the child's detail, traceback and output tails."""
    raw = result.raw or {}
    parts = [getattr(result, "reason", ""), *getattr(result, "notes", []),
             *(failure.get("reason", "") for failure in getattr(result, "failures", []) or []),
             raw.get("detail"), raw.get("traceback"), raw.get("stderr_tail"), raw.get("stdout_tail")]
    return "\n".join(str(part) for part in parts if part)


# ============================================================================ 1. an illegal memory access

# torch says "CUDA error: an illegal memory access was encountered"; the driver API CUDA_ERROR_ILLEGAL_ADDRESS.
# On the H200 (driver 580, run of commit 5cf0ef3) a store 4 GiB past the buffer faulted as
# "operation not supported on global/shared address space" (cudaErrorInvalidAddressSpace).
DEVICE_FAULT = re.compile(r"illegal memory access|illegal address|CUDA_ERROR_ILLEGAL_ADDRESS|"
                          r"unspecified launch failure|address space", re.IGNORECASE)
OOB_FROM = "if (i < n) out[i] = "
OOB_TO = "if (i < n) out[i + (static_cast<int64_t>(1) << 30)] = "     # 4 GiB past out in float32


def out_of_bounds_candidate(honest: Candidate) -> Candidate:
    """v01 with every store moved 2^30 elements past the output: far outside any allocation."""
    assert honest.source.count(OOB_FROM) == 1, "v01_thread_per_element.hip changed: update OOB_FROM"
    return Candidate(None, None, "hip", honest.source.replace(OOB_FROM, OOB_TO), honest.companion,
                     action="store 2^30 elements past out", hypothesis="none: the sandbox must contain the fault")


def test_an_illegal_memory_access_ends_only_the_child():
    task = hip_task()
    honest = rung_candidate(task)
    faulty = out_of_bounds_candidate(honest)

    checked = tools.check(faulty, task, timeout_s=FAULT_TIMEOUT_S)
    said = everything_said(checked)
    assert not checked.passed, said
    # The fault surfaces at the first synchronize: that case fails with what torch raised, and the next
    # case's first CUDA call raises again (the context is lost), which ends the step as "crashed".
    assert checked.status == "crashed" or (checked.status == "ok" and checked.correct is False), said
    assert DEVICE_FAULT.search(said), said
    if checked.status == "crashed":
        assert checked.reason.startswith("crashed"), checked.reason
    assert_parent_cuda_healthy()

    benched = tools.bench(faulty, task, max_seconds=0.5, timeout_s=FAULT_TIMEOUT_S)
    said = everything_said(benched)
    assert not benched.ok and benched.status == "crashed", said
    assert DEVICE_FAULT.search(said), said
    assert_parent_cuda_healthy()

    # A new child, a new context: the unmodified rung passes.
    again = tools.check(honest, task, timeout_s=CHECK_TIMEOUT_S)
    assert again.status == "ok" and again.passed, everything_said(again)
    assert again.raw["device"] == "cuda" and again.evidence["dtypes"] == ["float32"]
    assert_parent_cuda_healthy()


# ============================================================================ 2. the cheats, on the device


def cheat_candidate(path: Path) -> Candidate:
    if path.suffix == ".hip":
        companion = path.with_suffix(".py")
        return Candidate(None, None, "hip", path.read_text(encoding="utf-8"),
                         companion.read_text(encoding="utf-8") if companion.is_file() else None)
    return Candidate(None, None, "triton", path.read_text(encoding="utf-8"))


def test_every_cheat_is_rejected_on_the_device():
    paths = sorted(CHEATS.glob("t9*.py")) + sorted(CHEATS.glob("v9*.hip"))
    assert HONEST in {p.name for p in paths} and len(paths) >= 10, [p.name for p in paths]

    def check(path: Path):
        task = hip_task() if path.suffix == ".hip" else triton_task()
        return tools.check(cheat_candidate(path), task, timeout_s=CHECK_TIMEOUT_S)

    with ThreadPoolExecutor(8) as pool:             # each check is its own child process, with its own context
        results = dict(zip([p.name for p in paths], pool.map(check, paths)))
    assert_parent_cuda_healthy()
    for name, result in results.items():
        assert result.status == "ok", (name, everything_said(result))
        assert result.raw["device"] == "cuda", (name, result.raw.get("device"))
        if name != HONEST and "honest" in name:     # another honest control (t98: its own scratch buffer)
            assert result.passed and not result.cheats, (name, everything_said(result))
            continue
        if name == HONEST:
            assert result.passed and not result.cheats, (name, result.reason)
            # Device evidence was gathered: its own kernel in the profiled calls' trace, on the timed stream,
            # and a launch in every counted call.
            anticheat = result.raw.get("anticheat") or {}
            kernels = anticheat.get("kernels") or []
            assert kernels and all("add_kernel" in k.get("name", "") for k in kernels), anticheat
            assert anticheat.get("timed_stream") is not None, anticheat
            assert anticheat.get("launches") and all(anticheat["launches"]), anticheat.get("launches")
            continue
        assert not result.passed and result.reason, name
        expected = next(tag for prefix, tag in CHEAT_TAGS.items() if name.startswith(prefix))
        assert any(reason.startswith(expected) for reason in result.cheats), (name, expected, result.cheats)


# ============================================================================ 3. a kernel that never ends

# Python, torch, the CUDA context and Triton's JIT of one kernel take a few seconds of it (this test runs after
# the cheat suite, whose children leave Triton's launcher stubs built in its cache).
SPIN_TIMEOUT_S = 30.0
LAUNCHED = "hello-gpu test: the spinning kernel is launched"
SPIN_SOURCE = f'''"""A kernel that never ends: each program waits for a flag that nothing ever sets (agent GPU tier).

parent: t01_tile_1024
change: before its add, each program spins until a flag in device memory becomes nonzero; it stays 0
hypothesis: none: the sandbox must kill the step at its time limit and say so
"""

import torch
import triton
import triton.language as tl

TILE = 1024
_flags = []        # kept alive: the memory the kernel spins on is never handed to anything else


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, flag_ptr, n, TILE: tl.constexpr):
    # A volatile load is read from memory again on every trip, so the loop can be neither hoisted nor dropped.
    flag = tl.load(flag_ptr, volatile=True)
    while flag == 0:
        flag = tl.load(flag_ptr, volatile=True)
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    flag = torch.zeros(1, dtype=torch.int32, device=a.device)
    _flags.append(flag)
    n = a.numel()
    add_kernel[(triton.cdiv(n, TILE),)](a, b, out, flag, n, TILE=TILE)
    print({LAUNCHED!r}, flush=True)    # compiled and launched: whatever hangs now is the kernel
    return out
'''


def test_a_kernel_that_never_ends_is_killed_at_the_time_limit():
    spinning = Candidate(None, None, "triton", SPIN_SOURCE, action="spin on a flag that is never set")
    started = time.perf_counter()
    result = tools.check(spinning, triton_task(), timeout_s=SPIN_TIMEOUT_S)
    seconds = time.perf_counter() - started
    said = everything_said(result)
    assert result.status == "timeout" and not result.passed, said
    assert f"did not finish within {SPIN_TIMEOUT_S:g} s" in result.reason and "killed" in result.reason, said
    # The child got as far as launching the kernel: it is the kernel that hung, not the child's start-up.
    assert LAUNCHED in (result.raw.get("stdout_tail") or ""), said
    assert seconds < SPIN_TIMEOUT_S + 60, seconds      # the kill is prompt, not a second time limit
    assert_parent_cuda_healthy()


# ============================================================================ 4. compare, device clock


# Two rungs whose difference is large and has a reason in the bytes, so that acceptance is no matter of luck.
# v02_strided_chunks gives each thread 16 consecutive elements: a warp's load touches 32 sectors of 32 bytes
# (1024 bytes of sectors for 128 useful ones) instead of 4, and its L1/L2 transactions grow up to 8x while the
# DRAM bytes stay the same (12 bytes an element); v01 has one element per thread, 4 sectors a warp load. The
# H200 records (vector_add.float32, 2^24): v02 208 us, v01 65.6 us, 3.2x (0.31x at 2^28, as predicted, 0.3-0.5x).
# v04 against v01 (55.3 against 65.6 us in the records) measured 1.07x in the agent's cold compare on the H200
# (session 8), under the 1.05 + 3 x noise lower bound tools.accept asks for: within its own noise of refused.
def test_compare_times_two_rungs_with_device_events():
    task = hip_task(bench_shape=2**24)
    slower = rung_candidate(hip_task("v02_strided_chunks", bench_shape=2**24))
    faster = rung_candidate(task)                                               # v01_thread_per_element
    result = tools.compare(slower, faster, task, min_rounds=10, max_seconds=2.0, timeout_s=CHECK_TIMEOUT_S)
    assert result.ok and result.status == "ok", everything_said(result)
    assert result.clock == "device-events"
    assert result.raw["shape"] == "2^24" and result.raw["dtype"] == "float32" and result.raw["device"] == "cuda"
    assert result.pairs >= 10
    low, high = result.ci95
    assert low <= result.speedup <= high, (result.speedup, result.ci95)
    assert result.speedup > 1 and low > 1, (result.speedup, result.ci95)
    assert result.candidate_median_s < result.baseline_median_s
    assert result.verdict == "faster" and result.suspect is None, (result.verdict, result.suspect)
    assert result.noise is not None and 0 <= result.noise < 0.05, result.noise
    assert tools.accept(result).accepted, tools.accept(result).reason


# ============================================================================ 5. a short run of the loop

# A Triton start that is slow on purpose: 64 elements per program over 16 warps (7 of 8 threads idle),
# four programs resident per SM, so at 2^22 elements the programs' start-up and latency, not memory,
# set the pace. The scripted policy's moves from it (seed 0, any bound) are TILE 64 -> 128, then 256,
# then 512, each about halving the time (1.8-1.9x each in the CPU interpreter, where programs cost the
# same); were the first refused, 32 and then 8 warps would follow. So the run accepts candidates and has a
# start-vs-best re-measurement to check. From vector_add's own t01_tile_1024 the same policy proposes
# TILE 512, TILE 2048 and 8 warps, likely all within noise on the H200 (t02's 4096 and t03's 8 warps
# measured 0.97-1.0x t01): nothing accepted, nothing to re-measure.
SLOW_START = "t01_slow_tile_64"
def slow_start_source() -> str:
    """vector_add's t01_tile_1024 with a 64-element tile over 16 warps (and no parent in the folder)."""
    from hello_gpu.ops import load_op
    source = load_op("vector_add").rung("t01_tile_1024").path.read_text(encoding="utf-8")
    for old, new in (("one program per tile of 1024 elements: the first Triton rung",
                      "64-element tiles over 16 warps: slow on purpose"),
                     ("TILE = 1024", "TILE = 64"), ("NUM_WARPS = 4", "NUM_WARPS = 16"),
                     ("parent: v00_torch", "parent: none")):
        assert old in source, f"t01_tile_1024 changed: no {old!r} to edit"
        source = source.replace(old, new, 1)
    return source


AGENT_TIMEOUTS = {"compile": 120, "check": CHECK_TIMEOUT_S, "bench": 120, "compare": 120, "analyze": 180,
                  "bench_seconds": 0.3, "compare_seconds": 0.5, "counters": False}
STOP_REASONS = ("max rounds", "patience", "target reached", "policy exhausted", "time budget")


def slow_ops_root(folder: Path) -> Path:
    """An operator folder of vector_add's spec and the slow start alone (the sandbox copies it per step)."""
    from hello_gpu.ops import load_op
    root = Path(folder) / "ops"
    target = root / "vector_add"
    target.mkdir(parents=True)
    shutil.copy2(load_op("vector_add").path / "spec.py", target / "spec.py")
    (target / f"{SLOW_START}.py").write_text(slow_start_source(), encoding="utf-8")
    return root


def agent_task(ops_root: Path, bench_shape=2**22) -> Task:
    return Task("vector_add", SLOW_START, "triton", dtypes=("float32",), check_shapes=(1, 31, 1000, 4097),
                bench_shape=bench_shape, extra={"ops_root": str(ops_root)})


def test_a_short_scripted_run_on_the_gpu(tmp_path):
    from hello_gpu.agent.loop import run_agent
    from hello_gpu.agent.report import build_record
    from hello_gpu.agent.store import CandidateStore
    from hello_gpu.bench.records import validate_record

    run_dir = tmp_path / "run"
    events = []
    result = run_agent(agent_task(slow_ops_root(tmp_path)), "scripted", run_dir, rounds=3, patience=3, seed=0,
                       progress=events.append, timeouts=AGENT_TIMEOUTS)
    assert result.stop_reason and result.stop_reason.startswith(STOP_REASONS), result.stop_reason
    assert [e["event"] for e in events][-3:] == ["stop", "final", "report"]

    with CandidateStore(run_dir) as store:
        candidates = store.list()
        states = {c.id: (c.action, c.state, c.reason[:300]) for c in candidates}
        assert all(c.state in FINAL_STATES for c in candidates), states
        start = next(c for c in candidates if c.id == result.start_id)
        assert start.state == "accepted", states
        assert len(candidates) >= 2, states                      # the policy proposed something
        for candidate in candidates:
            check = candidate.results.get("check") or {}
            if candidate.state == "accepted":
                # Only a candidate the checker passed (correct, no cheat) on the GPU is ever accepted.
                assert check.get("status") == "ok" and check.get("passed") is True, states[candidate.id]
                assert check.get("correct") is True and not check.get("cheats"), states[candidate.id]
                assert (check.get("raw") or {}).get("device") == "cuda", states[candidate.id]
                bench = candidate.results.get("bench") or {}
                assert bench.get("ok") and bench.get("clock") == "device-events", (states[candidate.id], bench)
                # the analysis carries the launched kernels' registers (Triton's JIT cache) for the policy
                analysis = candidate.results.get("analyze") or {}
                resources = analysis.get("resources") or {}
                assert resources.get("registers_per_thread", 0) > 0, (states[candidate.id], analysis.get("notes"))
                # and so does the compile step, whose first calls compiled the kernels (Triton's JIT)
                compiled = ((candidate.results.get("compile") or {}).get("resources") or {}).get("kernels") or []
                assert compiled and all(k["registers_per_thread"] > 0 for k in compiled), (states[candidate.id],
                                                                                           compiled)
            if check and not check.get("passed"):
                assert candidate.state in ("incorrect", "rejected", "crashed"), states[candidate.id]
            if candidate.id != result.start_id and "compare" in candidate.results:
                assert candidate.results["compare"].get("clock") == "device-events", states[candidate.id]
        accepted = [c for c in candidates if c.state == "accepted" and c.id != result.start_id]
        assert accepted, f"nothing beat the slow start: {states}"
        assert result.best_id == store.best_accepted().id != result.start_id

    final = result.final
    assert final and final["status"] == "ok", final
    assert final["pairs"] >= 5 and final["clock"] == "device-events", final
    assert final["ci95"][0] <= final["remeasured"] <= final["ci95"][1], final
    assert final["remeasured"] > 1, final
    versus = final.get("vs_hand_written")
    if versus:                                              # the run's hand-written reference, where it has one
        assert versus["status"] == "ok" and versus["pairs"] >= 5, versus

    assert (run_dir / "report.md").is_file() and (run_dir / "report.json").is_file()
    markdown = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "wall clock on the CPU" not in markdown

    record = build_record(run_dir)
    name = torch.cuda.get_device_name(0)
    assert record["kind"] == "agent" and record["device"]["name"] == name, record["device"]
    assert record["device"]["slug"] != "cpu" and record["environment"]["gpu"] == name
    assert [e["role"] for e in record["entries"]] == ["baseline", "candidate"]
    assert record["entries"][1]["speedups"][SLOW_START]["value"] > 1
    # Valid as a record; the measured commit is whatever this copy of the tree can tell (git or HG_GIT_COMMIT).
    problems = [p for p in validate_record(record) if not p.startswith("environment.git")]
    assert problems == [], problems
    assert json.loads(json.dumps(record)) == record


def test_a_kernelbench_problem_on_the_gpu(tmp_path):
    """6. A KernelBench-style problem (a Model with a learned weight) as a task on the device: the start
    kernel is checked against the float64 Model and timed with device events; a kernel that drops the
    weight fails its check there too."""
    from hello_gpu.agent.kernelbench import write_operator
    from hello_gpu.agent.loop import run_agent
    from hello_gpu.agent.store import CandidateStore
    from hello_gpu.ops import check_rung, load_op

    fixtures = HERE / "fixtures" / "agent"
    write_operator(fixtures / "kb_rms_norm_weight.py", fixtures / "t02_kb_rms_norm_ignores_weight.py", tmp_path / "bad")
    bad = load_op("kb_rms_norm_weight", root=tmp_path / "bad")
    report = check_rung(bad.rung("t02_kb_rms_norm_ignores_weight"), bad, seeds=[1, 2, 3])
    assert report.ran and not report.passed and report.skipped is None, report.reason

    run_dir = tmp_path / "run"
    task, _ = write_operator(fixtures / "kb_rms_norm_weight.py", fixtures / "t01_kb_rms_norm_start.py", run_dir / "ops")
    result = run_agent(task, "scripted", run_dir, rounds=1, patience=1, seed=0,
                       timeouts={**AGENT_TIMEOUTS, "counters": False})
    with CandidateStore(run_dir) as store:
        start = store.get(result.start_id)
    assert start.state == "accepted", start.reason
    assert start.results["check"]["passed"] and (start.results["check"].get("raw") or {}).get("device") == "cuda"
    assert start.results["bench"]["clock"] == "device-events", start.results["bench"]
    assert (run_dir / "report.md").is_file()


# ============================================================================ 7. issue 17: verdicts from outside the child

# The classes of issue 17 on the device, each through the agent's own check (verdict in the parent). The tags
# each one's reasons must include; "incorrect" stands for the checker's own verdict (result.correct False).
OUTSIDE_CHEATS = {
    "t80_walks_the_stack.py": {"tamper evidence"},
    "t81_widens_tolerance.py": {"tamper evidence", "incorrect"},
    "t82_wraps_numpy.py": {"tamper evidence"},
    "t83_skips_at_scale.py": {"incorrect"},                 # 2^20 at the benchmark shape: 1 tile in 8 skipped
    "t84_fewer_dtypes.py": {"dtype coverage"},
    "t85_hunts_the_reference.py": {"tamper evidence", "incorrect"},
    "t86_rewrites_the_reporter.py": {"tamper evidence", "incorrect"},
    "t87_raw_thread.py": {"tamper evidence"},
    "t88_writes_past_the_end.py": {"guard bytes"},
    "t89_aliased_library.py": {LIBRARY},
    "v91_named_like_aten.hip": {LIBRARY},                   # origin: ATen's kernel under the candidate's name
}


def _red_team() -> dict:
    """The red team's cheats the CPU tier catches in the check step (tests/test_agent_anticheat.py), on the
    device too; t65 maps /dev/shm blocks, which hold nothing on a GPU (buffers there are CUDA IPC)."""
    from test_agent_anticheat import OUTSIDE_CHEATS as CPU_OUTSIDE
    return {name: tags for name, tags in CPU_OUTSIDE.items()
            if name.startswith(("t6", "t7", "t10")) and name != "t65_reads_the_baseline.py"}


OUTSIDE_CHEATS.update(_red_team())
OUTSIDE_CHEATS["t54_makes_its_own_context.py"] = {TAMPER}   # a real context made on the device, named as on the CPU


def test_every_class_of_issue_17_is_rejected_on_the_device():
    from hello_gpu.agent.anticheat import tag_of

    def check(name: str):
        path = CHEATS / name
        task = hip_task() if path.suffix == ".hip" else triton_task()
        if name.startswith("t84_"):
            task = Task("vector_add", "t01_tile_1024", "triton", dtypes=("float32", "bfloat16"),
                        check_shapes=CHECK_SHAPES, bench_shape=2**20)
        return tools.check(cheat_candidate(path), task, timeout_s=CHECK_TIMEOUT_S)

    honest = ("t98_honest_scratch.py", "t77_honest_bookkeeping.py", HONEST)
    names = sorted(OUTSIDE_CHEATS) + list(honest)
    with ThreadPoolExecutor(6) as pool:
        results = dict(zip(names, pool.map(check, names)))
    assert_parent_cuda_healthy()
    for name in honest:
        result = results[name]
        assert result.status == "ok" and result.passed and not result.cheats, (name, everything_said(result))
        anticheat = result.raw["anticheat"]
        assert anticheat["guard"] == [] and anticheat["tamper"] == [], anticheat
        # Every kernel of the profiled calls is its own, launched by the driver API (origin, not name).
        assert anticheat["kernels"] and all(k["own"] and str(k["launched_by"]).startswith("cuLaunch")
                                            for k in anticheat["kernels"]), anticheat["kernels"]
    for name, expected in OUTSIDE_CHEATS.items():
        result = results[name]
        assert result.status == "ok", (name, everything_said(result))
        found = {tag_of(reason) for reason in result.cheats} | ({"incorrect"} if result.correct is False else set())
        assert not result.passed and expected <= found, (name, expected, result.reason)


def test_module_name_lookups_are_judged_by_the_frame_they_name_on_the_device():
    """Python 3.12 here: Triton's compiler (a namedtuple of the kernel's metadata, on a kernel's first launch)
    and t57's own namedtuple / Enum in run() ask sys._getframemodulename for a frame inside the candidate's
    call: no evidence, and check, bench and compare pass t57 clean. t56 asks for the modules of the frames
    above its call, through typing._caller and through sys._getframemodulename: frame inspection."""
    from test_agent_anticheat import ASKS_WHO_CALLS, MAKES_TYPES, T56_BY_SYS, T56_LOOKUP

    from hello_gpu.agent.anticheat import TAMPER, tag_of
    task = triton_task(bench_shape=2**22)
    honest = cheat_candidate(CHEATS / MAKES_TYPES)
    source = (CHEATS / ASKS_WHO_CALLS).read_text(encoding="utf-8")
    by_sys = source.replace(T56_LOOKUP[0], T56_BY_SYS[0]).replace(T56_LOOKUP[1], T56_BY_SYS[1])
    lookups = {"typing._caller": cheat_candidate(CHEATS / ASKS_WHO_CALLS),
               "sys._getframemodulename": Candidate(None, None, "triton", by_sys)}
    with ThreadPoolExecutor(3) as pool:
        checked = pool.submit(tools.check, honest, task, timeout_s=CHECK_TIMEOUT_S)
        looked = {name: pool.submit(tools.check, candidate, task, timeout_s=CHECK_TIMEOUT_S)
                  for name, candidate in lookups.items()}
        checked, looked = checked.result(), {name: future.result() for name, future in looked.items()}
    assert checked.status == "ok" and checked.passed and not checked.cheats, everything_said(checked)
    bench = tools.bench(honest, task, max_seconds=1.0, timeout_s=CHECK_TIMEOUT_S)
    assert bench.ok and bench.suspect is None, everything_said(bench)
    compare = tools.compare(cheat_candidate(CHEATS / HONEST), honest, task, timeout_s=CHECK_TIMEOUT_S)
    assert compare.ok and compare.suspect is None, everything_said(compare)
    for name, result in looked.items():
        frames = [reason for reason in result.cheats if tag_of(reason) == TAMPER and "frame inspection" in reason]
        assert result.status == "ok" and not result.passed and frames, (name, everything_said(result))
        assert "outside the candidate's call" in frames[0], (name, frames)


SLOW_EVENTS = """
import torch as _torch_for_the_clock
_elapsed = _torch_for_the_clock.cuda.Event.elapsed_time
setattr(_torch_for_the_clock.cuda.Event, "elapsed_time", lambda self, end: _elapsed(self, end) * 0.5)
"""


def test_a_halved_device_clock_is_caught_by_the_parents_clock():
    """Event.elapsed_time halved in the child (behind setattr, past the source scan): the warm batch's
    claimed span covers half of what the parent's wall clock saw; the fingerprint names the patch."""
    source = (CHEATS / HONEST).read_text(encoding="utf-8").replace("TILE = 256\n", "TILE = 256\n" + SLOW_EVENTS, 1)
    result = tools.bench(Candidate(None, None, "triton", source), triton_task(bench_shape=2**24), max_seconds=1.0,
                         timeout_s=CHECK_TIMEOUT_S)
    assert result.ok, everything_said(result)
    assert result.suspect and "timing inconsistent" in result.suspect, result.suspect
    assert "torch.cuda.Event.elapsed_time" in result.raw["patched"]


def test_timed_outputs_are_checked_on_the_device():
    """t101 skips tiles only once it is called back to back, as a timed batch calls it: the parent's random check
    of timed outputs sees it."""
    result = tools.bench(cheat_candidate(CHEATS / "t101_skips_in_a_rush.py"), triton_task(), max_seconds=1.0,
                         timeout_s=CHECK_TIMEOUT_S)
    assert result.ok, everything_said(result)
    assert result.suspect and "timed output wrong" in result.suspect, result.suspect


def test_an_honest_compare_is_clean_and_consistent_in_separate_processes():
    """t99 against v-less t01 on the device: both sides' timed outputs checked, both clocks consistent with
    the parent's, no problem on either side, and the suspect flag unset. On the H200 (session 8) four-call batches
    of ~0.3 ms read as clocks at 0.42-0.44x in 30 of 100 batches (hiccups of ~0.4 ms outside their spans): the
    counted batches are now sized to session.BATCH_SPAN_S, so they grew (more input sets than the four to start)."""
    from hello_gpu.agent.session import INPUT_SETS, SHORT_BATCH, BATCH_SPAN_S
    task = triton_task(bench_shape=2**24)
    result = tools.compare(rung_candidate(task), cheat_candidate(CHEATS / HONEST), task, timeout_s=CHECK_TIMEOUT_S)
    assert result.ok, everything_said(result)
    assert result.suspect is None, (result.suspect, result.raw.get("consistency"))
    assert result.raw["timed_outputs_checked"]["candidate"] >= 10 and not result.raw["problems"]
    assert result.raw["resizes"] >= 1 and result.raw["calls_per_batch"] > INPUT_SETS, result.raw["calls_per_batch"]
    for side in ("A", "B"):
        consistency = result.raw["consistency"][side]
        assert not consistency["problems"], consistency
        assert consistency["claimed_span_s"] <= consistency["parent_wall_s"], consistency
        assert consistency["median_span_s"] >= SHORT_BATCH * BATCH_SPAN_S, consistency
        # Work left running past each counted call's end event (worker.ContextDrain): measured, and ~0 for both (the
        # rule names a side only when a quarter of its calls are over the threshold; the median is far under it).
        running = consistency["left_running"]
        assert running["calls"] >= 10 * INPUT_SETS and running["median_s"] < LEFT_RUNNING_MIN_S, running


# ============================================================================ side streams, where a task allows them

JOINED = "t78_honest_joined_streams.py"


# On the H200 (run of 6983866) the unjoined variant got through the first design (an after-call marker alone:
# its side kernel ended before the host queued the marker); the hold before each call is the answer to that.
def test_side_streams_joined_before_return_are_accepted_where_the_task_allows_them():
    """The honest two-stream control passes on a side-stream task; the same file without its join does not,
    and on an ordinary task the honest one is refused (issue 17, part 7: honest controls at each rule's edge)."""
    from hello_gpu.agent.anticheat import tag_of
    honest = cheat_candidate(CHEATS / JOINED)
    source = (CHEATS / JOINED).read_text(encoding="utf-8")
    # Unjoined: all the work on the side stream and no join, so the after-call marker on the caller's
    # stream starts while the side kernel (2^24 elements, ~50 us) still runs.
    joined_body = ("    _add(a, b, out, 0, half)\n    with torch.cuda.stream(side):\n        _add(a, b, out, half, n)\n"
                   "    caller.wait_stream(side)")
    assert joined_body in source
    loose_body = "    with torch.cuda.stream(side):\n        _add(a, b, out, 0, n)"
    unjoined = Candidate(None, None, "triton", source.replace(joined_body, loose_body),
                         action="side stream left unjoined")
    allowed = Task("vector_add", "t01_tile_1024", "triton", dtypes=("float32",), check_shapes=CHECK_SHAPES,
                   bench_shape=2**24, side_streams=True)
    cases = {"joined, allowed": (honest, allowed), "unjoined, allowed": (unjoined, allowed),
             "joined, not allowed": (honest, triton_task(bench_shape=2**24))}
    with ThreadPoolExecutor(3) as pool:
        results = dict(zip(cases, pool.map(lambda case: tools.check(*case, timeout_s=CHECK_TIMEOUT_S), cases.values())))
    assert_parent_cuda_healthy()
    good = results["joined, allowed"]
    assert good.status == "ok" and good.passed and not good.cheats, everything_said(good)
    streams = {entry["stream"] for entry in good.raw["anticheat"]["streams"]}
    assert len(streams) == 2, good.raw["anticheat"]["streams"]            # it really used two streams
    for name in ("unjoined, allowed", "joined, not allowed"):
        result = results[name]
        assert result.status == "ok" and not result.passed, (name, everything_said(result))
        assert CONCURRENCY in {tag_of(reason) for reason in result.cheats}, (name, result.cheats)
    assert any("not waited for by the timed stream" in reason for reason in results["unjoined, allowed"].cheats), \
        results["unjoined, allowed"].cheats


def _device_timed_cheats() -> dict:
    """tests/test_agent_anticheat.py's TIMED_CHEATS as the device sees them. t61 forges the child's wall clock
    (hello_gpu.agent.worker.time), which times nothing on a GPU (device events do): there it changes no claim,
    and only the fingerprint names it. (On the H200 run of 50fb9e5 it read as a slow clock only because every
    honest kernel did: the batch floor was the ping alone.)"""
    from test_agent_anticheat import TIMED_CHEATS

    from hello_gpu.agent.anticheat import TAMPER
    return {**TIMED_CHEATS, "t61_forges_the_clock.py": ("bench", {TAMPER}, "hello_gpu.agent.worker.time")}


def test_the_red_teams_timed_cheats_are_caught_on_the_device():
    """tests/test_agent_anticheat.py's TIMED_CHEATS on the H200: each named in its timing step's verdict."""
    cheats = _device_timed_cheats()

    def run(name):
        step, _, _ = cheats[name]
        # 2^22: four cold calls span ~0.3 ms on the H200; the counted batches are sized to session.BATCH_SPAN_S
        # (4 ms) from the first ones, so t64's halved spans miss ~2 ms a batch, over any hiccup allowed.
        task = triton_task(bench_shape=2**22)
        if step == "bench":
            return tools.bench(cheat_candidate(CHEATS / name), task, max_seconds=1.0, timeout_s=CHECK_TIMEOUT_S)
        return tools.compare(cheat_candidate(CHEATS / HONEST), cheat_candidate(CHEATS / name), task,
                             timeout_s=CHECK_TIMEOUT_S)
    with ThreadPoolExecutor(3) as pool:
        results = dict(zip(cheats, pool.map(run, cheats)))
    for name, (_, tags_wanted, text) in cheats.items():
        said = results[name].suspect or str(results[name].raw.get("detail") or "")
        assert all(tag in said for tag in tags_wanted) and text in said, (name, said)


def test_the_other_routes_of_each_class_are_rejected_on_the_device():
    """tests/test_agent_anticheat.py's routes (the ATen watch taken off seven ways, the evidence channel hidden
    three ways, a thread through _thread's alias) on the H200, where Triton compiles with ptxas in a
    subprocess while the candidate's call is on the stack: each still named, none from the compiler's own
    descriptor calls."""
    from test_agent_anticheat import _routes

    from hello_gpu.agent.anticheat import TAMPER, tag_of
    routes = _routes()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda route: tools.check(Candidate(None, None, "triton", route[1]), triton_task(),
                                                          timeout_s=CHECK_TIMEOUT_S), routes))
    for (name, _, text), result in zip(routes, results):
        assert result.status == "ok" and not result.passed, (name, everything_said(result))
        assert any(tag_of(reason) == TAMPER and text in reason for reason in result.cheats), (name, result.reason)


def test_an_honest_deterministic_kernel_passes_the_timed_repeats_on_the_device():
    """On a task that declares determinism, t99's timed batches repeat sets at random (at least once per
    timing) and agree bit for bit; t72, random rounding only where it is timed, does not."""
    task = Task("vector_add", "t01_tile_1024", "triton", dtypes=("float32",), check_shapes=CHECK_SHAPES,
                bench_shape=2**22, deterministic=True)
    honest = tools.bench(cheat_candidate(CHEATS / HONEST), task, max_seconds=1.0, timeout_s=CHECK_TIMEOUT_S)
    assert honest.ok and honest.suspect is None, everything_said(honest)
    assert honest.raw["determinism"]["repeated_batches_compared"] >= 1, honest.raw["determinism"]
    noisy = tools.bench(cheat_candidate(CHEATS / "t72_nondeterministic_when_timed.py"), task, max_seconds=1.0,
                        timeout_s=CHECK_TIMEOUT_S)
    assert noisy.suspect and "nondeterministic" in noisy.suspect, everything_said(noisy)


# The current stream switched in the timed (poisoned) calls: each call goes back to the caller's stream for its
# kernel and leaves a side stream current as it returns, so that an end event recorded on the current stream lands
# on a stream with nothing queued and fires before the kernel ends. (A switch never undone would only move the
# whole batch, the harness's events included, onto the side stream: honest times, nothing gained.) On the H200
# (session 8) it went unflagged (its .item() waits put most of its kernels back inside the claimed times: 112 us
# at 2^24, slower than honest). The worker now records every event on the timed stream whatever is current, and
# names a call that returns with another stream current ("timing inconsistent").
STREAM_SWITCH = '''
_cuda = __import__("torch").cuda
_streams = []


def run(a, b, out=None):
    if not _streams:
        _streams.extend([_cuda.current_stream(), _cuda.Stream()])
    getattr(_cuda, "set_stream")(_streams[0])
    first = out.reshape(-1)[0].item() if out is not None and out.numel() else 0.0
    out = _cuda_empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    if first != first:
        getattr(_cuda, "set_stream")(_streams[1])
    return out
'''


def test_a_stream_switched_and_left_is_caught_on_the_device():
    source = (CHEATS / HONEST).read_text(encoding="utf-8")
    source = source[:source.index("def run(")] + "_cuda_empty_like = torch.empty_like\n" + STREAM_SWITCH
    result = tools.bench(Candidate(None, None, "triton", source), triton_task(bench_shape=2**24), max_seconds=1.0,
                         timeout_s=CHECK_TIMEOUT_S)
    assert result.ok, everything_said(result)
    assert result.suspect and "timing inconsistent" in result.suspect, result.suspect
    assert "another CUDA stream current" in result.suspect, result.suspect


# Work hidden beside the harness's own L2 flush. In a timed cold call the caller's stream is still busy with the flush
# queued just before it (current_stream().query() False), and there the candidate puts an eighth of its add on a side
# stream it never joins. The call's end event fires after the seven eighths on the caller's stream; the eighth runs
# beside the flushes, inside the batch's span but in no call's time (claimed: ~7/8 of the add's time, under the
# physics bound). The clock check cannot see it. It was a strict xfail until every call began as a timed one
# (worker.Worker._prepare_call): the check step's and the profile's calls now also follow a flush, so the candidate
# hides its eighth there too, where the profile sees its kernel off the timed stream; and the timed calls' own
# launches are counted with their streams (session.timed_launch_problems), so the bench names it in every batch.
FLUSH_HIDING = """
_cuda = __import__("torch").cuda
_side = []


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    split = n if _cuda.current_stream().query() else (7 * n // 8) // TILE * TILE
    add_kernel[(triton.cdiv(split, TILE),)](a, b, out, split, TILE=TILE)
    if split < n:
        if not _side:
            _side.append(_cuda.Stream())
        with getattr(_cuda, "stream")(_side[0]):
            rest = n - split
            add_kernel[(triton.cdiv(rest, TILE),)](a.view(-1)[split:], b.view(-1)[split:], out.view(-1)[split:], rest,
                                                   TILE=TILE)
    return out
"""


def assert_the_side_work_is_timed_or_named(timed, honest) -> None:
    """A candidate that queued part of its work on a stream of its own: with each call held behind its start
    (worker.CallWindow) that part starts with the call, so either it ended inside the call's time (the claim is
    no faster than the honest kernel's, timed alone just before: hiding an eighth read ~0.875x of it) or it ran
    on past the call's end event and the bench names it (ContextDrain). The H100 (session 14, before the window)
    saw neither: the eighth ran beside the flush, before the start event."""
    named = "left work running on the device after they returned" in (timed.suspect or "")
    in_time = timed.median_s >= 0.95 * honest.median_s
    assert named or in_time, (timed.median_s / honest.median_s, timed.suspect, timed.raw["consistency"])


def test_work_hidden_beside_the_flush_is_caught_on_the_device():
    """FLUSH_HIDING, named where it is timed (each timed call's launches, with their streams), in the time or named
    as left running there, and caught where it is checked (the profiled calls, behind the same flush, show its
    side-stream kernel)."""
    source = (CHEATS / HONEST).read_text(encoding="utf-8")
    candidate = Candidate(None, None, "triton", source[:source.index("def run(")] + FLUSH_HIDING)
    task = triton_task(bench_shape=2**24)
    checked = tools.check(candidate, task, timeout_s=CHECK_TIMEOUT_S)
    honest = tools.bench(rung_candidate(task), task, max_seconds=1.0, timeout_s=CHECK_TIMEOUT_S)
    timed = tools.bench(candidate, task, max_seconds=1.0, timeout_s=CHECK_TIMEOUT_S)
    assert timed.ok and honest.ok, (everything_said(timed), everything_said(honest))
    assert timed.suspect and CONCURRENCY in timed.suspect and "another stream than the timed one" in timed.suspect, \
        (timed.suspect, timed.median_s)
    assert_the_side_work_is_timed_or_named(timed, honest)
    assert checked.status == "ok" and not checked.passed, everything_said(checked)
    assert any(CONCURRENCY in reason and "off the timed stream" in reason for reason in checked.cheats), checked.cheats


def test_checked_profiled_and_timed_calls_begin_alike_on_the_device():
    """tests/test_agent_anticheat.py's OBSERVER on the device, in the child's own Worker class: every call, checked,
    profiled or timed, finds its caller's stream busy (the flush queued just before it), the same stream current,
    the same memory statistics (the flush's buffer and the profile's marker made at load) and the same launch
    hooks; and the timed calls' launches are counted, none off the timed stream."""
    from test_agent_anticheat import observations_by_request
    found, answers = observations_by_request("cuda", n=2**20)
    assert {name: len(calls) for name, calls in found.items()} == {"call": 1, "profile": 3, "time": 3}, found
    first = found["call"][0]
    assert first["stream busy"] is True and first["pre-run hooks"] >= 1, first
    assert all(seen == first for calls in found.values() for seen in calls), found
    assert answers["time"]["launches"] == [1, 1, 1] and answers["time"]["off_stream"] == [], answers["time"]


def test_checked_profiled_and_timed_calls_read_the_same_callers_on_the_device():
    """tests/test_agent_anticheat.py's TELLING_OBSERVER on the device: the file and line of every frame above run()
    (warnings.warn's stacklevel, no audit event) read the same in checked, profiled and timed calls, all made by
    Worker._calls; in this process, and in the child as the agent runs it (tools.check, tools.bench)."""
    from test_agent_anticheat import (TELLING_OBSERVER, assert_the_same_callers, callers_printed_in_the_child,
                                      observations_by_request)
    found, answers = observations_by_request("cuda", n=2**20, observer=TELLING_OBSERVER)
    seen = {tuple(call["callers"]) for calls in found.values() for call in calls}
    assert len(seen) == 1 and len(next(iter(seen))) == 7, found
    assert answers["time"]["launches"] == [1, 1, 1] and answers["time"]["clock"] == "device-events", answers["time"]
    assert_the_same_callers(callers_printed_in_the_child(triton_task(), timeout_s=CHECK_TIMEOUT_S, max_seconds=1.0))


# A spin left on a side stream as each call returns (t53), meant to keep the GPU busy while the baseline is timed in its
# own process. The worker ends each timed batch with torch.cuda.synchronize(), which waits for every stream of its
# context, so the spin ends inside the candidate's own request: it never overlaps the baseline's batches, it lengthens
# the candidate's requests but not their spans (the finish event is on the caller's stream), and it reads as the
# candidate's clock running slow (timing inconsistent). It was a strict xfail until each counted call was followed by
# one event for the whole context (worker.ContextDrain): the spin runs ~1 ms past every call's end event, and that is
# named for what it is (side stream or thread).
DEVICE_HOG = "t53_hogs_the_device.py"


@pytest.fixture(scope="module")
def device_hog_compare():
    """The hog against t99, compared once for the two tests below (~15 s each on the H200)."""
    task = triton_task(bench_shape=2**24)
    with pytest.MonkeyPatch.context() as patch:          # as _compiled_triton, for a module-scoped fixture
        patch.delenv("TRITON_INTERPRET", raising=False)
        return tools.compare(cheat_candidate(CHEATS / HONEST), cheat_candidate(CHEATS / DEVICE_HOG), task,
                             timeout_s=CHECK_TIMEOUT_S)


def test_device_work_left_running_reads_as_the_candidates_slow_clock(device_hog_compare):
    """The hog's spin ends inside its own timed batches (the worker's device-wide synchronize): its counted
    batches read as a clock running slow, and the baseline, timed between them, is untouched."""
    result = device_hog_compare
    assert result.ok, everything_said(result)
    assert result.suspect and "timing inconsistent" in result.suspect, result.suspect
    assert result.raw["baseline_problems"] == [], result.raw["baseline_problems"]


def test_device_work_left_running_while_the_baseline_is_timed_is_caught(device_hog_compare):
    """... and named for what it is: every counted call's work ran on past its end event (~1 ms of spin)."""
    result = device_hog_compare
    assert result.ok, everything_said(result)
    assert result.suspect and CONCURRENCY in result.suspect, result.suspect
    assert "left work running on the device after they returned" in result.suspect, result.raw["consistency"]["B"]
    assert result.raw["consistency"]["B"]["left_running"]["median_s"] > 1e-4, result.raw["consistency"]["B"]


# ============================================================================ work left running, whatever launched it

# v55: seven eighths of the add on the caller's stream, the last eighth on a side stream of its own through our runtime
# (kernel(..., stream=side)), never joined, except while the profiler is on. Our runtime records no launch's stream
# (the per-launch stream record is Triton's JIT only) and the profiled calls see an honest kernel, so before the
# context event after each counted call (worker.ContextDrain) it reached the accept rule ~1/8 faster than it is.
HIDES_UNPROFILED = "v55_hides_work_unprofiled.hip"


def test_work_left_running_through_our_runtime_is_timed_or_named_where_it_is_timed():
    """v55 passes its check (its profiled calls are honest; nothing else in a check looks at a HIP launch's stream),
    and its bench either times its side eighth or names it as left running; v01, honest and launched the same way,
    leaves none."""
    task = hip_task(bench_shape=2**24)
    cheat = cheat_candidate(CHEATS / HIDES_UNPROFILED)
    checked = tools.check(cheat, task, timeout_s=CHECK_TIMEOUT_S)
    honest = tools.bench(rung_candidate(task), task, max_seconds=1.0, timeout_s=CHECK_TIMEOUT_S)
    timed = tools.bench(cheat, task, max_seconds=1.0, timeout_s=CHECK_TIMEOUT_S)   # timed alone, after it
    assert checked.status == "ok" and checked.passed, everything_said(checked)
    assert timed.ok, everything_said(timed)
    assert_the_side_work_is_timed_or_named(timed, honest)
    assert honest.ok and honest.suspect is None, everything_said(honest)
    assert honest.raw["consistency"]["left_running"]["median_s"] < LEFT_RUNNING_MIN_S, honest.raw["consistency"]


def test_side_streams_joined_before_return_leave_nothing_running_where_timed():
    """t78 (half the add on a side stream, joined before return) benched on a task that allows side streams: its
    calls leave nothing running (no false positive for an honest two-stream kernel); unjoined, they do."""
    source = (CHEATS / JOINED).read_text(encoding="utf-8")
    joined_body = "    caller.wait_stream(side)"
    assert joined_body in source
    unjoined = Candidate(None, None, "triton", source.replace(joined_body, "    pass"), action="side stream unjoined")
    allowed = Task("vector_add", "t01_tile_1024", "triton", dtypes=("float32",), check_shapes=CHECK_SHAPES,
                   bench_shape=2**24, side_streams=True)
    with ThreadPoolExecutor(2) as pool:
        joined = pool.submit(tools.bench, cheat_candidate(CHEATS / JOINED), allowed, max_seconds=1.0,
                             timeout_s=CHECK_TIMEOUT_S)
        loose = pool.submit(tools.bench, unjoined, allowed, max_seconds=1.0, timeout_s=CHECK_TIMEOUT_S)
        joined, loose = joined.result(), loose.result()
    assert joined.ok and joined.suspect is None, everything_said(joined)
    assert joined.raw["consistency"]["left_running"]["median_s"] < LEFT_RUNNING_MIN_S, joined.raw["consistency"]
    assert loose.ok and loose.suspect and "left work running on the device" in loose.suspect, everything_said(loose)


# A CUDA graph (a captured spin of ~50 us) replayed on a side stream after each call's add, never joined: no launch hook
# sees a replay (the stream record is Triton's JIT only), and the source scan reads only computed names. The context
# event after each counted call holds every stream's queued work, replays included.
GRAPH_LEFT_RUNNING = '''
_cuda = getattr(torch, "cu" + "da")
_graph = []


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    if not _graph:
        side, graph = getattr(_cuda, "Str" + "eam")(), getattr(_cuda, "CUDA" + "Graph")()
        with getattr(_cuda, "gr" + "aph")(graph, stream=side):
            getattr(_cuda, "_sl" + "eep")(10**5)
        _graph.extend([side, graph])
    with getattr(_cuda, "str" + "eam")(_graph[0]):
        _graph[1].replay()
    return out
'''


def test_a_graph_replayed_on_a_side_stream_is_named_where_it_is_timed():
    source = (CHEATS / HONEST).read_text(encoding="utf-8")
    candidate = Candidate(None, None, "triton", source[:source.index("def run(")] + GRAPH_LEFT_RUNNING,
                          action="a captured spin replayed on a side stream")
    result = tools.bench(candidate, triton_task(bench_shape=2**24), max_seconds=1.0, timeout_s=CHECK_TIMEOUT_S)
    assert result.ok, everything_said(result)
    assert result.suspect and CONCURRENCY in result.suspect, (result.suspect, result.raw["consistency"])
    assert "left work running on the device after they returned" in result.suspect, result.raw["consistency"]


def compared_with_and_without(variable: str) -> tuple[dict, dict]:
    """v02_strided_chunks against v01 (HIP, 2^24) compared twice: as the agent runs it, and with the test switch
    ``variable`` set in the children (tests/fixtures/agent/worker_clock: HG_TEST_NO_DRAIN, HG_TEST_NO_WINDOW, as on
    a driver without cuCtxRecordEvent or cuCtxWaitEvent). Both must be clean."""
    from test_agent_anticheat import WORKER_CLOCK

    from hello_gpu.agent import session
    from hello_gpu.agent.sandbox import _package_path
    from hello_gpu.agent.tools import _payload
    task = hip_task(bench_shape=2**24)
    payload = _payload(task, baseline=rung_candidate(hip_task("v02_strided_chunks", bench_shape=2**24)),
                       candidate=rung_candidate(task))
    payload.update(min_rounds=10, max_seconds=2.0)
    path = os.pathsep.join(filter(None, [str(WORKER_CLOCK), _package_path(), os.environ.get("PYTHONPATH")]))
    with_it = session.run_compare(payload, CHECK_TIMEOUT_S, {"PYTHONPATH": path})
    without = session.run_compare(payload, CHECK_TIMEOUT_S, {"PYTHONPATH": path, variable: "1"})
    for raw in (with_it, without):
        assert raw.get("status", "ok") == "ok" and raw["suspect"] is None, (raw.get("detail"), raw.get("suspect"))
    assert with_it["notes"] == [], with_it["notes"]
    return with_it, without


def assert_the_timings_agree(first: dict, second: dict) -> None:
    """Two timings of the same pair, each with its own 95% interval, agree where the intervals overlap (wide ones:
    the H100, session 12: 3.05x [2.91, 3.06] with the context event, 2.92x [2.76, 3.04] without, 4.5% apart) or the
    medians are within report.AGREEMENT (narrow ones: the H200, session 16: 3.19x [3.19, 3.20] with the event,
    3.25x [3.23, 3.26] without, 1.7% apart: two processes' runs differ by more than one run's interval). A bias
    the agent would carry into a verdict moves the speedup past both."""
    low, high = max(first["ci95"][0], second["ci95"][0]), min(first["ci95"][1], second["ci95"][1])
    apart = abs(first["speedup"] / second["speedup"] - 1)
    assert low <= high or apart <= AGREEMENT, (first["speedup"], first["ci95"], second["speedup"], second["ci95"])


def test_the_context_event_leaves_an_honest_speedup_where_it_was():
    """The pair compared with the context event after each counted call and without it: the event's host work comes
    after each call's end event, so the two timings agree within their own noise; the run without it says so
    instead of measuring nothing silently."""
    with_event, without = compared_with_and_without("HG_TEST_NO_DRAIN")
    assert with_event["consistency"]["B"]["left_running"]["calls"] > 0, with_event["consistency"]["B"]
    assert "HG_TEST_NO_DRAIN" in without["consistency"]["B"]["left_running"]["unseen"], without["consistency"]["B"]
    assert any("work left running after the timed calls was not measured" in note for note in without["notes"]), \
        without["notes"]
    assert_the_timings_agree(with_event, without)


def test_the_window_leaves_an_honest_speedup_where_it_was():
    """The pair compared with each call held behind its start (worker.CallWindow: cuCtxWaitEvent after the flush)
    and without it: the window is host work before each call's start event and a wait an honest call's single
    stream already has, so the two timings agree within their own noise; the run without it says so."""
    held, unheld = compared_with_and_without("HG_TEST_NO_WINDOW")
    assert any("no window held: switched off by the test's HG_TEST_NO_WINDOW" in note for note in unheld["notes"]), \
        unheld["notes"]
    assert_the_timings_agree(held, unheld)



# ============================================================================ the parent's device memory

def test_a_finished_step_gives_its_device_memory_back():
    """The parent lends every timed input set and output to the children (CUDA IPC, agent/shared.py). On the H100
    (session 14) none of it was ever freed: torch keeps a lent allocation until the child releases its copy, and
    the children never do (os._exit, kills); the tier's 22nd test, a single bench, found 76.80 GiB allocated in
    this process, and the last three tests ran out of memory. After a bench, a compare and a check at 2^24 (a set
    of the vector add: 192 MiB; a bench makes 4-64 of them), what this process holds is back where it was, within
    one set."""
    task = triton_task(bench_shape=2**24)
    one_set = 3 * 4 * 2**24
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    timed = tools.bench(rung_candidate(task), task, max_seconds=0.5, timeout_s=CHECK_TIMEOUT_S)
    after_bench = torch.cuda.memory_allocated()
    compared = tools.compare(rung_candidate(task), rung_candidate(task), task, max_seconds=1.0,
                             timeout_s=CHECK_TIMEOUT_S)
    checked = tools.check(rung_candidate(task), task, timeout_s=CHECK_TIMEOUT_S)
    after = torch.cuda.memory_allocated()
    assert timed.ok and compared.ok and checked.status == "ok", (everything_said(timed), compared.raw.get("detail"),
                                                                   everything_said(checked))
    held = {"after the bench": after_bench - before, "after the compare and the check": after - before}
    assert all(grown < one_set for grown in held.values()), (held, timed.raw["input_sets"])
    from hello_gpu.agent.session import TIMING_MEMORY
    assert TIMING_MEMORY.granted() == 0
