"""The hint table: what exercise() can observe, what it usually means, and what to try.

Data only, in one place (docs/course/exercises.md includes this file). Each row is one symptom. A hint
is shown only with the evidence that triggered it (``detect.py`` gathers it), and says how sure it is:

- ``observed``: the symptom itself was measured (bytes written past the output, outputs that differ
  run to run on the same inputs, a compiler error);
- ``likely``: a pattern of passes and failures, or of timings, that this cause explains best;
- ``possible``: a pattern in the source text alone (nothing was run that confirms it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HintRule:
    key: str
    symptom: str          # what is observed
    cause: str            # the common mistake behind it
    advice: str           # what to try
    detected_by: str      # how exercise() looks for it, and where it cannot


HINTS: tuple[HintRule, ...] = (
    HintRule(
        "compile-error",
        "the kernel does not compile (or its Python file does not import)",
        "a syntax or type error",
        "read the compiler's message at the line it names; the line numbers are your file's",
        "NVRTC for sm_90 (and clang for gfx1201 where installed) for HIP; importing the module and a first "
        "call for Triton"),
    HintRule(
        "bounds",
        "bytes past the end of the output change, or results are wrong only at sizes that are not a multiple "
        "of the block size",
        "the tail: a missing bounds check (the last block's extra threads, or the last tile's lanes, read and "
        "write past the end), or a grid that rounds n / block down and leaves the tail undone",
        "guard every load and store of the tail (`if (i < n)` in HIP, `mask=offsets < n` in Triton) and round "
        "the grid up (ceil(n / block))",
        "guard bytes around a poisoned output at every checked shape (observed); edge shapes failing while "
        "sizes that are multiples of 4096 pass (likely)"),
    HintRule(
        "unwritten",
        "output elements keep the NaN poison the checker filled the output with",
        "part of the work is never done: a grid too small (n / block without rounding up), a program or "
        "block that skips its store, a loop that stops early",
        "make the grid ceil(n / elements per block) and check every program stores its whole tile",
        "the checker's poisoned outputs and its block probe (observed)"),
    HintRule(
        "race",
        "the same inputs give different outputs from run to run, some of them wrong",
        "a race in the reduction tree: threads read shared memory another thread has not finished writing "
        "(a missing `__syncthreads()` between the tree's steps, or one inside a branch not every thread takes)",
        "put a `__syncthreads()` after every step that writes shared memory, outside any `if`",
        "the kernel run 8 times on the same inputs on the GPU (observed); not detectable in the Triton "
        "interpreter, which runs programs one after another"),
    HintRule(
        "uncoalesced",
        "correct but much slower than the ladder's coalesced rung, and/or neighbouring threads index memory "
        "a constant stride apart",
        "uncoalesced access: the 32 threads of a warp touch 32 different 32-byte sectors instead of 4 "
        "(a chunk per thread, or a row per thread)",
        "let consecutive threads read consecutive elements (index = block * blockDim + threadIdx, a "
        "grid-stride loop for more work per thread)",
        "the source's index pattern (possible); paired timing against the ladder's coalesced and "
        "uncoalesced rungs on the GPU (likely)"),
    HintRule(
        "bank-conflict",
        "a shared-memory array indexed with a stride that is a multiple of 32 words across a warp",
        "shared-memory bank conflicts: 32 banks of 4 bytes; threads of a warp hitting the same bank wait "
        "for each other",
        "pad the array (`[32][33]`) or index with sequential addressing (`cache[tid] += cache[tid + s]`)",
        "the source text only (possible): no profiler counter is read here (Nsight Compute's "
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared counters would confirm it on an NVIDIA GPU)"),
)

BY_KEY = {rule.key: rule for rule in HINTS}
