"""The candidate's side of a verdict: a child process that runs candidate code and decides nothing.

``python -m hello_gpu.agent.worker FD`` serves one agent process (:mod:`hello_gpu.agent.session`) over
the socket ``FD``. The parent sends pickled requests (it trusts nothing the child could have made; the
child trusts the parent); the child answers in JSON only, so nothing it sends can run code in the
parent when read. What the child can do:

- ``load`` a candidate (its rung file written into a copy of the operator's folder) and build it;
- ``register`` buffers the parent owns (:mod:`hello_gpu.agent.shared`) and ``call`` the candidate on
  them, the spec's plain options (a bool, an int, a float) passed by value: the outputs land in the
  parent's memory, where the parent checks them against a reference it computes itself, after the
  call returned;
- ``time`` a batch of calls with device events (the wall clock without a GPU) and say how long each
  took: claims, which the parent checks against its own wall clock over the batch;
- ``profile`` calls (the kernels they launched, on which stream, launched by which API) and count
  the candidate's own Triton launches;
- ``finish``: report the tamper evidence gathered since before the candidate was imported.

Tamper evidence (issue 17, part 3). Before any candidate code is imported the child installs a PEP 578
audit hook (``sys.addaudithook``: it cannot be removed) and takes a fingerprint of the functions a
verdict leans on. The hook records, when the innermost frame outside the standard library is the
candidate's own file: frame inspection (``sys._getframe``, ``sys._current_frames``, ``tb_frame`` /
``gi_frame`` reads), ``ctypes``, ``gc.get_objects`` / ``get_referrers``, ``sys.settrace`` / ``setprofile``,
``compile`` / ``exec``, processes and sockets, files opened outside the candidate's folder, new threads
(``_thread`` wrapped: Python 3.11 raises no audit event for them); and any import of another GPU compute
library (cupy, numba, jax, ...), whoever imports it. The fingerprint (object ids and code objects of
every function of ``hello_gpu``, ``torch``, ``torch.cuda``, ``torch.profiler``, ``numpy``, ``time``,
``triton``'s JIT and the spec, and the spec's data) is taken again at ``finish``; anything replaced is
named. Every one of these rejects the candidate (tag :data:`hello_gpu.agent.anticheat.TAMPER`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import socket
import sys
import sysconfig
import tempfile
import threading
import time
import traceback
import types
from multiprocessing.connection import Connection
from pathlib import Path

# Libraries that would do the work instead of the candidate's kernel: importing one is evidence.
COMPUTE_LIBRARIES = ("cupy", "numba", "jax", "jaxlib", "pycuda", "tensorflow", "cutlass", "flash_attn",
                     "xformers", "apex", "liger_kernel", "thunderkittens", "tilelang", "cuda.cccl")
# Audit events that are evidence when the candidate's own code raised them.
FRAME_EVENTS = ("sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "sys._getframemodulename")
FRAME_ATTRIBUTES = ("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_locals", "f_globals")
GC_EVENTS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")
PROCESS_EVENTS = ("os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
                  "os.kill", "os.killpg", "socket.connect", "socket.bind", "socket.__new__")
CODE_EVENTS = ("compile", "exec", "code.__new__", "function.__new__", "object.__setattr__", "object.__delattr__",
               "sys.addaudithook", "cpython.PyInterpreterState_Clear", "marshal.loads")
# Memory the candidate was not lent: another process's shared blocks mapped by name, a folder listed to find them.
MEMORY_EVENTS = ("mmap.__new__", "os.listdir", "os.scandir")
RECORDED_EVENTS = 40                         # evidence kept per kind: enough to name it, not to flood the result

# The standard library's folders (in a virtual environment "platstdlib" is the venv's lib/pythonX.Y, which
# also holds site-packages: a frame under "-packages" is never the standard library's).
_STDLIB = tuple(str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "platstdlib"))


class TamperWatch:
    """The audit hook, the thread and signal wrappers and the fingerprint; everything they saw, as reasons.

    Bound before any candidate code runs (issue 17): the hook and the report are closures over the functions
    and constants they use, taken at construction, so rebinding a module global (``worker.FRAME_EVENTS``,
    ``worker.time``), replacing a method on this class or ``builtins.__import__`` changes nothing they do;
    and every new piece of evidence is written at once to ``evidence_fd``, a pipe the parent reads, so
    nothing the candidate does afterwards can take it back (the parent also checks, from /proc, that the
    descriptor is still that pipe).
    """

    def __init__(self, evidence_fd: int | None = None):
        self.candidate_files: set[str] = set()
        self.allowed_folders: list[str] = []
        self.events: dict[str, list[str]] = {}
        self.armed = False
        self._threads_before = 0
        self.hook, self.record, self.report, self.take_fingerprint, self.remember = _bound_watch(self, evidence_fd)

    def wrap_threads(self) -> None:
        """Python 3.11 raises no audit event for a new thread, nor for a signal handler: wrap ``_thread``'s
        starters, the reference ``threading`` took of them at its import, and ``signal.signal``."""
        import _signal
        import _thread
        import signal
        import threading
        record, frame_of = self.record, self._frame_of
        for module, name in ((_thread, "start_new_thread"), (_thread, "start_joinable_thread"),
                             (threading, "_start_new_thread"), (threading, "_start_joinable_thread"),
                             (_signal, "signal"), (signal, "signal")):
            original = getattr(module, name, None)
            if original is None:
                continue
            kind = "signal handler" if "signal" in module.__name__ else "thread"

            def wrapped(*args, __original=original, __name=f"{module.__name__}.{name}", __kind=kind,
                        __getframe=sys._getframe, **kwargs):
                frame = frame_of(__getframe(1))
                if frame is not None:
                    record(__kind, f"line {frame.f_lineno} called {__name}")
                return __original(*args, **kwargs)
            setattr(module, name, wrapped)
            self.remember(f"{module.__name__}.{name}", wrapped)   # its defaults and closure, checked at the end
        self._threads_before = _thread._count()  # noqa: SLF001 - the standard library's own count


_MISSING = object()


def _bound_watch(state: TamperWatch, evidence_fd: int | None):
    """The closures of a :class:`TamperWatch` (see its docstring): (hook, record, report, take_fingerprint)."""
    import _thread

    write, getframe, count_threads = os.write, sys._getframe, _thread._count  # noqa: SLF001
    compute_libraries, frame_events, frame_attributes = COMPUTE_LIBRARIES, FRAME_EVENTS, FRAME_ATTRIBUTES
    gc_events, process_events, code_events, memory_events = GC_EVENTS, PROCESS_EVENTS, CODE_EVENTS, MEMORY_EVENTS
    stdlib, recorded_events, missing = _STDLIB, RECORDED_EVENTS, _MISSING
    string, represent, is_function, make_tuple = str, repr, types.FunctionType, tuple
    inside = threading.local()
    snapshot: list[tuple[str, object, object, object]] = []      # (name, live mapping, key, the value then)
    codes: list[tuple[str, object, tuple]] = []                   # (name, function, its insides then)
    texts: list[tuple[str, object, str]] = []                     # (name, data object, its repr then)

    def record(kind: str, text: str) -> None:
        found = state.events.setdefault(kind, [])
        if len(found) < recorded_events and text not in found:
            found.append(text)
            if evidence_fd is not None:
                line = f"{kind}\t{text}".replace("\n", " ")[:500] + "\n"
                try:
                    write(evidence_fd, line.encode("utf-8", "replace"))
                except OSError:           # a full or closed pipe: the parent sees the channel broken
                    pass

    def frame_of(frame, anywhere: bool = False):
        """The innermost frame outside the standard library when it is the candidate's own code (None also
        for the import machinery's events); with ``anywhere``, the candidate's frame wherever it is on the
        stack: a library that walks frames or the heap on the candidate's behalf acts for it."""
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith("<frozen importlib"):
                return None
            if name in state.candidate_files:
                return frame
            if not anywhere and not name.startswith("<frozen") and not (name.startswith(stdlib)
                                                                          and "-packages" not in name):
                return None
            frame = frame.f_back
        return None

    def hook(event: str, args: tuple) -> None:
        if not state.armed or getattr(inside, "busy", False):
            return
        if event == "import":
            module = string(args[0]) if args else ""
            if any(module == name or module.startswith(name + ".") for name in compute_libraries):
                record("compute library", f"imported {module}")
            return
        reaching = (event in frame_events or event in gc_events
                    or (event == "object.__getattr__" and len(args) > 1 and args[1] in frame_attributes))
        watched = (reaching or event in code_events or event in memory_events or event == "open"
                   or event.startswith("ctypes.") or any(event.startswith(p) for p in process_events))
        if not watched:
            return
        inside.busy = True
        try:
            frame = frame_of(getframe(1), anywhere=reaching)
            if frame is None:
                return
            where = f"line {frame.f_lineno}"
            if event == "open":
                path = string(args[0]) if args else ""
                if isinstance(args[0], int) or any(path.startswith(folder) for folder in state.allowed_folders):
                    return
                record("file", f"{where} opened {path}")
            elif event in frame_events or event == "object.__getattr__":
                record("frame inspection", f"{where} " + (f"{event}({args[1]})" if event == "object.__getattr__"
                                                           else event))
            elif event in gc_events:
                record("gc", f"{where} {event}")
            elif event.startswith("ctypes."):
                record("ctypes", f"{where} {event}")
            elif event in memory_events:
                record("memory", f"{where} {event}")
            elif event in code_events:
                record("code", f"{where} {event}" + (f"({args[1]})" if event.startswith("object.") and
                                                     len(args) > 1 else ""))
            else:
                record("process", f"{where} {event}")
        finally:
            inside.busy = False

    def insides(function) -> tuple:
        """What a function runs with besides its name: code, defaults, keyword defaults, closure cells (each
        can be changed in place, without rebinding the name)."""
        keywords = function.__kwdefaults__ or {}
        return (function.__code__, *(function.__defaults__ or ()), *keywords.keys(), *keywords.values(),
                *(cell.cell_contents for cell in function.__closure__ or ()))

    def same(before: tuple, after: tuple) -> bool:
        return len(before) == len(after) and all(old is new for old, new in zip(before, after))

    def remember(name: str, function) -> None:
        codes.append((name, function, insides(function)))

    def take_fingerprint(spec=None) -> None:
        """Remember what every name a verdict leans on refers to now (see :func:`fingerprint_targets`)."""
        inside.busy = True
        try:
            for name, mapping, key, value in fingerprint_targets(spec):
                snapshot.append((name, mapping, key, value))
                if isinstance(value, is_function):
                    codes.append((name, value, insides(value)))
                if name.startswith("spec.") and not callable(value):
                    texts.append((name, value, represent(value)))
        finally:
            inside.busy = False

    def report(spec=None) -> dict:
        """What was seen, and every remembered name that now refers to something else, in place or not."""
        inside.busy = True
        try:
            patched = sorted({name for name, mapping, key, value in snapshot if mapping.get(key, missing) is not value}
                             | {name for name, function, then in codes if not same(then, make_tuple(insides(function)))}
                             | {name for name, value, text in texts if represent(value) != text})
            for name in patched:
                record("replaced", name)
            running = max(0, count_threads() - state._threads_before)  # noqa: SLF001
            return {"events": state.events, "patched": patched, "threads_running": running}
        finally:
            inside.busy = False

    state._frame_of = frame_of
    return hook, record, report, take_fingerprint, remember


FINGERPRINTED_MODULES = ("time", "numpy", "torch", "torch.cuda", "torch.profiler", "torch.autograd.profiler",
                         "torch.multiprocessing.reductions", "triton.runtime.jit", "triton.runtime.autotuner",
                         "statistics", "math", "json", "pickle", "random", "multiprocessing.connection", "builtins",
                         "os", "sys", "signal", "_thread", "threading", "gc")
FINGERPRINTED_CLASSES = ("torch.Tensor", "torch.cuda.Event", "torch.cuda.Stream", "torch.profiler.profile",
                         "multiprocessing.connection.Connection", "triton.runtime.jit.JITFunction",
                         "triton.runtime.jit.KernelInterface", "triton.runtime.autotuner.Autotuner",
                         "triton.runtime.interpreter.InterpretedFunction")


def fingerprint_targets(spec=None) -> list[tuple[str, object, object, object]]:
    """(name, live mapping, key, value now) of every name a verdict leans on: the functions and classes of
    the modules above, every global of hello_gpu's modules (modules and data included: ``worker.time``
    rebound to a stand-in clock is a patch), the methods of the classes above and of hello_gpu's classes,
    the spec's names, and which module every name in sys.modules leads to (a module swapped there is a patch)."""
    found = []
    names = [name for name in list(sys.modules) if name == "hello_gpu" or name.startswith("hello_gpu.")]
    for module_name in [*FINGERPRINTED_MODULES, *names]:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        ours = module_name.startswith("hello_gpu")
        mapping = vars(module)
        for attribute, value in list(mapping.items()):
            if ours and not attribute.startswith("__") or isinstance(value, (types.FunctionType, type)) \
                    or callable(value) and not isinstance(value, types.ModuleType):
                found.append((f"{module_name}.{attribute}", mapping, attribute, value))
            if isinstance(value, type) and getattr(value, "__module__", "").startswith("hello_gpu"):
                for method, function in list(vars(value).items()):
                    if isinstance(function, (types.FunctionType, staticmethod, classmethod, property)):
                        found.append((f"{module_name}.{attribute}.{method}", vars(value), method, function))
    for dotted in FINGERPRINTED_CLASSES:
        module_name, _, class_name = dotted.rpartition(".")
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if cls is not None:
            for method, function in list(vars(cls).items()):
                if callable(function) or isinstance(function, (property, staticmethod, classmethod)):
                    found.append((f"{dotted}.{method}", vars(cls), method, function))
    if spec is not None:
        for attribute, value in list(vars(spec).items()):
            if not attribute.startswith("__") and not isinstance(value, types.ModuleType):
                found.append((f"spec.{attribute}", vars(spec), attribute, value))
    modules = sys.modules
    found += [(f"sys.modules[{name!r}]", modules, name, module) for name, module in list(modules.items())]
    return found


def aten_watch(record):
    """A dispatch mode that records every computing ATen op the candidate's calls run (issue 17: a library
    fallback is seen in every call, checked or timed, not only in the profiled ones, so a candidate that
    behaves while profiled gains nothing). Pushed around each request that calls the candidate; it records
    only while ``inside`` is set (the candidate's own call), through ``record`` (the write-through channel,
    kind "ATen op"). Allocation, views and copies (anticheat.CPU_GLUE_OPS) compute nothing and pass."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from .anticheat import CPU_GLUE_OPS
    glue = frozenset(CPU_GLUE_OPS)

    class AtenWatch(TorchDispatchMode):
        inside = False

        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            if self.inside:
                name = func._schema.name  # noqa: SLF001 - "aten::add" for aten.add.Tensor
                if name not in glue:
                    record("ATen op", f"{name} ran inside a call")
            return func(*args, **(kwargs or {}))
    return AtenWatch()


# ====================================================================================== serving


class Worker:
    def __init__(self, connection: Connection, watch: TamperWatch, aten=None):
        self.connection = connection
        self.watch = watch
        self.aten = aten
        self.buffers: dict[str, object] = {}
        self.keep: dict[str, object] = {}
        self.built = None
        self.op = None
        self.rung = None
        self.device = "cpu"
        self.launch_counter = None
        self.folder = Path(tempfile.mkdtemp(prefix="hello-gpu-candidate-"))
        self.held_result = None
        self.flush = None

    # ------------------------------------------------------------------ requests
    def load(self, request: dict) -> dict:
        from ..ops.rung import triton_interpreter_on
        from .sandbox import materialize
        from .store import task_from_dict
        task = task_from_dict(request["task"])
        op, names = materialize(task, {"candidate": request["candidate"]}, self.folder)
        self.op, self.rung = op, op.rung(names["candidate"])
        paths = [self.rung.path] + ([self.rung.companion] if self.rung.companion else [])
        self.watch.candidate_files = {str(path) for path in paths} | {str(path.resolve()) for path in paths}
        self.watch.allowed_folders = [str(self.folder), str(self.folder.resolve())]
        skip = self.rung.skip_reason()
        if self.rung.route == "triton" and skip is None:
            import triton  # noqa: F401 - before the fingerprint: its JIT's functions are fingerprinted too
            import triton.runtime.autotuner  # noqa: F401
            import triton.runtime.jit  # noqa: F401
            if triton_interpreter_on():
                import triton.runtime.interpreter  # noqa: F401
        self.watch.take_fingerprint(op.spec)
        if skip is not None:
            return {"skip": skip, "accepts_out": False, "interpreted": False, "device": self.rung.device(),
                    "triton_kernels": [], "route": self.rung.route, "interpreter": triton_interpreter_on(),
                    "rung": names["candidate"]}
        self.watch.armed = True                 # from here on, the candidate's code runs
        self.built = self.rung.build()
        self.device = self.rung.device()
        interpreted = bool(getattr(self.built, "interpreted", False))
        own_triton: list[str] = []
        if self.rung.route == "triton":
            from .anticheat import candidate_namespace, triton_launch_counter
            self.launch_counter = triton_launch_counter(candidate_namespace(self.built.function))
            own_triton = list(self.launch_counter.kernel_names)
        return {"skip": None, "accepts_out": bool(self.built.accepts_out), "interpreted": interpreted, "device": self.device,
                "triton_kernels": own_triton, "route": self.rung.route,
                "interpreter": triton_interpreter_on(), "rung": names["candidate"]}

    def register(self, request: dict) -> dict:
        from .shared import open_handle
        for name, handle in request["buffers"].items():
            tensor, keep = open_handle(handle)
            self.buffers[name], self.keep[name] = tensor, keep
        return {"registered": sorted(request["buffers"])}

    def release(self, request: dict) -> dict:
        for name in request["names"]:
            self.buffers.pop(name, None)
            self.keep.pop(name, None)
        return {}

    def _synchronize(self) -> None:
        if self.device.startswith("cuda"):
            import torch
            torch.cuda.synchronize()

    def _argument(self, entry):
        """One argument of a call as the parent sent it (session.lend): a registered buffer's key, or a plain
        option's value ({"option": value}: a bool, an int or a float), passed to the candidate as it is."""
        if isinstance(entry, str):
            return self.buffers[entry]
        value = entry["option"]
        if type(value) not in (bool, int, float):
            raise TypeError(f"an option must be a bool, an int or a float, not a {type(value).__name__}")
        return value

    def _invoke(self, inputs: list, out: str | None):
        arguments = [self._argument(entry) for entry in inputs]
        target = self.buffers[out] if out is not None else None
        if self.aten is not None:
            self.aten.inside = True
        try:
            if target is not None:
                return self.built(*arguments, out=target), target
            return self.built(*arguments), None
        finally:
            if self.aten is not None:
                self.aten.inside = False

    def call(self, request: dict) -> dict:
        """One call; the output lands in the parent's buffer (``out``) or is held for ``fetch``."""
        import torch
        if self.launch_counter is not None:
            with self.launch_counter() as count:
                result, target = self._invoke(request["inputs"], request.get("out"))
                self._synchronize()
            launches = count.count
        else:
            result, target = self._invoke(request["inputs"], request.get("out"))
            self._synchronize()
            launches = None
        answer = {"launches": launches}
        if target is not None:
            same = result is None or (isinstance(result, torch.Tensor) and result.data_ptr() == target.data_ptr())
            answer["returned"] = "out" if same else "other"
        if isinstance(result, torch.Tensor):
            self.held_result = result
            answer.update(shape=list(result.shape), dtype=str(result.dtype).removeprefix("torch."))
        else:
            self.held_result = None
            answer["type"] = type(result).__name__
        return answer

    def fetch(self, request: dict) -> dict:
        """Copy the held result into the parent's buffer ``into`` (a run() that allocates its own output)."""
        target = self.buffers[request["into"]]
        target.copy_(self.held_result.reshape(target.shape))
        self._synchronize()
        self.held_result = None
        return {}

    def time(self, request: dict) -> dict:
        """A batch of calls, each between two events (after an L2 flush when ``cold``), one synchronize.

        Returns each call's seconds and the span from before the first call to after the last: claims,
        which the parent checks against its own clock around the whole request."""
        from ..runtime.kernel import empty_launches        # imported in main() before the candidate
        from .sandbox import empty_launch_reason
        empty_before = empty_launches()
        answer = self._time(request)
        # Launches our runtime skipped for an empty grid during the batch (issue 17: evidence, not a no-op).
        answer["empty_launches"] = empty_launch_reason(empty_before)
        return answer

    def _time(self, request: dict) -> dict:
        calls = [(list(inputs), out) for inputs, out in request["calls"]]
        cold = bool(request.get("cold"))
        if not self.device.startswith("cuda"):
            began = time.perf_counter()
            seconds = []
            for inputs, out in calls:
                start = time.perf_counter()
                self._invoke(inputs, out)
                seconds.append(time.perf_counter() - start)
            return {"per_call_s": seconds, "span_s": time.perf_counter() - began, "clock": "wall"}
        import torch
        from ..bench.compare import DeviceTimer
        if cold and self.flush is None:
            self.flush = DeviceTimer("cold").flush
        flush = self.flush if cold else None
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in calls]
        begin, finish = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for (inputs, out), (start, end) in zip(calls, events):
            if flush is not None:
                flush()
            start.record()
            self._invoke(inputs, out)
            end.record()
        finish.record()
        torch.cuda.synchronize()
        return {"per_call_s": [start.elapsed_time(end) / 1e3 for start, end in events],
                "span_s": begin.elapsed_time(finish) / 1e3, "clock": "device-events"}

    def profile(self, request: dict) -> dict:
        """Kernels of ``repeats`` calls (the profiler's trace) and the candidate's own launches per call."""
        from ..profile.rung_profile import own_kernel_names
        from .anticheat import profile_evidence
        ours, triton = own_kernel_names(self.rung)
        triton = tuple(triton) + tuple(getattr(self.launch_counter, "kernel_names", ()))
        own_launches = []
        counter_factory = self.launch_counter

        def one_call():
            # No synchronisation here: profile_evidence queues its after-call marker first (a side stream
            # left running must still be running then), then waits.
            if counter_factory is not None:
                with counter_factory() as count:
                    self._invoke(request["inputs"], request.get("out"))
                own_launches.append(count.count)
            else:
                self._invoke(request["inputs"], request.get("out"))
        evidence = profile_evidence(one_call, ours=ours, triton=triton, repeats=int(request.get("repeats", 3)),
                                    hold=bool(request.get("hold")))
        evidence["own_launches"] = own_launches if counter_factory is not None else None
        evidence["own_names"] = sorted({*ours, *triton})
        return evidence

    def ping(self, request: dict) -> dict:
        self._synchronize()
        return {}

    def finish(self, request: dict) -> dict:
        spec = self.op.spec if self.op is not None else None
        return self.watch.report(spec)

    # ------------------------------------------------------------------ the loop
    def serve(self) -> None:
        handlers = {"load": self.load, "register": self.register, "release": self.release, "call": self.call,
                    "fetch": self.fetch, "time": self.time, "profile": self.profile, "ping": self.ping,
                    "finish": self.finish}
        while True:
            try:
                request = pickle.loads(self.connection.recv_bytes())
            except EOFError:
                return
            operation = request.get("op")
            watched = self.aten if self.aten is not None and operation in ("call", "time", "profile") else None
            try:
                if watched is not None:
                    with watched:
                        answer = {"ok": True, **handlers[operation](request)}
                else:
                    answer = {"ok": True, **handlers[operation](request)}
            except Exception as error:  # noqa: BLE001 - the candidate (or the harness on it) failed: say so
                answer = {"ok": False, "error": f"{type(error).__name__}: {error}",
                          "traceback": traceback.format_exc()[-4000:]}
            answer["nonce"] = request.get("nonce")          # whose answer this is: the parent checks it
            self.connection.send_bytes(json.dumps(answer, default=str).encode("utf-8"))
            if operation == "finish":
                return


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    connection = Connection(socket.socket(fileno=int(arguments[0])).detach())
    watch = TamperWatch(int(arguments[1]) if len(arguments) > 1 else None)
    # Imports a step needs, before the hook is armed and the fingerprint taken (the fingerprint covers
    # hello_gpu's modules as they are once imported).
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401 - rewraps torch.manual_seed on import; imported on the way anyway
    import torch.profiler  # noqa: F401

    from ..bench import compare as _compare  # noqa: F401
    from ..ops import checking as _checking  # noqa: F401
    from ..profile import rung_profile as _rung_profile  # noqa: F401
    from . import anticheat as _anticheat  # noqa: F401
    from . import sandbox as _sandbox  # noqa: F401
    aten = aten_watch(watch.record)
    sys.addaudithook(watch.hook)
    watch.wrap_threads()
    Worker(connection, watch, aten).serve()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not a normal exit: a thread the candidate left running must not hold the child open.
    os._exit(0)


if __name__ == "__main__":
    # Serve from the module under its own name, not from __main__: the fingerprint covers
    # hello_gpu.agent.worker's classes, and a candidate patching them must be seen doing it.
    from hello_gpu.agent import worker as _named
    sys.exit(_named.main())
