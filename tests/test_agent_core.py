"""The agent's pieces on the CPU: the store survives a kill, the sandbox contains hangs and crashes,
the tools answer in JSON, the accept and stop rules decide as written.

Triton candidates run in the interpreter (the sandbox sets TRITON_INTERPRET=1 where no GPU is), on the
fixture operator toy_add with small shapes; HIP candidates only compile (NVRTC needs no GPU).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from hello_gpu.agent import accept, stop, tools
from hello_gpu.agent.candidate import Candidate
from hello_gpu.agent.sandbox import describe_exit, run_candidate_step
from hello_gpu.agent.store import CandidateStore, task_from_dict, task_to_dict
from hello_gpu.agent.task import Task

FIXTURES = Path(__file__).parent / "fixtures" / "ops"
TOY = FIXTURES / "toy_add"
SRC = Path(__file__).resolve().parents[1] / "src"
TRITON_SOURCE = (TOY / "t01_block_per_program.py").read_text(encoding="utf-8")
HIP_SOURCE = (TOY / "v01_thread_per_element.hip").read_text(encoding="utf-8")


def toy_task(route: str = "triton", start: str = "t01_block_per_program") -> Task:
    return Task("toy_add", start, route, dtypes=("float32",), check_shapes=(1, 31, 1000, (37, 29)), bench_shape=4096,
                extra={"ops_root": str(FIXTURES)})


def triton(source: str = TRITON_SOURCE, parent_id: int | None = None, **fields) -> Candidate:
    return Candidate(None, parent_id, "triton", source, **fields)


def with_run(body: str) -> str:
    """The fixture's Triton rung with ``run`` replaced by ``body`` (indented code of the function)."""
    head = TRITON_SOURCE.split("def run(a, b, out=None):")[0]
    return head + "def run(a, b, out=None):\n" + textwrap.indent(textwrap.dedent(body), "    ")


# ============================================================================================ store


def test_store_round_trip(tmp_path):
    task = toy_task()
    with CandidateStore(tmp_path) as store:
        store.start_run(task, "test-policy", 7)
        start = store.add(triton(action="start"))
        child = store.add(triton(TRITON_SOURCE.replace("BLOCK = 1024", "BLOCK = 2048"), parent_id=start.id,
                                 action="BLOCK 1024 -> 2048"), round_number=1)
        child.state, child.reason = "rejected", "not faster"
        child.results["compare"] = {"speedup": 1.01}
        store.update(child)
        store.add_result(child.id, "compare", {"speedup": 1.01})
        start.state = "accepted"
        store.update(start)
        with pytest.raises(ValueError, match="already holds a run"):
            store.start_run(task, "again", 1)
    with CandidateStore(tmp_path) as store:           # reopened: everything is there
        info = store.run_info()
        assert info["policy"] == "test-policy" and info["seed"] == 7
        assert store.task() == task
        assert [c.id for c in store.list()] == [start.id, child.id]
        again = store.get(child.id)
        assert again.state == "rejected" and again.results == {"compare": {"speedup": 1.01}}
        row = store.row(child.id)
        assert "-BLOCK = 1024" in row["diff"] and "+BLOCK = 2048" in row["diff"] and row["round"] == 1
        assert row["source_sha256"] == again.source_sha256
        assert store.best_accepted().id == start.id
        assert store.by_sha256(again.source_sha256).id == child.id
        assert [r["tool"] for r in store.results(child.id)] == ["compare"]
        store.set_stop_reason("max rounds: 1 of 1 done")
        assert store.run_info()["stop_reason"].startswith("max rounds")


def test_task_json_round_trip_keeps_shapes():
    task = toy_task()
    again = task_from_dict(json.loads(json.dumps(task_to_dict(task))))
    assert again == task and again.check_shapes[-1] == (37, 29)


WRITER = """
import sys, time
sys.path.insert(0, {src!r})
from hello_gpu.agent.candidate import Candidate
from hello_gpu.agent.store import CandidateStore
from hello_gpu.agent.task import Task
store = CandidateStore({folder!r})
store.start_run(Task("toy_add", "t01", "triton"), "writer", 1)
for index in range(10_000):
    candidate = store.add(Candidate(None, None, "triton", "source %d" % index))
    candidate.state = "rejected"
    store.update(candidate)
    store.add_result(candidate.id, "check", {{"index": index}})
    print(index, flush=True)
    time.sleep(0.01)
"""


def test_store_survives_a_killed_writer(tmp_path):
    process = subprocess.Popen([sys.executable, "-c", WRITER.format(src=str(SRC), folder=str(tmp_path))],
                               stdout=subprocess.PIPE, text=True)
    written = -1
    while written < 20:
        line = process.stdout.readline()
        assert line, "the writer died before writing"
        written = int(line)
    process.send_signal(signal.SIGKILL)           # no clean-up, no close: as a crash or a power cut
    process.wait()
    assert process.returncode == -signal.SIGKILL
    with CandidateStore(tmp_path) as store:
        assert store.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        candidates = store.list()
        # Everything the writer reported committed is there (it may have committed one more).
        assert len(candidates) >= written + 1
        assert all(c.state in ("rejected", "proposed") for c in candidates)
        assert len(store.results(tool="check")) >= written + 1
        assert store.run_info()["policy"] == "writer"


# ============================================================================================ sandbox


def _payload(candidate: Candidate, task: Task | None = None) -> dict:
    return {"task": task_to_dict(task or toy_task()),
            "candidate": {"route": candidate.route, "source": candidate.source, "companion": candidate.companion}}


def test_sandbox_checks_a_triton_candidate_in_the_interpreter():
    result = run_candidate_step("check", _payload(triton()), 120)
    assert result["status"] == "ok", result
    assert result["passed"] is True
    evidence = result["evidence"]
    assert len(evidence["seeds"]) >= 3 and len(evidence["distributions"]) >= 2
    assert evidence["dtypes"] == ["float32"] and evidence["deterministic_checked"]
    assert result["device"] == "cpu" and result["patched"] == []


def test_the_agent_checks_the_distributions_the_ladder_checks():
    """A task without its own distributions takes the spec's, edge cases included; never fewer than two."""
    from types import SimpleNamespace

    from hello_gpu.agent.sandbox import _distributions
    from hello_gpu.ops import load_op
    for name, extra in (("vector_add", "near_overflow"), ("softmax", "minus_inf_rows")):
        op = load_op(name)
        chosen = _distributions(Task(name, op.rungs[0].id, "triton"), op)
        assert chosen == list(op.spec.DISTRIBUTIONS) and extra in chosen
    op = load_op("vector_add")
    assert _distributions(Task("vector_add", "t01_tile_1024", "triton", distributions=("large", "normal")), op) == \
        ["large", "normal"]
    one = SimpleNamespace(spec=SimpleNamespace(DISTRIBUTIONS=("normal",)))
    assert _distributions(Task("x", "t01", "triton"), one) == ["normal", "large"]
    with pytest.raises(ValueError, match="at least 2 input distributions"):
        Task("vector_add", "t01_tile_1024", "triton", distributions=("normal",))


def test_sandbox_kills_a_candidate_that_never_returns():
    started = time.perf_counter()
    result = run_candidate_step("check", _payload(triton(with_run("while True:\n    pass\n"))), 12)
    assert result["status"] == "timeout"
    assert "killed" in result["detail"]
    assert time.perf_counter() - started < 40


def test_sandbox_contains_a_process_exit():
    result = run_candidate_step("check", _payload(triton(with_run("import os\nos._exit(139)\n"))), 60)
    assert result["status"] == "crashed"
    assert "139" in result["detail"] and "SIGSEGV" in result["detail"]


def test_sandbox_contains_a_segfault():
    result = run_candidate_step("check", _payload(triton(with_run("import ctypes\nctypes.string_at(0)\n"))), 60)
    assert result["status"] == "crashed"
    assert "SIGSEGV" in result["detail"]


def test_exit_descriptions():
    assert describe_exit(-11) == "killed by signal SIGSEGV (11)"
    assert describe_exit(139) == "exited with status 139 (128 + SIGSEGV)"


def test_a_candidate_that_raises_fails_its_check_with_the_error():
    result = tools.check(triton(with_run("raise RuntimeError('boom')\n")), toy_task())
    assert result.status == "ok" and not result.passed
    assert "raised RuntimeError: boom" in result.reason


def test_a_candidate_that_raises_on_import_fails_to_compile_at_its_line():
    source = TRITON_SOURCE.replace("BLOCK = 1024", "BLOCK = 1024\nraise ImportError('no such helper')")
    line = source.splitlines().index("raise ImportError('no such helper')") + 1
    result = tools.compile(triton(source), toy_task())
    assert result.status == "ok" and not result.ok
    assert result.errors[0]["line"] == line and "no such helper" in result.errors[0]["message"]


def test_a_triton_syntax_error_names_its_line():
    source = TRITON_SOURCE.replace("BLOCK = 1024", "BLOCK = = 1024")
    line = source.splitlines().index("BLOCK = = 1024") + 1
    result = tools.compile(triton(source), toy_task())
    assert not result.ok and result.errors[0]["line"] == line


def test_a_triton_kernel_error_fails_the_compile_at_its_line():
    """Triton compiles at the first call: the compile step makes one, so an error inside the kernel is a
    compile failure at the kernel's line, not an incorrect candidate."""
    source = TRITON_SOURCE.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK - 24)")
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "BLOCK - 24" in text)
    result = tools.compile(triton(source), toy_task())
    assert result.status == "ok" and not result.ok, result.message
    assert result.errors[0]["line"] == line, result.errors
    assert "power of 2" in result.errors[0]["message"] and result.errors[0]["dtype"] == "float32"
    assert "agent_candidate" not in result.message


def test_a_triton_compile_notes_that_the_interpreter_has_no_registers():
    result = tools.compile(triton(), toy_task())
    assert result.ok and result.resources is None
    assert "interpreter compiles nothing" in result.raw["note"]


def test_hip_compile_error_points_at_the_candidates_line():
    source = HIP_SOURCE.replace("out[i] = a[i] + b[i];", "out[i] = a[i] + undefined_name;")
    line = source.splitlines().index(next(s for s in source.splitlines() if "undefined_name" in s)) + 1
    result = tools.compile(Candidate(None, None, "hip", source), toy_task("hip", "v01_thread_per_element"))
    assert result.status == "ok" and not result.ok
    assert result.errors and result.errors[0]["line"] == line
    assert "undefined_name" in result.errors[0]["message"]
    assert "agent_candidate" not in result.message        # the temporary file name is not shown


def test_hip_compile_reports_registers_and_spills():
    result = tools.compile(Candidate(None, None, "hip", HIP_SOURCE), toy_task("hip", "v01_thread_per_element"))
    assert result.ok, result.message
    resources = result.resources["float32"]
    assert resources["registers_per_thread"] > 0 and resources["spill_store_bytes"] == 0
    assert result.arch == "sm_90"


def test_patching_the_timer_is_caught():
    source = TRITON_SOURCE.replace("BLOCK = 1024", "BLOCK = 1024\nimport time\ntime.perf_counter = lambda: 0.0")
    result = tools.check(triton(source), toy_task())
    assert not result.passed
    assert "time.perf_counter" in result.patched
    assert "patched the harness" in result.reason


# ============================================================================================ tools


def test_check_result_is_json(tmp_path):
    result = tools.check(triton(), toy_task())
    assert result.passed
    data = json.loads(json.dumps(result.to_dict()))
    assert tools.CheckResult.from_dict(data) == result


def test_a_candidate_that_drops_the_last_element_is_incorrect():
    source = (TOY / "t02_drops_last.py").read_text(encoding="utf-8")
    result = tools.check(triton(source), toy_task())
    assert result.status == "ok" and not result.passed
    assert "never written" in result.reason


def _fake_anticheat(monkeypatch, inspect):
    module = types.ModuleType("hello_gpu.agent.anticheat")
    module.inspect = inspect
    monkeypatch.setitem(sys.modules, "hello_gpu.agent.anticheat", module)


def test_anticheat_reasons_reject(monkeypatch):
    seen = {}

    def inspect(candidate, task, evidence):
        seen["evidence"] = evidence
        return ["calls torch.add instead of its own kernel"]

    _fake_anticheat(monkeypatch, inspect)
    result = tools.check(triton(), toy_task())
    assert not result.passed and result.correct and result.cheats == ["calls torch.add instead of its own kernel"]
    assert result.reason == "calls torch.add instead of its own kernel"
    assert seen["evidence"]["check"]["passed"] is True     # the inspection saw the checker's evidence


def test_anticheat_that_raises_fails_closed(monkeypatch):
    def inspect(candidate, task, evidence):
        raise RuntimeError("bug")

    _fake_anticheat(monkeypatch, inspect)
    result = tools.check(triton(), toy_task())
    assert not result.passed and "inspection failed" in result.cheats[0]


def test_bench_and_analyze_on_the_cpu_say_so():
    bench = tools.bench(triton(), toy_task(), max_seconds=0.3)
    assert bench.ok and bench.clock == "wall" and bench.device == "cpu"
    assert bench.median_s > 0 and bench.ci95[0] <= bench.median_s <= bench.ci95[1]
    assert bench.gb_per_s > 0 and bench.suspect is None
    analysis = tools.analyze(triton(), toy_task(), median_s=bench.median_s)
    assert analysis.ok and analysis.bound == "unknown"
    assert any("counters unavailable" in note for note in analysis.notes)
    assert analysis.intensity == pytest.approx(4096 / 49152)


def test_compare_finds_the_bigger_block_faster_in_the_interpreter():
    # 4096 elements: 4 programs of 1024 or 1 of 4096; the interpreter pays ~0.6 ms per program.
    faster = triton(TRITON_SOURCE.replace("BLOCK = 1024", "BLOCK = 4096"))
    result = tools.compare(triton(), faster, toy_task(), max_seconds=1.0)
    assert result.ok and result.clock == "wall"
    # The direction only, with its interval: 4x fewer programs is a large effect (~2-4x here), but the
    # figure itself is wall time on a shared CPU (it read 1.49 once under load): no threshold on it.
    assert result.ci95[0] > 1.0 and result.pairs >= 10, result
    assert result.noise is not None and result.noise >= 0
    assert tools.accept(result).accepted


# ============================================================================ the parent's timing memory
# Session 14 (the GPU tier on an 80 GB H100): the parent, which holds every timing's input sets and outputs and
# lends them to the children, ran out of device memory in the tier's last tests (76.80 GiB allocated during a
# single bench, which holds at most session.TIMING_BYTES, 16 GiB). Lent CUDA buffers were never freed (their IPC
# counters waited for children that never release them: shared.release_ipc_counter), a timing that failed in the
# parent left its session open, and the timings running at once in threads were bounded one by one, never together.


def _lent_buffer_names(monkeypatch) -> list[str]:
    """The shared-memory blocks the parent allocates for its children from now on (CPU buffers: /dev/shm)."""
    from hello_gpu.agent import session, shared
    names = []

    def recording(*arguments, **keywords):
        buffer = shared.allocate(*arguments, **keywords)
        names.append(buffer.handle["name"])
        return buffer
    monkeypatch.setattr(session, "allocate", recording)
    return names


def _children_of_this_process() -> list[int]:
    """Worker children of this process still running (their /proc entries: parent and command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"hello_gpu.agent.worker" in command:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("step", ["bench", "compare"])
def test_a_timing_that_fails_in_the_parent_gives_its_children_and_buffers_back(monkeypatch, step):
    """An error of the parent's own in the middle of a timing (session 14: torch.OutOfMemoryError while checking a
    timed output, or while growing the sets) ends the step as crashed, and takes its children, its lent buffers and
    its memory grant with it. Before, the session stayed open: its blocks stayed in /dev/shm (on a GPU, its
    device memory stayed allocated), its child waited until garbage collection closed its socket."""
    from hello_gpu.agent import session
    names = _lent_buffer_names(monkeypatch)
    batch, calls = session.TimedSide.batch, []

    def failing(self, inputs, check):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("out of memory, as torch would say it")
        return batch(self, inputs, check)
    monkeypatch.setattr(session.TimedSide, "batch", failing)
    if step == "bench":
        result = tools.bench(triton(), toy_task(), max_seconds=0.3)
    else:
        result = tools.compare(triton(), triton(), toy_task(), max_seconds=0.5)
    assert result.status == "crashed" and "out of memory, as torch would say it" in result.raw["detail"], result.raw
    assert len(calls) == 3 and names, (calls, names)
    assert [name for name in names if (Path("/dev/shm") / name.lstrip("/")).exists()] == []
    assert _children_of_this_process() == []
    assert session.TIMING_MEMORY.granted() == 0


def test_a_timing_holds_no_more_sets_than_the_device_has_room_for(monkeypatch):
    """The sets a timing makes fit TIMING_FREE_SHARE of the device's free memory, not TIMING_BYTES alone: with room
    for 2.5 sets of the toy bench (4096 float32: two inputs and an output, 48 KiB a set), it makes two where it
    would make INPUT_SETS; and its grant is given back when it ends."""
    from hello_gpu.agent import session
    per_set = 3 * 4096 * 4
    monkeypatch.setattr(session, "_device_free_bytes", lambda device: int(2.5 * per_set / session.TIMING_FREE_SHARE))
    result = tools.bench(triton(), toy_task(), max_seconds=0.3)
    assert result.ok, result.raw
    assert result.raw["input_sets"] == session.MIN_INPUT_SETS == 2 < session.INPUT_SETS, result.raw["input_sets"]
    assert session.TIMING_MEMORY.granted() == 0


def test_timings_running_at_once_share_the_device_memory(monkeypatch):
    """Two benches at once in one process (as the GPU tier runs them, in threads) on a device with room for 12 sets:
    together they are granted at most TIMING_FREE_SHARE of it (6 sets); the second waits for the first to end,
    where the minimum of two sets would not fit beside it, and both finish."""
    from concurrent.futures import ThreadPoolExecutor

    from hello_gpu.agent import session
    per_set = 3 * 4096 * 4
    device_bytes = 12 * per_set
    ledger = session.TIMING_MEMORY
    granted_at_once = []

    def free(device):                     # what the timings hold is no longer free, as on a device
        held = sum(grant.used for grant in ledger._grants)
        return device_bytes - held
    monkeypatch.setattr(session, "_device_free_bytes", free)
    reserve = ledger.reserve

    def recording(*arguments, **keywords):
        grant = reserve(*arguments, **keywords)
        granted_at_once.append(ledger.granted())
        return grant
    monkeypatch.setattr(ledger, "reserve", recording)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: tools.bench(triton(), toy_task(), max_seconds=0.3), range(2)))
    assert all(result.ok for result in results), [result.raw for result in results]
    assert len(granted_at_once) == 2 and max(granted_at_once) <= session.TIMING_FREE_SHARE * device_bytes, \
        (granted_at_once, device_bytes)
    assert ledger.granted() == 0


def test_the_memory_grant_waits_for_others_only_until_the_deadline(monkeypatch):
    """A timing whose minimum does not fit beside the others' grants waits for them, but no longer than its step's
    deadline: then it is granted its minimum (it may still fit: free memory is counted with a margin); a timing
    alone is granted its minimum whatever is free (a large problem on a small device fails as it did before)."""
    from hello_gpu.agent import session
    monkeypatch.setattr(session, "_device_free_bytes", lambda device: 100)
    ledger = session.TimingMemory()
    alone = ledger.reserve("cuda", wanted=400, minimum=200, deadline=time.perf_counter() + 60)
    assert alone.granted == 200
    began = time.perf_counter()
    late = ledger.reserve("cuda", wanted=400, minimum=200, deadline=time.perf_counter() + 0.3)
    assert late.granted == 200 and 0.25 <= time.perf_counter() - began < 5
    late.release()
    alone.release()
    assert ledger.granted() == 0
    monkeypatch.setattr(session, "_device_free_bytes", lambda device: 1000)
    roomy = ledger.reserve("cuda", wanted=400, minimum=200)
    assert roomy.granted == 400 and ledger.available("cuda") == 100
    roomy.release()


def test_a_lent_cuda_buffers_ipc_counter_is_set_to_zero():
    """torch counts a lent CUDA allocation in a shared-memory file (a 64-byte header, then an int64 slot per
    allocation) and keeps the allocation while its slot is above zero; the child never brings it down (it ends
    with os._exit or a kill). release_ipc_counter zeroes the slot, and that slot alone (a file of that layout
    here; the layout itself: the next test)."""
    import secrets

    from hello_gpu.agent import shared
    name = f"/hg_test_counter_{os.getpid()}_{secrets.token_hex(4)}"
    path = Path("/dev/shm") / name.lstrip("/")
    slots = [1, 1, 5, 2**64 - 1]                  # lent once; once; five times; released twice (wrapped around)
    header = bytes(range(64))
    path.write_bytes(header + b"".join(value.to_bytes(8, "little") for value in slots))
    try:
        for slot in (1, 3):
            assert shared.release_ipc_counter(name, slot)
        data = path.read_bytes()
        assert data[:64] == header
        assert [int.from_bytes(data[64 + 8 * i:72 + 8 * i], "little") for i in range(4)] == [1, 0, 5, 0]
    finally:
        path.unlink()
    assert not shared.release_ipc_counter(name, 0)        # the file is gone: nothing to release


def test_torchs_ipc_counter_layout_is_the_one_the_parent_writes():
    """What release_ipc_counter assumes of the installed torch, checked without a GPU: its shared-memory files are
    mapped with a 64-byte header before the data (a CPU storage shared by file name goes through the same
    RefcountedMapAllocator as the CUDA counters' file), and rebuild_cuda_tensor names its counter's arguments
    ref_counter_handle and ref_counter_offset (read by name, ipc_counter_of)."""
    import torch
    from torch.multiprocessing import reductions

    from hello_gpu.agent import shared
    storage = torch.arange(5, dtype=torch.int64).add_(7).untyped_storage()
    _, file, size = storage._share_filename_cpu_()
    data = (Path("/dev/shm") / file.decode().lstrip("/")).read_bytes()
    start = shared.IPC_COUNTER_HEADER_BYTES
    assert [int.from_bytes(data[start + 8 * i:start + 8 * i + 8], "little") for i in range(5)] == [7, 8, 9, 10, 11]
    import inspect
    parameters = list(inspect.signature(reductions.rebuild_cuda_tensor).parameters)
    arguments = [None] * len(parameters)
    arguments[parameters.index("ref_counter_handle")] = b"/torch_1_2_3"
    arguments[parameters.index("ref_counter_offset")] = 17
    assert shared.ipc_counter_of(reductions.rebuild_cuda_tensor, tuple(arguments)) == ("/torch_1_2_3", 17)


# ============================================================================================ accept


def comparison(speedup, low, high, noise=None, suspect=None) -> dict:
    return {"speedup": speedup, "ci95": [low, high], "noise": noise, "suspect": suspect}


@pytest.mark.parametrize("low, noise, accepted", [
    (1.021, None, True),          # default margin 2%
    (1.019, None, False),
    (1.021, 0.005, True),         # 3 x 0.5% = 1.5% < 2%: the default margin stands
    (1.05, 0.02, False),          # 3 x 2% = 6%: 1.05 is not enough
    (1.061, 0.02, True),
    (0.9, None, False),
])
def test_accept_rule_margin(low, noise, accepted):
    decision = accept.decide(comparison(low + 0.05, low, low + 0.1, noise))
    assert decision.accepted is accepted
    assert decision.margin == pytest.approx(max(0.02, 3 * (noise or 0)))


def test_suspect_is_never_accepted():
    decision = accept.decide(comparison(3.0, 2.9, 3.1, 0.001, suspect="5000 GB/s is 1.15x the copy bandwidth"))
    assert not decision.accepted and decision.reason.startswith("suspect")
    assert not accept.decide(comparison(3.0, 2.9, 3.1), suspect="above the roof").accepted


def test_incorrect_is_never_accepted():
    assert not accept.decide(comparison(3.0, 2.9, 3.1), correct=False).accepted


def test_no_interval_is_not_accepted():
    assert not accept.decide({"speedup": 2.0}).accepted
    assert not accept.decide(comparison(2.0, float("nan"), 2.1)).accepted


def test_decision_is_json():
    decision = accept.decide(comparison(1.5, 1.4, 1.6, 0.01))
    assert accept.Decision.from_dict(json.loads(json.dumps(decision.to_dict()))) == decision


# ============================================================================================ stop


@pytest.mark.parametrize("state, expected", [
    (stop.SearchState(rounds_done=5), "max rounds"),
    (stop.SearchState(rounds_done=1, elapsed_s=100), "time budget"),
    (stop.SearchState(rounds_done=3, rounds_since_accept=3), "patience"),
    (stop.SearchState(rounds_done=1, fraction_of_roofline=0.93), "target reached"),
    (stop.SearchState(rounds_done=1, policy_exhausted=True), "policy exhausted"),
    (stop.SearchState(rounds_done=1, elapsed_s=10, rounds_since_accept=2, fraction_of_roofline=0.5), None),
])
def test_stop_rules(state, expected):
    rules = stop.StopRules(max_rounds=5, time_budget_s=60, patience=3, target_fraction=0.9)
    reason = rules.reason(state)
    assert (reason is None) if expected is None else reason.startswith(expected)


def test_stop_rules_without_optional_limits():
    rules = stop.StopRules(max_rounds=2, time_budget_s=None, patience=None, target_fraction=None)
    assert rules.reason(stop.SearchState(rounds_done=1, elapsed_s=1e9, rounds_since_accept=99,
                                         fraction_of_roofline=5.0)) is None
    with pytest.raises(ValueError):
        stop.StopRules(patience=0)


def test_the_parent_never_imports_a_candidate():
    before = set(sys.modules)
    result = tools.compile(triton(TRITON_SOURCE.replace("BLOCK = 1024", "BLOCK = 1024\nimport json")), toy_task())
    assert result.ok
    assert not [name for name in set(sys.modules) - before if "agent_candidate" in name or name.startswith("_hello_gpu_ops")]
    from hello_gpu.agent.sandbox import child_environment
    environment = child_environment({"EXTRA": "1"})
    assert environment["EXTRA"] == "1" and str(SRC) in environment["PYTHONPATH"].split(os.pathsep)
    assert "EXTRA" not in os.environ


def test_store_file_is_sqlite(tmp_path):
    CandidateStore(tmp_path).close()
    connection = sqlite3.connect(tmp_path / "candidates.sqlite")
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"run", "candidates", "tool_results"} <= tables


# ============================================================================================ cheats

CHEATS = Path(__file__).parent / "agent_cheats"
CHEAT_TAGS = {"t90_": "library fallback", "t91_": "side stream or thread", "t92_": "cached result",
              "t93_": "partial write", "t94_": "writes into inputs", "t95_": "lower precision than declared",
              "t96_": "never launches", "t97_": "timer patching"}


def test_every_cheating_candidate_is_rejected_through_the_sandbox():
    """The deliberately cheating Triton rungs (tests/agent_cheats/, written for the anti-cheat checks) go
    through tools.check as the loop calls it: each is refused, the honest one passes."""
    from concurrent.futures import ThreadPoolExecutor
    paths = sorted(CHEATS.glob("t9*.py"))
    if not paths:
        pytest.skip("no cheating candidates under tests/agent_cheats/")
    task = Task("vector_add", "t01_tile_1024", "triton", dtypes=("float32",), check_shapes=(1, 31, 1000, (37, 29)),
                bench_shape=4096)
    with ThreadPoolExecutor(4) as pool:             # each check is its own child process
        results = dict(zip([p.name for p in paths],
                           pool.map(lambda p: tools.check(triton(p.read_text(encoding="utf-8")), task), paths)))
    for name, result in results.items():
        assert result.status == "ok", (name, result.raw.get("detail"))
        if "honest" in name:
            assert result.passed and not result.cheats, (name, result.reason)
            continue
        assert not result.passed and result.reason, name
        expected = next((tag for prefix, tag in CHEAT_TAGS.items() if name.startswith(prefix)), None)
        if expected is not None:                  # rejected under the cheat's own name, not only as incorrect
            assert any(reason.startswith(expected) for reason in result.cheats), (name, result.cheats)


def test_a_slower_candidate_is_called_slower():
    assert accept.decide(comparison(0.6, 0.57, 0.62)).reason.endswith("slower (the whole interval is below 1)")
    assert accept.decide(comparison(1.0, 0.98, 1.02)).reason.endswith("not faster beyond noise")


def test_triton_resources_are_read_after_one_call_on_one_argument_set(monkeypatch):
    # A Triton kernel compiles at its first call; the analyze step reads the JIT cache after calling the
    # candidate once, with one set of arguments (the H200 runs of 0640e65 and 21604b4 found none read).
    import torch
    from hello_gpu.agent import sandbox
    from hello_gpu.runtime import triton_jit
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("sync"))
    monkeypatch.setattr(triton_jit, "kernel_resources", lambda modules: [
        {"name": "add", "registers_per_thread": 26 if "launch" in calls else None, "spill_bytes": 0}])
    def candidate(*arguments):
        assert arguments == first_set                 # the tensors themselves, not a list of argument sets
        calls.append("launch")

    rung = type("Rung", (), {"route": "triton"})()
    first_set = (torch.ones(3), torch.ones(3))
    resources = sandbox._launched_resources(rung, "float32", candidate, first_set)
    assert calls == ["launch", "sync"]
    assert resources["registers_per_thread"] == 26 and resources["spill_bytes"] == 0


def test_a_pool_whose_session_was_never_closed_ends_only_in_release(monkeypatch):
    """A session dropped without close() leaves its memory pool to the garbage collector, which may run inside another
    thread's allocation into its own pool, where torch asserts that no pool ends (the H100 abort, session 16). So the
    pool is kept in shared._ORPHANED_POOLS and ends in release(), under the pool lock; a pool ended by end_pool is
    not kept."""
    import gc
    import types

    from hello_gpu.agent import shared

    ended = []

    class Pool:                                           # stands in for torch.cuda.MemPool: records its end
        def __del__(self):
            ended.append(self)

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(MemPool=Pool, use_mem_pool=None, is_available=lambda: False))
    monkeypatch.setattr(shared, "_torch", lambda: fake)
    monkeypatch.setattr(shared, "_ORPHANED_POOLS", [])

    class Holder:
        pool = None

    dropped = Holder()
    shared.new_pool(dropped)
    assert isinstance(dropped.pool, Pool)
    del dropped
    gc.collect()
    assert not ended and len(shared._ORPHANED_POOLS) == 1, "the dropped session's pool ended outside release()"
    with shared._POOL_LOCK:
        shared._ORPHANED_POOLS.clear()                    # what release() does on a GPU, under the lock
    assert len(ended) == 1

    closed = Holder()
    shared.new_pool(closed)
    shared.end_pool(closed)
    gc.collect()
    assert closed.pool is None and len(ended) == 2 and not shared._ORPHANED_POOLS
    del closed
    gc.collect()
    assert not shared._ORPHANED_POOLS, "a pool ended by end_pool came back as an orphan"
