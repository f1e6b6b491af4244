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
