"""hello-gpu: write a GPU kernel inline, call it on PyTorch tensors, measure it honestly.

    import torch, hello_gpu as hg
    add = hg.hip(SOURCE, entry="vector_add")
    c = add(a, b, block=256)

In a notebook: ``%load_ext hello_gpu`` then ``%%hip NAME``.
"""

from .runtime import (CompileError, HelloGpuError, Kernel, KernelArgumentError, LaunchConfigError, NoGpuError,
                      SignatureError, cuda, hip)

__version__ = "0.1.0"

__all__ = ["CompileError", "HelloGpuError", "Kernel", "KernelArgumentError", "LaunchConfigError", "NoGpuError",
           "SignatureError", "cuda", "hip", "__version__"]


def load_ipython_extension(ipython) -> None:
    """``%load_ext hello_gpu``: registers the ``%%hip`` and ``%%cuda`` cell magics."""
    from .magic import register
    register(ipython)
