"""Shared test set-up: a private kernel cache per test session, so tests never touch the user's; on a
machine without a GPU, Triton in interpreter mode from the first import on.

Why the second: TRITON_INTERPRET is read when a function is decorated with @triton.jit, and Triton's
own library functions (tl.sum, tl.max: @jit functions in triton.language.standard) are decorated once,
when triton.language is first imported. Imported in compiled mode, they refuse to run inside an
interpreted kernel ("Cannot call @triton.jit'd outside of the scope of a kernel"), so whether a test
passed depended on which earlier test had imported triton first. A test that needs compiled mode for
its own kernels (ahead-of-time compiles) removes the variable before it loads them.
"""

import os

import pytest


def _gpu_here() -> bool:
    try:
        import torch
        return torch.cuda.is_available() or bool(getattr(torch.version, "hip", None) and torch.cuda.device_count())
    except Exception:  # noqa: BLE001 - no torch: no GPU
        return False


if not _gpu_here():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache(tmp_path_factory):
    import os
    previous = os.environ.get("HG_CACHE_DIR")
    os.environ["HG_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernel-cache"))
    yield
    if previous is None:
        os.environ.pop("HG_CACHE_DIR", None)
    else:
        os.environ["HG_CACHE_DIR"] = previous


@pytest.fixture(scope="session")
def side_by_side():
    """``submit(function, *args) -> Future``: runs set-ups that mostly wait on child processes two at a
    time, so a module can start all its independent agent runs at once and each test waits for its own.

    Why: an agent run starts a Python child per step (compile, check, bench, compare, analyze), and
    each spends ~3 s importing torch while the parent waits, so a run alone keeps one of the CI
    machine's 2 cores busy. ``future.result()`` re-raises a set-up's error (an assertion included)
    with its traceback in the test that asked for it. Two at a time, not more: the runs' compare
    steps time kernels, and a third process per core would widen their noise.
    """
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(2, thread_name_prefix="side-by-side")
    yield pool.submit
    pool.shutdown(wait=True, cancel_futures=True)      # a session stopped early (-x) skips what never started


@pytest.fixture(scope="session")
def extension():
    """The compiled replay's C++ extension (runtime/compiled_replay.cpp) built for real, configured with
    CPU stand-ins for torch's stream and device queries and no Triton hook lists (a test that needs
    others configures it again). Skips where no C++ compiler can build it."""
    import shutil

    import torch

    from hello_gpu.runtime import compiled_replay
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler on this machine: the compiled replay cannot be built here (the Python "
                    "replay serves instead)")
    return compiled_replay.load_module(configure_with=(
        (torch.Tensor, torch.nn.Parameter), lambda device: 0x5EED, lambda: 0, ([], [])))


@pytest.fixture
def built_extension():
    """The compiled replay's extension built as a user's first call builds it, with torch's own stream and
    device queries (GPU tier: there it must build; the status says why not)."""
    from hello_gpu.runtime import compiled_replay
    status = compiled_replay.start(wait=True)
    assert status == "ready", f"the compiled replay did not build: {status}"
    return compiled_replay.extension()


@pytest.fixture(params=["python key", "compiled key"])
def key_path(request):
    """Each planned kernel-call test twice: Kernel.__call__ keys a common call in Python (_argument_parts),
    or by the compiled replay's signature() once that is built (on a GPU machine as a user's call builds
    it; without a GPU, the CPU build of the ``extension`` fixture)."""
    import torch

    from hello_gpu.runtime import kernel
    saved = kernel._EXTENSION[0]
    if request.param == "compiled key":
        kernel._EXTENSION[0] = request.getfixturevalue("built_extension" if torch.cuda.is_available() else "extension")
    else:
        kernel._EXTENSION[0] = None
    yield request.param
    kernel._EXTENSION[0] = saved


@pytest.fixture(scope="session")
def compiled_mode():
    """``run(script) -> the JSON object its last line prints``: ``script`` in a Python child with this checkout's
    src first and Triton in compiled mode (no TRITON_INTERPRET), for ahead-of-time compiles (triton.compile for
    a GPU target) on a machine without a GPU, where this process's Triton is the interpreter; the tests folder
    is on its path too, for :mod:`hopper_ptx`."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    def run(script: str) -> dict:
        environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
        here = Path(__file__).resolve().parent
        environment["PYTHONPATH"] = os.pathsep.join((str(here.parent / "src"), str(here)))
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                              env=environment)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])
    return run
