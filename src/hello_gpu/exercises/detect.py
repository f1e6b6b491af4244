"""Patterns in a kernel's source text that the hint table's "possible" rows rest on.

Each finder returns ``(line, text)`` pairs, the line numbers being the file's own. They read text, not
meaning: a finding is evidence for a hint of confidence "possible", never a verdict.
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _code_lines(source: str) -> list[tuple[int, str]]:
    """(line number, line) with C comments blanked (newlines kept, so numbers stay the file's)."""
    text = _COMMENT.sub(lambda match: "\n" * match.group(0).count("\n"), source)
    text = re.sub(r"static_cast<[^>]*>\(\s*(\w+)\s*\)", r"\1", text)      # static_cast<int64_t>(row) -> row
    return [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]


_ASSIGNMENT = re.compile(r"\b(\w+)\s*=(?!=)\s*([^;]*)")


def strided_thread_index(source: str) -> list[tuple[int, str]]:
    """Lines where a thread's index is multiplied by something (``thread * kChunk``, ``row * columns``
    with ``row`` a thread index): neighbouring threads then address memory that stride apart. A
    multiplication by blockDim/gridDim (a grid-stride loop) is the coalesced pattern and is left out.
    A name is a thread index from the line that assigns it from ``threadIdx.x`` until it is assigned
    otherwise (``row = blockIdx.x`` in another branch is a block's index, not a thread's)."""
    names = {r"threadIdx\.x"}
    found = []
    for number, line in _code_lines(source):
        if "__shared__" in line:
            continue
        assigned = _ASSIGNMENT.search(line)
        for name in names:
            pattern = rf"(?<![\w.])({name})\s*\*\s*(?!\s*(?:blockDim|gridDim))([A-Za-z_]\w*|\d+)"
            reverse = rf"(?<![\w.])(?!blockDim|gridDim)([A-Za-z_]\w*|\d+)\s*\*\s*({name})(?![\w.])"
            hit = re.search(pattern, line) or re.search(reverse, line)
            if hit and "blockIdx" not in hit.group(0) and not _is_assignment_of_thread(line):
                found.append((number, line.strip()))
                break
        if assigned and "+=" not in line and not re.search(r"[<>!]=?\s*$", line[:assigned.start(2)].rstrip("= ")):
            name, value = assigned.group(1), assigned.group(2)
            if "threadIdx.x" in value and "blockDim" in value or re.fullmatch(r"\s*threadIdx\.x\s*", value):
                names.add(name)
            else:
                names.discard(name)
    return found


def _is_assignment_of_thread(line: str) -> bool:
    """``i = blockIdx.x * blockDim.x + threadIdx.x``: the coalesced index itself, not a stride."""
    return bool(re.search(r"blockIdx\.x\s*\*\s*blockDim\.x", line)) and "threadIdx.x" in line


def shared_bank_strides(source: str) -> list[tuple[int, str]]:
    """Shared-memory patterns with a conflict-prone stride: a 2-D ``__shared__`` array whose row is a
    multiple of 32 words read down a column by ``threadIdx.x`` (``tile[threadIdx.x][k]``), and the
    interleaved tree ``cache[2 * s * tid]`` (thread t at stride 2s: two-way and worse conflicts)."""
    lines = _code_lines(source)
    found = []
    square = {}
    for _, line in lines:
        for name, width in re.findall(r"__shared__[^;]*?\b(\w+)\s*\[[^\]]+\]\s*\[\s*(\d+)\s*\]", line):
            if int(width) % 32 == 0:
                square[name] = int(width)
    names = {"threadIdx.x", "tid", "thread", "lane"}
    for number, line in lines:
        if "__shared__" in line:
            continue
        for name in square:
            if any(re.search(rf"\b{name}\s*\[\s*{re.escape(thread)}\s*\]\s*\[", line) for thread in names):
                found.append((number, line.strip()))
        if re.search(r"\[\s*2\s*\*\s*\w+\s*\*\s*\w+\s*\]", line) and any(
                re.search(rf"(?<![\w.]){re.escape(thread)}(?![\w.])", line) for thread in names):
            found.append((number, line.strip()))
    return found
