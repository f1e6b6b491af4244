"""The compiled replay (runtime/compiled_replay.cpp) on the CPU: built for real, configured with CPU
stand-ins for torch's stream and device functions, and Python functions in place of Triton's C
launcher, which record what they are given. The GPU tier (tests/test_functions.py) runs it with
Triton's launcher behind hello_gpu.ops.softmax and rms_norm."""

from __future__ import annotations

import threading

import pytest
import torch

from hello_gpu.runtime import compiled_replay

STREAM = 0x5EED
HOOKS = ([], [])


@pytest.fixture
def module(extension):         # extension: tests/conftest.py
    """A fresh configuration (empty tables) per test."""
    extension.configure((torch.Tensor, torch.nn.Parameter), lambda device: STREAM, lambda: 0, HOOKS,
                        len(compiled_replay.TABLES))
    HOOKS[0].clear()
    HOOKS[1].clear()
    return extension


class Launcher:
    """Stands in for Triton's C launch: keeps the arguments of every call."""

    def __init__(self):
        self.calls = []

    def __call__(self, *arguments):
        self.calls.append(arguments)


def _rows(shape=(16, 64), dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator).add_(3.0).to(dtype)     # never zeros


def _add(module, example, launcher, *, sizes=None, strides=None, dtype=None, slots=((6, 0), (7, -1)), table=0):
    x = example[0]
    sizes = tuple(x.shape) if sizes is None else sizes
    strides = tuple(x.stride()) if strides is None else strides
    arguments = (1, 2, 3, None, 99, "metadata", 0, 0, 4096)
    module.add(table, example, sizes, strides, dtype or x.dtype, x.device, [(launcher, arguments, list(slots))])


def test_a_planned_call_allocates_the_result_and_hands_the_launch_new_pointers_and_the_stream(module):
    launcher = Launcher()
    _add(module, (_rows(seed=1),), launcher)
    x = _rows(seed=2)                    # same signature, fresh data and memory
    result = module.replay(0, x)
    assert isinstance(result, torch.Tensor)
    assert result.shape == x.shape and result.stride() == x.stride() and result.dtype == x.dtype
    assert result.data_ptr() != x.data_ptr()
    (arguments,) = launcher.calls
    assert arguments[:3] == (1, 2, 3) and arguments[3] == STREAM and arguments[4:6] == (99, "metadata")
    assert arguments[6] == x.data_ptr() and arguments[7] == result.data_ptr() and arguments[8] == 4096
    second = module.replay(0, x)
    assert second.data_ptr() != result.data_ptr()       # a new result per call, never a reused one
    assert launcher.calls[1][7] == second.data_ptr()


def test_a_non_contiguous_result_layout_is_allocated_as_recorded(module):
    launcher = Launcher()
    x = _rows((8, 5))
    _add(module, (x,), launcher, sizes=(8, 5), strides=(1, 8))         # column-major result
    result = module.replay(0, _rows((8, 5), seed=3))
    assert result.shape == (8, 5) and result.stride() == (1, 8)


@pytest.mark.parametrize("change", ["shape", "dtype", "strides", "alignment", "subclass", "no tensor", "other table"])
def test_a_call_of_another_signature_gets_none(module, change):
    """None sends the caller down its checked path: every difference the Python key would see."""
    launcher = Launcher()
    _add(module, (_rows((16, 64)),), launcher)
    fresh = _rows((16, 64), seed=4)
    table = 0
    if change == "shape":
        x = _rows((16, 63))
    elif change == "dtype":
        x = fresh.double()
    elif change == "strides":
        x = _rows((64, 16)).t()                         # same shape, transposed strides
    elif change == "alignment":
        storage = _rows((16 * 64 + 1,)).view(-1)
        x = storage[1:].view(16, 64)                    # 4 bytes past a 16-byte boundary
        assert x.data_ptr() % 16 != 0 and x.stride() == fresh.stride()
    elif change == "subclass":
        class Marked(torch.Tensor):
            pass
        x = fresh.as_subclass(Marked)
    elif change == "no tensor":
        x = fresh.tolist()
    else:
        x, table = fresh, 1
    assert module.replay(table, x) is None
    assert launcher.calls == []


def test_a_parameter_is_replayed_as_a_tensor(module):
    launcher = Launcher()
    _add(module, (_rows(),), launcher)
    weight = torch.nn.Parameter(_rows(seed=5), requires_grad=False)
    assert isinstance(module.replay(0, weight), torch.Tensor)


def test_grad_mode_and_requires_grad_send_the_call_to_the_checked_path(module):
    launcher = Launcher()
    _add(module, (_rows(),), launcher)
    x = _rows(seed=6).requires_grad_()
    assert module.replay(0, x) is None                  # autograd would need a backward: refused there
    with torch.no_grad():
        assert isinstance(module.replay(0, x), torch.Tensor)


def test_scalars_are_keyed_by_kind_and_value(module):
    launcher = Launcher()
    x = _rows()
    _add(module, (x, 1e-6), launcher)
    assert isinstance(module.replay(0, x, 1e-6), torch.Tensor)
    assert module.replay(0, x, 1e-5) is None
    assert module.replay(0, x, 0) is None               # an int is another kind than a float
    assert module.replay(0, x, True) is None
    assert module.replay(0, x, "1e-6") is None          # no key for a str: the checked path
    assert module.replay(0, x, 2**70) is None           # beyond int64: no key


def test_a_launch_hook_stops_the_replay(module):
    launcher = Launcher()
    _add(module, (_rows(),), launcher)
    HOOKS[0].append(lambda *args: None)
    assert module.replay(0, _rows(seed=7)) is None
    HOOKS[0].clear()
    assert isinstance(module.replay(0, _rows(seed=7)), torch.Tensor)


def test_an_error_in_the_launch_is_raised_and_nothing_is_returned(module):
    def failing(*arguments):
        raise RuntimeError("the launch failed: CUDA_ERROR_INVALID_VALUE")
    _add(module, (_rows(),), failing)
    with pytest.raises(RuntimeError, match="CUDA_ERROR_INVALID_VALUE"):
        module.replay(0, _rows(seed=8))


def test_plans_beyond_the_limit_push_out_the_oldest(module):
    launcher = Launcher()
    for rows in range(1, 258):                          # 257 signatures: one more than the limit of 256
        _add(module, (_rows((rows, 4)),), launcher)
    assert module.plans(0) == 256
    assert module.replay(0, _rows((1, 4))) is None      # the first one added is gone
    assert isinstance(module.replay(0, _rows((257, 4))), torch.Tensor)


def test_a_plan_replaced_during_its_own_replay_is_not_freed_under_it(module):
    """Triton's launcher lets go of the GIL around the launch, so another thread may replace the plan
    between two of its launches: the replay keeps its own reference."""
    x = _rows()
    seen = []

    def replacing(*arguments):
        seen.append(arguments)
        _add(module, (x,), Launcher())                  # replaces the plan being replayed
    module.add(0, (x,), tuple(x.shape), tuple(x.stride()), x.dtype, x.device,
               [(replacing, (1, 1, 1, None, 7, 0), [(5, 0)]), (replacing, (2, 2, 2, None, 8, 0), [(5, -1)])])
    result = module.replay(0, _rows(seed=9))
    assert [arguments[4] for arguments in seen] == [7, 8]  # both launches of the old plan ran
    assert seen[1][5] == result.data_ptr()


def test_replays_from_several_threads_each_get_their_own_result(module):
    launcher = Launcher()
    _add(module, (_rows(),), launcher)
    results, errors = [], []

    def work(seed):
        try:
            for _ in range(200):
                results.append(module.replay(0, _rows(seed=seed)).data_ptr())
        except Exception as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)
    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(results) == 800 and len(launcher.calls) == 800


@pytest.mark.parametrize("bad", ["slot past the arguments", "slot before the stream", "input index", "short arguments",
                                 "dtype", "table"])
def test_a_malformed_plan_is_refused_clearly(module, bad):
    x = _rows()
    arguments, slots, dtype, table = (1, 2, 3, None, 5, 0), [(5, 0)], x.dtype, 0
    if bad == "slot past the arguments":
        slots = [(6, 0)]
    elif bad == "slot before the stream":
        slots = [(2, 0)]
    elif bad == "input index":
        slots = [(5, 1)]
    elif bad == "short arguments":
        arguments, slots = (1, 2, 3, None), []
    elif bad == "dtype":
        dtype = "float32"
    else:
        table = 7
    with pytest.raises((ValueError, TypeError, IndexError)):
        module.add(table, (x,), tuple(x.shape), tuple(x.stride()), dtype, x.device, [(Launcher(), arguments, slots)])
    assert module.plans(0) == 0


def test_the_public_functions_use_the_same_tables_as_the_extension():
    assert compiled_replay.table("softmax") != compiled_replay.table("rms_norm")
    with pytest.raises(ValueError):
        compiled_replay.table("matmul")


def test_the_build_name_changes_with_the_source_torch_and_python():
    name = compiled_replay.build_name()
    assert name.startswith("hello_gpu_compiled_replay_") and len(name) == len("hello_gpu_compiled_replay_") + 12


def test_it_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("HG_COMPILED_REPLAY", "0")
    state = dict(compiled_replay._state)
    try:
        compiled_replay._state.update(module=None, status="not started", thread=None)
        assert compiled_replay.start(wait=True) == "off (HG_COMPILED_REPLAY=0)"
        assert compiled_replay.function() is None
    finally:
        compiled_replay._state.clear()
        compiled_replay._state.update(state)


def test_a_build_started_before_the_first_call_is_taken_up_by_the_public_functions(tmp_path):
    # The H200 run of 8b07192: benchmarks/call_overhead.py built the extension before its first
    # ops.softmax call, and the functions, which registered for the build only at their first plan,
    # never used it. In a fresh process (so no other test's state counts): build first, then look.
    import subprocess
    import sys
    script = (
        "import types\n"
        "from hello_gpu.runtime import compiled_replay\n"
        "from hello_gpu.ops import functions\n"
        "built = types.SimpleNamespace(replay=lambda table, *args: None)\n"
        "compiled_replay.load_module = lambda configure_with=None: built\n"
        "assert compiled_replay.start(wait=True) == 'ready', compiled_replay.status()\n"
        "assert functions._COMPILED[0] is built.replay, functions._COMPILED[0]\n"
        "print('taken up')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "HG_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0 and "taken up" in done.stdout, done.stdout + done.stderr


def test_plans_held_counts_each_public_functions_table(module, monkeypatch):
    monkeypatch.setitem(compiled_replay._state, "module", module)
    assert compiled_replay.plans_held() == {"softmax": 0, "rms_norm": 0}
    x = _rows()
    _add(module, (x,), Launcher(), table=compiled_replay.table("rms_norm"))
    assert compiled_replay.plans_held() == {"softmax": 0, "rms_norm": 1}
