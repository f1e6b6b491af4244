"""The parent's side of a verdict: check, bench and compare decided where the candidate never runs.

The candidate runs in a child process (:mod:`hello_gpu.agent.worker`); this module, in the agent's own
process, drives it and decides (issue 17, parts 1, 2 and 6):

- **Inputs and outputs are the parent's.** Every tensor a call touches is a guarded shared buffer the
  parent allocated (:mod:`hello_gpu.agent.shared`); the inputs are drawn here from seeds the child never
  sees (a fresh seed per case, per timed batch); the float64 reference is computed here, from the
  parent's own copy of the inputs; the comparison with the spec's tolerance is made here. The child only
  writes outputs, and answers in JSON: nothing it sends is executed or unpickled.
- **The checker is the ladder's own** (:func:`hello_gpu.ops.checking.check_rung`, and the run-time
  anti-cheat checks of :mod:`hello_gpu.agent.anticheat`), given a :class:`RemoteCandidate` in place of a
  built rung: each call crosses into the child, and everything around it stays here.
- **Every dtype the task declares** is checked; a candidate whose header declares fewer fails
  (:data:`COVERAGE`), it is not skipped.
- **What is timed is checked.** The timed calls run at the benchmark shape on fresh inputs per batch,
  each call of a batch on its own input set and into its own poisoned output; after each batch the
  parent picks outputs at random (the child cannot know which) and compares them with the reference.
  Before timing, every dtype is checked at the benchmark shape too, and repeated for determinism where
  the task or the rung declares it. Where it is declared, some timed batches (the parent's choice, at
  random) also give two of their calls the same values in different buffers: the two outputs must be
  the same bits (:data:`NONDETERMINISTIC`), so a kernel deterministic only where it is checked is seen
  where it is timed.
- **The clock is checked from outside.** The child's device-event (or wall) times are claims. A warm
  batch of back-to-back calls is timed by the child and, around the whole request, by the parent's wall
  clock: the claimed span must fit inside the parent's interval and fill most of it (a child whose
  clock was slowed or whose events were forged is caught, :data:`TIMING`). So must the counted batches',
  each less what a batch costs outside its span (the batch floor: measured by probes, bounded), one by one,
  in the median and in total (:func:`judge_batches`); each counted batch is made long enough (BATCH_SPAN_S,
  more input sets where calls are short) that a host hiccup outside it cannot pass for a slowed clock.
- **Work left running is measured.** After every counted timed call the child records one event for its whole
  CUDA context (worker.ContextDrain) and says how long the call's work, on any stream, ran past the call's end
  event: a call that leaves work beside the next call's L2 flush is named (:func:`left_running_problems`),
  whatever launched that work.
- **Baseline and candidate are timed in separate processes**, alternating batch by batch (ABBA): a
  candidate cannot slow the baseline down by sharing its process.
- **Guard bytes** on both sides of every buffer are compared after every call (:data:`GUARD`).
"""

from __future__ import annotations

import json
import math
import os
import pickle
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

from ..bench import rates
from ..bench.roof import current_roof
from ..bench.records import timing_from_summary
from ..bench.stats import paired_ratio, summarize, verdict
from ..ops.checking import (
    CHECK_CHUNK_BYTES,
    INTERPRETER_MAX_ELEMENTS,
    check_rung,
    differing_elements,
    expected_shape,
    fresh_seeds,
    is_option,
    is_tensor,
    output_failure,
    poison_value,
    tensor_bits,
)
from ..ops.rung import Rung
from ..ops.shapes import numel, shape_label
from .anticheat import (CONCURRENCY, COVERAGE, GUARD, LIBRARY, NO_LAUNCH, NONDETERMINISTIC, TAMPER, TIMED_OUTPUT,
                        TIMING, _second_poison, input_signature)
from .shared import allocate, end_pool, guards_changed, new_pool

INPUT_SETS = 4                # input sets (and outputs) per timed batch: each call of a batch reads its own
MIN_INPUT_SETS = 2            # ... fewer where the problem is large: two still alternate, and every batch
TIMING_BYTES = 16 * 2**30     # gets fresh values; the sets and both sides' outputs stay within this (or 2 sets)
# ... and within what the device has: every timing of this process together (the verdicts of several steps run in
# threads of one process, each timing with its own sets) holds at most this share of the device memory free when
# its sets are made, counting what those timings already hold as free (TimingMemory). The other half is for the
# children (~0.94 GiB each on the H100 before a candidate allocates anything: session 14's OOM messages), the
# parent's checks of timed outputs (fresh inputs and float64 references, ~1 GiB at 2^24 float32) and the
# allocator's rounding. A timing alone on an 80 GB H100 (~77 GiB free) gets ~38 GiB: KernelBench's 6.4 GB softmax
# (two sets, two sides' outputs: 35.8 GiB) still fits; three 2^24 vector-add benches at once (session 14: up to
# 64 sets of 192 MiB, 12 GiB each) share it.
TIMING_FREE_SHARE = 0.5
RUNTIME_CHECK_MAX_BYTES = 2**31   # the anti-cheat probes (several input sets and float64 references held at
                              # once) run at check shapes whose inputs and output fit this; larger shapes are
                              # checked at the benchmark shape instead, with fresh sets and chunked references
CHECKED_SETS = 3              # fresh input sets checked at the benchmark shape, per dtype, before timing
HISTORY_CALLS = 24            # earlier calls' inputs kept per shape to name a cached answer (small shapes only)
HISTORY_MAX_ELEMENTS = 2**13
PROFILED_CALLS = 3            # calls profiled per dtype for the kernel evidence
DETERMINISM_REPEATS = 3       # calls on the same inputs that must agree bit for bit, where declared
REPEATED_SET_CHANCE = 0.5     # where determinism is declared, the chance that a timed batch gives two of its calls
                              # the same values (in different buffers): their outputs must agree bit for bit
CONSISTENCY_SECONDS = 0.02    # the warm batch the parent's clock checks lasts about this long: 20 ms dwarfs
                              # the ~0.1-1 ms a request's round trip costs
CONSISTENCY_FILL = 0.75       # the claimed span must cover >= 75% of the parent's interval (less its round trip)
CONSISTENCY_SLACK_S = 5e-4    # and may exceed it by at most this: timer resolution, nothing more
# The counted batches, each checked against the parent's clock (TimedSide.consistency, judge_batches). On the H200
# (session 8) four cold calls at 2^22-2^24 spanned ~0.3 ms, and what a batch cost outside its span was ~0.1 ms in
# most batches but 0.4-0.7 ms in a quarter of them (process wake-ups on a busy 16-core host, three steps running at
# once): a rule on each batch could not tell those from a clock at 0.4x. So a counted batch is made long enough
# that a host hiccup is small beside it: as many input sets (each call its own set and output: a repeated set
# would let a cached answer through) as make its claimed span BATCH_SPAN_S, sized from the batches themselves.
BATCH_SPAN_S = 4e-3           # 4 ms: a 1 ms hiccup leaves an honest batch's clock at >= 0.8x; a cold call spans
                              # >= ~70 us on the H200 (the L2 flush: 256 MiB zeroed), so MAX_INPUT_SETS reach it
MAX_INPUT_SETS = 64           # ... and at most this many sets (memory: TIMING_BYTES bounds them first for large
                              # problems, where calls are long: 16 GiB of sets stream in ~4 ms at 4 TB/s)
SIZING_BATCHES = 3            # a side's last batches whose median span per call sizes the sets; they are grown
SHORT_BATCH = 0.75            # when those batches span less than this share of BATCH_SPAN_S, the counted batches
MAX_RESIZES = 3               # so far dropped, at most this many times (each grows straight to what is needed)
MIN_COUNTED_BATCHES = 8       # a bench counts at least this many batches (64 calls can meet its error target in one)
BENCH_TIME_CAP_FACTOR = 4     # ... unless that takes more than this many times its max_seconds
# Each counted batch's "missing" time: the parent's interval, less the batch floor (below), less the span claimed.
# Honest: a host hiccup (>= 0). A clock at f x on a batch that truly spans T: (1 - f) T more.
BATCH_JITTER_S = 1e-3         # a batch is slow when its missing time is more than a hiccup this long and more than
                              # CONSISTENCY_FILL allows ((1 - 0.75) / 0.75 of its span: 1.3 ms at 4 ms): a clock at
                              # <= 0.75x is caught in any batch of >= 4 ms, an honest one passes a 1.3 ms hiccup
SLOW_BATCH_SHARE = 0.25       # slow batches: this share of the counted ones (and MIN_SLOW_BATCHES) is a clock lying
MIN_SLOW_BATCHES = 3          # in some batches (a lie in fewer moves the pooled median by < 0.45 sigma: to the
                              # (0.5 - 0.25) / 0.75 = 1/3 quantile of the honest times)
MEDIAN_FILL = 0.9             # the median batch: missing time within MEDIAN_JITTER_S plus (1 - 0.9) / 0.9 of the
MEDIAN_JITTER_S = 2.5e-4      # median span (0.7 ms at 4 ms): a clock at <= 0.85x in most batches is caught, and
                              # hiccups in fewer than half of them do not move the median at all
BATCH_SLACK_S = 1e-4          # per counted batch, what the child's honest span may fall short of the parent's
                              # interval in the total (CONSISTENCY_FILL of it all) besides the batch floor below
# The batch floor: what a counted batch costs outside the span the child claims, subtracted from the parent's
# interval before the two are compared. Not the round trip alone: each "time" request also switches the ATen
# watch on and off and writes a larger answer, and the machine wakes the child after it idled and the parent after
# it waited as long as a batch (on the CPU box, measured with perf_counter: a ping 57 us; a request without calls
# 110 us; a batch of 1-8 interpreted calls 350-450 us beyond its span, whatever the count; the parent alone waking
# 27 us after a 0.1 ms wait, 150-220 us after 10-30 ms; on the H200, 0.52 ms per four-call batch beyond a 0.22 ms
# ping made honest kernels' clocks read 0.35x), and each call's times are read and sent after the span (the H200's
# warm batch: ~5 us a call). The parent measures it with probes: "time" requests without calls that go through
# everything a batch does but the calls, sent after the child idled as long as before a counted batch, holding
# their span as long as a batch lasted and recording as many empty marks as a batch has calls (CPU box: 0.42-0.54
# ms, against 0.52-0.63 ms for the batches). The fastest probe counts.
FLOOR_PROBES = 5              # probes per timed side, after its counted batches
PROBE_MAX_S = 0.01            # each idles before it and holds its span at most this long: by 10 ms the wake-up
                              # cost has reached its full size (0.2 ms above), and five probes cost <= 0.1 s
BATCH_FLOOR_MAX_S = 1e-3      # the most the probes may add to the round trip, plus MARK_FLOOR_MAX_S a mark (~2x the
MARK_FLOOR_MAX_S = 1e-5       # 0.4-0.5 ms and ~5 us a call seen on the CPU box and the H200). The child can tell a
                              # probe from a batch (no calls), so a child that slows only its probes makes the
                              # parent subtract at most 1 ms + 10 us a call more than a ping (1.64 ms at 64 calls):
                              # in a 4.5 ms batch, a clock at >= ~0.5x would then pass the slow-batch and median
                              # rules. Slowing a probe needs code running outside the candidate's calls (a thread, a
                              # signal handler, a patched harness function: tamper evidence), so this is a second
                              # line only; with four-call batches of 0.3 ms (before sizing) it was no line at all
# Work a timed call left running past its end event, on any stream of the context (worker.ContextDrain measures it
# after every counted call): it runs beside the next call's L2 flush, in no call's time (issue 17: a side stream never
# joined, a CUDA graph replayed there, a launch through our runtime or cuda-python on a stream of its own, a spin left
# to hog the device). Honest calls leave ~0: the drained end is queued before the reference end, so host time between
# them only lowers a reading, and what a context event takes beyond an ordinary one is the floor below.
LEFT_RUNNING_MIN_S = 2e-6     # a call left work running when it ran this long past the end event and this share
LEFT_RUNNING_SHARE = 0.02     # of the call's own time (the acceptance margin's 2%). Events resolve ~0.5 us; with the
                              # drain's streams behind the call window (worker.ContextDrain.begin) an honest add read
                              # at most 1.3 us, none of 512 calls over 2 us, then 1 of 256 over it (3.2 us) in a second
                              # run (benchmarks/window_drain.py, the H100, session 17); at 5 us (session 16) a cheat
                              # left ~4.7 us a call past its end unnamed
LEFT_RUNNING_UNHELD_MIN_S = 5e-6   # ... where no window could be held (a driver without cuCtxWaitEvent): the drain's
                              # streams cannot wait for its event, and honest calls read 2.8-3.1 us in 70-73% of
                              # them, over 5 us in 0-1.6% (window_drain.py's A, the H100, session 17)
LEFT_RUNNING_CALLS = 0.25     # ... in this share of the counted calls (at least MIN_SLOW_BATCHES): work hidden in
                              # fewer moves the per-batch medians by a fraction of their spread, as with the clock
LEFT_RUNNING_FLOOR_MAX_S = 2e-5   # what the measurement itself reads with nothing left running (the probes' marks,
                              # which go through the same steps after an empty pair of events, each behind a spin so
                              # that the device is busy as after an honest call) is subtracted, up to
                              # this: a probe's reading, were it ever inflated, excuses no more than 20 us a call
IDLE_CPU_S = 0.05             # CPU a side's process may use while the other side is timed (an idle child
IDLE_CPU_FRACTION = 0.2       # blocked on its socket uses none), or this fraction of the other side's time


class CandidateFailed(RuntimeError):
    """The candidate raised in the child; the message is what it raised."""


class WorkerEnded(BaseException):
    """The child process ended or ran out of time; ``status`` is "crashed" or "timeout".

    A BaseException, like KeyboardInterrupt: the checkers catch ``Exception`` from a call as the
    candidate's failure, and a dead child must end the step instead."""

    def __init__(self, status: str, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


def _torch():
    import torch
    return torch


# ================================================================================== one child process


class WorkerSession:
    """One candidate in one child process: start, requests with a deadline, buffers, the end."""

    def __init__(self, payload_task: dict, candidate: dict, deadline: float, environment: dict | None = None,
                 label: str = "candidate", limit_s: float | None = None):
        from .sandbox import child_environment
        self.deadline, self.label = deadline, label
        self.limit_s = limit_s                        # the step's time limit, for the message when it is reached
        parent_end, child_end = socket.socketpair()
        from multiprocessing.connection import Connection
        self.connection = Connection(parent_end.detach())
        # The evidence channel: the child's watch writes each new piece of tamper evidence here the moment
        # it sees it (never blocking: a full pipe drops lines, and any line at all rejects the candidate).
        self.evidence_fd, evidence_write = os.pipe()
        os.set_blocking(self.evidence_fd, False)
        os.set_blocking(evidence_write, False)
        self.evidence_child_fd = evidence_write
        self.evidence_lines: list[str] = []
        self._evidence_tail = b""
        self.evidence_lost: list[str] = []            # answers whose count of evidence lines exceeded what arrived
        self.channel_child_fd = child_end.fileno()
        self.channel_inode = os.fstat(child_end.fileno()).st_ino
        self.stdout = tempfile.TemporaryFile()
        self.stderr = tempfile.TemporaryFile()
        self.folder = tempfile.TemporaryDirectory(prefix="hello-gpu-worker-")
        self.process = subprocess.Popen([sys.executable, "-m", "hello_gpu.agent.worker", str(child_end.fileno()),
                                         str(evidence_write)],
                                        pass_fds=(child_end.fileno(), evidence_write), stdin=subprocess.DEVNULL,
                                        stdout=self.stdout, stderr=self.stderr, env=child_environment(environment),
                                        cwd=self.folder.name, start_new_session=True)
        child_end.close()
        os.close(evidence_write)
        self.idle_cpu_s = 0.0                         # CPU the child used while the other side was being timed
        self.idle_wall_s = 0.0                        # ... and how long that was
        self.buffers: dict[str, object] = {}
        self.pool = None                              # this session's CUDA memory pool, made with its first buffer
        self.counters: list = []
        self.guard_reasons: list[str] = []
        # Set at the first write outside the lent buffers: the child is stopped there and never called again. The
        # write may have gone past the guards into the child's own heap (t88 on the CPU overran a tensor it
        # allocated itself): a later call then aborted in realloc() on one machine and hung for the step's whole
        # 600 s on another, so the verdict must not wait for what a corrupted process does next.
        self.untrusted: str | None = None
        self.loaded: dict = {}
        self.answered_at: float | None = None         # the parent's clock when the child's last answer arrived
        self.finished: dict | None = None
        self._load_request = {"task": payload_task, "candidate": candidate}

    def load(self) -> dict:
        """Have the child import and build the candidate (its tamper watch armed first)."""
        self.loaded = self.request("load", **self._load_request)
        return self.loaded

    # ------------------------------------------------------------------ requests
    def request(self, operation: str, **fields_) -> dict:
        """Send one request; the child's JSON answer. Raises :class:`CandidateFailed` when the candidate
        raised there, :class:`WorkerEnded` when the child died or the deadline passed."""
        if self.untrusted:
            raise CandidateFailed(f"not called: the {self.label} child was stopped after {self.untrusted}, since that "
                                  f"write may have corrupted its own memory")
        nonce = random.SystemRandom().getrandbits(62)
        try:
            self.connection.send_bytes(pickle.dumps({"op": operation, "nonce": nonce, **fields_}))
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise self._ended() from None
        remaining = self.deadline - time.perf_counter()
        if remaining <= 0 or not self.connection.poll(remaining):
            self.kill()
            limit = f"{self.limit_s:g} s, the step's time limit" if self.limit_s else "the step's time limit"
            raise WorkerEnded("timeout", f"{self.label}: {operation} did not finish within {limit}; "
                                         f"the child process group was killed")
        try:
            answer = json.loads(self.connection.recv_bytes().decode("utf-8"))
        except (EOFError, ConnectionResetError, OSError):
            raise self._ended() from None
        except ValueError as error:
            raise CandidateFailed(f"the {self.label} child answered what is not JSON ({error})") from None
        finally:
            self.answered_at = time.perf_counter()
        if not isinstance(answer, dict):
            raise CandidateFailed(f"the {self.label} child answered a {type(answer).__name__}, not an object")
        self.drain()
        self._count_evidence(operation, answer.get("evidence_written"))
        if answer.get("nonce") != nonce:
            # Something besides the worker wrote on the channel (a forged answer): the stream cannot be trusted.
            self.kill()
            raise WorkerEnded("crashed", f"{TAMPER}: the {self.label} child's answer to {operation} does not echo the "
                                         f"request's nonce: something besides the worker wrote on its channel")
        if not answer.get("ok"):
            raise CandidateFailed(str(answer.get("error", "failed")))
        return answer

    def _ended(self) -> WorkerEnded:
        from .sandbox import describe_exit
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.wait()
        detail = f"the {self.label} child {describe_exit(code)}"
        lines = [line for line in self.tail("stderr").strip().splitlines() if line.strip()]
        if lines:
            detail += f"; last stderr line: {lines[-1][:300]}"
        return WorkerEnded("crashed", detail)

    def _count_evidence(self, operation: str, written) -> None:
        """Every line the child's watch wrote must have arrived: one redirected (``os.dup2`` over the pipe),
        drained (the pipe reopened for reading through /proc) or dropped is itself evidence."""
        if self.evidence_lost:
            return                                    # the first shortfall says it; later ones only repeat it
        if not isinstance(written, int) or isinstance(written, bool):
            problem = (f"{TAMPER}: the {self.label} child's answer to {operation} does not say how many evidence "
                       f"lines its watch wrote (its watch no longer answers)")
        elif written > len(self.evidence_lines):
            problem = (f"{TAMPER}: the {self.label} child's evidence channel lost lines: its watch had written "
                       f"{written} by the answer to {operation}, {len(self.evidence_lines)} arrived (the pipe was "
                       f"redirected, drained or closed)")
        else:
            return
        self.evidence_lost.append(problem)

    def drain(self) -> None:
        """Read what the child's watch wrote on the evidence channel so far."""
        while True:
            try:
                chunk = os.read(self.evidence_fd, 65536)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            self._evidence_tail += chunk
            *lines, self._evidence_tail = self._evidence_tail.split(b"\n")
            self.evidence_lines += [line.decode("utf-8", "replace") for line in lines if line]

    def channel_problem(self) -> str | None:
        """None while the child's evidence descriptor is still the pipe the parent made, and its only copy
        (read from /proc, outside the child's reach); else what changed."""
        folder = Path(f"/proc/{self.process.pid}/fd")
        if not folder.is_dir() or self.process.poll() is not None:
            return None
        pipe = f"pipe:[{os.fstat(self.evidence_fd).st_ino}]"
        try:
            links = {entry.name: os.readlink(entry) for entry in folder.iterdir()}
        except OSError:
            return None
        problems = []
        for what, link, descriptor in (("evidence channel", pipe, self.evidence_child_fd),
                                       ("socket to the parent", f"socket:[{self.channel_inode}]", self.channel_child_fd)):
            holders = sorted(name for name, target in links.items() if target == link)
            if holders != [str(descriptor)]:
                problems.append(f"{TAMPER}: the {self.label} child's {what} (descriptor {descriptor}) was replaced or "
                                f"copied (descriptors holding it now: {', '.join(holders) or 'none'})")
        return "; ".join(problems) or None

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds the child process has used (all its threads), from /proc; None elsewhere."""
        try:
            fields_ = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")

    def kill(self) -> None:
        from .sandbox import kill_group
        if self.process.poll() is None:
            kill_group(self.process)
            self.process.wait()

    def tail(self, stream: str, characters: int = 4000) -> str:
        handle = self.stdout if stream == "stdout" else self.stderr
        handle.flush()
        handle.seek(0)
        return handle.read().decode("utf-8", "replace")[-characters:]

    def finish(self) -> dict:
        """The tamper evidence: the child's answer merged with what its watch wrote on the evidence channel
        (which the candidate cannot take back); the child exits after answering."""
        if self.untrusted:                            # stopped: what its watch wrote before is all there is
            return self.evidence(self.finished)
        if self.finished is None:
            channel = self.channel_problem()
            self.finished = dict(self.request("finish"))
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
            self.finished["channel"] = channel
        return self.evidence(self.finished)

    def evidence(self, finished: dict | None = None) -> dict:
        """``finished`` (or nothing, for a child that died) with the evidence channel's lines merged in."""
        self.drain()
        lines = self.evidence_lines + ([self._evidence_tail.decode("utf-8", "replace")] if self._evidence_tail else [])
        merged = {"events": {kind: list(seen) for kind, seen in ((finished or {}).get("events") or {}).items()
                             if kind not in ("replaced", "ATen op")},          # those two are read from the lines below
                  "patched": list((finished or {}).get("patched") or []),
                  "threads_running": (finished or {}).get("threads_running") or 0,
                  "channel": (finished or {}).get("channel"), "library": [], "lost": list(self.evidence_lost)}
        for line in lines:
            kind, tab, text = line.partition("\t")
            if not tab:                               # not the watch's "kind<TAB>text": someone else wrote it
                kind, text = "evidence channel written by another hand", line[:200]
            if kind == "replaced":
                merged["patched"] += [text] if text not in merged["patched"] else []
            elif kind == "ATen op":
                merged["library"] += [text] if text not in merged["library"] else []
            else:
                seen = merged["events"].setdefault(kind, [])
                seen += [text] if text not in seen else []
        return merged

    def close(self) -> None:
        self.kill()
        for buffer in self.buffers.values():
            buffer.close()
        self.buffers.clear()
        self.connection.close()
        os.close(self.evidence_fd)
        self.folder.cleanup()
        if self.pool is not None:
            end_pool(self)

    # ------------------------------------------------------------------ buffers
    def buffer(self, name: str, shape, dtype, device: str):
        """The guarded shared buffer ``name`` of this shape and dtype, allocated and registered on first use."""
        shape = tuple(shape)
        key = f"{name}:{'x'.join(map(str, shape))}:{str(dtype).removeprefix('torch.')}"
        if key not in self.buffers:
            if device.startswith("cuda") and self.pool is None:
                new_pool(self)
            self.buffers[key] = allocate(shape, dtype, device, self.pool)
            self.request("register", buffers={key: self.buffers[key].handle})
        return key, self.buffers[key]

    def adopt(self, key: str, buffer) -> None:
        """Lend another session's buffer (the same inputs for baseline and candidate)."""
        if key not in self.buffers:
            self.buffers[key] = buffer
            self.request("register", buffers={key: buffer.handle})

    def check_guards(self, keys) -> None:
        """Raise (and record) when any guard of the buffers ``keys`` changed."""
        broken = []
        keys = list(keys)
        for key, problem in zip(keys, guards_changed([self.buffers[key] for key in keys])):
            if problem:
                broken.append(f"{key.split(':')[0]}: {problem}")
                self.buffers[key].rearm()
        if broken:
            reason = f"{GUARD}: the call wrote outside its buffers ({'; '.join(broken)})"
            if reason not in self.guard_reasons:
                self.guard_reasons.append(reason)
            self.untrusted = reason
            self.kill()
            raise CandidateFailed(reason)

    @contextmanager
    def launch_counter(self):
        """Counts the candidate's own Triton launches over the calls made inside (anticheat's protocol)."""
        counter = SimpleNamespace(count=0)
        self.counters.append(counter)
        try:
            yield counter
        finally:
            self.counters.remove(counter)


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        _torch().cuda.synchronize()


def lend(session: WorkerSession, inputs, prefix: str, device: str, owners=()) -> list:
    """The call's arguments as the child receives them, in order: a tensor is copied into the guarded shared
    buffer ``{prefix}{position}`` and travels as that buffer's key (a str); a plain option (a bool, an int,
    a float: the spec's, e.g. attention's ``causal``) travels as its value, ``{"option": value}``, which the
    child passes on as it is. Anything else is refused by position. ``owners``: other sessions lent the same
    buffers (a timing's baseline and candidate read one set of inputs)."""
    arguments = []
    for position, value in enumerate(inputs):
        if is_tensor(value):
            key, buffer = session.buffer(f"{prefix}{position}", value.shape, value.dtype, device)
            buffer.tensor.copy_(value)
            for other in owners:
                other.adopt(key, buffer)
            arguments.append(key)
        elif is_option(value):
            arguments.append({"option": value})
        else:
            raise TypeError(f"input {position} is a {type(value).__name__}: only tensors and plain options "
                            f"(a bool, an int, a float) cross to the child")
    return arguments


def buffer_keys(arguments) -> list[str]:
    """The shared buffers among a call's arguments (what lend made of its tensors)."""
    return [argument for argument in arguments if isinstance(argument, str)]


class RemoteCandidate:
    """What :func:`~hello_gpu.ops.checking.check_rung` and the anti-cheat checks call instead of a built
    rung: ``remote(*inputs, out=...)`` copies the parent's inputs (and poisoned output) into the guarded
    shared buffers, has the child call the candidate on them, and copies the output back. An input the
    call changed is copied back too, so the checker sees the write it made."""

    def __init__(self, session: WorkerSession, rung, device: str):
        self.session, self.rung, self.device = session, rung, device
        self.accepts_out = bool(session.loaded["accepts_out"])
        self.interpreted = bool(session.loaded["interpreted"])
        self.function = None
        self.calls = 0
        self.recent: dict[tuple, list[tuple]] = {}     # per input shapes: the parent's copies of the last calls' inputs

    def history(self) -> list[tuple]:
        """Inputs of earlier calls (small shapes only), newest first: a cache keyed on the lent buffers'
        addresses (one set of buffers per shape) returns one of their answers, which check_fresh_inputs
        then names as cached."""
        return [inputs for kept in self.recent.values() for inputs in reversed(kept)]

    def __call__(self, *inputs, out=None):
        torch = _torch()
        session, device = self.session, self.device
        arguments = lend(session, inputs, "input", device)
        names = buffer_keys(arguments)
        out_key = None
        if out is not None:
            out_key, out_buffer = session.buffer("output", out.shape, out.dtype, device)
            out_buffer.tensor.copy_(out)
        _synchronize(device)
        answer = session.request("call", inputs=arguments, out=out_key)
        self.calls += 1
        tensors = [value for value in inputs if is_tensor(value)]
        if sum(tensor.numel() for tensor in tensors) <= HISTORY_MAX_ELEMENTS:
            kept = self.recent.setdefault(input_signature(inputs), [])
            kept[:] = [*kept[-(HISTORY_CALLS - 1):], tuple(value.clone() if is_tensor(value) else value
                                                           for value in inputs)]
        for counter in session.counters:
            counter.count += int(answer.get("launches") or 0)
        session.check_guards(names + ([out_key] if out_key else []))
        for tensor, key in zip(tensors, names):
            shared = session.buffers[key].tensor
            if not torch.equal(tensor_bits(shared), tensor_bits(tensor)):
                tensor.copy_(shared)                 # the write the call made, where the checker looks for it
        if out is not None and answer.get("returned") == "out":
            out.copy_(session.buffers[out_key].tensor)
            return out
        if "shape" not in answer:
            return None
        dtype = getattr(torch, answer["dtype"])
        key, buffer = session.buffer("result", answer["shape"], dtype, device)
        session.request("fetch", into=key)
        session.check_guards([key])
        return buffer.tensor.clone()


def _view_of(rung: Rung, skip: str | None) -> Rung:
    """The parent's view of the candidate's rung (its header, never its code): its skip reason is the
    child's, where the code would run (the Triton interpreter is switched on there, not here)."""
    class _Remote(Rung):
        def skip_reason(self) -> str | None:
            return skip
    return _Remote(**{f.name: getattr(rung, f.name) for f in fields(Rung)})


# ================================================================================== shared helpers


# One at a time: CPython 3.11's parser is not safe to run from several threads at once ("AST constructor
# recursion depth mismatch"), and the registry parses every rung's header (tools.check runs in threads).
_REGISTRY_LOCK = threading.Lock()


def _materialize(task, candidate: dict, folder: Path):
    from .sandbox import materialize
    with _REGISTRY_LOCK:
        op, names = materialize(task, {"candidate": candidate}, folder)
    return op, op.rung(names["candidate"])


def _device(session: WorkerSession) -> str:
    return session.loaded["device"]


def _fresh_inputs(spec, shape, dtype: str, device: str, seed: int) -> tuple:
    return tuple(spec.make_inputs(shape, dtype, seed=seed, distribution="normal", device=device))


def _output_failure(spec, inputs, output, dtype: str) -> str | None:
    """The checker's comparison (ops.checking.output_failure: chunked where the spec's output is large)."""
    return output_failure(spec, inputs, output, dtype)


def _runtime_check_shapes(spec, dtypes, shapes, device: str) -> tuple[list, str | None]:
    """The check shapes the anti-cheat probes run at (inputs and output within RUNTIME_CHECK_MAX_BYTES),
    and a note naming those left to the benchmark-shape check, or None."""
    kept, dropped = [], []
    for shape in shapes:
        work = spec.work(shape, dtypes[0])          # from the shape alone: inputs read once, output written once
        size = int(work.bytes)
        (kept if size <= RUNTIME_CHECK_MAX_BYTES else dropped).append((shape, size))
    if not dropped:
        return [shape for shape, _ in kept], None
    note = (", ".join(f"{shape_label(shape)} ({size / 2**30:.1f} GiB)" for shape, size in dropped)
            + f": over the probes' {RUNTIME_CHECK_MAX_BYTES / 2**30:g} GiB (they hold several input sets and float64 "
              f"references at once); checked at the benchmark shape with fresh sets and chunked references instead")
    return [shape for shape, _ in kept], note


def _interpreter_too_big(session: WorkerSession, shape) -> bool:
    return bool(session.loaded["interpreted"]) and numel(shape) > INTERPRETER_MAX_ELEMENTS


def _expected_shape(spec, shape, dtype: str, device: str) -> tuple:
    """The output's shape: the reference's on tiny inputs would not do (a shape of its own), so one real
    set is made once at ``shape``; the caller keeps it as the first checked set."""
    inputs = _fresh_inputs(spec, shape, dtype, device, fresh_seeds(1)[0])
    return expected_shape(spec, inputs), inputs


def _declares_determinism(spec, rung) -> bool:
    """The rung's header says "deterministic: yes", or the spec (or the task, through it) requires it."""
    return bool(rung.deterministic or getattr(spec, "DETERMINISTIC_REQUIRED", False))


def _footprint(inputs, output_shape) -> int:
    """Bytes of one input set and its output (in the first input's dtype)."""
    tensors = [value for value in inputs if hasattr(value, "element_size")]
    return (sum(tensor.numel() * tensor.element_size() for tensor in tensors)
            + numel(output_shape) * (tensors[0].element_size() if tensors else 8))


# ================================================================================== check


def _tamper_reasons(finished: dict | None, who: str = "the candidate") -> tuple[list[str], list[str]]:
    """(reasons, patched names) from the child's finish answer."""
    if not finished:
        return [], []
    reasons = []
    for kind, seen in sorted((finished.get("events") or {}).items()):
        if seen:
            reasons.append(f"{TAMPER}: {kind} in {who}'s process ({'; '.join(map(str, seen[:4]))}"
                           f"{' ...' if len(seen) > 4 else ''})")
    library = list(finished.get("library") or [])
    if library:
        reasons.append(f"{LIBRARY}: {who}'s calls ran ATen ops that compute ({'; '.join(library[:4])}"
                       f"{' ...' if len(library) > 4 else ''}): the work must be done by its own kernel")
    if finished.get("channel"):
        reasons.append(str(finished["channel"]))
    reasons += [str(problem) for problem in finished.get("lost") or ()]
    patched = list(finished.get("patched") or [])
    if patched:
        reasons.append(f"{TAMPER}: {who}'s process replaced {len(patched)} function(s) the verdict leans on "
                       f"({', '.join(patched[:6])}{' ...' if len(patched) > 6 else ''})")
    return reasons, patched


def _idle_work(session: WorkerSession, who: str) -> list[str]:
    """A side that worked while the other was timed (a thread or process burning the shared CPU, which slows
    the other side): its CPU time in those intervals, read from /proc, must stay near zero."""
    allowed = max(IDLE_CPU_S, IDLE_CPU_FRACTION * session.idle_wall_s)
    if session.idle_cpu_s <= allowed:
        return []
    return [f"{TAMPER}: {who}'s process used {session.idle_cpu_s:.3g} s of CPU during the {session.idle_wall_s:.3g} s "
            f"the other side was timed (an idle process waiting for its next call uses none): work done between "
            f"its calls slows what it is compared with"]


def check_at_bench_shape(session: WorkerSession, remote: RemoteCandidate, spec, dtypes, shape, deterministic: bool,
                         device: str) -> dict:
    """Every dtype at the benchmark shape: fresh sets into poisoned outputs, compared here; and, where
    declared, the same inputs again and again, which must give the same bits."""
    torch = _torch()
    failures, notes, checked = [], [], []
    for dtype in dtypes:
        if _interpreter_too_big(session, shape):
            notes.append(f"{dtype} at the benchmark shape {shape_label(shape)}: more than the interpreter's "
                         f"{INTERPRETER_MAX_ELEMENTS} elements; checked there on a GPU")
            continue
        output_shape, first = _expected_shape(spec, shape, dtype, device)
        torch_dtype = first[0].dtype
        seeds = fresh_seeds(CHECKED_SETS - 1)
        # One set at a time: at a 6.4 GB benchmark shape three sets at once would be 19 GB of inputs.
        pending = [first]
        del first

        def sets():
            yield pending.pop()
            for seed in seeds:
                yield _fresh_inputs(spec, shape, dtype, device, seed)
        for index, inputs in enumerate(sets()):
            # NaN, then a finite poison: a kernel that works fully only into a NaN output (what checkers
            # poison with; a real caller's buffer holds its last result) is wrong in the second set.
            fill = poison_value(torch_dtype) if index % 2 == 0 else _second_poison(torch_dtype)
            out = torch.full(output_shape, fill, dtype=torch_dtype, device=device) if remote.accepts_out else None
            try:
                output = remote(*inputs, out=out)
            except CandidateFailed as error:
                failures.append(f"{dtype} {shape_label(shape)} set {index}: raised {error}")
                break
            problem = "returned no tensor" if not isinstance(output, torch.Tensor) else \
                _output_failure(spec, inputs, output, dtype)
            if problem:
                failures.append(f"{dtype} {shape_label(shape)} set {index}: {problem}")
                break
            if deterministic and index == 0:
                first_output = output.clone()
                for repeat in range(1, DETERMINISM_REPEATS):
                    again = torch.full(output_shape, poison_value(torch_dtype), dtype=torch_dtype, device=device) \
                        if remote.accepts_out else None
                    again = remote(*inputs, out=again)
                    differing = differing_elements(again, first_output)
                    if differing:
                        failures.append(f"{dtype} {shape_label(shape)}: declared deterministic, but repeat {repeat} "
                                        f"on the same inputs differs in {differing} of {again.numel()} elements")
                        break
        checked.append(dtype)
    return {"shape": shape_label(shape), "dtypes": checked, "failures": failures, "notes": notes,
            "sets": CHECKED_SETS, "determinism_repeats": DETERMINISM_REPEATS if deterministic else 0}


def kernel_evidence(session: WorkerSession, spec, dtypes, shape, device: str, accepts_out: bool,
                    hold: bool = False) -> dict:
    """The profiled calls' kernels at ``shape`` for every dtype (each launch attributed by origin, see
    :func:`hello_gpu.agent.anticheat.check_kernel_origin`). ``hold``: where the task allows side streams,
    each call is queued behind a spin on the timed stream (anticheat.profile_evidence)."""
    merged = {"kernels": [], "streams": [], "timed_stream": None, "stray_kernels": [], "launches": None,
              "own_launches": None, "profiled": [], "joins": []}
    launches: list[int] = []
    own_launches: list[int] | None = []
    calls_before = 0
    for dtype in dtypes:
        inputs = _fresh_inputs(spec, shape, dtype, device, fresh_seeds(1)[0])
        arguments = lend(session, inputs, "input", device)
        out_key = None
        if accepts_out:
            out_key, _ = session.buffer("output", expected_shape(spec, inputs), inputs[0].dtype, device)
        _synchronize(device)
        found = session.request("profile", inputs=arguments, out=out_key, repeats=PROFILED_CALLS, hold=hold)
        for kernel in found.get("kernels") or []:
            if kernel.get("call") is not None:
                kernel["call"] = int(kernel["call"]) + calls_before      # one numbering over every dtype
            merged["kernels"].append(kernel)
        calls_before += PROFILED_CALLS
        if own_launches is not None and found.get("own_launches") is not None:
            own_launches += [int(count) for count in found["own_launches"]]
        else:
            own_launches = None
        for entry in found.get("streams") or []:
            if entry.get("call") is not None:
                entry["call"] = int(entry["call"]) + calls_before - PROFILED_CALLS     # as the kernels above
            merged["streams"].append(entry)
        joins = found.get("joins")
        merged["joins"] += list(joins) if joins is not None else [None] * PROFILED_CALLS
        merged["stray_kernels"] += found.get("stray_kernels") or []
        merged["timed_stream"] = merged["timed_stream"] or found.get("timed_stream")
        if found.get("launches") is not None:
            launches += list(found["launches"])
        merged["profiled"].append(f"{dtype} {shape_label(shape)}")
    merged["launches"] = launches or None
    merged["own_launches"] = own_launches
    return merged


def run_check(payload: dict, timeout_s: float, environment: dict | None = None) -> dict:
    """The check step (see the module docstring); the dict ``tools.check`` reads."""
    from .sandbox import _bench_shape, _distributions, _dtypes, _rename
    from . import anticheat
    from .store import task_from_dict
    deadline = time.perf_counter() + timeout_s
    task = task_from_dict(payload["task"])
    with tempfile.TemporaryDirectory(prefix="hello-gpu-parent-") as folder:
        op, rung = _materialize(task, payload["candidate"], Path(folder))
        names = {"candidate": rung.id}
        spec = op.spec
        if task.deterministic:
            spec.DETERMINISTIC_REQUIRED = True
        declared = _dtypes(task, op)
        uncovered = [dtype for dtype in declared if not rung.supports(dtype)]
        session = WorkerSession(payload["task"], payload["candidate"], deadline, environment, limit_s=timeout_s)
        try:
            session.load()
            device = _device(session)
            remote = RemoteCandidate(session, rung, device)
            skip = session.loaded.get("skip")
            view = _view_of(rung, skip)
            seeds = fresh_seeds(task.seeds)
            shapes = list(task.check_shapes or spec.EDGE_SHAPES)
            report = check_rung(view, op, shapes, declared, seeds, _distributions(task, op), device=device,
                                built=remote)
            evidence = report.evidence()
            failures = [{"shape": c.shape, "dtype": c.dtype, "seed": c.seed, "distribution": c.distribution,
                         "reason": c.reason} for c in report.failures[:10]]
            skipped = sorted({f"{c.dtype}: {c.reason}" for c in report.cases if c.skipped})
            passed = report.passed and not uncovered
            reason = _rename(report.reason, names)
            coverage = []
            if uncovered:
                coverage.append(f"{COVERAGE}: the task declares {', '.join(declared)}; the candidate's header covers "
                                f"only {', '.join(d for d in declared if d not in uncovered) or 'none of them'}: "
                                f"{', '.join(uncovered)} would go unchecked (a dtype left out fails, it is not skipped)")
            result = {"passed": passed, "check_status": report.status if not uncovered else "FAIL",
                      "reason": "; ".join(([reason] if reason else []) + coverage), "evidence": evidence,
                      "failures": failures, "skipped": skipped, "device": device,
                      "seeds_hidden_from_candidate": True, "verdict_in": "parent"}
            ran = sorted({case.dtype for case in report.ran}, key=declared.index)
            anticheat_evidence: dict = {"coverage": coverage}
            if session.untrusted:               # stopped at a write outside its buffers: no call after that
                anticheat_evidence["stopped"] = f"the anti-cheat calls were not made: the child was stopped after " \
                                                f"{session.untrusted}"
            elif report.error is None and report.skipped is None and report.ran:
                try:
                    counter = session.launch_counter if session.loaded.get("route") == "triton" else None
                    probe_shapes, too_big = _runtime_check_shapes(spec, ran, shapes, device)
                    runtime = anticheat.runtime_evidence(remote, spec, dtypes=ran, shapes=probe_shapes, device=device,
                                                         launch_counter=counter)
                    if too_big:                 # said where skipped cases are said, not only in the evidence
                        runtime.setdefault("skipped", {})["large shapes"] = too_big
                        result["skipped"].append(f"anti-cheat probes at {too_big}")
                    runtime["triton_kernels"] = list(session.loaded.get("triton_kernels") or [])
                    anticheat_evidence.update(runtime)
                    bench_shape = _bench_shape(task, op)
                    deterministic = _declares_determinism(spec, rung)
                    timed = check_at_bench_shape(session, remote, spec, ran, bench_shape, deterministic, device)
                    anticheat_evidence["bench_shape"] = timed
                    if timed["failures"]:
                        result["passed"] = False
                        result["check_status"] = "FAIL"
                        result["reason"] = "; ".join(filter(None, [result["reason"], f"at the benchmark shape: "
                                                                   f"{timed['failures'][0]}"]))
                    profile_shape = bench_shape if not _interpreter_too_big(session, bench_shape) else \
                        max(shapes, key=numel)
                    anticheat_evidence.update(kernel_evidence(session, spec, ran, profile_shape, device,
                                                              remote.accepts_out, hold=task.side_streams))
                    anticheat_evidence["profiled_shape"] = shape_label(profile_shape)
                except CandidateFailed as error:
                    result["anticheat_error"] = _rename(str(error), names)
                except WorkerEnded as ended:
                    if ended.status != "crashed":
                        raise
                    # Killed by its own doing after the checker's cases ran (a heap it overran, a fault in a
                    # probe): a failed check, with everything seen before it died.
                    result.update(passed=False, check_status="FAIL", reason="; ".join(filter(None, [
                        result["reason"], f"the candidate's process died during the anti-cheat calls: {ended.detail}"])))
                    anticheat_evidence["crash"] = ended.detail
            finished = session.finish() if session.process.poll() is None else session.evidence()
            tamper, patched = _tamper_reasons(finished)
            anticheat_evidence["tamper"] = tamper
            anticheat_evidence["guard"] = list(session.guard_reasons)
            result["anticheat"] = json.loads(_rename(json.dumps(anticheat_evidence, default=str), names))
            result["patched"] = patched
            result["threads_started"] = int((finished or {}).get("threads_running") or 0)
            result["calls"] = remote.calls
            if session.loaded.get("window_unheld"):  # the check's calls could not hold side work behind them
                result["window_unheld"] = session.loaded["window_unheld"]
        except WorkerEnded as ended:
            return {"status": ended.status, "detail": ended.detail, "stdout_tail": session.tail("stdout"),
                    "stderr_tail": session.tail("stderr")}
        except CandidateFailed as error:
            # The load failed (the candidate raised on import, or its run() is missing): incorrect, with why.
            text = _rename(str(error), names)
            result = {"passed": False, "check_status": "FAIL", "reason": f"raised {text}", "evidence": {},
                      "failures": [], "skipped": [], "device": session.loaded.get("device"), "patched": []}
        finally:
            result_tails = {"stdout_tail": session.tail("stdout"), "stderr_tail": session.tail("stderr")}
            session.close()
    result.update(result_tails)
    return result


# ================================================================================== timing


class TimedSide:
    """One side of a timing (the candidate, or the baseline it is compared with) in its own child: its
    outputs, one per input set, and what its timed batches claimed and showed."""

    def __init__(self, session: WorkerSession, spec, dtype: str, output_shape, torch_dtype, device: str,
                 sets: int = INPUT_SETS, deterministic: bool = False, side_streams: bool = False):
        self.session, self.spec, self.dtype, self.device = session, spec, dtype, device
        self.side_streams = side_streams             # the task allows side streams joined before return
        self.launch_counts = [0, 0]                  # timed calls counted with no own launch, with some
        self.deterministic = deterministic           # declared by the task, the spec or this side's rung
        self.repeats_compared = 0                    # timed batches whose repeated sets were compared bit for bit
        self.accepts_out = bool(session.loaded["accepts_out"])
        self.output_shape, self.torch_dtype = output_shape, torch_dtype
        self.outputs: list = []
        self.grow(sets)
        self.per_call: list[float] = []
        self.batches: list[float] = []
        self.checked = 0
        self.failures: list[str] = []
        self.counted: list[tuple[float, float]] = []   # (the parent's interval, the child's claimed span) per batch
        self.idle: list[float] = []                      # how long the child had idled before each counted batch
        self.left_running: list[tuple[float, float]] = []   # (work left running past the end, claimed) per call
        self.left_running_unseen: str | None = None          # why the child could not measure it
        self.marks_left_running: list[float] = []            # the probes' marks: the measurement with nothing left
        self.calls_per_batch = 0                         # of the last batch (the probes record as many marks)

    def grow(self, sets: int) -> None:
        """One output per input set, ``sets`` in all."""
        self.outputs += [self.session.buffer(f"timed_output{index}", self.output_shape, self.torch_dtype, self.device)
                         for index in range(len(self.outputs), sets)]

    def close(self) -> None:
        """The outputs are no longer the parent's to read (the child ended); what was timed and seen stays."""
        self.outputs = []

    def restart(self) -> None:
        """Count from here: what was timed so far was a warm-up (it compiled) or batches too short to judge."""
        self.per_call.clear()
        self.batches.clear()
        self.counted.clear()
        self.idle.clear()
        self.left_running.clear()

    def span_per_call(self) -> float | None:
        """The median span per call of the last SIZING_BATCHES counted batches (none longer than the parent saw)."""
        recent = self.counted[-SIZING_BATCHES:]
        if len(recent) < SIZING_BATCHES or not self.calls_per_batch:
            return None
        return statistics.median(min(wall, span) for wall, span in recent) / self.calls_per_batch

    def batch(self, inputs: "TimedInputs", check: bool) -> float:
        """Time one call per input set (each into its own poisoned output); check some outputs; return
        the batch's claimed seconds per call (their median)."""
        torch = _torch()
        finite = random.SystemRandom().random() < 0.5          # NaN or a finite poison, unpredictably
        for _, (key, buffer) in enumerate(self.outputs):
            dtype = buffer.tensor.dtype
            buffer.tensor.fill_(_second_poison(dtype) if finite else poison_value(dtype))
        _synchronize(self.device)
        calls = [(names, self.outputs[index][0] if self.accepts_out else None)
                 for index, (names, _) in enumerate(inputs.sets)]
        began = time.perf_counter()
        if self.session.answered_at is not None:
            self.idle.append(began - self.session.answered_at)
        answer = self.session.request("time", calls=calls, cold=True)
        self.counted.append((time.perf_counter() - began, float(answer["span_s"])))
        self.calls_per_batch = len(calls)
        left = answer.get("streams_left") or []
        if left and not any(failure.startswith(f"{TIMING}: a timed call returned") for failure in self.failures):
            # The harness's events are on the timed stream whatever the call left current; leaving another one
            # current is how a call would have had them recorded where nothing waits for its work.
            self.failures.append(f"{TIMING}: a timed call returned with another CUDA stream current than the one it "
                                 f"was called on ({len(left)} of the {len(calls)} calls of batch {len(self.batches)}): "
                                 f"the harness's end events, recorded on the current stream, would have fired before "
                                 f"the call's work ended")
        self._judge_launches(answer, len(calls))
        self.session.check_guards([key for names, _ in inputs.sets for key in buffer_keys(names)]
                                  + [key for key, _ in self.outputs])
        seconds = [float(s) for s in answer["per_call_s"]]
        if len(seconds) != len(calls) or not all(math.isfinite(s) and s > 0 for s in seconds):
            raise CandidateFailed(f"{TIMING}: the child claimed {seconds!r} for {len(calls)} calls")
        if sum(seconds) > float(answer["span_s"]) * 1.001 + 1e-6:
            self.failures.append(f"{TIMING}: the calls' claimed times add up to {sum(seconds):.6g} s, more than the "
                                 f"{float(answer['span_s']):.6g} s the batch claimed to span")
        self.per_call += seconds
        running = answer.get("left_running_s")
        if running is not None and len(running) == len(seconds):
            self.left_running += [(float(left), claimed) for left, claimed in zip(running, seconds)]
        elif running is None and self.left_running_unseen is None:
            self.left_running_unseen = str(answer.get("left_running_unseen") or "the child did not say")
        empty = answer.get("empty_launches")
        if empty and empty not in self.failures:
            self.failures.append(empty)            # zero-block launches: calls timed for work they never did
        if self.deterministic and self.accepts_out and inputs.repeated is not None:
            self._compare_repeated(inputs.repeated)
        if check and self.accepts_out:
            chosen = random.SystemRandom().sample(range(len(inputs.sets)), k=1)
            for index in chosen:
                output = self.outputs[index][1].tensor
                problem = _output_failure(self.spec, inputs.values(index), output, self.dtype)
                self.checked += 1
                if problem:
                    self.failures.append(f"{TIMED_OUTPUT}: a timed call at the benchmark shape (batch "
                                         f"{len(self.batches)}, set {index}) gave a wrong output: {problem}")
        del torch
        median = sorted(seconds)[len(seconds) // 2]
        self.batches.append(median)
        return median

    def _judge_launches(self, answer: dict, calls: int) -> None:
        """The timed calls' own launches (timed_launch_problems), each kind of problem named once."""
        for problem in timed_launch_problems(answer, calls, self.launch_counts, self.side_streams, len(self.batches)):
            tag = problem.split(":", 1)[0]
            if not any(failure.startswith(tag) for failure in self.failures):
                self.failures.append(problem)

    def _compare_repeated(self, repeated: tuple[int, int]) -> None:
        """Two calls of this batch read the same values from different buffers: a deterministic kernel wrote the
        same bits into both outputs."""
        first, second = repeated
        one, other = self.outputs[first][1].tensor, self.outputs[second][1].tensor
        differing = differing_elements(one, other)
        self.repeats_compared += 1
        if differing and not any(failure.startswith(NONDETERMINISTIC) for failure in self.failures):
            self.failures.append(f"{NONDETERMINISTIC}: declared deterministic, but two timed calls at the benchmark "
                                 f"shape on the same values (sets {first} and {second} of batch {len(self.batches)}, "
                                 f"in different buffers) differ in {differing} of {one.numel()} elements")

    def consistency(self, inputs: "TimedInputs") -> dict:
        """A warm batch of back-to-back calls timed by the child and, around the request, by this clock."""
        floor = min(self._round_trip() for _ in range(3))
        median = sorted(self.per_call)[len(self.per_call) // 2] if self.per_call else 1e-3
        count = int(min(4096, max(2 * INPUT_SETS, math.ceil(CONSISTENCY_SECONDS / max(median, 1e-7)))))
        sets = inputs.sets
        calls = [(sets[index % len(sets)][0], self.outputs[index % len(sets)][0] if self.accepts_out else None)
                 for index in range(count)]
        _synchronize(self.device)
        began = time.perf_counter()
        answer = self.session.request("time", calls=calls, cold=False)
        wall = time.perf_counter() - began
        span = float(answer["span_s"])
        claimed = sum(float(s) for s in answer["per_call_s"])
        result = {"calls": count, "parent_wall_s": wall, "round_trip_s": floor, "claimed_span_s": span,
                  "claimed_calls_s": claimed}
        problems = []
        if span > wall + CONSISTENCY_SLACK_S:
            problems.append(f"the child claimed a {span:.6g} s span for a batch the parent saw take {wall:.6g} s")
        if span < CONSISTENCY_FILL * (wall - floor) - CONSISTENCY_SLACK_S:
            problems.append(f"the child claimed {span:.6g} s for {count} back-to-back calls that took {wall:.6g} s "
                            f"by the parent's clock ({wall - floor:.6g} s less the {floor:.2g} s round trip): its "
                            f"clock runs at {span / max(wall - floor, 1e-12):.2f}x")
        if claimed > span * 1.001 + 1e-6:
            problems.append(f"its calls' claimed times ({claimed:.6g} s) exceed the span it claimed ({span:.6g} s)")
        if answer.get("streams_left"):
            problems.append(f"{len(answer['streams_left'])} of its {count} calls returned with another CUDA stream "
                            f"current than the one they were called on")
        self._judge_launches(answer, count)            # the warm batch's calls are watched as the counted ones
        # The counted (cold) batches, judged one by one, in the median and in total (judge_batches): a child that
        # forges only where it is not cross-checked (its clock slowed, or its times edited, in the batches that
        # count, in all of them or in some) falls short there. Each batch's interval less the batch floor (what a
        # batch costs outside its span, measured by probes, bounded).
        if self.counted:
            base, probed = self.batch_floor(floor)
            result.update(batch_floor_s=base, probe_floor_s=probed, calls_per_batch=self.calls_per_batch)
            summary, found = judge_batches(self.counted, base)
            result.update(summary)
            problems += found
        result["problems"] = [f"{TIMING}: {problem}" for problem in problems]
        marks = self.marks_left_running
        least = LEFT_RUNNING_UNHELD_MIN_S if self.session.loaded.get("window_unheld") else LEFT_RUNNING_MIN_S
        summary, running = left_running_problems(self.left_running, statistics.median(marks) if marks else 0.0, least)
        result["left_running"] = summary if self.left_running else {"unseen": self.left_running_unseen}
        result["problems"] += running
        self.failures += result["problems"]
        return result

    def _round_trip(self) -> float:
        began = time.perf_counter()
        self.session.request("ping")
        return time.perf_counter() - began

    def batch_floor(self, round_trip: float) -> tuple[float, float]:
        """(the batch floor, what the probes measured): FLOOR_PROBES "time" requests without calls, each sent after
        the child idled as long as it did before the counted batches (their median), holding its span as long as
        they lasted (their median interval less the round trip), both at most PROBE_MAX_S, and recording as many
        empty marks as a batch has calls. The fastest probe's interval less its hold, kept between the round trip
        and the round trip plus BATCH_FLOOR_MAX_S and MARK_FLOOR_MAX_S a mark."""
        idle = min(PROBE_MAX_S, statistics.median(self.idle)) if self.idle else 0.0
        hold = min(PROBE_MAX_S, max(0.0, statistics.median(wall for wall, _ in self.counted) - round_trip))
        marks = self.calls_per_batch
        probes = []
        for _ in range(FLOOR_PROBES):
            time.sleep(idle)
            began = time.perf_counter()
            answer = self.session.request("time", calls=[], cold=True, hold_s=hold, marks=marks)
            probes.append(time.perf_counter() - began - hold)
            self.marks_left_running += [float(left) for left in answer.get("marks_left_running_s") or ()]
        probed = min(probes)
        bound = BATCH_FLOOR_MAX_S + marks * MARK_FLOOR_MAX_S
        return round_trip + min(max(0.0, probed - round_trip), bound), probed


def timed_launch_problems(answer: dict, calls: int, counts: list[int], side_streams: bool, batch: int) -> list[str]:
    """What a timed batch's own launches say (issue 17): each timed call is counted as a checked one is (the
    worker's launch counter, on in every call), so what a candidate does only when timed is seen in every timed
    call, not in a profiled sample. ``answer``: the child's "time" answer (``launches`` per call, ``off_stream``:
    its Triton launches that went to another stream than the timed one); ``counts``: [calls with no own launch,
    calls with some] of this side so far, updated here.

    - A call that launched none of its own kernels where other timed calls of the side did: its output came from
      memory (a side whose calls all count none, a rung whose kernels the counter cannot find, never checked here
      as a compare's baseline is, is not judged by launches; its outputs are).
    - Where the task allows no side streams, any launch on another stream than the timed one: work beside the L2
      flush, after the call's end event, in no call's time (tests/test_agent_gpu.py's FLUSH_HIDING)."""
    problems = []
    launches = [count for count in answer.get("launches") or [] if count is not None]
    silent = sum(1 for count in launches if not count)
    counts[0] += silent
    counts[1] += len(launches) - silent
    if silent and all(counts):
        problems.append(f"{NO_LAUNCH}: {silent} of the {calls} timed calls of batch {batch} launched none of the "
                        f"candidate's kernels, where its other timed calls did: the result came from memory, not from "
                        f"a kernel")
    off = answer.get("off_stream") or []
    if off and not side_streams:
        problems.append(f"{CONCURRENCY}: timed calls of batch {batch} launched kernels on another stream than the timed "
                        f"one, where no call's events wait for them ({'; '.join(map(str, off[:4]))})")
    return problems


def _unseen_notes(device: str, consistencies: list[dict]) -> list[str]:
    """On a GPU, a timing that could not see work left running after its calls says so in its notes (an older driver:
    no cuCtxRecordEvent); on the CPU nothing outlives a call but a thread, which is counted."""
    unseen = sorted({str(found["left_running"]["unseen"]) for found in consistencies
                     if "unseen" in found.get("left_running", {})})
    if not device.startswith("cuda") or not unseen:
        return []
    return [f"work left running after the timed calls was not measured: {'; '.join(unseen)}"]


def _window_notes(sessions) -> list[str]:
    """Where a child's device could not hold each call's work behind the call (worker.CallWindow: a driver without
    cuCtxWaitEvent), the timing says so: work a call queued on a stream of its own could run before the call began,
    in no call's time."""
    unheld = sorted({str(session.loaded["window_unheld"]) for session in sessions
                     if session.loaded.get("window_unheld")})
    return [f"a call's work on another stream could start before the call (no window held: {'; '.join(unheld)})"] \
        if unheld else []


def left_running_problems(calls: list[tuple[float, float]], floor: float = 0.0,
                          least: float = LEFT_RUNNING_MIN_S) -> tuple[dict, list[str]]:
    """Work the counted timed calls left running on the device: (a summary, the problems found).

    ``calls``: (seconds the context's work ran past the call's end event, the call's claimed seconds) per counted
    call (worker.ContextDrain); ``floor``: what the measurement reads with nothing left running (the median of the
    probes' marks), subtracted from each call's, up to LEFT_RUNNING_FLOOR_MAX_S. A call left work running when the
    rest is over ``least`` (LEFT_RUNNING_MIN_S; LEFT_RUNNING_UNHELD_MIN_S where the child held no call window) and
    LEFT_RUNNING_SHARE of its own time; a side is named when LEFT_RUNNING_CALLS
    of its calls did (at least MIN_SLOW_BATCHES). Whatever
    launched the work (Triton, our runtime, cuda-python, a CUDA graph, torch's _sleep) and on whatever stream: the
    context event holds every stream of the context. Where a task allows side streams they must be joined before
    the call returns, so the rule is the same there. What passes: up to max(2 us, 2%) a call (5 us without a
    window), or more in fewer than
    a quarter of the calls (the per-batch medians move by a fraction of their spread)."""
    if not calls:
        return {"calls": 0}, []
    floor = min(max(0.0, floor), LEFT_RUNNING_FLOOR_MAX_S)
    lefts = [max(0.0, left - floor) for left, _ in calls]
    over = [(left, claimed) for left, (_, claimed) in zip(lefts, calls)
            if left > max(least, LEFT_RUNNING_SHARE * claimed)]
    summary = {"calls": len(calls), "floor_s": floor, "median_s": statistics.median(lefts), "max_s": max(lefts),
               "calls_over": len(over)}
    if len(over) < max(min(MIN_SLOW_BATCHES, len(calls)), LEFT_RUNNING_CALLS * len(calls)):
        return summary, []
    left = statistics.median(left for left, _ in over)
    claimed = statistics.median(claimed for _, claimed in over)
    return summary, [f"{CONCURRENCY}: {len(over)} of the {len(calls)} counted timed calls left work running on the "
                     f"device after they returned ({left * 1e6:.3g} us past the call's end event in the median one, "
                     f"which claimed {claimed * 1e6:.3g} us): work on another stream than the timed one, never joined, "
                     f"runs beside the next call's L2 flush in no call's time"]


def judge_batches(counted: list[tuple[float, float]], floor: float) -> tuple[dict, list[str]]:
    """The counted batches' claims against the parent's clock: (a summary, the problems found).

    ``counted``: (the parent's interval, the span the child claimed) per batch; ``floor``: what a batch costs
    outside its span (TimedSide.batch_floor). A batch's missing time is its interval less the floor less its span:
    an honest batch's is a host hiccup, ~0 in most batches and up to ~1 ms in some; a clock at f x adds (1 - f) of
    what the batch truly spanned. Four rules, each for another way to lie:

    - a span longer than the parent's whole interval: no clock runs ahead of the parent's;
    - slow batches (a lie in some batches, e.g. those poisoned with NaN): missing time over BATCH_JITTER_S and over
      what CONSISTENCY_FILL allows of its span, in SLOW_BATCH_SHARE of the batches (at least MIN_SLOW_BATCHES);
    - the median batch (a lie in most or all, by a small factor): missing time within MEDIAN_JITTER_S plus what
      MEDIAN_FILL allows of the median span; hiccups in fewer than half the batches do not move it;
    - the total: the spans fill CONSISTENCY_FILL of the intervals less the floors (BATCH_SLACK_S a batch).

    What passes (the bounds, at a 4 ms batch): a clock at >= 0.85x in every batch (gains <= 18%); a lie of any size
    in fewer than a quarter of the batches (moves the pooled median by < 0.45 of the spread). A clock slowed
    further is caught, by the median rule where it lies in most batches, by the slow-batch rule in a quarter."""
    batches = len(counted)
    spans = [span for _, span in counted]
    seen = [wall - floor for wall, _ in counted]
    missing = [interval - span for interval, span in zip(seen, spans)]
    walls = sum(wall for wall, _ in counted)
    total_span, total_seen = sum(spans), sum(seen)
    allowed = [max(BATCH_JITTER_S, span * (1 - CONSISTENCY_FILL) / CONSISTENCY_FILL) for span in spans]
    slow = [span / max(interval, 1e-12) for span, interval, gap, allow in zip(spans, seen, missing, allowed)
            if gap > allow]
    median_span, median_missing = statistics.median(spans), statistics.median(missing)
    median_allowed = MEDIAN_JITTER_S + median_span * (1 - MEDIAN_FILL) / MEDIAN_FILL
    summary = {"counted_batches": batches, "counted_parent_wall_s": walls, "counted_claimed_span_s": total_span,
               "median_span_s": median_span, "median_missing_s": median_missing, "slow_batches": len(slow)}
    problems = []
    longer = [(span, wall) for wall, span in counted if span > wall + CONSISTENCY_SLACK_S]
    if longer:
        problems.append(f"{len(longer)} counted batch(es) claimed a span longer than the parent's clock saw "
                        f"(e.g. {longer[0][0]:.6g} s in {longer[0][1]:.6g} s)")
    if len(slow) >= max(min(MIN_SLOW_BATCHES, batches), SLOW_BATCH_SHARE * batches):
        ratios = ", ".join(f"{ratio:.2f}x" for ratio in sorted(slow)[:4]) + (" ..." if len(slow) > 4 else "")
        problems.append(f"{len(slow)} of the {batches} counted batches claimed less than {CONSISTENCY_FILL:.0%} of "
                        f"what the parent's clock saw, {BATCH_JITTER_S * 1e3:g} ms of host hiccup allowed (their "
                        f"clocks ran at {ratios})")
    if median_missing > median_allowed:
        problems.append(f"the median counted batch claimed {median_span:.6g} s, {median_missing:.6g} s less than the "
                        f"parent's clock saw beyond {floor:.2g} s a batch outside the calls (allowed: "
                        f"{median_allowed:.6g} s): its clock runs at about "
                        f"{median_span / max(median_span + median_missing, 1e-12):.2f}x")
    if total_span < CONSISTENCY_FILL * total_seen - batches * BATCH_SLACK_S:
        problems.append(f"the {batches} counted batches claimed {total_span:.6g} s in all, which the parent's clock "
                        f"saw take {walls:.6g} s ({total_seen:.6g} s less {floor:.2g} s a batch outside the calls): "
                        f"the claims run at {total_span / max(total_seen, 1e-12):.2f}x")
    return summary, problems


def _device_free_bytes(device: str) -> int | None:
    """Device memory free now (all processes counted), or None where nothing bounds it but TIMING_BYTES (the CPU:
    the sets are shared-memory blocks in host memory)."""
    if not device.startswith("cuda"):
        return None
    return int(_torch().cuda.mem_get_info(device)[0])


class TimingGrant:
    """What one timing may hold of the device (TimingMemory.reserve): ``granted`` bytes, ``used`` so far."""

    def __init__(self, ledger: "TimingMemory", granted: int):
        self.ledger, self.granted, self.used = ledger, granted, 0

    def release(self) -> None:
        self.ledger.release(self)


class TimingMemory:
    """The device memory the timings of this process hold together (TIMING_FREE_SHARE): the verdict of every step
    runs in the parent, several at once in threads (tools.bench and tools.check side by side), and each timing's
    input sets and outputs are the parent's. Each timing is granted its bytes when its sets are made: at most
    TIMING_BYTES, at most what is left of TIMING_FREE_SHARE of (the device's free memory + what the timings already
    hold) after every other timing's grant; a timing whose MIN_INPUT_SETS do not fit waits for others to end (until
    its deadline; alone on the device it is granted its minimum whatever is free, as before)."""

    def __init__(self):
        self._changed = threading.Condition()
        self._grants: list[TimingGrant] = []

    def reserve(self, device: str, wanted: int, minimum: int, deadline: float | None = None) -> TimingGrant:
        with self._changed:
            while True:
                available = self.available(device)
                if (available is None or available >= minimum or not self._grants
                        or deadline is None or time.perf_counter() >= deadline):
                    granted = wanted if available is None else max(minimum, min(wanted, available))
                    grant = TimingGrant(self, granted)
                    self._grants.append(grant)
                    return grant
                self._changed.wait(timeout=min(1.0, max(0.0, deadline - time.perf_counter())))

    def available(self, device: str) -> int | None:
        """Bytes a new timing may be granted now (None: no bound but TIMING_BYTES)."""
        free = _device_free_bytes(device)
        if free is None:
            return None
        held = sum(grant.used for grant in self._grants)
        return int(TIMING_FREE_SHARE * (free + held)) - sum(grant.granted for grant in self._grants)

    def release(self, grant: TimingGrant) -> None:
        with self._changed:
            if grant in self._grants:
                self._grants.remove(grant)
            self._changed.notify_all()

    def granted(self) -> int:
        """Bytes granted to the timings running now."""
        with self._changed:
            return sum(grant.granted for grant in self._grants)


TIMING_MEMORY = TimingMemory()


class TimedInputs:
    """The input sets of a timing, the parent's: fresh values (a new seed) before every batch.

    INPUT_SETS sets where they fit the timing's grant (TIMING_MEMORY: within TIMING_BYTES and the device's free
    memory, shared with the other timings of this process) with every side's outputs, never fewer than
    MIN_INPUT_SETS (a KernelBench softmax input is 6.4 GB: two sets and two sides' outputs are 38 GB, four would
    be 77); grown (:meth:`grow`) up to ``capacity`` (MAX_INPUT_SETS, within the grant) where batches of one call
    per set span less than BATCH_SPAN_S. The parent keeps each set's seed, not a copy: the values a call was
    given are made again from it when its output is checked (the child may have written into the shared ones).
    :meth:`close` gives the sets and the grant back (the timing keeps its numbers)."""

    def __init__(self, sessions: list[WorkerSession], spec, shape, dtype: str, device: str, repeat_sets: bool = False,
                 deadline: float | None = None):
        self.spec, self.shape, self.dtype, self.device = spec, shape, dtype, device
        self.repeat_sets = repeat_sets        # some side declares determinism: batches may repeat a set's values
        self.repeated: tuple[int, int] | None = None
        self.sessions = sessions
        first = _fresh_inputs(spec, shape, dtype, device, fresh_seeds(1)[0])
        self.expected_shape = expected_shape(spec, first)
        self.torch_dtype = first[0].dtype
        self.per_set = max(1, _footprint(first, self.expected_shape) + (len(sessions) - 1) *
                           numel(self.expected_shape) * first[0].element_size())
        wanted = max(MIN_INPUT_SETS, min(MAX_INPUT_SETS, TIMING_BYTES // self.per_set))
        self.grant = TIMING_MEMORY.reserve(device, wanted * self.per_set, MIN_INPUT_SETS * self.per_set, deadline)
        self.capacity = max(MIN_INPUT_SETS, min(wanted, self.grant.granted // self.per_set))
        # Per set: the call's arguments (shared buffers' keys, options' values: see lend) and the buffers' tensors.
        self.sets: list[tuple[list, tuple]] = []
        self.seeds: list[int] = []
        self.made = 0                         # sets made (count, once close gave them back)
        try:
            self._add_sets(min(INPUT_SETS, self.capacity), first)
            del first
            self.refresh()
        except BaseException:
            self.close()
            raise

    @property
    def count(self) -> int:
        return self.made

    def close(self) -> None:
        """The sets' buffers are no longer the parent's to read (their children ended): the views go, and the grant
        with them. Idempotent."""
        self.sets = []
        self.grant.release()

    def _add_sets(self, count: int, values: tuple) -> None:
        owner = self.sessions[0]
        for index in range(len(self.sets), count):
            arguments = lend(owner, values, f"timed_input{index}_", self.device, owners=self.sessions[1:])
            self.sets.append((arguments, tuple(owner.buffers[key].tensor for key in buffer_keys(arguments))))
            self.made = len(self.sets)
            self.grant.used = self.made * self.per_set

    def grow(self, count: int) -> None:
        """Sets up to ``count`` (at most ``capacity``), every set's values fresh."""
        if count > self.count:
            self._add_sets(min(count, self.capacity), self.values(0))
            self.refresh()

    def refresh(self, repeat: bool = False) -> None:
        """New values in every set: its tensors rewritten in place, its options as the new inputs give them.
        Where determinism is declared, now and then (the parent's choice, which the child cannot predict) two
        sets get the same seed, hence the same values in different buffers. ``repeat``: this time for sure (a
        timing that ended without one)."""
        self.seeds = list(fresh_seeds(len(self.sets)))
        self.repeated = None
        chooser = random.SystemRandom()
        if self.repeat_sets and len(self.sets) > 1 and (repeat or chooser.random() < REPEATED_SET_CHANCE):
            first, second = chooser.sample(range(len(self.sets)), 2)
            self.seeds[second] = self.seeds[first]
            self.repeated = (first, second)
        for (arguments, views), seed in zip(self.sets, self.seeds):
            fresh = _fresh_inputs(self.spec, self.shape, self.dtype, self.device, seed)
            for view, values in zip(views, [value for value in fresh if is_tensor(value)]):
                view.copy_(values)
            for position, value in enumerate(fresh):
                if not is_tensor(value):
                    arguments[position] = {"option": value}
        _synchronize(self.device)

    def values(self, index: int) -> tuple:
        """Set ``index``'s inputs as the last refresh made them (from its seed: the parent's own copy)."""
        return _fresh_inputs(self.spec, self.shape, self.dtype, self.device, self.seeds[index])


def resize(inputs: TimedInputs, sides: list[TimedSide], span_s: float) -> bool:
    """Grow the input sets (and every side's outputs) when the sides' recent counted batches span less than
    SHORT_BATCH of ``span_s``: to as many as make the faster side's batch span ``span_s`` (within the capacity),
    and start counting again on every side. True when it grew. The sizing comes from the counted batches, not the
    warm-up (which compiled), and only grows: a candidate slow while sized and fast afterwards is sized again as
    soon as SIZING_BATCHES of its batches are short, and whatever it does, its batches never get shorter."""
    if inputs.count >= inputs.capacity:
        return False
    per_call = [side.span_per_call() for side in sides]
    if any(seconds is None for seconds in per_call):
        return False
    fastest = max(min(per_call), 1e-9)
    if fastest * inputs.count >= SHORT_BATCH * span_s:
        return False
    inputs.grow(math.ceil(span_s / fastest))
    for side in sides:
        side.grow(inputs.count)
        side.restart()
    return True


def close_timing(sessions: list[WorkerSession], inputs: TimedInputs | None, sides: list) -> None:
    """End a timing, however it ended (an answer, a dead child, a candidate's error, an error of the parent's own such
    as a CUDA out-of-memory): every child first, so that no buffer is given back while a child can still reach it;
    then the parent's views of the sets and outputs and the timing's memory grant; then the buffers (their IPC
    counters set to zero, shared.SharedBuffer.close) and each session's pool. Before session 14 an error of the
    parent's own left the session open (its child, its buffers, their pool)."""
    for session in sessions:
        session.kill()
    for held in [inputs, *sides]:
        if held is not None:
            held.close()
    for session in sessions:
        session.close()


def _ceilings_for(device: str):
    if not device.startswith("cuda"):
        return None
    from ..bench.ceilings import cached_ceilings
    return cached_ceilings(allow_partial=True)


def _timing_task(payload: dict):
    from .sandbox import _bench_shape, _dtypes
    from .store import task_from_dict
    task = task_from_dict(payload["task"])
    return task, _bench_shape, _dtypes


def _pick_dtype(payload: dict, declared: list[str], rungs) -> str:
    if payload.get("dtype"):
        return payload["dtype"]
    return next(d for d in declared if all(r.supports(d) for r in rungs))


def clock_only_problems(result: dict) -> list[str]:
    """The problems of a timing when every one of them is the clock check's (TIMING), else []: no other
    reason (a wrong output, a launch, tamper evidence, the roofline bound) may be among them."""
    problems = list(result.get("problems") or []) + [f"baseline: {p}" for p in result.get("baseline_problems") or []]
    clock_only = all(p.removeprefix("baseline: ").startswith(TIMING) for p in problems)
    if not problems or not clock_only or result.get("suspect") != "; ".join(problems):
        return []
    return problems


# An honest timing can fail the clock check on a busy host: on this 2-core box, with a second test suite and three
# compiles running, the median counted batch of an honest CPU candidate read as a clock at 0.84-0.87x (floor 1.1
# ms, batches ~2.3 ms), where alone it passes. A clock that lies fails the check every time it is timed. So a timing
# whose only problems are the clock check's is done once more, in new processes on new inputs, and the second
# timing is the one reported, with the first one's problems in its notes: a candidate is only ever accepted on the
# numbers of a timing that passed the check, so lying in the first one gains nothing.
RETIME_MIN_TIME_SHARE = 1.2   # timed again only if at least this many times the first timing's duration is left


def timed_again_if_only_the_clock_failed(step, payload: dict, timeout_s: float, environment: dict | None) -> dict:
    began = time.perf_counter()
    first = step(payload, timeout_s, environment)
    problems = clock_only_problems(first)
    if not problems:
        return first
    spent = time.perf_counter() - began
    left = timeout_s - spent
    if left < RETIME_MIN_TIME_SHARE * spent:
        first.setdefault("notes", []).append(f"only the clock check failed, but {left:.0f} s of the step's {timeout_s:.0f} "
                                             f"s are left, under {RETIME_MIN_TIME_SHARE:g}x the {spent:.0f} s the timing "
                                             f"took: not timed again")
        return first
    second = step(payload, left, environment)
    if second.get("status", "ok") != "ok":          # it ended (a timeout, a crash): the first timing's verdict stands
        first.setdefault("notes", []).append(f"timed again after the clock check failed; that timing ended "
                                             f"({second.get('status')}: {second.get('detail')})")
        return first
    second.setdefault("notes", []).append(f"timed again: the first timing failed only the clock check ({'; '.join(problems)})")
    second["first_timing_problems"] = problems
    return second


def run_bench(payload: dict, timeout_s: float, environment: dict | None = None) -> dict:
    """The bench step: cold median at the benchmark shape, timed in the child, checked from here (timed once
    more where only the clock check failed: :func:`timed_again_if_only_the_clock_failed`)."""
    return timed_again_if_only_the_clock_failed(_bench_once, payload, timeout_s, environment)


def _bench_once(payload: dict, timeout_s: float, environment: dict | None = None) -> dict:
    deadline = time.perf_counter() + timeout_s
    task, bench_shape_of, dtypes_of = _timing_task(payload)
    with tempfile.TemporaryDirectory(prefix="hello-gpu-parent-") as folder:
        op, rung = _materialize(task, payload["candidate"], Path(folder))
        spec = op.spec
        dtype = _pick_dtype(payload, dtypes_of(task, op), [rung])
        shape = bench_shape_of(task, op)
        session = WorkerSession(payload["task"], payload["candidate"], deadline, environment, limit_s=timeout_s)
        inputs = side = None
        try:
            session.load()
            device = _device(session)
            deterministic = _declares_determinism(spec, rung)
            inputs = TimedInputs([session], spec, shape, dtype, device, repeat_sets=deterministic, deadline=deadline)
            side = TimedSide(session, spec, dtype, inputs.expected_shape, inputs.torch_dtype, device, inputs.count,
                             deterministic, task.side_streams)
            side.batch(inputs, check=True)              # warm-up: compiles, first touch; checked
            side.restart()            # the clock check covers the counted batches, not a warm-up that compiled
            max_seconds = float(payload.get("max_seconds", 2.0))
            span_s = float(payload.get("batch_span_s", BATCH_SPAN_S))
            resizes = 0
            started = time.perf_counter()
            stopped_by = "time cap"
            while True:
                inputs.refresh()
                side.batch(inputs, check=True)
                if resizes < MAX_RESIZES and resize(inputs, [side], span_s):
                    resizes += 1
                    continue
                count, batches = len(side.per_call), len(side.counted)
                if count >= 20 and batches >= MIN_COUNTED_BATCHES:
                    summary = summarize(side.per_call)
                    if summary.relative_standard_error < 0.01:
                        stopped_by = "relative standard error"
                        break
                elapsed = time.perf_counter() - started
                if (elapsed > max_seconds and batches >= MIN_COUNTED_BATCHES
                        or elapsed > BENCH_TIME_CAP_FACTOR * max_seconds or count >= 2000):
                    stopped_by = "time cap" if count < 2000 else "max repeats"
                    break
            if side.deterministic and side.repeats_compared == 0:
                # Not one batch repeated a set (a short timing): one more, which does, to the child like any other.
                inputs.refresh(repeat=True)
                side.batch(inputs, check=True)
            consistency = side.consistency(inputs)
            finished = session.finish()
            tails = (session.tail("stdout"), session.tail("stderr"))
        except WorkerEnded as ended:
            return {"status": ended.status, "detail": ended.detail}
        except CandidateFailed as error:
            tails = (session.tail("stdout"), session.tail("stderr"))
            return {"status": "crashed", "detail": f"the candidate failed while timed: {error}",
                    "stdout_tail": tails[0], "stderr_tail": tails[1]}
        finally:
            close_timing([session], inputs, [side])
    summary = summarize(side.per_call)
    work = spec.work(shape, dtype)
    ceilings = _ceilings_for(device)
    # Always armed on a GPU: the measured ceilings when cached, the datasheet peaks otherwise (bench.roof).
    measured = rates(work, summary.median, roof=current_roof(work, ceilings), cold=True)
    tamper, patched = _tamper_reasons(finished)
    problems = side.failures + session.guard_reasons + tamper
    suspect = "; ".join(filter(None, [measured.suspect, *problems])) or None
    clock = "device-events" if device.startswith("cuda") else "wall"
    return {"shape": shape_label(shape), "dtype": dtype, "median_s": summary.median, "ci95": list(summary.ci95),
            "relative_standard_error": summary.relative_standard_error if summary.count > 1 else None,
            "count": summary.count, "clock": clock, "cache": "cold", "device": device, "stopped_by": stopped_by,
            "work": work.to_dict(), "gb_per_s": measured.gb_per_s, "tflop_per_s": measured.tflop_per_s,
            "bandwidth_fraction": measured.bandwidth_fraction, "compute_fraction": measured.compute_fraction,
            "suspect": suspect, "notes": _unseen_notes(device, [consistency]) + _window_notes([session]),
            "input_sets": inputs.count,
            "inputs": "fresh values before every batch",
            "timing": timing_from_summary(summary, cache="cold", graph=False, clock=clock),
            "derived": measured.to_dict(), "timed_outputs_checked": side.checked, "consistency": consistency,
            "calls_per_batch": inputs.count, "resizes": resizes,
            "determinism": {"declared": side.deterministic, "repeated_batches_compared": side.repeats_compared},
            "problems": problems, "patched": patched, "stdout_tail": tails[0], "stderr_tail": tails[1]}


def run_compare(payload: dict, timeout_s: float, environment: dict | None = None) -> dict:
    """The compare step: baseline and candidate each in its own child, timed batch by batch in ABBA
    order on the same fresh inputs; the speedup is the median of per-round ratios, with its interval (timed
    once more where only the clock check failed: :func:`timed_again_if_only_the_clock_failed`)."""
    return timed_again_if_only_the_clock_failed(_compare_once, payload, timeout_s, environment)


def _compare_once(payload: dict, timeout_s: float, environment: dict | None = None) -> dict:
    from ..bench.compare import round_order
    deadline = time.perf_counter() + timeout_s
    task, bench_shape_of, dtypes_of = _timing_task(payload)
    margin = float(payload.get("margin", 0.02))
    min_rounds = int(payload.get("min_rounds", 10))
    max_seconds = float(payload.get("max_seconds", 4.0))
    with tempfile.TemporaryDirectory(prefix="hello-gpu-parent-") as folder:
        op, candidate_rung = _materialize(task, payload["candidate"], Path(folder) / "b")
        _, baseline_rung = _materialize(task, payload["baseline"], Path(folder) / "a")
        spec = op.spec
        dtype = _pick_dtype(payload, dtypes_of(task, op), [candidate_rung, baseline_rung])
        shape = bench_shape_of(task, op)
        sessions: dict[str, WorkerSession] = {}
        inputs, sides = None, {}
        try:
            sessions["A"] = WorkerSession(payload["task"], payload["baseline"], deadline, environment, "baseline", timeout_s)
            sessions["B"] = WorkerSession(payload["task"], payload["candidate"], deadline, environment, "candidate", timeout_s)
            for session in sessions.values():           # both children start together; each loads its own
                session.load()
            device = _device(sessions["B"])
            declared = {"A": _declares_determinism(spec, baseline_rung), "B": _declares_determinism(spec, candidate_rung)}
            inputs = TimedInputs([sessions["A"], sessions["B"]], spec, shape, dtype, device,
                                 repeat_sets=any(declared.values()), deadline=deadline)
            sides = {label: TimedSide(session, spec, dtype, inputs.expected_shape, inputs.torch_dtype, device,
                                      inputs.count, declared[label], task.side_streams)
                     for label, session in sessions.items()}
            for label in "ABAB":                                # warm-up, checked, not counted
                sides[label].batch(inputs, check=True)
            for side in sides.values():
                side.restart()                                  # nor in the clock check (see run_bench)
            span_s = float(payload.get("batch_span_s", BATCH_SPAN_S))
            resizes = 0
            rounds: dict[str, list[float]] = {"A": [], "B": []}
            started = time.perf_counter()
            count = 0
            while count < 400:
                inputs.refresh()
                times = {"A": 0.0, "B": 0.0}
                for label in round_order(count):
                    other = sessions["B" if label == "A" else "A"]
                    before, began = other.cpu_seconds(), time.perf_counter()
                    times[label] += sides[label].batch(inputs, check=True)
                    after = other.cpu_seconds()
                    if before is not None and after is not None:
                        other.idle_cpu_s += after - before
                        other.idle_wall_s += time.perf_counter() - began
                rounds["A"].append(times["A"])
                rounds["B"].append(times["B"])
                count += 1
                if resizes < MAX_RESIZES and resize(inputs, [sides["A"], sides["B"]], span_s):
                    resizes += 1                                # the rounds so far were too short to judge
                    rounds, count = {"A": [], "B": []}, 0
                    continue
                if count >= min_rounds and count % 5 == 0:
                    ratio = paired_ratio(rounds["A"], rounds["B"])
                    low, high = ratio.ci95
                    if (high - low) / ratio.value < 0.02 or time.perf_counter() - started > max_seconds:
                        break
            if any(side.deterministic and side.repeats_compared == 0 for side in sides.values()):
                inputs.refresh(repeat=True)                     # as in run_bench: at least one repeated batch
                for label in "AB":
                    sides[label].batch(inputs, check=True)
            consistency = {label: sides[label].consistency(inputs) for label in "AB"}
            finished = {label: sessions[label].finish() for label in "AB"}
            tails = (sessions["B"].tail("stdout"), sessions["B"].tail("stderr"))
        except WorkerEnded as ended:
            return {"status": ended.status, "detail": ended.detail}
        except CandidateFailed as error:
            return {"status": "crashed", "detail": f"a side failed while timed: {error}"}
        finally:
            close_timing(list(sessions.values()), inputs, list(sides.values()))
    ratio = paired_ratio(rounds["A"], rounds["B"])
    baseline_summary, candidate_summary = summarize(sides["A"].per_call), summarize(sides["B"].per_call)
    work = spec.work(shape, dtype)
    ceilings = _ceilings_for(device)
    candidate_rates = rates(work, candidate_summary.median, roof=current_roof(work, ceilings), cold=True)
    tamper, patched = _tamper_reasons(finished["B"])
    baseline_tamper, baseline_patched = _tamper_reasons(finished["A"], "the baseline")
    problems = sides["B"].failures + sessions["B"].guard_reasons + tamper + _idle_work(sessions["B"], "the candidate")
    baseline_problems = sides["A"].failures + sessions["A"].guard_reasons + baseline_tamper
    suspect = "; ".join(filter(None, [candidate_rates.suspect, *problems,
                                      *[f"baseline: {p}" for p in baseline_problems]])) or None
    noise = baseline_summary.relative_standard_error if baseline_summary.count > 1 else None
    return {"shape": shape_label(shape), "dtype": dtype, "speedup": ratio.value, "ci95": list(ratio.ci95),
            "pairs": ratio.pairs, "rounds": count, "verdict": verdict(ratio, margin), "margin": margin,
            "calls_per_batch": inputs.count, "resizes": resizes,
            "order": "ABBA batches, baseline and candidate in separate processes",
            "baseline_median_s": baseline_summary.median, "candidate_median_s": candidate_summary.median,
            "baseline_spread": ((baseline_summary.p80 - baseline_summary.p20) / baseline_summary.median
                                if baseline_summary.median else None),
            "noise": noise, "clock": "device-events" if device.startswith("cuda") else "wall", "device": device,
            "candidate_gb_per_s": candidate_rates.gb_per_s,
            "candidate_bandwidth_fraction": candidate_rates.bandwidth_fraction, "suspect": suspect,
            "timed_outputs_checked": {"baseline": sides["A"].checked, "candidate": sides["B"].checked},
            "determinism": {name: {"declared": sides[label].deterministic,
                                   "repeated_batches_compared": sides[label].repeats_compared}
                            for label, name in (("A", "baseline"), ("B", "candidate"))},
            "consistency": consistency,
            "notes": _unseen_notes(device, list(consistency.values())) + _window_notes(sessions.values()),
            "problems": problems, "baseline_problems": baseline_problems,
            "patched": patched, "baseline_patched": baseline_patched, "stdout_tail": tails[0],
            "stderr_tail": tails[1]}
