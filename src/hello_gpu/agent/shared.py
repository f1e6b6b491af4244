"""Buffers the agent's parent owns and lends to a candidate's child process, with guard bytes on both sides.

The parent allocates every input and output a candidate's calls touch, fills them, and sends the child
a handle; the child writes its outputs into them and the parent reads the result in its own memory.
Nothing the child reports about correctness is believed: the parent looks at the bytes itself.

- On a GPU the buffer is CUDA memory of the parent's, opened in the child through CUDA IPC (the
  handle is ``torch.multiprocessing``'s reduction of the tensor). The shared buffers come from their
  own memory pool: CUDA IPC maps a whole allocator segment into the child, and a segment shared with
  the parent's float64 references would let a kernel read them out of bounds.
- On the CPU (the Triton interpreter) it is a POSIX shared-memory block (``multiprocessing.shared_memory``)
  the child opens by name.

A CUDA buffer's memory outlives the parent's last reference while torch thinks a child still holds it: sharing
wraps the allocation in a reference counter (torch's CudaIPCSentData) that only the child's release of its
tensor brings back to zero, and until then the freed allocation waits in torch's limbo, still counted as
allocated. The child never releases it (it ends with ``os._exit``, or is killed), so every buffer ever lent
stayed allocated in the parent until the parent ended: on the H100 (session 14), the GPU tier's 22nd test, a
single bench (at most TIMING_BYTES, 16 GiB), found 76.80 GiB allocated in the pytest process, and its end said
"Producer process has been terminated before all shared CUDA tensors released". So the parent, once the child
that opened a buffer is gone, sets the buffer's counter to zero itself (:meth:`SharedBuffer.close`,
:func:`release_ipc_counter`).

Each buffer is laid out as ``[guard | data | guard]``. The guards hold random bytes the parent drew;
after every call the parent compares them: a kernel that writes past either end of its output (a last
tile without its mask, an off-by-one grid) changed them, and is rejected under :data:`GUARD`, even
where the stray bytes landed on memory nobody else was using.
"""

from __future__ import annotations

import math
import os
import pickle
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

# 16 KiB a side: a whole unmasked tile past the end (1024 float32 = 4 KiB, 2048 float64 = 16 KiB) lands
# inside the guard instead of beyond it. A multiple of 256, so the data keeps the allocator's alignment.
GUARD_BYTES = 16384
GUARD = "guard bytes"


def _torch():
    import torch
    return torch


@dataclass
class SharedBuffer:
    """One guarded buffer: ``tensor`` is the data region (the parent's view), ``handle`` what the child needs."""

    tensor: object
    raw: object                       # the whole [guard | data | guard] byte tensor
    guard_pattern: object             # the guards' expected bytes (parent memory, never shared)
    handle: dict
    owner: object = None              # the SharedMemory block (CPU), kept open while the buffer lives
    ipc_counter: tuple | None = None  # (CUDA) torch's reference counter of the lent allocation: (file, slot)

    def guards_intact(self) -> str | None:
        """None, or what changed: "3 bytes before and 0 after the output were written"."""
        return guards_changed([self])[0]

    def describe_change(self, before: int, after: int) -> str | None:
        if not before and not after:
            return None
        return (f"{before} byte(s) in the {GUARD_BYTES} before and {after} in the {GUARD_BYTES} after a "
                f"{tuple(self.tensor.shape)} {str(self.tensor.dtype).removeprefix('torch.')} buffer changed")

    def rearm(self) -> None:
        """Write the guard pattern again (after a violation was reported)."""
        self.raw[:GUARD_BYTES] = self.guard_pattern[:GUARD_BYTES]
        self.raw[-GUARD_BYTES:] = self.guard_pattern[GUARD_BYTES:]

    def close(self) -> None:
        """The parent is done with the buffer, and every child it was lent to has ended: a CUDA buffer's memory
        goes back to the allocator as soon as the parent's last view of it goes (its IPC counter set to zero,
        whatever the child did), a CPU block is unlinked."""
        if self.ipc_counter is not None:
            release_ipc_counter(*self.ipc_counter)
            self.ipc_counter = None
            self.tensor = self.raw = None
        if self.owner is not None:
            try:
                self.owner.unlink()
            except FileNotFoundError:
                pass
            self.tensor = self.raw = None
            try:
                self.owner.close()
            except BufferError:         # a view still exported: the mapping goes with the process
                pass
            self.owner = None


def guards_changed(buffers: list[SharedBuffer]) -> list[str | None]:
    """:meth:`SharedBuffer.guards_intact` of many buffers (all on one device) at once: their guards gathered and
    compared in one pass, one read back. A timed batch of 64 input sets checks ~200 buffers after every batch:
    one synchronize instead of ~400 (~15 us each on the H200: 6 ms a batch, longer than the batch)."""
    if not buffers:
        return []
    torch = _torch()
    guards = torch.stack([buffer.raw[:GUARD_BYTES] for buffer in buffers]
                         + [buffer.raw[-GUARD_BYTES:] for buffer in buffers])
    patterns = torch.stack([buffer.guard_pattern[:GUARD_BYTES] for buffer in buffers]
                           + [buffer.guard_pattern[GUARD_BYTES:] for buffer in buffers])
    changed = (guards != patterns).sum(dim=1).view(2, len(buffers)).t().tolist()
    return [buffer.describe_change(before, after) for buffer, (before, after) in zip(buffers, changed)]


# One lock for every session's pool in this process. torch's caching allocator counts a thread inside
# ``use_mem_pool`` as a capture underway, and emptying a cache (a pool's end, ``empty_cache``) asserts that
# none is: on the H100 (session 16) one session's pool ended while another thread allocated in its own,
# and the assert, raised inside the pool's destructor, aborted the whole process (the GPU tier's six
# checks at once). So allocating into a pool and ending one never overlap.
_POOL_LOCK = threading.RLock()


# Pools whose holder was collected without end_pool (a session dropped without close()): kept alive here, so that
# the pool's destructor never runs inside a garbage collection that another allocation set off, perhaps inside
# ``use_mem_pool`` (the assert above), and let go in release(), under the lock.
_ORPHANED_POOLS: list = []


def new_pool(holder):
    """A memory pool for one session's shared buffers (None where this torch has none), made ``holder.pool``. Per
    session, so that closing the session gives the memory back (:func:`end_pool`): a pool that lives on keeps its
    segments reserved, and after a 6.4 GB problem the next child would find the GPU full. Should the holder be
    collected without end_pool, its pool waits in _ORPHANED_POOLS for the next release()."""
    torch = _torch()
    pool = None
    if hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool"):
        pool = torch.cuda.MemPool()
        holder.pool_orphaned = weakref.finalize(holder, _ORPHANED_POOLS.append, pool)
    holder.pool = pool
    return pool


def end_pool(holder) -> None:
    """Drop ``holder.pool`` (from :func:`new_pool`) and give the memory back (:func:`release`), while no thread
    allocates into any pool (:data:`_POOL_LOCK`)."""
    with _POOL_LOCK:
        orphaned = getattr(holder, "pool_orphaned", None)
        if orphaned is not None:
            orphaned.detach()                     # the finalizer's reference to the pool goes with it
        holder.pool = holder.pool_orphaned = None
        release()


def release() -> None:
    """Return the parent's unused CUDA memory to the driver (pools no longer referenced included, and lent
    allocations whose counters :meth:`SharedBuffer.close` set to zero after their views were gone), so the
    next candidate's child can have it."""
    torch = _torch()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        import gc
        with _POOL_LOCK:
            gc.collect()
            _ORPHANED_POOLS.clear()
            torch.cuda.ipc_collect()
            torch.cuda.empty_cache()


# torch keeps the counters of lent CUDA allocations in POSIX shared-memory files it maps with its
# RefcountedMapAllocator: a 64-byte header of the allocator's own (at::map_alloc_alignment), then one int64
# slot per allocation (CudaIPCRefCountersFile). Checked against the installed torch in the CPU tier
# (tests/test_agent_core.py: a CPU storage shared by file name is mapped the same way).
IPC_COUNTER_HEADER_BYTES = 64
IPC_COUNTER_BYTES = 8


def release_ipc_counter(file: str, slot: int) -> bool:
    """Set torch's reference counter of a lent CUDA allocation to zero: the child it was lent to has ended, and
    what it did with its copy (released it, never did: ``os._exit``, a kill; released it twice, which wraps the
    unsigned counter) no longer matters. The allocation is then freed with the parent's last view of it, or by
    the next ``torch.cuda.ipc_collect()`` where that view is already gone. False where the file is gone."""
    path = Path("/dev/shm") / file.lstrip("/")
    try:
        descriptor = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        os.pwrite(descriptor, bytes(IPC_COUNTER_BYTES), IPC_COUNTER_HEADER_BYTES + IPC_COUNTER_BYTES * int(slot))
    finally:
        os.close(descriptor)
    return True


def allocate(shape, dtype, device: str, pool=None) -> SharedBuffer:
    """A guarded buffer of ``shape`` and ``dtype`` (a torch dtype) on ``device`` ("cpu" or "cuda"), from
    ``pool`` (:func:`new_pool`) on a GPU where given."""
    torch = _torch()
    shape = tuple(shape)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    data_bytes = max(1, math.prod(shape)) * itemsize
    data_bytes = -(-data_bytes // 256) * 256
    total = GUARD_BYTES + data_bytes + GUARD_BYTES
    pattern = torch.frombuffer(bytearray(os.urandom(2 * GUARD_BYTES)), dtype=torch.uint8)
    numel = math.prod(shape)
    if device.startswith("cuda"):
        if pool is not None:
            with _POOL_LOCK, torch.cuda.use_mem_pool(pool):
                raw = torch.empty(total, dtype=torch.uint8, device=device)
        else:
            raw = torch.empty(total, dtype=torch.uint8, device=device)
        pattern = pattern.to(device)
        pickled, counter = _pickle_cuda(raw)
        handle = {"kind": "cuda", "pickled": pickled, "offset": GUARD_BYTES, "numel": numel,
                  "dtype": str(dtype).removeprefix("torch."), "shape": list(shape)}
        owner = None
    else:
        from multiprocessing import shared_memory
        owner = shared_memory.SharedMemory(create=True, size=total)
        raw = torch.frombuffer(owner.buf, dtype=torch.uint8, count=total)
        handle = {"kind": "shm", "name": owner.name, "size": total, "offset": GUARD_BYTES, "numel": numel,
                  "dtype": str(dtype).removeprefix("torch."), "shape": list(shape)}
    raw[:GUARD_BYTES] = pattern[:GUARD_BYTES]
    raw[-GUARD_BYTES:] = pattern[GUARD_BYTES:]
    tensor = raw[GUARD_BYTES:GUARD_BYTES + numel * itemsize].view(dtype).view(shape)
    return SharedBuffer(tensor, raw, pattern, handle, owner, counter if device.startswith("cuda") else None)


class _Reduced:
    """Pickles as the reduction it holds: the child rebuilds what torch.multiprocessing would have sent."""

    def __init__(self, reduced: tuple):
        self.reduced = reduced

    def __reduce__(self):
        return self.reduced


def _pickle_cuda(raw) -> tuple[bytes, tuple[str, int]]:
    """CUDA IPC: torch.multiprocessing's reduction of the tensor (a memory handle, not the bytes), and the
    reference counter that reduction made for it ((file, slot): :func:`release_ipc_counter`). One reduction, so
    one counter: each reduction of a tensor makes another."""
    from torch.multiprocessing.reductions import reduce_tensor
    rebuild, arguments = reduce_tensor(raw)
    named = ipc_counter_of(rebuild, arguments)
    return pickle.dumps(_Reduced((rebuild, arguments)), pickle.HIGHEST_PROTOCOL), named


def ipc_counter_of(rebuild, arguments) -> tuple[str, int]:
    """(file, slot) of the reference counter among a CUDA reduction's arguments, read by the names of
    ``rebuild``'s parameters (torch.multiprocessing.reductions.rebuild_cuda_tensor's)."""
    import inspect
    named = dict(zip(inspect.signature(rebuild).parameters, arguments))
    file = named["ref_counter_handle"]
    return (file.decode() if isinstance(file, bytes) else str(file)), int(named["ref_counter_offset"])


def open_handle(handle: dict):
    """In the child: (data tensor, keep-alive object) for a handle from :func:`allocate`."""
    torch = _torch()
    dtype = getattr(torch, handle["dtype"])
    if handle["kind"] == "cuda":
        raw = pickle.loads(handle["pickled"])
        keep = raw
    else:
        from multiprocessing import resource_tracker, shared_memory
        block = shared_memory.SharedMemory(name=handle["name"])
        # The parent created and unlinks the block; the child's tracker must not unlink it a second time.
        try:
            resource_tracker.unregister(block._name, "shared_memory")  # noqa: SLF001 - stdlib's own bookkeeping
        except Exception:  # noqa: BLE001 - no tracker in this process: nothing to unregister
            pass
        raw = torch.frombuffer(block.buf, dtype=torch.uint8, count=handle["size"])
        keep = block
    itemsize = torch.empty(0, dtype=dtype).element_size()
    offset = handle["offset"]
    tensor = raw[offset:offset + handle["numel"] * itemsize].view(dtype).view(tuple(handle["shape"]))
    return tensor, keep
