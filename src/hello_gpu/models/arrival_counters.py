"""Arrival counters: how the last program of a kernel to finish knows it is the last, so it can do the work that
needs every other program's results (a merge, a norm over all outputs) without a launch of its own.

Each program stores its results, passes a barrier (every thread's stores issued), and adds 1 to a counter with an
acquire-release atomic at GPU scope; the program that reads ``programs - 1`` back is the last one, sees every other
program's stores, reads them past L1 (``cache_modifier=".cg"``: L1 is not coherent between SMs), does the
remaining work and sets the counter back to 0.

The counters of a device are a ring of zeros: each call takes the next ones. Successive calls (a decode step's
layers, one after another) and calls captured in CUDA graphs each get counters of their own, so no call depends
on the one before having reset its counters, and two calls in flight on two streams share a counter only if
:data:`RING` counters' worth of calls separate them. The ring is created outside a CUDA-graph capture (the
backend's check and warm-up calls come first); under a capture before it exists, :func:`take` gives None and
the caller runs the launches the counters would have saved (a capture cannot zero memory it does not own
without a memset node of its own).
"""

from __future__ import annotations

import torch

RING = 1 << 16      # int32 counters a device's ring holds (256 KiB): 8192 8B decode attention calls at batch 1

_rings: dict = {}   # device -> [counters, the next free index]


def take(device: torch.device, count: int) -> torch.Tensor | None:
    """The next ``count`` counters of ``device``'s ring (all 0), or None where there is no ring to take them
    from: more than the ring holds, or a CUDA-graph capture before the ring exists."""
    entry = _rings.get(device)
    if count > RING:
        return None
    if entry is None:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return None
        entry = _rings[device] = [torch.zeros(RING, dtype=torch.int32, device=device), 0]
    counters, start = entry
    if start + count > len(counters):
        start = 0
    entry[1] = start + count
    return counters[start:start + count]


def ring(device: torch.device) -> tuple[torch.Tensor, int] | None:
    """(the counters, the next free index) of ``device``'s ring, for tests; None before the first :func:`take`."""
    entry = _rings.get(device)
    return None if entry is None else (entry[0], entry[1])


__all__ = ["RING", "ring", "take"]
