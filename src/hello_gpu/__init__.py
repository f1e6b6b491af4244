"""hello-gpu: write a GPU kernel inline, call it on PyTorch tensors, measure it honestly.

    import torch, hello_gpu as hg
    add = hg.hip(SOURCE, entry="vector_add")
    c = add(a, b, block=256)

    course = hg.load("kernels.hip")          # every kernel of a whole course file (main() left out)
    c = course.vector_add_v3_float4(a, b)

In a notebook: ``%load_ext hello_gpu`` then ``%%hip NAME``.
"""

import os

# Where an NVIDIA driver is installed, NVRTC 12.9+ serves a repeated compile from the driver's compute
# cache (~/.nv/ComputeCache) and ptxas then prints no -v report, so registers and spills would read
# as missing. hello-gpu keeps its own cache; the driver reads this variable when it initialises, so it
# is set on import (import hello_gpu before PyTorch first touches the GPU to be sure it applies).
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")

from .runtime import (  # noqa: E402 - the variable above must be set first
    CompileError, HelloGpuError, Kernel, KernelArgumentError, KernelModule, LaunchConfigError, NoGpuError, ProgramError,
    SignatureError, cuda, hip, load)

__version__ = "0.1.0"

__all__ = ["CompileError", "exercise", "HelloGpuError", "Kernel", "KernelArgumentError", "KernelModule", "LaunchConfigError",
           "NoGpuError", "ProgramError", "SignatureError", "cuda", "hip", "load", "__version__"]


def __getattr__(name: str):
    """``hello_gpu.profile`` after a bare ``import hello_gpu``: the profile subpackage (callable as
    ``hello_gpu.profile(fn, *args)``), imported on first use so that ``import hello_gpu`` stays light."""
    if name == "profile":
        # Not "from . import profile": that looks the attribute up first, which lands here again.
        import importlib
        return importlib.import_module(f"{__name__}.profile")
    if name == "exercise":
        # hello_gpu.exercise(op, kernel): imported on first use (it needs PyTorch; import hello_gpu stays light).
        from .exercises import exercise
        return exercise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"profile", "exercise"})


def load_ipython_extension(ipython) -> None:
    """``%load_ext hello_gpu``: registers the ``%%hip`` and ``%%cuda`` cell magics."""
    from .magic import register
    register(ipython)
