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
RECORDED_EVENTS = 40                         # evidence kept per kind: enough to name it, not to flood the result

# The standard library's folders (in a virtual environment "platstdlib" is the venv's lib/pythonX.Y, which
# also holds site-packages: a frame under "-packages" is never the standard library's).
_STDLIB = tuple(str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "platstdlib"))


class TamperWatch:
    """The audit hook, the thread wrapper and the fingerprints; everything they saw, as reasons."""

    def __init__(self):
        self.candidate_files: set[str] = set()
        self.allowed_folders: list[str] = []
        self.events: dict[str, list[str]] = {}
        self.armed = False
        self._inside = threading.local()
        self._before: dict[str, tuple] = {}
        self._threads_before = 0

    # ------------------------------------------------------------------ the hook
    def _record(self, kind: str, text: str) -> None:
        found = self.events.setdefault(kind, [])
        if len(found) < RECORDED_EVENTS and text not in found:
            found.append(text)

    def _candidate_frame(self, frame):
        """The innermost frame outside the standard library, when it is the candidate's own code; None
        also when the event came from the import machinery (an ``import`` opens and compiles files)."""
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith("<frozen importlib"):
                return None
            if name.startswith("<frozen") or (name.startswith(_STDLIB) and "-packages" not in name):
                frame = frame.f_back
                continue
            return frame if name in self.candidate_files else None
        return None

    def hook(self, event: str, args: tuple) -> None:
        if not self.armed or getattr(self._inside, "busy", False):
            return
        if event == "import":
            module = str(args[0]) if args else ""
            if any(module == name or module.startswith(name + ".") for name in COMPUTE_LIBRARIES):
                self._record("compute library", f"imported {module}")
            return
        watched = (event in FRAME_EVENTS or event in GC_EVENTS or event in CODE_EVENTS or event == "open"
                   or event.startswith("ctypes.") or any(event.startswith(p) for p in PROCESS_EVENTS)
                   or (event == "object.__getattr__" and len(args) > 1 and args[1] in FRAME_ATTRIBUTES))
        if not watched:
            return
        self._inside.busy = True
        try:
            frame = self._candidate_frame(sys._getframe(1))
            if frame is None:
                return
            where = f"line {frame.f_lineno}"
            if event == "open":
                path = str(args[0]) if args else ""
                if isinstance(args[0], int) or any(path.startswith(folder) for folder in self.allowed_folders):
                    return
                self._record("file", f"{where} opened {path}")
            elif event in FRAME_EVENTS or event == "object.__getattr__":
                what = f"{event}({args[1]})" if event == "object.__getattr__" else event
                self._record("frame inspection", f"{where} {what}")
            elif event in GC_EVENTS:
                self._record("gc", f"{where} {event}")
            elif event.startswith("ctypes."):
                self._record("ctypes", f"{where} {event}")
            elif event in CODE_EVENTS:
                self._record("code", f"{where} {event}" + (f"({args[1]})" if event.startswith("object.") and
                                                           len(args) > 1 else ""))
            else:
                self._record("process", f"{where} {event}")
        finally:
            self._inside.busy = False

    def wrap_threads(self) -> None:
        """Python 3.11 raises no audit event for a new thread: wrap ``_thread``'s starters (threading uses them)."""
        import _thread
        watch = self
        for name in ("start_new_thread", "start_joinable_thread"):
            original = getattr(_thread, name, None)
            if original is None:
                continue

            def started(*args, __original=original, __name=name, **kwargs):
                frame = watch._candidate_frame(sys._getframe(1)) if watch.armed else None
                if frame is not None:
                    watch._record("thread", f"line {frame.f_lineno} started a thread (_thread.{__name})")
                return __original(*args, **kwargs)
            setattr(_thread, name, started)
        self._threads_before = _thread._count()  # noqa: SLF001 - the standard library's own count

    # ------------------------------------------------------------------ fingerprints
    def fingerprint_now(self, spec=None) -> dict[str, tuple]:
        return fingerprint(spec)

    def take_fingerprint(self, spec=None) -> None:
        self._before = fingerprint(spec)

    def replaced(self, spec=None) -> list[str]:
        after = fingerprint(spec)
        return sorted(name for name, value in self._before.items() if after.get(name, ("gone",)) != value)

    def reasons(self, spec=None) -> dict:
        import _thread
        self._inside.busy = True                      # the harness's own look at frames and code is not evidence
        try:
            patched = self.replaced(spec)
        finally:
            self._inside.busy = False
        running = max(0, _thread._count() - self._threads_before)  # noqa: SLF001
        return {"events": self.events, "patched": patched, "threads_running": running}


def _code_key(value) -> tuple:
    code = getattr(value, "__code__", None) if isinstance(value, types.FunctionType) else None
    if not isinstance(code, types.CodeType):
        return (id(value),)
    return (id(value), id(code), hashlib.sha256(code.co_code).hexdigest()[:16])


def _data_key(value) -> tuple:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - an unprintable value is compared by identity alone
        return (id(value),)
    return (hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16],)


FINGERPRINTED_MODULES = ("time", "numpy", "torch", "torch.cuda", "torch.profiler", "torch.autograd.profiler",
                         "torch.multiprocessing.reductions", "triton.runtime.jit", "triton.runtime.autotuner",
                         "statistics", "math", "json", "pickle", "random", "multiprocessing.connection")
FINGERPRINTED_CLASSES = ("torch.Tensor", "torch.cuda.Event", "torch.cuda.Stream", "torch.profiler.profile",
                         "multiprocessing.connection.Connection", "triton.runtime.jit.JITFunction",
                         "triton.runtime.jit.KernelInterface", "triton.runtime.autotuner.Autotuner",
                         "triton.runtime.interpreter.InterpretedFunction")


def fingerprint(spec=None) -> dict[str, tuple]:
    """Name -> identity (and code) of every function a verdict leans on, now; see the module docstring."""
    found: dict[str, tuple] = {}
    names = [name for name in list(sys.modules) if name == "hello_gpu" or name.startswith("hello_gpu.")]
    for module_name in [*FINGERPRINTED_MODULES, *names]:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)) \
                    or callable(value) and not isinstance(value, types.ModuleType):
                found[f"{module_name}.{attribute}"] = _code_key(value)
            if isinstance(value, type) and getattr(value, "__module__", "").startswith("hello_gpu"):
                for method, function in list(vars(value).items()):
                    if isinstance(function, (types.FunctionType, staticmethod, classmethod, property)):
                        found[f"{module_name}.{attribute}.{method}"] = _code_key(function)
    for dotted in FINGERPRINTED_CLASSES:
        module_name, _, class_name = dotted.rpartition(".")
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if cls is not None:
            for method, function in list(vars(cls).items()):
                if callable(function) or isinstance(function, (property, staticmethod, classmethod)):
                    found[f"{dotted}.{method}"] = _code_key(function)
    if spec is not None:
        for attribute, value in list(vars(spec).items()):
            if attribute.startswith("__") or isinstance(value, types.ModuleType):
                continue
            key = _code_key(value) if callable(value) else _data_key(value)
            found[f"spec.{attribute}"] = key
    return found


# ====================================================================================== serving


class Worker:
    def __init__(self, connection: Connection, watch: TamperWatch):
        self.connection = connection
        self.watch = watch
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
        if target is not None:
            return self.built(*arguments, out=target), target
        return self.built(*arguments), None

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
        return self.watch.reasons(spec)

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
            try:
                answer = {"ok": True, **handlers[operation](request)}
            except Exception as error:  # noqa: BLE001 - the candidate (or the harness on it) failed: say so
                answer = {"ok": False, "error": f"{type(error).__name__}: {error}",
                          "traceback": traceback.format_exc()[-4000:]}
            self.connection.send_bytes(json.dumps(answer, default=str).encode("utf-8"))
            if operation == "finish":
                return


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    connection = Connection(socket.socket(fileno=int(arguments[0])).detach())
    watch = TamperWatch()
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
    sys.addaudithook(watch.hook)
    watch.wrap_threads()
    Worker(connection, watch).serve()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not a normal exit: a thread the candidate left running must not hold the child open.
    os._exit(0)


if __name__ == "__main__":
    # Serve from the module under its own name, not from __main__: the fingerprint covers
    # hello_gpu.agent.worker's classes, and a candidate patching them must be seen doing it.
    from hello_gpu.agent import worker as _named
    sys.exit(_named.main())
