"""CHEAT, a CUDA context of its own: the place where work left running is in no event of ours.

After each timed call the worker records one event for the whole primary context (cuCtxRecordEvent:
every stream, green contexts too) and measures how long the context's work ran past the call's end
event (worker.ContextDrain). A context the candidate makes itself (cuda-python's cuCtxCreate) is
outside that event: work launched there would run beside the next call's L2 flush unseen. This file
makes one (by a computed name: no name the source scan reads), puts the primary context back, and
adds honestly: the hidden launch would follow, but making the context is already the cheat's whole
setup. Caught by the guard on cuda-python's context makers (tamper evidence, "another CUDA context"),
recorded before the driver is even asked: on the CPU, where there is no driver, as on a GPU.

parent: t01_tile_1024
change: a CUDA context made at the first call (then unused)
hypothesis: a second context is where work hides from the primary context's event
"""

import torch
import triton
import triton.language as tl

TILE = 256
_driver = __import__("cuda.bindings.driver", fromlist=["driver"])
_made = []


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def _own_context():
    try:
        made = getattr(_driver, "cuCtx" + "Create")(None, 0, _driver.CUdevice(0))
        if made[0] == _driver.CUresult.CUDA_SUCCESS:
            _driver.cuCtxPopCurrent()                # the primary context current again: torch's tensors work
        return made
    except Exception as error:  # noqa: BLE001 - no driver (the CPU): nothing made, nothing lost
        return error


def run(a, b, out=None):
    if not _made:
        _made.append(_own_context())
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    add_kernel[(triton.cdiv(n, TILE),)](a, b, out, n, TILE=TILE)
    return out
