"""Call a Python launcher of Triton kernels at the cost of the launches alone.

``kernel[grid](...)`` costs 13-18 us of host time on the H200 machine (Triton 3.6: binding the
arguments, computing the specialisation key, looking the compiled kernel up), and a rung that
dispatches by width through three earlier rungs adds its own Python on top: ``hello_gpu.ops.softmax``
at 16x4096 took 55.5 us against 9.4 for ``torch.softmax`` (records/nvidia-h200/call-overhead.json,
run of 2a52c2f). At decode sizes that host path is the whole cost.

:func:`replayable` wraps such a launcher. The first call of each *call signature* (the tensors'
dtypes, shapes, strides, devices and 16-byte alignment, the other arguments' values) runs the
launcher as written while recording:

- every Triton launch it makes, at the level of Triton's own compiled launcher (after the binder,
  before the driver): grid, stream, the compiled function and its arguments;
- every PyTorch operation it runs (a ``TorchDispatchMode``): only allocations and views may appear.

The signature is replayable when every tensor a launch reads or writes is one of the call's inputs
or the tensor it returns, and nothing but allocations and views ran besides the launches. Later
calls of that signature then allocate the result like the first one and call the recorded compiled
launchers with the new pointers and the current stream: no Python of the rung, no Triton binder.

A signature whose first call is not replayable is recorded once more, on its second call: a first
call may do work later calls do not. ``triton.autotune`` times every configuration on the first call
of a key (extra launches, and its benchmark's cache flush runs a ``zero_``); the second call makes the
chosen configuration's launch alone, which is what the plan must hold.

A signature that is not replayable (scratch buffers, a ``zeros`` or ``copy_``, ``.item()``, a tensor
descriptor, a launch hook, the Triton interpreter, a Triton whose launcher looks unlike the one this
was written against) simply keeps calling the launcher as written: slower, never wrong.

What it assumes, as Triton's own cache does: the launches depend only on the call signature, not on
the values in the tensors or on hidden state (a rung that reads a counter or a tensor's contents to
pick its launch is not replayable and must not be wrapped).
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import threading
from typing import Callable

from .device import torch_module

# Aten operations a replayable launcher may run besides its Triton launches: allocations whose
# contents the kernels overwrite, and views. Anything else (fill_, zero_, copy_, clone, arithmetic,
# _local_scalar_dense for .item()) is work the replay would skip.
ALLOCATIONS_AND_VIEWS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "alias", "detach", "expand",
    "t", "transpose", "permute", "select", "slice", "squeeze", "unsqueeze", "flatten", "unflatten",
    "contiguous", "lift_fresh",
}
EXPECTED_LAUNCHER_PARAMETERS = ("gridX", "gridY", "gridZ", "stream", "function")
_capture_lock = threading.Lock()          # the launcher class is patched while a call is recorded


def _launcher_class():
    """Triton's compiled-launcher class for the active driver, or None when it is not the kind of
    launcher this module knows (its call must begin gridX, gridY, gridZ, stream, function)."""
    try:
        from triton.runtime import driver
        cls = driver.active.launcher_cls
    except Exception:  # noqa: BLE001 - the interpreter, no GPU, another Triton: no replay, plain calls
        return None
    try:
        names = tuple(inspect.signature(cls.__call__).parameters)[1:6]
    except (TypeError, ValueError):
        return None
    return cls if names == EXPECTED_LAUNCHER_PARAMETERS else None


def _hook_holder():
    """Where Triton keeps its launch hooks: ``knobs.runtime`` (>= 3.4), ``CompiledKernel`` before."""
    try:
        from triton import knobs
        return knobs.runtime
    except (ImportError, AttributeError):
        from triton.compiler import CompiledKernel
        return CompiledKernel


def _hooks_set() -> bool:
    """A Triton launch hook (a profiler's) wants fresh launch metadata per call: no replay then."""
    holder = _hook_holder()
    return any(_hook_present(getattr(holder, name, None)) for name in ("launch_enter_hook", "launch_exit_hook"))


def _hook_chains() -> tuple:
    """The ``calls`` lists of Triton 3.6's hook chains, read once: a replayed call then checks two
    lists (~0.1 us) instead of reading the knobs (~2 us). Empty where the hooks are not chains."""
    holder = _hook_holder()
    chains = tuple(getattr(getattr(holder, name, None), "calls", None) for name in ("launch_enter_hook", "launch_exit_hook"))
    return chains if all(isinstance(calls, list) for calls in chains) else ()


_HOOK_CHAINS: list = []         # _hook_chains(), looked up at the first launch_hooks_set()


def hook_lists() -> tuple | None:
    """The lists of Triton's launch hook chains (a profiler's hooks land in them), for a replay that
    watches them from C++ (compiled_replay); None where this Triton keeps its hooks elsewhere."""
    return _hook_chains() or None


def launch_hooks_set() -> bool:
    """Whether a Triton launch hook (a profiler's) is set now: a replay would skip it, so a caller
    holding a plan (:func:`plan_of`) must run the launcher as written while this is true."""
    if not _HOOK_CHAINS:
        _HOOK_CHAINS.append(_hook_chains())
    chains = _HOOK_CHAINS[0]
    if chains:
        return bool(chains[0] or chains[1])
    return _hooks_set()


def _hook_present(hook) -> bool:
    """Triton 3.6 always holds a ``HookChain`` (set when its ``calls`` list is not empty); earlier
    versions a function or None."""
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else hook is not None


class _Recorder:
    """Records Triton launches (patching the launcher class's __call__) and aten ops (a dispatch mode)."""

    def __init__(self, launcher_class):
        from torch.utils._python_dispatch import TorchDispatchMode
        self.launcher_class = launcher_class
        self.launches: list[tuple] = []
        self.other_ops: list[str] = []
        recorder = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if func.overloadpacket.__name__ not in ALLOCATIONS_AND_VIEWS:
                    recorder.other_ops.append(func.overloadpacket.__name__)
                return func(*args, **(kwargs or {}))

        self.mode = Mode()

    def __enter__(self):
        _capture_lock.acquire()
        original = self.original = self.launcher_class.__call__
        launches = self.launches

        def recording(launcher, gridX, gridY, gridZ, stream, function, *args):
            # One level down too: the launcher's C entry point (``launcher.launch``), which Triton's
            # Python __call__ reaches after preparing scratch buffers and hooks. Replaying that call
            # directly skips ~10 us of Python per launch; it is used only where exactly one such call
            # was seen, with the same grid and stream.
            inner_calls = []
            inner = getattr(launcher, "launch", None)
            if callable(inner):
                def inner_recording(*inner_args):
                    inner_calls.append(inner_args)
                    return inner(*inner_args)
                launcher.launch = inner_recording
            try:
                result = original(launcher, gridX, gridY, gridZ, stream, function, *args)
            finally:
                if callable(inner):
                    launcher.launch = inner
            launches.append((launcher, gridX, gridY, gridZ, stream, function, args,
                             (inner, inner_calls[0]) if len(inner_calls) == 1 else None))
            return result

        self.launcher_class.__call__ = recording
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            self.mode.__exit__(*exc)
        finally:
            self.launcher_class.__call__ = self.original
            _capture_lock.release()
        return False


class _Plan:
    """The recorded launches of one call signature, with where each tensor argument comes from.

    ``plan(args)`` with arguments of that signature (new tensors, new values) allocates the result and
    launches; ``result_shape`` is the shape of what it returns. Get one with :func:`plan_of`."""

    def __init__(self, launches, inputs, result, device: int, launch_call):
        torch = torch_module()
        self.result_layout = (tuple(result.shape), tuple(result.stride()), result.dtype, result.device)
        self.result_shape = self.result_layout[0]
        self.device = device
        # Looked up once: torch_module() and two attribute reads per call were ~0.3 us of a replay.
        self._empty_strided = torch.empty_strided
        self._current_device = torch._C._cuda_getDevice
        self._raw_stream = torch._C._cuda_getCurrentRawStream
        self._device_guard = torch.cuda.device
        self._empty_like = torch.empty_like
        self._like = _UNKNOWN          # the input the result can be allocated like, learned at the first replay
        pointers = {tensor.data_ptr(): index for index, tensor in enumerate(inputs) if isinstance(tensor, torch.Tensor)}
        result_pointer = result.data_ptr()
        self.launches = []
        for launcher, grid_x, grid_y, grid_z, stream, function, args, inner in launches:
            python_level = [grid_x, grid_y, grid_z, stream, function, *args]
            entry = None
            if inner is not None and tuple(inner[1][:5]) == (grid_x, grid_y, grid_z, stream, function):
                # The C entry point's own arguments: grid, stream, function, Triton's flags and scratch
                # pointers, then the kernel's. Scratch made per call cannot come from a recording: then
                # the launch is replayed at the Python level, which allocates it again.
                # Its pointer arguments as ints: Triton's C launcher takes an int as the device pointer
                # itself, where a tensor costs a data_ptr() call from C and a cuPointerGetAttribute
                # (whose only purpose, refusing a CPU tensor, the call signature's device already serves).
                try:
                    slots = self._slots(inner[1], pointers, result_pointer, torch)
                    entry = (inner[0], _released(inner[1], slots), slots, True)
                except _NotReplayable:
                    entry = None
            if entry is None:
                slots = self._slots(python_level, pointers, result_pointer, torch)
                entry = (functools.partial(launch_call, launcher), _released(python_level, slots), slots, False)
            self.launches.append(entry)

    def reshaped(self, shape: tuple) -> "_Plan":
        """This plan returning its result as ``shape``: for a caller that hands the launcher an N-D
        tensor viewed as rows, so that a later call skips the view and the view back (~1 us each on
        a CPU tensor): the launches see pointers only, and a contiguous result of the same element
        count is the same bytes in either shape."""
        shape = tuple(shape)
        recorded_shape, stride, dtype, device = self.result_layout
        if math.prod(shape) != math.prod(recorded_shape) or stride != _contiguous_strides(recorded_shape):
            raise ValueError(f"a plan whose result is {recorded_shape} with strides {stride} cannot return {shape}: "
                             f"only a contiguous result of the same element count can be reshaped")
        plan = copy.copy(self)
        plan._like = _UNKNOWN
        plan.result_layout = (shape, _contiguous_strides(shape), dtype, device)
        plan.result_shape = shape
        return plan

    @staticmethod
    def _slots(arguments, pointers: dict, result_pointer: int, torch) -> list[tuple[int, int]]:
        """(position, input index or -1 for the result) of each tensor among a launch's arguments."""
        slots = []
        for position, value in enumerate(arguments):
            if position < 5:              # grid, stream, function
                continue
            if isinstance(value, torch.Tensor):
                pointer = value.data_ptr()
                if pointer == result_pointer and pointer not in pointers:
                    slots.append((position, -1))
                elif pointer in pointers and pointer != result_pointer:
                    slots.append((position, pointers[pointer]))
                else:
                    raise _NotReplayable("a launch uses a tensor that is neither an input nor the result "
                                         "(a scratch buffer)")
            elif type(value).__name__ in ("TensorDescriptor", "TensorDescriptorArgs") or hasattr(value, "data_ptr"):
                raise _NotReplayable(f"a launch takes a {type(value).__name__}, which holds its own pointers")
        return slots

    def __call__(self, inputs):
        result = self.allocate(inputs)
        if self._current_device() != self.device:
            # The recorded function belongs to the tensors' device: launch there, as Triton itself would
            # have to (the current device is not part of the call signature).
            with self._device_guard(self.device):
                return self._launch(inputs, result)
        return self._launch(inputs, result)

    def allocate(self, inputs):
        """A new result for a call with ``inputs``: like the input laid out as the result where there is
        one (empty_like: ~0.7 us less than empty_strided's argument parsing on the CPU), else as recorded."""
        like = self._like
        if like is _UNKNOWN:
            like = self._like = self._input_like_result(inputs)
        if like is None:
            shape, stride, dtype, device = self.result_layout
            return self._empty_strided(shape, stride, dtype=dtype, device=device)
        return self._empty_like(inputs[like])

    def _input_like_result(self, inputs) -> int | None:
        """The index of an input laid out exactly as the result (shape, strides, dtype, device), whose
        ``empty_like`` is then the result's allocation; None when there is none. Every later call of
        the plan has inputs of the same signature, so the first call's answer holds for all."""
        torch = torch_module()
        for index, value in enumerate(inputs):
            if (isinstance(value, torch.Tensor) and value.is_contiguous()
                    and (tuple(value.shape), value.stride(), value.dtype, value.device) == self.result_layout):
                return index
        return None

    def compiled_launches(self) -> list | None:
        """The launches as compiled_replay takes them: (Triton's C launch function, its recorded
        arguments, [(position, input index or -1 for the result)]), the stream at position 3; None
        when a launch is replayed at the Python level (it allocates scratch per call)."""
        if not all(as_pointers for *_, as_pointers in self.launches):
            return None
        return [(call, tuple(recorded), [tuple(slot) for slot in slots]) for call, recorded, slots, _ in self.launches]

    def launch_into(self, inputs, result):
        """The recorded launches alone, with ``inputs`` and a ``result`` the caller allocated like the
        plan's (on the current device): what a replay costs besides its allocation (call_overhead.py)."""
        return self._launch(inputs, result)

    def _launch(self, inputs, result):
        stream = self._raw_stream(self.device)
        for call, recorded, slots, as_pointers in self.launches:
            arguments = list(recorded)
            arguments[3] = stream
            if as_pointers:
                for position, source in slots:
                    arguments[position] = (result if source < 0 else inputs[source]).data_ptr()
            else:
                for position, source in slots:
                    arguments[position] = result if source < 0 else inputs[source]
            call(*arguments)
        return result


def _released(arguments, slots) -> list:
    """A launch's recorded arguments without the recorded call's tensors: every slot is filled again at each
    replay (the new call's tensors or their pointers), so the plan keeps None there. Kept, they would live
    as long as the plan, for the process: the hello-gpu backend's linear timing recorded its plans on
    random weights of every projection shape of the 8B, 1.49 GB held through the decode and every later
    backend's peak."""
    released = list(arguments)
    for position, _source in slots:
        released[position] = None
    return released


def _contiguous_strides(shape: tuple) -> tuple:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class _NotReplayable(Exception):
    pass


_UNKNOWN = object()


def plain_tensor_types() -> tuple:
    """torch.Tensor and nn.Parameter (a model's weights): a Parameter behaves as a tensor does; any other
    subclass may override anything, so its calls are not keyed (they run the launcher as written)."""
    torch = torch_module()
    return (torch.Tensor, torch.nn.Parameter)


def _signature(args: tuple, tensor_types: tuple) -> tuple | None:
    """The key of a call: per tensor dtype, shape, strides, device and 16-byte alignment (what Triton
    specialises on); other arguments by value. None when an argument is neither."""
    parts = []
    for value in args:
        if type(value) in tensor_types:
            parts.append((value.dtype, value.shape, value.stride(), value.get_device(), value.data_ptr() % 16 == 0))
        elif value is None or type(value) in (int, float, bool, str):
            parts.append((type(value), value))
        else:
            return None
    return tuple(parts)


def replayable(launcher: Callable) -> Callable:
    """``launcher(*args)`` (tensors and plain scalars, returning one new tensor) made to cost its
    launches alone on repeated call signatures; see the module's notes. ``wrapped.plans`` maps each
    signature seen to its plan, or to the reason it is not replayable."""
    launcher_class = _launcher_class()
    plans: dict = {}
    recorded_twice: set = set()          # signatures whose second call was recorded too (see the module's notes)
    tensor_types = None if launcher_class is None else plain_tensor_types()

    def call(*args, **kwargs):
        if launcher_class is None or kwargs:
            return launcher(*args, **kwargs)
        key = _signature(args, tensor_types)
        if key is None:
            return launcher(*args)
        plan = plans.get(key)
        if type(plan) is _Plan and not launch_hooks_set():
            return plan(args)
        if type(plan) is _Plan or (plan is not None and key in recorded_twice):
            return launcher(*args)                    # a hook is set, or known not replayable: as written
        if plan is not None:
            recorded_twice.add(key)
        with _Recorder(launcher_class) as recorder:
            result = launcher(*args)
        plans[key] = _make_plan(recorder, args, result, torch_module())
        return result

    call.plans = plans
    call.__wrapped__ = launcher
    call.__doc__ = launcher.__doc__
    return call


def plan_of(launcher: Callable, *args) -> _Plan | None:
    """The plan a :func:`replayable` launcher holds for the call signature of ``args``: ``plan(args)``
    then costs the launches alone. None when it has none: not called with that signature yet, the
    signature is not replayable, or ``launcher`` was not made by :func:`replayable`. A caller that
    keeps a plan must run the launcher as written while :func:`launch_hooks_set` is true."""
    plans = getattr(launcher, "plans", None)
    if not isinstance(plans, dict) or not plans:
        return None
    key = _signature(args, plain_tensor_types())
    plan = plans.get(key) if key is not None else None
    return plan if type(plan) is _Plan else None


def _make_plan(recorder: _Recorder, args: tuple, result, torch):
    """The plan, or the reason (a str) this signature is not replayable."""
    if recorder.other_ops:
        return f"it runs PyTorch operations besides allocations and views: {', '.join(sorted(set(recorder.other_ops)))}"
    if not isinstance(result, torch.Tensor) or not recorder.launches:
        return "it returned no tensor or launched no Triton kernel"
    if any(isinstance(value, torch.Tensor) and value.data_ptr() == result.data_ptr() for value in args):
        return "its result shares memory with an input"
    if _hooks_set():
        return "a Triton launch hook is set"
    tensors = [value for value in args if isinstance(value, torch.Tensor)]
    stream = torch._C._cuda_getCurrentRawStream(result.get_device())
    if any(launch[4] != stream for launch in recorder.launches):
        return "a launch went to another stream than the current one"
    try:
        return (_Plan(recorder.launches, args, result, result.get_device(), recorder.original) if tensors
                else "it takes no tensor")
    except _NotReplayable as reason:
        return str(reason)
