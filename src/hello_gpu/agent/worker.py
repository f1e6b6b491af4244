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
  took: claims, which the parent checks against its own wall clock over the batch; and, after each counted
  call, how long the work it queued on any stream ran past its end event (ContextDrain: one context event);
- ``profile`` calls (the kernels they launched, on which stream, launched by which API) and count
  the candidate's own Triton launches;
- ``finish``: report the tamper evidence gathered since before the candidate was imported.

Every call, checked, timed or profiled, begins in the same state (Worker._prepare_call: the timed stream
current, the L2 flush queued on it, the launch counter on) and is made from the same lines, through the same
frames (Worker._calls, given each kind's CallPlan), so that the candidate cannot tell which it is in.

Tamper evidence (issue 17, part 3). Before any candidate code is imported the child installs a PEP 578
audit hook (``sys.addaudithook``: it cannot be removed) and takes a fingerprint of the functions a
verdict leans on. The hook records, when the innermost frame outside the standard library is the
candidate's own file: frame inspection (``sys._getframe``, ``sys._current_frames``, ``tb_frame`` /
``gi_frame`` reads), ``ctypes``, ``gc.get_objects`` / ``get_referrers``, ``sys.settrace`` / ``setprofile``,
``compile`` / ``exec``, processes and sockets, files opened outside the candidate's folder; and any import
of another GPU compute library (cupy, numba, jax, ...), whoever imports it. A module-name lookup (a namedtuple,
an Enum, Triton's compiler asking which module called it) is judged by the frame it names: inside the
candidate's own call it is no evidence, at the harness's frames it is. Functions that raise no audit
event are wrapped wherever a loaded module holds them (:data:`GUARDED_FUNCTIONS`, :data:`DISPATCH_SWITCHES`):
new threads (``_thread``'s starters and aliases), signal handlers, descriptor calls on the child's own
channels (``os.dup2`` over the evidence pipe, ``os.close`` of the socket), and whatever takes the ATen
watch off (the dispatch-mode stack, the Python dispatch key, an op called at a chosen dispatch key).
The fingerprint (object ids and code objects of every function of ``hello_gpu``, ``torch``, ``torch._C``,
``torch.cuda``, ``torch.profiler``, ``numpy``, ``time``, ``os`` / ``posix``, ``triton``'s JIT and the spec,
and the spec's data) is taken again at ``finish``; anything replaced is named. Every one of these rejects
the candidate (tag :data:`hello_gpu.agent.anticheat.TAMPER`).

What the watch cannot promise (docs/agent.md, threat model): the candidate owns this interpreter, so an
object it can reach it can change for the length of one call and put back; the watch's own switches are
therefore kept where nothing reaches them without an audited access, evidence leaves at once and is
counted, and the verdict itself is the parent's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
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
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

# Libraries that would do the work instead of the candidate's kernel: importing one is evidence.
COMPUTE_LIBRARIES = ("cupy", "numba", "jax", "jaxlib", "pycuda", "tensorflow", "cutlass", "flash_attn",
                     "xformers", "apex", "liger_kernel", "thunderkittens", "tilelang", "cuda.cccl")
# Audit events that are evidence when the candidate's own code raised them. (CPython 3.11-3.13 audit no read of
# f_back, f_locals or f_globals: from any frame handed out, the whole stack is in reach unseen. So a frame handed
# out is evidence whatever frame it is; only a module name, which leads nowhere, is judged by the frame it names.)
FRAME_EVENTS = ("sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "sys._getframemodulename")
FRAME_ATTRIBUTES = ("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_locals", "f_globals")
# Module-name lookups: sys._getframemodulename(depth) names the module of the frame ``depth`` levels above its
# caller, and these standard-library functions call sys._getframe(depth) only to read that frame's
# f_globals['__name__'] (Python 3.11; 3.12+ asks sys._getframemodulename). A lookup is evidence only when the
# frame it names lies outside the candidate's own call (the worker's _invoke or above: who is calling it?);
# inside it, it is a namedtuple, an Enum or Triton's compiler learning its caller's module (the H200, issue 17).
MODULE_NAME_LOOKUP = "sys._getframemodulename"
MODULE_NAME_READERS = ("collections.namedtuple", "enum.EnumType._create_", "typing._caller")
# collections.namedtuple compiles and runs its own one-line template, ``lambda _cls, a, b: _tuple_new(_cls, (a, b))``
# (no builtins, only its arguments and _tuple_new), then sets __module__ / __defaults__ on what it made: not the
# candidate's code, when what runs is that template (checked at "exec": nothing but _tuple_new is named).
TEMPLATE_MAKER = "collections.namedtuple"
GC_EVENTS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")
PROCESS_EVENTS = ("os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
                  "os.kill", "os.killpg", "socket.connect", "socket.bind", "socket.__new__")
CODE_EVENTS = ("compile", "exec", "code.__new__", "function.__new__", "object.__setattr__", "object.__delattr__",
               "sys.addaudithook", "cpython.PyInterpreterState_Clear", "marshal.loads")
# Memory the candidate was not lent: another process's shared blocks mapped by name, a folder listed to find them.
MEMORY_EVENTS = ("mmap.__new__", "os.listdir", "os.scandir")
RECORDED_EVENTS = 40                         # evidence kept per kind: enough to name it, not to flood the result
PROBE_HOLD_MAX_S = 0.05                      # the longest a probe (a "time" request without calls) holds its span
PROBE_MARKS_MAX = 4096                       # the most empty (start, end) marks a probe records: a batch's calls
OTHER_CONTEXT = "another CUDA context"
CALL_HOLD_CYCLES = 10**6                     # ~0.5 ms at 2 GHz: the spin before a flush queued on an idle stream,
                                             # longer than the host's way from the flush to the candidate's first line
# Functions a candidate could use unseen (Python 3.11 raises no audit event for them), wrapped before it is
# imported wherever a module holds them; the kind of evidence each use is. The descriptor functions are
# evidence only on the child's watched descriptors (the evidence pipe, the socket to the parent).
GUARDED_FUNCTIONS = {
    "_thread.start_new_thread": "thread", "_thread.start_new": "thread", "_thread.start_joinable_thread": "thread",
    "_signal.signal": "signal handler",
    **{f"posix.{name}": "descriptor" for name in ("dup", "dup2", "close", "closerange", "write", "writev", "pwrite",
                                                    "read", "readv", "set_inheritable", "set_blocking", "sendfile",
                                                    "ftruncate", "lseek")},
    "_socket.close": "descriptor", "_socket.dup": "descriptor",
    # A CUDA context of the candidate's own: its work is in no event of the primary context, so the context event
    # after each timed call (ContextDrain) would not see work left running there. (Green contexts it does see.)
    **{f"cuda.bindings.driver.{name}": OTHER_CONTEXT for name in ("cuCtxCreate", "cuCtxCreate_v2", "cuCtxCreate_v3",
                                                                   "cuCtxCreate_v4")},
}
# What takes the ATen watch off (issue 17): the mode stack's pop and push, the guards and setters of the
# thread-local dispatch keys (excluding the Python key skips every mode), the infra-mode slots, and the calls
# that dispatch below the Python key. Evidence when the candidate's code is anywhere on the stack.
DISPATCH_SWITCHES = ("_pop_torch_dispatch_stack", "_push_on_torch_dispatch_stack", "_set_dispatch_mode",
                     "_unset_dispatch_mode", "_dispatch_tls_set_dispatch_key_excluded",
                     "_dispatch_tls_set_dispatch_key_included", "_DisableTorchDispatch", "_ExcludeDispatchKeyGuard",
                     "_IncludeDispatchKeyGuard", "_ForceDispatchKeyGuard", "_SetExcludeDispatchKeyGuard",
                     "_get_operation_overload")
# ... and each op's entry at a chosen dispatch key (OpOverload._op_dk, and the handle's redispatch), which call
# the op below the Python key without switching anything. torch itself makes an op's entries the first time
# the op is looked up, so _get_operation_overload is evidence only when the candidate's code calls it directly.
DISPATCH_METHODS = (("_DispatchOperatorHandle", "redispatch_boxed"),)
CALLED_DIRECTLY = ("torch._C._get_operation_overload",)
SWITCH_KIND = "switching off the ATen watch"
DISPATCH_STATE = ("modes on the stack", "the top mode's id", "included dispatch keys", "excluded dispatch keys",
                  "the watch's __torch_dispatch__ as installed")
CHANNEL_KIND = "descriptor calls on the watched channels"

# The standard library's folders (in a virtual environment "platstdlib" is the venv's lib/pythonX.Y, which
# also holds site-packages: a frame under "-packages" is never the standard library's).
_STDLIB = tuple(str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "platstdlib"))


class TamperWatch:
    """The audit hook, the guarded functions and the fingerprint; everything they saw, as reasons.

    Bound before any candidate code runs (issue 17). Nothing the candidate can reach without an audited
    access (frames, ``gc``) leads to the watch's switches: they live in the audit hook's own closure, and
    the hook is held by the interpreter alone. The wrappers of the guarded functions and the dispatch mode
    hold no reference to the watch: they raise audit events (``hello_gpu.*``), and the hook hands each
    wrapper the function it wraps, one call at a time. Whether the watch is armed and whether a candidate
    call is in progress are told to the hook by events it checks the origin of (a call begins and ends
    only in :meth:`Worker._invoke`'s own code). Every new piece of evidence is written at once to
    ``evidence_fd``, a pipe the parent reads, and counted: every answer says how many lines were written,
    and the parent counts what arrived, so a line redirected, drained or dropped is itself evidence.
    """

    def __init__(self, evidence_fd: int | None = None, watched_fds: dict[int, str] | None = None, invoke_code=None,
                 serve_code=None):
        self.candidate_files: set[str] = set()
        self.allowed_folders: list[str] = []
        self.events: dict[str, list[str]] = {}
        (self.hook, self.record, self.report, self.take_fingerprint, self.remember,
         self.protect) = _bound_watch(self, evidence_fd, dict(watched_fds or {}), invoke_code, serve_code)

    def guard_functions(self, aten=None) -> list[str]:
        """Wrap every guarded function (GUARDED_FUNCTIONS, and torch's DISPATCH_SWITCHES when torch is loaded)
        in every loaded module that holds it; hand ``aten`` (the dispatch mode) to the hook, which checks it
        is on top of the mode stack when each call begins. Returns the names wrapped."""
        import _thread
        originals: dict[str, tuple[object, str]] = {}
        for dotted, kind in GUARDED_FUNCTIONS.items():
            module_name, _, name = dotted.rpartition(".")
            value = getattr(sys.modules.get(module_name), name, None)
            if value is not None:
                originals[dotted] = (value, kind)
        torch_c = sys.modules.get("torch._C")
        if torch_c is not None:
            for name in DISPATCH_SWITCHES:
                if hasattr(torch_c, name):
                    originals[f"torch._C.{name}"] = (getattr(torch_c, name), SWITCH_KIND)
        wrappers = {id(original): _guarded(dotted) for dotted, (original, _) in originals.items()}
        self.protect(originals, wrappers, aten)
        for module in list(sys.modules.values()):
            mapping = getattr(module, "__dict__", None)
            if not isinstance(mapping, dict):
                continue
            for key, value in list(mapping.items()):
                wrapper = wrappers.get(id(value))
                if wrapper is not None and any(value is original for original, _ in originals.values()):
                    mapping[key] = wrapper
        if torch_c is not None:
            for class_name, method in DISPATCH_METHODS:
                cls = getattr(torch_c, class_name, None)
                if cls is not None and hasattr(cls, method):
                    dotted = f"torch._C.{class_name}.{method}"
                    original = getattr(cls, method)
                    wrapper = _guarded(dotted)
                    self.protect({dotted: (original, SWITCH_KIND)}, {id(original): wrapper}, aten)
                    setattr(cls, method, wrapper)
        if "torch._ops" in sys.modules:
            _guard_operator_entries(sys.modules["torch._ops"])
        self._threads_before = _thread._count()  # noqa: SLF001 - the standard library's own count
        return sorted(originals)


def _guard_operator_entries(ops) -> None:
    """Each op's entry at a chosen dispatch key (``OpOverload._op_dk``) becomes a wrapper whose use by the
    candidate is evidence (the hook keeps the original): for the ops torch has made already, and, through
    ``OpOverload.__init__``, for every op it makes later."""
    import torch
    for namespace in list(vars(torch.ops).values()):
        for packet in list(vars(namespace).values()) if isinstance(namespace, ops._OpNamespace) else ():  # noqa: SLF001
            for overload in list(vars(packet).values()) if isinstance(packet, ops.OpOverloadPacket) else ():
                if isinstance(overload, ops.OpOverload) and "_op_dk" in vars(overload):
                    box: list = []
                    sys.audit("hello_gpu.guard_entry", overload._name, vars(overload)["_op_dk"], box)  # noqa: SLF001
                    if box:
                        vars(overload)["_op_dk"] = box[0]

    def __init__(self, overloadpacket, op, op_dk, schema, tags, *, __init=ops.OpOverload.__init__,
                 __audit=sys.audit):
        box: list = []
        __audit("hello_gpu.guard_entry", f"{schema.name}.{schema.overload_name or 'default'}", op_dk, box)
        __init(self, overloadpacket, op, box[0] if box else op_dk, schema, tags)
    ops.OpOverload.__init__ = __init__


def _guarded(dotted: str):
    """A stand-in for the guarded function ``dotted``: it raises an audit event, and the hook, which decides
    whether the call is evidence, gives it the original to call. It holds no reference to the original or to
    the watch (its keyword defaults are only the audit function and its name; writing them is audited)."""
    def guarded(*args, __audit=sys.audit, __name=dotted, **kwargs):
        box: list = []
        __audit("hello_gpu.original", __name, args, box)
        return box[0](*args, **kwargs)
    guarded.__name__ = guarded.__qualname__ = dotted.rpartition(".")[2]
    return guarded


_GUARDED_CODE = _guarded("x").__code__
_MISSING = object()


def _code_of(dotted: str):
    """The code object of the standard-library function ``dotted`` ("module.name" or "module.Class.name"), taken
    before any candidate code runs; None where this Python has no such function."""
    import importlib
    module_name, _, rest = dotted.partition(".")
    try:
        value = importlib.import_module(module_name)
    except ImportError:
        return None
    for part in rest.split("."):
        value = vars(value).get(part) if isinstance(value, type) else getattr(value, part, None)
    return getattr(value, "__code__", None)


def _bound_watch(state: TamperWatch, evidence_fd: int | None, watched_fds: dict[int, str], invoke_code,
                 serve_code=None):
    """The closures of a :class:`TamperWatch` (see its docstring): (hook, record, report, take_fingerprint,
    remember, protect). The hook's switches (armed, calls in progress, the originals) are its own cells."""
    import _thread

    write, getframe, count_threads, stat, fstat = os.write, sys._getframe, _thread._count, os.stat, os.fstat  # noqa: SLF001
    compute_libraries, frame_events, frame_attributes = COMPUTE_LIBRARIES, FRAME_EVENTS, FRAME_ATTRIBUTES
    gc_events, process_events, code_events, memory_events = GC_EVENTS, PROCESS_EVENTS, CODE_EVENTS, MEMORY_EVENTS
    stdlib, recorded_events, missing, guarded_code, make_wrapper = _STDLIB, RECORDED_EVENTS, _MISSING, _GUARDED_CODE, \
        _guarded
    called_directly = CALLED_DIRECTLY
    string, represent, is_function, make_tuple, integer = str, repr, types.FunctionType, tuple, int
    bound_kind = functools.partialmethod   # the worker's call, time and profile: one function, the kind bound in C
    method_types = (is_function, bound_kind)
    code_type, frame_type = types.CodeType, types.FrameType
    module_name_lookup = MODULE_NAME_LOOKUP
    # By identity (code objects compare by content): the functions as this interpreter loaded them.
    readers = [code for code in map(_code_of, MODULE_NAME_READERS) if code is not None]
    reader_ids = frozenset(id(code) for code in readers)
    template_maker = _code_of(TEMPLATE_MAKER)
    inside = threading.local()
    armed = [False]                       # only ever switched on ("hello_gpu.arm")
    depth = [0]                           # candidate calls in progress (Worker._invoke's own events)
    written = [0]                         # evidence lines written to the pipe
    originals: dict[str, tuple[object, str]] = {}        # guarded name -> (original, kind of evidence)
    protected: set[int] = set()           # ids of functions whose code or defaults must not be rewritten
    mode = [None]                         # the dispatch mode that must be on top while a call runs
    call_states: list[tuple] = []         # the dispatch state as each call in progress began
    request = [None, 0, 0]                # the request being served: (its operation, calls it makes, calls seen)
    worker: list = [None, None, {}]       # the worker being served, its class, its methods as they were
    pipe = [None]                         # (device, inode) of the evidence pipe
    if evidence_fd is not None:
        identity = os.fstat(evidence_fd)
        pipe[0] = (identity.st_dev, identity.st_ino)
    watched_files = {}                    # (device, inode) of each watched descriptor -> what it is
    for descriptor, what in watched_fds.items():
        try:
            found = fstat(descriptor)
            watched_files[(found.st_dev, found.st_ino)] = what
        except OSError:
            pass
    snapshot: list[tuple[str, object, object, object]] = []      # (name, live mapping, key, the value then)
    codes: list[tuple[str, object, tuple]] = []                   # (name, function, its insides then)
    texts: list[tuple[str, object, str]] = []                     # (name, data object, its repr then)
    dispatch = []                         # torch's dispatch-state functions, taken before anything is wrapped
    dispatch_method = [None]              # the watch's __torch_dispatch__ (class, instance) as installed

    def record(kind: str, text: str) -> None:
        found = state.events.setdefault(kind, [])
        if len(found) < recorded_events and text not in found:
            found.append(text)
            if evidence_fd is not None:
                line = f"{kind}\t{text}".replace("\n", " ")[:500] + "\n"
                try:
                    # Only into the pipe itself: a descriptor number closed and reused holds something else
                    # (a shared buffer, a file). Anything else, or a full pipe: the count says a line is missing.
                    now = fstat(evidence_fd)
                    if (now.st_dev, now.st_ino) == pipe[0]:
                        write(evidence_fd, line.encode("utf-8", "replace"))
                except OSError:
                    pass
                written[0] += 1

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

    def dispatch_state() -> tuple:
        """(modes on the stack, the top one, the thread's included / excluded dispatch keys, the watch's method
        as its class and the instance hold it): what must not change while a call runs."""
        length, stack_at, included, excluded = dispatch
        size = length()
        watch = mode[0]
        method = (vars(type(watch)).get("__torch_dispatch__"), vars(watch).get("__torch_dispatch__"))
        return size, id(stack_at(size - 1)) if size else None, included(), excluded(), method == dispatch_method[0]

    def watched_descriptor(arguments: tuple, name: str) -> str | None:
        """The watched descriptor a descriptor call touches, as text; None when it touches none."""
        numbers = [value for value in arguments[:2] if isinstance(value, integer) and not isinstance(value, bool)]
        if name.endswith("closerange") and len(numbers) == 2:
            hit = [descriptor for descriptor in watched_fds if numbers[0] <= descriptor < numbers[1]]
        else:
            hit = [value for value in numbers if value in watched_fds]
        return ", ".join(f"{descriptor} ({watched_fds[descriptor]})" for descriptor in hit) or None

    def internal(event: str, args: tuple) -> None:
        """The watch's own events (``hello_gpu.*``): told by the worker, or by the wrappers and the mode.
        Answered even while the hook is busy (a wrapper needs its original); what the hook itself does here
        (frames read, the dispatch state asked) raises events it must not record: busy meanwhile."""
        busy = getattr(inside, "busy", False)
        inside.busy = True
        try:
            handle(event, args, busy)
        finally:
            inside.busy = busy

    def handle(event: str, args: tuple, busy: bool) -> None:
        if event == "hello_gpu.aten":     # the most frequent: one per computing op, no frame needed
            if armed[0] and depth[0] > 0:
                record("ATen op", f"{args[0]} ran inside a call")
            return
        caller = getframe(3)              # the frame that raised the event (above handle, internal and the hook)
        if event == "hello_gpu.original":
            name, arguments, box = args
            original, kind = originals.get(name, (None, None))
            if original is None:
                return
            if armed[0] and not busy:
                judge(name, kind, arguments, caller)
            box.append(original)
        elif event == "hello_gpu.guard_entry":
            name, original, box = args
            dotted = f"OpOverload {name}._op_dk #{id(original)}"
            wrapper = make_wrapper(dotted)
            originals[dotted] = (original, SWITCH_KIND)
            protected.add(id(wrapper))
            box.append(wrapper)
        elif event == "hello_gpu.arm":
            armed[0] = True
        elif event == "hello_gpu.request" and caller.f_code is serve_code:
            operation, expected = args           # (the operation, its calls) as it begins; (None, check?) at its end
            if operation is not None:
                request[:] = [operation, expected, 0]
            elif request[0] is not None:
                if armed[0] and expected and request[2] < request[1]:
                    record(SWITCH_KIND, f"a {request[0]} request made {request[1]} call(s) of the candidate, but only "
                                        f"{request[2]} went through the worker's own Worker._invoke (the others "
                                        f"bypassed the watch: a method of the worker replaced)")
                request[:] = [None, 0, 0]
        elif event == "hello_gpu.serving" and caller.f_code is serve_code and worker[0] is None:
            cls = type(args[0])
            worker[:] = [args[0], cls, {name: value for name, value in vars(cls).items() if isinstance(value, method_types)}]
        elif event == "hello_gpu.call" and caller.f_code is invoke_code:
            problem = worker_problem(args[1] if len(args) > 1 else None)
            if problem and armed[0]:
                record(SWITCH_KIND, problem)
            if args[0] > 0:
                request[2] += 1
                if dispatch and mode[0] is not None and armed[0]:
                    now = dispatch_state()
                    if now[1] != id(mode[0]):
                        record(SWITCH_KIND, "a call began with the dispatch watch not on top of the mode stack")
                    if not now[4]:
                        record(SWITCH_KIND, "a call began with the dispatch watch's __torch_dispatch__ replaced")
                    call_states.append(now)
                depth[0] += 1
            else:
                depth[0] = max(0, depth[0] - 1)
                if call_states:
                    before, after = call_states.pop(), dispatch_state()
                    changed = [f"{what} {old} -> {new}" for what, old, new in zip(DISPATCH_STATE, before, after)
                               if old != new]
                    if changed:
                        record(SWITCH_KIND, "during a call: " + "; ".join(changed))
        elif event == "hello_gpu.written":
            args[0].append(written[0])

    def worker_problem(who) -> str | None:
        """A call through Worker._invoke for another object than the worker, or with one of the worker's methods
        replaced (on its class or its instance): a bypass of the watch, and decoy calls to fill its count."""
        served, cls, methods = worker
        if served is None:
            return None
        if who is not served or type(who) is not cls:
            return "a call went through Worker._invoke for another object than the worker (a decoy call)"
        own = vars(who)
        replaced = sorted(name for name, function in methods.items() if vars(cls).get(name) is not function
                          or name in own)
        return f"the worker's {', '.join(replaced)} replaced while a call ran" if replaced else None

    def judge(name: str, kind: str, arguments: tuple, caller) -> None:
        """Is this use of a guarded function evidence? ``caller``: the frame that asked for the original."""
        if caller.f_code is not guarded_code:
            found = frame_of(caller, anywhere=True)
            record("code", f"{'line ' + string(found.f_lineno) + ' ' if found else ''}asked the watch for the "
                           f"original {name} (only its wrapper may)")
            return
        if kind == "descriptor":
            touched = watched_descriptor(arguments, name)
            if touched is not None:
                found = frame_of(caller.f_back, anywhere=True)
                where = f"line {found.f_lineno} " if found is not None else ""
                record(CHANNEL_KIND, f"{where}called os.{name.rpartition('.')[2]} on descriptor {touched}")
        elif kind == SWITCH_KIND:
            found = frame_of(caller.f_back, anywhere=name not in called_directly)
            if found is not None:
                record(SWITCH_KIND, f"line {found.f_lineno} called {name.split(' #')[0]}")
        else:
            found = frame_of(caller.f_back)
            if found is not None:
                record(kind, f"line {found.f_lineno} called {name}")

    def hook(event: str, args: tuple) -> None:
        if event.startswith("hello_gpu."):
            internal(event, args)
            return
        if not armed[0] or getattr(inside, "busy", False):
            return
        if event == "import":
            module = string(args[0]) if args else ""
            if any(module == name or module.startswith(name + ".") for name in compute_libraries):
                record("compute library", f"imported {module}")
            return
        if event == "object.__setattr__" and args and id(args[0]) in protected:
            record("code", f"rewrote {string(args[1]) if len(args) > 1 else '?'} of the watch's "
                           f"{getattr(args[0], '__qualname__', '?')}")
            return
        if event == "open" and args and (watched_fds or watched_files):
            target = args[0]
            opened = watched_fds.get(target) if isinstance(target, integer) else opens_watched(target)
            if opened:
                record(CHANNEL_KIND, f"opened {string(target)[:200]}, which is {opened}")
                return
        reaching = (event in frame_events or event in gc_events
                    or (event == "object.__getattr__" and len(args) > 1 and args[1] in frame_attributes))
        watched = (reaching or event in code_events or event in memory_events or event == "open"
                   or event.startswith("ctypes.") or any(event.startswith(p) for p in process_events))
        if not watched:
            return
        inside.busy = True
        try:
            caller = getframe(1)          # the frame that raised the event (the hook is called from C)
            frame = frame_of(caller, anywhere=reaching)
            if frame is None:
                return
            named = named_frame(event, args, caller)
            if named is not None and within_the_call(named[0]):
                return                    # a module name from inside its own call: what it could know anyway
            if caller.f_code is template_maker and template_maker is not None and own_template(event, args):
                return
            where = f"line {frame.f_lineno}"
            if event == "open":
                path = string(args[0]) if args else ""
                if isinstance(args[0], integer) or any(path.startswith(folder) for folder in state.allowed_folders):
                    return
                record("file", f"{where} opened {path}")
            elif named is not None:
                record("frame inspection", f"{where} {named[1]} outside the candidate's call")
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

    def named_frame(event: str, args: tuple, caller):
        """(the frame whose module name is read, what read it) for a module-name lookup; None for any other event.
        sys._getframemodulename(depth) names the frame ``depth`` levels above its caller (None past the stack's
        end); a module-name reader's sys._getframe returns the frame it reads (the event's argument)."""
        if event == module_name_lookup:
            depth = args[0] if args and isinstance(args[0], integer) else 0
            target = caller
            while target is not None and depth > 0:
                target, depth = target.f_back, depth - 1
            return target, f"{event}({args[0] if args else ''})"
        if event == "sys._getframe" and id(caller.f_code) in reader_ids and args and isinstance(args[0], frame_type):
            return args[0], f"{event} (by {caller.f_code.co_name}, for a module name)"
        return None

    def within_the_call(target) -> bool:
        """Is ``target`` the candidate's own frame or one its code called (a library, hello_gpu's runtime)?
        Walking up from it, a frame of the candidate's files comes before the worker's _invoke or serve (or
        the stack's end: a frame that is not there names nothing, but asks how deep the stack is). What lies
        below a candidate frame is its own doing; the one harness frame that can lie there (the ATen watch's
        __torch_dispatch__, under an op it called) is a mode it can list unaudited anyway."""
        while target is not None:
            code = target.f_code
            if code.co_filename in state.candidate_files:
                return True
            if code is invoke_code or code is serve_code:
                return False
            target = target.f_back
        return False

    def own_template(event: str, args: tuple) -> bool:
        """Is this event collections.namedtuple doing its own work (raised from its frame)? Compiling runs
        nothing; what runs ("exec") must be its template: a module naming nothing, one lambda naming nothing but
        _tuple_new (no attribute, no builtin: a template swapped through the module's globals shows here).
        Attributes set: __module__ on a tuple class, __defaults__ on a lambda of "<string>" (its __new__)."""
        if event == "compile":
            return True
        if event == "exec":
            code = args[0] if args else None
            if not isinstance(code, code_type) or code.co_names:
                return False
            inner = [value for value in code.co_consts if isinstance(value, code_type)]
            return (len(inner) == 1 and set(inner[0].co_names) <= {"_tuple_new"}
                    and not any(isinstance(value, code_type) for value in inner[0].co_consts))
        if event == "object.__setattr__" and len(args) > 1:
            target, name = args[0], args[1]
            if name == "__module__":
                return isinstance(target, type) and issubclass(target, tuple)
            if name == "__defaults__" and isinstance(target, is_function):
                code = target.__code__
                return code.co_filename == "<string>" and code.co_name == "<lambda>"
        return False

    def opens_watched(path) -> str | None:
        """What a path leads to when it is a watched descriptor's file (``/proc/self/fd/N``, a link to it):
        opening the pipe that way gives its read end, from which the evidence could be drained."""
        if not isinstance(path, (str, bytes)):
            return None
        inside.busy = True
        try:
            found = stat(path)
            return watched_files.get((found.st_dev, found.st_ino))
        except (OSError, ValueError):
            return None
        finally:
            inside.busy = False

    def insides(function) -> tuple:
        """What a function runs with besides its name: code, defaults, keyword defaults, closure cells (each
        can be changed in place, without rebinding the name); of a partialmethod, its function and arguments."""
        if isinstance(function, bound_kind):
            return (function.func, *function.args, *function.keywords.keys(), *function.keywords.values())
        keywords = function.__kwdefaults__ or {}
        return (function.__code__, *(function.__defaults__ or ()), *keywords.keys(), *keywords.values(),
                *(cell.cell_contents for cell in function.__closure__ or ()))

    def same(before: tuple, after: tuple) -> bool:
        return len(before) == len(after) and all(old is new for old, new in zip(before, after))

    def remember(name: str, function) -> None:
        codes.append((name, function, insides(function)))

    def protect(guarded: dict, wrappers: dict, dispatch_mode=None) -> None:
        """Take the originals of the guarded functions (name -> (original, kind)); their wrappers (by the
        original's id) and the worker's own functions are protected: rewriting their code or defaults is
        evidence, and they are fingerprinted."""
        originals.update(guarded)
        for name, (original, _) in guarded.items():
            wrapper = wrappers[id(original)]
            protected.add(id(wrapper))
            remember(name, wrapper)
        if dispatch_mode is not None and mode[0] is None:
            mode[0] = dispatch_mode
            torch_c = sys.modules["torch._C"]
            dispatch[:] = [torch_c._len_torch_dispatch_stack, torch_c._get_dispatch_stack_at,  # noqa: SLF001
                           torch_c._dispatch_tls_local_include_set, torch_c._dispatch_tls_local_exclude_set]
            dispatch_method[0] = (vars(type(dispatch_mode)).get("__torch_dispatch__"),
                                  vars(dispatch_mode).get("__torch_dispatch__"))
            for function in vars(type(dispatch_mode)).values():
                if isinstance(function, is_function):
                    protected.add(id(function))
                    remember(f"the dispatch watch's {function.__name__}", function)
        worker_module = sys.modules.get(__name__)
        for value in list(vars(worker_module).values()) if worker_module else ():
            members = vars(value).values() if isinstance(value, type) and value.__module__ == __name__ else [value]
            protected.update(id(member) for member in members if isinstance(member, is_function))

    def take_fingerprint(spec=None) -> None:
        """Remember what every name a verdict leans on refers to now (see :func:`fingerprint_targets`)."""
        inside.busy = True
        try:
            for name, mapping, key, value in fingerprint_targets(spec):
                snapshot.append((name, mapping, key, value))
                if isinstance(value, method_types):
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
    state._threads_before = count_threads()
    return hook, record, report, take_fingerprint, remember, protect


FINGERPRINTED_MODULES = ("time", "numpy", "torch", "torch.cuda", "torch.profiler", "torch.autograd.profiler",
                         "torch.multiprocessing.reductions", "triton.runtime.jit", "triton.runtime.autotuner",
                         "statistics", "math", "json", "pickle", "random", "multiprocessing.connection", "builtins",
                         "os", "sys", "signal", "_thread", "threading", "gc", "posix", "_signal", "_socket",
                         "torch._C", "torch.utils._python_dispatch", "torch._ops", "cuda.bindings.driver")
FINGERPRINTED_CLASSES = ("torch.Tensor", "torch.cuda.Event", "torch.cuda.Stream", "torch.profiler.profile",
                         "multiprocessing.connection.Connection", "triton.runtime.jit.JITFunction",
                         "triton.runtime.jit.KernelInterface", "triton.runtime.autotuner.Autotuner",
                         "triton.runtime.interpreter.InterpretedFunction", "torch._C._DispatchOperatorHandle",
                         "torch._ops.OpOverload", "torch._ops.OpOverloadPacket")


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
                    if isinstance(function, (types.FunctionType, staticmethod, classmethod, property,
                                             functools.partialmethod)):
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


def aten_watch():
    """A dispatch mode that reports every computing ATen op (issue 17: a library fallback is seen in every
    call, checked or timed, not only in the profiled ones, so a candidate that behaves while profiled gains
    nothing). Pushed around each request that calls the candidate. It decides nothing and holds nothing of
    the watch: it raises an audit event per op, and the hook records it only while a candidate call is in
    progress (kind "ATen op", written through to the parent). Allocation, views and copies
    (anticheat.CPU_GLUE_OPS) compute nothing and pass. The hook checks, as each call begins and ends, that
    this mode is on top of the stack and the dispatch keys are as they were (see DISPATCH_SWITCHES)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from .anticheat import CPU_GLUE_OPS

    class AtenWatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types_, args=(), kwargs=None, *, __audit=sys.audit,
                               __glue=frozenset(CPU_GLUE_OPS)):
            name = func._schema.name  # noqa: SLF001 - "aten::add" for aten.add.Tensor
            if name not in __glue:
                __audit("hello_gpu.aten", name)
            return func(*args, **(kwargs or {}))
    return AtenWatch()


# ====================================================================================== work left running


class ContextDrain:
    """How long the work a timed call queued ran on past the call's end event, on any stream (issue 17).

    A call's time is its two events on the timed stream. Work the call left on another stream (a side stream it
    never joined, a CUDA graph replayed there, a kernel launched through our runtime or cuda-python with a stream
    of its own, a spin left to hog the device) runs after the end event, beside the next call's L2 flush, in no
    call's time: a falsely fast verdict, whatever path launched it (the per-launch stream record sees Triton's JIT
    only). So after each timed call, in this order:

    - ``captured``: a context event (``cuCtxRecordEvent``: all the work of the primary context queued so far, on
      every stream, green contexts included, in one event);
    - on a stream of the harness's own (``stream``): a wait for ``captured``, then ``drained`` recorded;
    - on a second one (``ends``): a wait for the call's end event, then ``reference`` recorded.

    ``reference`` to ``drained`` is how long the context's work went on after the end event. Host work after the end
    event only: no call's events move. Both streams are non-blocking (nothing else waits for them). The order is what
    makes an honest call read ~0 (the H100, session 12, read 3-14 us for honest kernels with ``reference`` queued
    first, on the same stream, and the context event after it):

    - where the device is idle as they are queued (a call whose host time outlasts its kernels), each record fires
      when the host queues it, so the reading is host time between the two: queued ``drained`` first, host time
      (the cuda-python call, a garbage collection) only lowers it, and what is read is work still running when the
      host got there, which an honest call never leaves; queued after, it read as work left running;
    - the context event holds neither measuring record (it held ``reference``, so ``drained`` came a whole chain
      after it): with nothing left running the two ends differ by what a context event takes to complete beyond
      an ordinary event, which the probes' marks measure behind a spin, as a busy device reads it
      (Worker._time_plan), and the parent subtracts (session.left_running_problems).

    What it cannot see: another CUDA context (its creation is guarded: GUARDED_FUNCTIONS), another device, another
    process (audited). Made in Worker._ready_device, before any candidate code runs; where the driver cannot record
    a context event it is not made, and the time answers say so (``left_running_unseen``)."""

    def __init__(self):
        import torch
        from cuda.bindings import driver
        error, context = driver.cuCtxGetCurrent()
        _driver_ok(error, "cuCtxGetCurrent")
        raws = []
        for _ in range(2):
            error, raw = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
            _driver_ok(error, "cuStreamCreate")
            raws.append(raw)
        self.raw_streams, self.context = raws, context
        self.stream, self.ends = (torch.cuda.ExternalStream(int(raw)) for raw in raws)
        self.record_context, self.event_of = driver.cuCtxRecordEvent, driver.CUevent
        self.slots: list[tuple] = []
        self.after(0, torch.cuda.Event(enable_timing=True))   # once now: a driver without it fails here
        torch.cuda.synchronize()

    def _slot(self, index: int) -> tuple:
        import torch
        while len(self.slots) <= index:
            captured = torch.cuda.Event()                     # no timing: only waited for
            captured.record(self.stream)                      # made now (torch makes an event when first recorded)
            self.slots.append((captured, torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
        return self.slots[index]

    def begin(self, opened) -> None:
        """Before a call held behind the window (CallWindow), each of the two streams waits for the window's event.

        An honest 2^24 float32 add (73-74 us a call) read as work left running (benchmarks/window_drain.py, the H100,
        session 17, 256 calls a process, two processes a variant in each of two runs): with no window 2.8-3.1 us in the median call,
        70-73% of calls over 2 us; behind the window 0 in the median, 30-34% over 2 us; behind it with both streams
        waiting for ``opened`` (this), at most 1 call in 256 over 2 us, the largest 1.3-3.2 us. The wait is met
        before the call starts and ``captured`` still holds every stream of the context, so work left running reads
        as before (a 20 us spin after the end event read 21.6 us). Waiting for an event of the drain's own on the
        timed stream instead, with no window, did not help (43-69% over 2 us): what helps is the window's event,
        why is not known; without a window the parent's rule is looser (session.LEFT_RUNNING_UNHELD_MIN_S)."""
        self.stream.wait_event(opened)
        self.ends.wait_event(opened)

    def after(self, index: int, end) -> None:
        """Queue the measurement of call ``index``, whose end event ``end`` was just recorded."""
        captured, reference, drained = self._slot(index)
        (error,) = self.record_context(self.context, self.event_of(captured.cuda_event))
        _driver_ok(error, "cuCtxRecordEvent")
        self.stream.wait_event(captured)
        drained.record(self.stream)
        self.ends.wait_event(end)
        reference.record(self.ends)

    def left_running_s(self, index: int) -> float:
        """Seconds call ``index``'s work ran past its end event (after the device synchronised)."""
        _, reference, drained = self.slots[index]
        return max(0.0, reference.elapsed_time(drained) / 1e3)


class CallWindow:
    """No work of a call starts before the call does, on any stream (issue 17).

    Every call begins behind the L2 flush queued on the caller's stream (Worker._prepare_call), and its time is the
    two events around it on that stream. Work the call queues on a stream of its own waits for nothing: it runs
    beside the flush, before the start event, in no call's time, and it is over before the end event, so the
    context event after the call (ContextDrain) sees nothing left running. FLUSH_HIDING (tests/test_agent_gpu.py)
    put an eighth of its add there; v55 did the same through our runtime, which records no launch's stream; on the
    H100 (session 14, fd61933) neither bench named it. So after the flush, before the call, on every call (checked,
    profiled, timed: they must begin alike): ``opened`` recorded on the caller's stream, then ``cuCtxWaitEvent`` of
    the primary context on it, which makes all work submitted to the context afterwards, on any stream, green
    contexts included, wait for it. Work on a side stream then starts with the call: inside its time where it ends
    before the end event, named by ContextDrain where it ends after. Host work before the start event only: no
    event of the call moves. Made in Worker._ready_device, before any candidate code runs; where the driver has no
    cuCtxWaitEvent it is not made, and the load answer says so (``window_unheld``)."""

    def __init__(self):
        import torch
        from cuda.bindings import driver
        error, context = driver.cuCtxGetCurrent()
        _driver_ok(error, "cuCtxGetCurrent")
        self.context, self.wait_context, self.event_of = context, driver.cuCtxWaitEvent, driver.CUevent
        self.opened = torch.cuda.Event()                  # no timing: only waited for; one event, recorded anew
        self.hold(torch.cuda.default_stream())            # once now: a driver without it fails here
        torch.cuda.synchronize()

    def hold(self, stream) -> None:
        """All work the context is given from now on waits for what ``stream`` holds now."""
        self.opened.record(stream)
        (error,) = self.wait_context(self.context, self.event_of(self.opened.cuda_event))
        _driver_ok(error, "cuCtxWaitEvent")


def mark_spin_cycles(hold_s: float, marks: int) -> int:
    """The spin before each of a probe's ``marks`` marks: the longest that lets all of them end within the probe's own
    host time (the marks are queued first, then the host holds ``hold_s``: spins of 3/4 of it at 2 GHz still end in
    it at 1.5 GHz), at most 2 x HOLD_CYCLES_PER_CALL (~100 us). Longer than the host takes to queue a mark and its
    measurement (a spin, four records, three waits and a context event: ~25 us), so the device is still busy with
    it when the measurement is queued: ~47 us a mark at 64 marks and a 4 ms hold (a counted batch's length)."""
    from ..bench.timing import HOLD_CYCLES_PER_CALL, HOLD_MICROSECONDS_PER_CALL
    if marks <= 0:
        return 0
    per_second = HOLD_CYCLES_PER_CALL / (HOLD_MICROSECONDS_PER_CALL * 1e-6)
    return int(min(2 * HOLD_CYCLES_PER_CALL, 0.75 * hold_s / marks * per_second))


def _driver_ok(error, what: str) -> None:
    from cuda.bindings import driver
    if error != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {error!r}")


# ====================================================================================== one plan per kind of call


@dataclasses.dataclass
class CallPlan:
    """What a request does around the candidate's calls, as data for the one loop that makes them (Worker._calls):
    a checked, a profiled and a timed call differ here only, never in the lines they are called from (issue 17).

    ``calls``: the (inputs, out) of each call. ``prepare(index)``: before call ``index``, the launch counter still
    off (the L2 flush; the profile's hold and markers). ``brackets(index)``: its (opening, closing), called just
    before and just after it with nothing else between them and the call (a timed call's start and end events, a
    profiled call's range in the trace, nothing for a checked call). ``after(index, count, result)``: after it, the
    counter off (``count``: the counter's value, None where nothing counts; ``result``: _invoke's). ``around``:
    a context entered before the first call and left after the last (a timed batch's span, the profiler).
    ``answer()``: the request's answer, once ``around`` is left."""

    calls: list
    prepare: Callable[[int], object]
    brackets: Callable[[int], tuple]
    after: Callable[[int, object, object], object]
    answer: Callable[[], dict]
    around: contextlib.AbstractContextManager = dataclasses.field(default_factory=contextlib.nullcontext)


def _nothing() -> None:
    """The opening and closing of a call that nothing marks (a checked call)."""


def _unmarked(index: int) -> tuple:
    return _nothing, _nothing


class WallEvent:
    """A device event's stand-in without a GPU: ``record`` reads the wall clock, ``elapsed_time`` answers in
    milliseconds as torch.cuda.Event's does, so that a timed batch is bracketed the same way on either."""

    def __init__(self):
        self.at = None

    def record(self, stream=None) -> None:
        self.at = time.perf_counter()

    def elapsed_time(self, end: "WallEvent") -> float:
        return (end.at - self.at) * 1e3


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
        self.flush = None                 # the L2 flush queued before every call (see _prepare_call)
        self.timed_stream = None          # the device's default stream: the caller's stream of every call
        self.marker = None                # the profile's one-element marker, made with the flush
        self.timing_events: list = []     # device events of the timed batches, made once and reused
        self.drain = None                 # ContextDrain: work a timed call left running (GPU)
        self.drain_unavailable = None     # ... or why the device cannot show it
        self.window = None                # CallWindow: no work of a call starts before the call (GPU)
        self.window_unheld = None         # ... or why the device cannot hold it

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
        self.device = self.rung.device()
        if self.device.startswith("cuda"):
            self._ready_device()
        sys.audit("hello_gpu.arm")              # from here on, the candidate's code runs: the watch records
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
                "interpreter": triton_interpreter_on(), "rung": names["candidate"], "window_unheld": self.window_unheld}

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

    # ------------------------------------------------------------------ one state for every call
    # A candidate must not be able to tell a timed call from a checked or profiled one (issue 17): whatever it can
    # observe as a call begins must read the same in all three, or it can behave only where nobody looks. The hole
    # (tests/test_agent_gpu.py's FLUSH_HIDING) was the caller's stream: busy with the L2 flush queued just before a
    # cold timed call (torch.cuda.current_stream().query() False), idle before a checked or profiled one (the
    # parent and the child synchronise around each), so a candidate left an eighth of its work on a side stream
    # beside the flush only when timed. So every call, in "call", "profile" and "time" alike, begins as a cold
    # timed call does (_prepare_call): the timed stream current, the same flush (one buffer, made at load, before
    # the candidate's code runs, so the memory statistics are the same in every call) queued on it just before,
    # and the launch counter on (its hooks sit on the candidate's own JIT functions and in Triton's launch hook
    # chain, where the candidate can look; the timed calls were the only ones without them). The warm batch (the
    # clock check's back-to-back calls, neither counted nor checked) queues no flush. What stays different is
    # listed in docs/agent.md (threat model).

    def _ready_device(self) -> None:
        """Make, before any candidate code runs, what every call's preparation uses: the flush of a cold timed
        call (4x the L2, at least 256 MiB: a cold call's floor, see session.BATCH_SPAN_S), the profile's marker."""
        import torch
        from ..bench.compare import DeviceTimer
        self.flush = DeviceTimer("cold").flush
        self.timed_stream = torch.cuda.default_stream()
        self.marker = torch.empty(1, device="cuda")
        try:
            self.drain = ContextDrain()
        except Exception as error:  # noqa: BLE001 - an older driver: said in every time answer, not hidden
            self.drain_unavailable = f"{type(error).__name__}: {error}"
        try:
            self.window = CallWindow()
        except Exception as error:  # noqa: BLE001 - an older driver: said in the load answer, not hidden
            self.window_unheld = f"{type(error).__name__}: {error}"

    def _prepare_call(self, flush: bool = True) -> None:
        """What comes just before every call of the candidate: the timed stream made current (a stream a call
        left current is not the caller's), then the L2 flush queued on it (``flush``: not in the warm batch),
        behind a spin of CALL_HOLD_CYCLES where the stream was idle, then the CallWindow held behind it all (on a
        GPU whose driver has cuCtxWaitEvent): the context's work from here on, on any stream, starts after it.

        The spin: a timed call after the first of its batch finds its stream busy with the calls queued before it
        whatever the host does, but a checked or profiled call (the parent and the child synchronise around each)
        and a batch's first call find only the flush: a race between the flush (256 MiB, ~80 us) and the host's way
        from it to the call's first line (the audit hook, the profiler's ranges). On the H100 (session 12) checked
        calls read their stream idle, and FLUSH_HIDING (tests/test_agent_gpu.py), which hides an eighth of its work
        only where its stream is busy, passed its check while its timed calls were caught. Behind the spin (~0.5 ms)
        every call's stream is busy as it begins, as in a queued batch. Outside every call's events (a batch's first
        call: inside its span, where the parent's clock sees it too); a profiled call's spin is in its flush range."""
        if self.timed_stream is not None:
            import torch
            torch.cuda.set_stream(self.timed_stream)
        if flush and self.flush is not None:
            if self.timed_stream is not None and self.timed_stream.query():
                torch.cuda._sleep(CALL_HOLD_CYCLES)   # noqa: SLF001 - torch's own spin kernel
            self.flush()
        if self.window is not None:
            self.window.hold(self.timed_stream)       # nothing the call queues, on any stream, starts before it
            if self.drain is not None:
                self.drain.begin(self.window.opened)  # the drain's streams behind the window too (ContextDrain.begin)

    def _counted(self):
        """The launch counter around one call (a context whose value has ``count`` and ``streams``); a null
        context where nothing counts (a HIP rung: its launches are counted from the profile)."""
        return self.launch_counter() if self.launch_counter is not None else contextlib.nullcontext()

    def _off_stream(self, count) -> list[str]:
        """The launches of a counted call that went to another stream than the timed one (GPU only)."""
        if count is None or self.timed_stream is None:
            return []
        timed = self.timed_stream.cuda_stream
        return [f"{name} on stream {stream}" for name, stream in count.streams if stream is not None and stream != timed]

    def _argument(self, entry):
        """One argument of a call as the parent sent it (session.lend): a registered buffer's key, or a plain
        option's value ({"option": value}: a bool, an int or a float), passed to the candidate as it is."""
        if isinstance(entry, str):
            return self.buffers[entry]
        value = entry["option"]
        if type(value) not in (bool, int, float):
            raise TypeError(f"an option must be a bool, an int or a float, not a {type(value).__name__}")
        return value

    def _invoke(self, inputs: list, out: str | None, _audit=sys.audit):
        """One call of the candidate. The watch learns that a call is in progress from the two events raised
        here (it accepts them from this function's code only), and checks the dispatch state around it."""
        arguments = [self._argument(entry) for entry in inputs]
        target = self.buffers[out] if out is not None else None
        _audit("hello_gpu.call", 1, self)
        try:
            if target is not None:
                return self.built(*arguments, out=target), target
            return self.built(*arguments), None
        finally:
            _audit("hello_gpu.call", -1, self)

    # ------------------------------------------------------------------ every call from the same lines
    # A call can read the file and line of each frame above it with no audited access (warnings.warn with a
    # stacklevel, caught with catch_warnings(record=True): C code, no event, no frame handed out). Checked, profiled
    # and timed calls were made from different lines of this class (call, _time, profile_evidence's loop), so a
    # candidate could tell which kind of call it was in. Now every request that calls the candidate is served by
    # _serve_calls (call, time and profile are that one function with the kind bound in C: functools.partial adds
    # no frame), which asks the kind for its plan (a CallPlan: data) and hands it to _calls, the one loop that calls
    # the candidate (through _invoke). Above run() there are the same frames in every kind: BuiltRung.__call__,
    # _invoke, _calls, _serve_calls, serve (tests/test_agent_anticheat.py, test_a_call_cannot_read_its_callers_lines).

    def _serve_calls(self, kind: str, request: dict) -> dict:
        """A request that calls the candidate ("call", "time" or "profile"): its plan, its calls, its answer."""
        plan = getattr(self, f"_{kind}_plan")(request)
        self._calls(plan)
        return plan.answer()

    call = functools.partialmethod(_serve_calls, "call")
    time = functools.partialmethod(_serve_calls, "time")
    profile = functools.partialmethod(_serve_calls, "profile")

    def _calls(self, plan: CallPlan) -> None:
        """The one place the candidate is called, whatever the kind of call: what differs between kinds is the
        plan's data (what comes before and after each call, and around them all), called from these same lines.

        Between a call's opening and closing (a timed call's start and end events) there is nothing but the call
        (_invoke), as before: every step a kind adds (the flush, the profile's markers, reading the launch counter,
        the context event after a timed call) is in ``prepare`` or ``after``, before the start event (while the
        device is still flushing L2: host time no event sees) or after the end event is queued. The launch counter
        goes on before the opening and off after the closing: host time only, as it was."""
        with plan.around:
            for index, (inputs, out) in enumerate(plan.calls):
                plan.prepare(index)
                opening, closing = plan.brackets(index)
                with self._counted() as count:
                    opening()
                    result = self._invoke(inputs, out)
                    closing()
                plan.after(index, count, result)

    def _call_plan(self, request: dict) -> CallPlan:
        """One checked call; the output lands in the parent's buffer (``out``) or is held for ``fetch``. It
        begins as a timed call does (_prepare_call)."""
        import torch
        answer: dict = {}

        def after(index: int, count, result) -> None:
            self._synchronize()
            output, target = result
            answer["launches"] = count.count if count is not None else None
            if target is not None:
                same = output is None or (isinstance(output, torch.Tensor) and output.data_ptr() == target.data_ptr())
                answer["returned"] = "out" if same else "other"
            if isinstance(output, torch.Tensor):
                self.held_result = output
                answer.update(shape=list(output.shape), dtype=str(output.dtype).removeprefix("torch."))
            else:
                self.held_result = None
                answer["type"] = type(output).__name__

        return CallPlan(calls=[(request["inputs"], request.get("out"))], prepare=lambda index: self._prepare_call(),
                        brackets=_unmarked, after=after, answer=lambda: answer)

    def fetch(self, request: dict) -> dict:
        """Copy the held result into the parent's buffer ``into`` (a run() that allocates its own output)."""
        target = self.buffers[request["into"]]
        target.copy_(self.held_result.reshape(target.shape))
        self._synchronize()
        self.held_result = None
        return {}

    def _time_plan(self, request: dict) -> CallPlan:
        """A batch of calls, each between two events (after an L2 flush when ``cold``), one synchronize.

        Answers each call's seconds and the span from before the first call to after the last: claims, which the
        parent checks against its own clock around the whole request. A request without calls is the parent's
        probe of what a batch costs outside its span (session.TimedSide.batch_floor): it holds its span ``hold_s``
        (busy, as a batch's host is while it launches and waits for the device), so that the machine wakes both
        processes after a wait as long as a batch's, and records ``marks`` empty (start, end) pairs, read back and
        answered as a batch's calls are, so that what a batch costs per call after its span (reading the times,
        the longer answer) is in the probe too.

        On a GPU every event is recorded on the timed stream (the device's default stream, the caller's stream
        of every call), never on whatever stream is current: a call that returns with another stream current
        (work queued on the caller's stream, then a side stream left current) would otherwise have the call's end
        event, and the batch's, recorded where nothing is queued, firing before the call's work ended. Such a
        call is named in the answer (``streams_left``: the calls' indices) and the timed stream made current
        again. The batch ends with a device-wide synchronize: work left running on any stream ends inside this
        request, where the parent's clock sees it (the span, on the timed stream, does not). Without a GPU the
        events are the wall clock's (WallEvent).

        Each call is counted (launches, and the stream of each Triton launch) as a checked one is: ``launches``
        per call, and ``off_stream``, the launches (at most eight named) that went to another stream than the
        timed one, which the parent judges where the task allows no side streams.

        Each cold call's work left running past its end event, on any stream (ContextDrain): ``left_running_s``,
        seconds per call (None in a warm batch; on the CPU or an older driver, with ``left_running_unseen``).
        Launches our runtime skipped for an empty grid during the batch: ``empty_launches`` (issue 17: evidence,
        not a no-op)."""
        from ..runtime.kernel import empty_launches        # imported in main() before the candidate
        from .sandbox import empty_launch_reason
        empty_before = empty_launches()
        calls = [(list(inputs), out) for inputs, out in request["calls"]]
        cold = bool(request.get("cold"))      # each call after the L2 flush, as every checked and profiled call
        hold = 0.0 if calls else min(max(float(request.get("hold_s") or 0.0), 0.0), PROBE_HOLD_MAX_S)
        marks = 0 if calls else min(max(int(request.get("marks") or 0), 0), PROBE_MARKS_MAX)
        gpu = self.device.startswith("cuda")
        timed = self.timed_stream if gpu else None
        drain = self.drain if cold and gpu else None   # the counted (cold) calls and the probes' marks, not warm
        if gpu:
            import torch
            torch.cuda.set_stream(timed)     # a stream a call left current before this batch is not the timed one
            # The events are made once (inside a span, the first time) and reused: no event is made or destroyed
            # outside the span, where the parent's clock would see it as the child's and no probe would.
            pool = self.timing_events
            if not pool:
                pool += [torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)]
        else:
            pool = [WallEvent(), WallEvent()]
        begin, finish = pool[0], pool[1]
        events: list[tuple] = []
        left, launches, off_stream = [], [], []

        @contextlib.contextmanager
        def span():
            begin.record(timed)
            pairs = len(calls) or marks
            while len(pool) < 2 + 2 * pairs:
                pool.append(torch.cuda.Event(enable_timing=True) if gpu else WallEvent())
            events.extend((pool[2 + 2 * index], pool[3 + 2 * index]) for index in range(pairs))
            if not calls:
                # Each mark behind a spin of its own on the timed stream (with the context event, below), so that the
                # context event measures with nothing left running as it does after an honest call: on a busy device,
                # the previous mark's measurement over by then. The spins end within the hold (the device's time stays
                # inside the host's: the probe's interval, from which the batch floor comes, is unchanged).
                spin = mark_spin_cycles(hold, marks) if drain is not None else 0
                for index, (start, end) in enumerate(events):
                    if spin:
                        torch.cuda._sleep(spin)      # noqa: SLF001 - torch's own spin kernel
                    start.record(timed)
                    end.record(timed)
                    if drain is not None:
                        drain.after(index, end)      # a mark costs what a call costs after its end event
            began = time.perf_counter()
            while time.perf_counter() - began < hold:
                pass
            yield
            finish.record(timed)
            if gpu:
                torch.cuda.synchronize()

        def after(index: int, count, result) -> None:
            if drain is not None:
                drain.after(index, events[index][1])  # after the end event: host work only, no event of the call moves
            launches.append(count.count if count is not None else None)
            off_stream.extend(f"call {index}: {launch}" for launch in self._off_stream(count))
            if gpu and torch.cuda.current_stream() != timed:
                left.append(index)
                torch.cuda.set_stream(timed)

        def brackets(index: int) -> tuple:
            start, end = events[index]
            return functools.partial(start.record, timed), functools.partial(end.record, timed)

        def answer() -> dict:
            found = {"per_call_s": [start.elapsed_time(end) / 1e3 for start, end in events],
                     "span_s": begin.elapsed_time(finish) / 1e3, "launches": launches,
                     "empty_launches": empty_launch_reason(empty_before)}
            if not gpu:
                return {**found, "clock": "wall", "streams_left": [], "off_stream": [], "left_running_s": None,
                        "left_running_unseen": "no device: nothing outlives a call on the host but a thread (counted)"}
            running: dict = {"left_running_s": None}
            if drain is not None:
                # Read back for a probe's marks too: what a batch costs per call after its span, a probe costs.
                measured = [drain.left_running_s(index) for index in range(len(events))]
                running["left_running_s" if calls else "marks_left_running_s"] = measured
            elif calls and cold:
                running["left_running_unseen"] = f"the driver cannot record a context event ({self.drain_unavailable})"
            return {**found, "clock": "device-events", "streams_left": left, "off_stream": off_stream[:8], **running}

        return CallPlan(calls=calls, prepare=lambda index: self._prepare_call(cold), brackets=brackets, after=after,
                        answer=answer, around=span())

    def _profile_plan(self, request: dict) -> CallPlan:
        """Kernels of ``repeats`` calls (the profiler's trace) and the candidate's own launches per call. Each
        profiled call begins as a timed one (_prepare_call, in its own range of the trace): what a candidate
        does only where it is timed, it does here, where its kernels and their streams are seen."""
        from ..profile.rung_profile import own_kernel_names
        from .anticheat import ProfiledCalls
        ours, triton = own_kernel_names(self.rung)
        triton = tuple(triton) + tuple(getattr(self.launch_counter, "kernel_names", ()))
        own_launches: list = []
        counting = self.launch_counter is not None
        self._prepare_call(flush=False)       # the timed stream current before the profile marks it
        profiled = ProfiledCalls(hold=bool(request.get("hold")), before_call=self._prepare_call, marker=self.marker)

        def after(index: int, count, result) -> None:
            if count is not None:
                own_launches.append(count.count)
            # No synchronisation before this: the join marker is queued first (a side stream left running must
            # still be running then), then profiled.after waits.
            profiled.after(index)

        def answer() -> dict:
            evidence = profiled.evidence(ours=ours, triton=triton)
            evidence["own_launches"] = own_launches if counting else None
            evidence["own_names"] = sorted({*ours, *triton})
            return evidence

        repeats = int(request.get("repeats", 3))
        return CallPlan(calls=[(request["inputs"], request.get("out"))] * repeats, prepare=profiled.prepare,
                        brackets=profiled.brackets, after=after, answer=answer, around=profiled)

    def ping(self, request: dict) -> dict:
        self._synchronize()
        return {}

    def finish(self, request: dict) -> dict:
        spec = self.op.spec if self.op is not None else None
        return self.watch.report(spec)

    # ------------------------------------------------------------------ the loop
    def serve(self, _audit=sys.audit) -> None:
        handlers = {"load": self.load, "register": self.register, "release": self.release, "call": self.call,
                    "fetch": self.fetch, "time": self.time, "profile": self.profile, "ping": self.ping,
                    "finish": self.finish}
        _audit("hello_gpu.serving", self)                  # the one worker whose calls count, and its methods
        while True:
            try:
                request = pickle.loads(self.connection.recv_bytes())
            except EOFError:
                return
            operation = request.get("op")
            watched = self.aten if self.aten is not None and operation in ("call", "time", "profile") else None
            # How many calls of the candidate this request makes: each must go through _invoke (the watch counts).
            calls = {"call": 1, "time": len(request.get("calls") or ()), "profile": int(request.get("repeats", 3))}
            _audit("hello_gpu.request", operation, calls.get(operation, 0))
            try:
                if watched is not None:
                    with watched:
                        answer = {"ok": True, **handlers[operation](request)}
                else:
                    answer = {"ok": True, **handlers[operation](request)}
            except Exception as error:  # noqa: BLE001 - the candidate (or the harness on it) failed: say so
                answer = {"ok": False, "error": f"{type(error).__name__}: {error}",
                          "traceback": traceback.format_exc()[-4000:]}
            # The request is over: were its calls all watched? (Not asked when it failed part-way.)
            _audit("hello_gpu.request", None, bool(answer["ok"]))
            answer["nonce"] = request.get("nonce")          # whose answer this is: the parent checks it
            written: list[int] = []
            _audit("hello_gpu.written", written)            # how many evidence lines the watch has written:
            answer["evidence_written"] = written[0] if written else None    # the parent counts what arrived
            self.connection.send_bytes(json.dumps(answer, default=str).encode("utf-8"))
            if operation == "finish":
                return


def keep_builds_off() -> None:
    """No thread of the harness's own in the candidate's process (its thread census counts every thread started
    after the watch is made, TamperWatch.report). The compiled replay's C++ extension (runtime.compiled_replay) is
    built in a background thread ("hello-gpu compiled replay", 30-60 s of compiling) that hello_gpu.Kernel starts at
    a HIP rung's first call: in the child that is inside the candidate's call, and the census named it as the
    candidate's ("1 thread(s) started during the check and still running" for the honest v01 on the H100, session
    12), while it compiled beside the timed calls. Turned off here, before any candidate code runs: the status is
    then "off", so no later start() makes the thread whatever the environment says by then, and a HIP rung's calls
    key their plans in Python (host time only; device events time the same kernels)."""
    from ..runtime import compiled_replay
    os.environ["HG_COMPILED_REPLAY"] = "0"
    compiled_replay.start()


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    channel = int(arguments[0])
    connection = Connection(socket.socket(fileno=channel).detach())
    evidence = int(arguments[1]) if len(arguments) > 1 else None
    # Imports a step needs, before the hook is armed and the fingerprint taken (the fingerprint covers
    # hello_gpu's modules as they are once imported).
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401 - rewraps torch.manual_seed on import; imported on the way anyway
    import torch.profiler  # noqa: F401
    try:
        import cuda.bindings.driver  # noqa: F401 - its context makers are guarded, ContextDrain's calls fingerprinted
    except ImportError:
        pass

    from ..bench import compare as _compare  # noqa: F401
    from ..ops import checking as _checking  # noqa: F401
    from ..profile import rung_profile as _rung_profile  # noqa: F401
    from . import anticheat as _anticheat  # noqa: F401
    from . import sandbox as _sandbox  # noqa: F401
    keep_builds_off()
    watched = {channel: "the socket to the parent", **({evidence: "the evidence pipe"} if evidence is not None else {})}
    watch = TamperWatch(evidence, watched, invoke_code=Worker._invoke.__code__, serve_code=Worker.serve.__code__)
    aten = aten_watch()
    sys.addaudithook(watch.hook)
    watch.guard_functions(aten)          # after the hook: the wrappers get their originals from it
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
