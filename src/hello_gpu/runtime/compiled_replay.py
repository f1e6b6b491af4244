"""The replay plans of :mod:`triton_replay`, run by a small C++ extension: one call per eager call.

A replay in Python costs the signature key (0.9 us), an allocation by ``torch.empty_like`` from
Python (3.7 us) and ~2 us of Python around the launch (records/nvidia-h200/call-overhead.json,
softmax 16x4096, run of f71d987); torch does the same allocation inside its C++ call for ~1.5 us.
``compiled_replay.cpp`` does the key, the allocation and the argument substitution in C++ and calls
Triton's C launcher with the recorded arguments, as the Python replay does.

The extension is built with ``torch.utils.cpp_extension`` (a C++ compiler and the Python headers
are needed; ~30-60 s) into the hello-gpu cache, once per source, torch and Python version, in a
background thread started by the first call that would use it: calls made meanwhile take the Python
replay, so no call waits for the compiler. Where it cannot be built, :func:`status` says why and
everything keeps working through the Python replay. ``HG_COMPILED_REPLAY=0`` turns it off.

Use: ``replay = compiled_replay.function()`` (None until built); ``replay(table, *args)`` returns the
result or None when it holds no plan for that call; :func:`add` gives it a :class:`~triton_replay._Plan`
that :func:`triton_replay.plan_of` returned for a call of the same arguments. The same key, alone, is
the extension's ``signature(*args)``: ``hello_gpu.Kernel`` looks its checked call plans up by it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Callable

from . import triton_replay
from .compiler import cache_dir
from .device import torch_module

SOURCE = Path(__file__).with_name("compiled_replay.cpp")
TABLES = ("softmax", "rms_norm")        # one table of plans per public function
_lock = threading.Lock()
_state: dict = {"module": None, "status": "not started", "thread": None}
_on_ready: list[Callable[[], None]] = []


def table(name: str) -> int:
    """The index of a public function's table of plans."""
    return TABLES.index(name)


def function():
    """The extension's ``replay(table, *args)``, or None while it is not built (or cannot be)."""
    module = _state["module"]
    return None if module is None else module.replay


def extension():
    """The loaded extension, or None while it is not built (or cannot be). Besides ``replay`` it has
    ``signature(*args)``, a call's key as bytes (None where an argument has none), and
    ``data_pointers(*tensors)``: hello_gpu.Kernel's checked calls use both (runtime/kernel.py)."""
    return _state["module"]


def status() -> str:
    """'ready', 'building', 'off (HG_COMPILED_REPLAY=0)', 'not started' or 'unavailable: <why>'."""
    return _state["status"]


def start(*, wait: bool = False) -> str:
    """Build and load the extension in the background (once); with ``wait``, until it is done."""
    with _lock:
        if os.environ.get("HG_COMPILED_REPLAY", "1") == "0":
            _state["status"] = "off (HG_COMPILED_REPLAY=0)"
        elif _state["status"] == "not started":
            _state["status"] = "building"
            _state["thread"] = threading.Thread(target=_build, name="hello-gpu compiled replay", daemon=True)
            _state["thread"].start()
        thread = _state["thread"]
    if wait and thread is not None:
        thread.join()
    return _state["status"]


def when_ready(callback: Callable[[], None]) -> None:
    """Call ``callback()`` once the extension is loaded (now, if it is): a caller re-adds the plans it
    made before (the Python replay served them meanwhile)."""
    with _lock:
        if _state["module"] is None:
            _on_ready.append(callback)
            return
    callback()


def build_name() -> str:
    """The extension's module name: one per source, torch and Python version (a rebuilt torch ABI or
    an edited source gets its own build, never a stale one)."""
    torch = torch_module()
    digest = hashlib.sha256(SOURCE.read_bytes() + torch.__version__.encode() + sys.version.encode()).hexdigest()
    return f"hello_gpu_compiled_replay_{digest[:12]}"


def load_module(configure_with: tuple | None = None):
    """Build (or find built) and import the extension, configured with Triton's hook lists and torch's
    stream and device functions, or with ``configure_with`` (tensor type, stream function, device
    function, hook lists) for a test on the CPU (tensor types: a tuple). Raises where it cannot be built."""
    from torch.utils import cpp_extension
    _ninja_on_path()
    name = build_name()
    build_directory = cache_dir() / "compiled-replay" / name
    build_directory.mkdir(parents=True, exist_ok=True)
    module = cpp_extension.load(name=name, sources=[str(SOURCE)], build_directory=str(build_directory),
                                extra_cflags=["-O2"], is_python_module=True, verbose=False)
    if configure_with is None:
        configure_with = _torch_and_triton_functions()
    module.configure(*configure_with, len(TABLES))
    _state["configuration"] = configure_with
    return module


def clear() -> None:
    """Drop every plan the extension holds (a caller that forgets its own plans, as tests do)."""
    module = _state["module"]
    if module is not None:
        module.configure(*_state["configuration"], len(TABLES))


def _ninja_on_path() -> None:
    """torch's builder runs ``ninja`` from PATH; the ``ninja`` wheel (a dependency) puts it in the
    environment's bin folder, which is not on PATH when the environment is not activated."""
    if shutil.which("ninja") is not None:
        return
    try:
        import ninja
    except ImportError:
        return                 # the build then fails with torch's own message, kept by status()
    os.environ["PATH"] = os.environ.get("PATH", "") + os.pathsep + ninja.BIN_DIR


def _torch_and_triton_functions() -> tuple:
    torch = torch_module()
    lists = triton_replay.hook_lists()
    if lists is None:
        raise RuntimeError("this Triton keeps its launch hooks in no list the replay can watch")
    return triton_replay.plain_tensor_types(), torch._C._cuda_getCurrentRawStream, torch._C._cuda_getDevice, lists



def _build() -> None:
    try:
        module = load_module()
    except Exception as error:  # noqa: BLE001 - no compiler, no headers, a build error: the Python replay serves
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        _state["status"] = f"unavailable: {type(error).__name__}: {first_line[:300]}"
        return
    with _lock:
        _state["module"] = module
        _state["status"] = "ready"
        callbacks, _on_ready[:] = list(_on_ready), []
    for callback in callbacks:
        callback()


def add(name: str, args: tuple, plan) -> bool:
    """Give the extension ``plan`` for calls like ``args`` (the arguments it was looked up with);
    False when the extension is not loaded, the plan has a launch only Python can replay, or the
    extension refused it (the reason is kept in :func:`last_refusal`; the Python replay serves it)."""
    module = _state["module"]
    launches = plan.compiled_launches() if module is not None else None
    if launches is None:
        return False
    shape, stride, dtype, device = plan.result_layout
    try:
        module.add(table(name), tuple(args), tuple(shape), tuple(stride), dtype, device, launches)
    except (TypeError, ValueError, IndexError, RuntimeError) as error:
        _state["refusal"] = f"{type(error).__name__}: {error}"
        return False
    return True


def plans_held() -> dict[str, int] | None:
    """How many plans each public function's table holds (None while the extension is not loaded)."""
    module = _state["module"]
    return None if module is None else {name: module.plans(index) for index, name in enumerate(TABLES)}


def last_refusal() -> str | None:
    """Why the extension last refused a plan (None if it never did)."""
    return _state.get("refusal")
