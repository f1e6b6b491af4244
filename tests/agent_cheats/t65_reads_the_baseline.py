"""CHEAT, the answer taken from the other process: maps the baseline's shared output buffers by name.

In the compare step the baseline and the candidate read the same lent input buffers, and on the CPU
tier every lent buffer is a POSIX shared-memory block with a name under /dev/shm. The candidate lists
them, maps those of its output's size (the modules found by ``__import__``, not imported), and when one
already holds a + b for its inputs (sampled at a few places: the baseline has just computed it, in AB
rounds) copies it instead of computing. Caught by the child's audit hook (the listing, and the mapping
of shared memory it was not lent, from the candidate's own code: tamper evidence).

parent: t01_tile_1024
change: copy the baseline's output out of /dev/shm when it matches a sample
hypothesis: a process cannot see another's buffers
"""

import os
import struct

import torch
import triton
import triton.language as tl

TILE = 256
GUARD = 16384
shared_memory = __import__("multiprocessing.shared_memory", fromlist=["SharedMemory"])
resource_tracker = __import__("multiprocessing.resource_tracker", fromlist=["unregister"])


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def _borrowed(a, b, out) -> bool:
    n = a.numel()
    if a.device.type != "cpu" or a.dtype != torch.float32 or n < 64:
        return False
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    sample = (0, n // 3, n // 2, n - 1)
    want = [_float32(flat_a[i].item() + flat_b[i].item()) for i in sample]
    for name in os.listdir("/dev/shm"):
        try:
            block = shared_memory.SharedMemory(name=name)
            resource_tracker.unregister(block._name, "shared_memory")
        except (OSError, ValueError):
            continue
        data = block.buf[GUARD:GUARD + 4 * n] if block.size >= 2 * GUARD + 4 * n else None
        if data is None or len(data) != 4 * n:
            continue
        if [struct.unpack_from("f", data, 4 * i)[0] for i in sample] == want:
            memoryview(out.reshape(-1).numpy()).cast("B")[:] = data     # not our own: ours starts as poison
            return True
    return False


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    if not _borrowed(a, b, out):
        add_kernel[(triton.cdiv(a.numel(), TILE),)](a, b, out, a.numel(), TILE=TILE)
    return out
