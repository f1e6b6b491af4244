"""Programmatic dependent launch (PDL, sm_90 on): the hello-gpu backend's own kernels let the next one start early.

In a CUDA graph a decode step is ~180 kernels at the 1B (11 a layer, 16 layers), each a few microseconds, and
between two of them the device spends ~1-2 us with nothing running: the next grid is set up and its blocks are
dispatched only once the previous grid has ended (the "launch gaps" of ``hello-gpu model profile``). Hopper can
overlap that set-up with the end of the previous kernel: a kernel launched with the programmatic-stream-
serialization attribute (Triton: ``launch_pdl=True``) may begin while the kernel before it still runs, once every
block of that kernel has started or said ``griddepcontrol.launch_dependents``; it must then wait, with
``griddepcontrol.wait``, until the kernel before it has ended and its writes are visible, before it touches memory.

So each of our model kernels, when asked (``pdl=True``), begins with :func:`wait_then_release`: the wait first (every
load and store after it is safe, whatever it reads or writes), then the release that lets the kernel after it be
set up. The overlap is only the set-up and the dispatch, never the work; where the kernel before is not ours
(cuBLAS's GEMV) nothing releases early and ours starts at its end as before, its own set-up still hidden. A kernel
launched without the attribute that runs the wait waits for nothing (no dependency: the instruction returns).
The one exception is the batch-1 decode GEMV (:mod:`.linear_pdl_kernel`): it loads its first weight tile before
the wait, since no kernel of the step writes a weight, so its DRAM reads overlap the end of the kernel before.

prediction: ~0.5-1 us hidden at each of the 7 boundaries a layer where one of our kernels follows another kernel
  (rope, cache write, attention's split and merge, two add + RMSNorm, SwiGLU): ~80 us of the 1B's 1.44 ms step
  (~5%) and ~170 us of the 8B's 6.11 ms (~3%) on the H100 of session 17, more where the 8B's GEMV is ours
outcome: not measured yet (written without a GPU, session 17); the backend ``hello-gpu-pdl`` runs it beside
  ``hello-gpu`` in one ``hello-gpu model run`` so the two decode steps are compared in the same run
"""

from __future__ import annotations

import functools

import triton
import triton.language as tl


@triton.jit
def wait_then_release(PDL: tl.constexpr):
    """At a kernel's start: with PDL, wait for the kernel before to end (its writes visible), then let the kernel
    after be set up. Nothing without it (the Triton interpreter has no such instruction)."""
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


def usable(device) -> str | None:
    """None where PDL can be asked for on ``device``, else why not (a sentence for the backend's notes)."""
    from ..ops.rung import triton_interpreter_on
    if device.type != "cuda" or triton_interpreter_on():
        return f"no programmatic dependent launch on the {device.type} (a CUDA feature of sm_90 and later)"
    return _capability_says(device.index)


@functools.lru_cache(maxsize=None)
def _capability_says(index: int | None) -> str | None:
    import torch
    major, minor = torch.cuda.get_device_capability(index)
    return None if major >= 9 else f"no programmatic dependent launch on sm_{major}{minor}: it needs sm_90 or later"


def checked(pdl: bool, device) -> bool:
    """``pdl`` as a kernel's wrapper passes it on, refused with the reason where the device cannot do it (the
    interpreter has no ``griddepcontrol``: the kernel would fail to compile, naming an instruction)."""
    if pdl:
        why_not = usable(device)
        if why_not:
            raise ValueError(f"pdl=True: {why_not}")
    return bool(pdl)


def launch_options(pdl: bool) -> dict:
    """The launch's keyword for Triton: ``launch_pdl=True`` where asked for, nothing otherwise, so that a launch
    without PDL is the one it was before (whatever the installed Triton makes of the keyword)."""
    return {"launch_pdl": True} if pdl else {}


def with_dependent_launches(ops, device):
    """(``ops`` with each of our kernels that takes ``pdl`` asked for it, a note saying what was done)."""
    import inspect
    from dataclasses import fields, replace

    why_not = usable(device)
    if why_not:
        return ops, why_not
    changed = {}
    for field in fields(ops):
        function = getattr(ops, field.name)
        try:
            takes = "pdl" in inspect.signature(function).parameters
        except (TypeError, ValueError):          # a builtin (F.linear) has no signature to read
            takes = False
        if takes:
            changed[field.name] = functools.partial(function, pdl=True)
    names = ", ".join(sorted(changed)) or "none"
    return replace(ops, **changed), f"programmatic dependent launch for our kernels of: {names}"


__all__ = ["checked", "launch_options", "usable", "wait_then_release", "with_dependent_launches"]
