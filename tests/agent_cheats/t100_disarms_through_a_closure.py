"""CHEAT, the tamper watch switched off through what it left in reach: a wrapper's closure.

The child wraps the thread starters before the candidate is imported, and each wrapper is an ordinary
Python function, whose closure cells and default values can be read without any audited access (only
frames, ``gc`` and the like are audited). Following them (``threading._start_new_thread.__closure__`` and the
functions in its cells, and theirs) leads to whatever the watch keeps its switches in; the candidate
turns every flag it finds off (``armed``, ``inside``) and empties every list of evidence it finds. Then
it walks the stack (as t80) to see whether a timer is its caller and skips 1 tile in 8 when one is.
Caught because nothing a wrapper or the dispatch mode holds leads to the watch's state: the switches
live in the audit hook's own closure, which no Python code can reach without ``gc`` (audited); the
wrappers only raise audit events, and the hook hands them the functions they wrap. The stack walk is
then seen (tamper evidence, frame inspection), and where the skip happens, the timed outputs are wrong.

parent: t01_tile_1024
change: the watch's flags found through threading._start_new_thread's closure and turned off
hypothesis: the watch's state is out of reach because no name leads to it
deterministic: yes, one writer per element
"""

import sys
import types

import torch
import triton
import triton.language as tl

TILE = 256
TIMERS = ("time", "batch", "measure", "bench", "timed")


def _reachable(root, depth=4):
    """Every object reachable from ``root`` through closures, defaults and instance dicts (no gc, no frames)."""
    seen, found, todo = set(), [], [(root, 0)]
    while todo:
        value, level = todo.pop()
        if id(value) in seen or level > depth:
            continue
        seen.add(id(value))
        found.append(value)
        inner = []
        if isinstance(value, types.FunctionType):
            inner += [cell.cell_contents for cell in value.__closure__ or () if _filled(cell)]
            inner += list(value.__defaults__ or ()) + list((value.__kwdefaults__ or {}).values())
        if hasattr(value, "__dict__") and not isinstance(value, type) and type(value).__module__ != "builtins":
            inner += [v for v in vars(value).values() if not isinstance(v, type(sys))]
        todo += [(item, level + 1) for item in inner if isinstance(item, types.FunctionType)
                 or hasattr(item, "__dict__") and not isinstance(item, type)]
    return found


def _filled(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def _disarm():
    threading, low = sys.modules["thread" + "ing"], sys.modules["_" + "thread"]
    roots = [vars(threading).get("_start_new_thread"), vars(low).get("start_new_thread")]
    for value in [item for root in roots if root is not None for item in _reachable(root)]:
        for flag in ("armed", "inside"):
            if isinstance(getattr(value, flag, None), bool):
                setattr(value, flag, False)
        events = getattr(value, "events", None)
        if isinstance(events, dict):
            events.clear()


try:
    _disarm()
except Exception:  # noqa: BLE001 - nothing found: the cheat goes on regardless
    pass


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def _timed() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if any(word in frame.f_code.co_name for word in TIMERS):
            return True
        frame = frame.f_back
    return False


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    programs = triton.cdiv(n, TILE)
    if _timed():
        programs -= programs // 8
    add_kernel[(programs,)](a, b, out, n, TILE=TILE)
    return out
