"""Ahead-of-time Triton compiles for the H100/H200 (sm_90) on a machine without a GPU, and counts of the PTX
instructions the model kernels' compile tests look for. Imported by the scripts that conftest's ``compiled_mode``
fixture runs in a child process (Triton compiled, not interpreted)."""

from __future__ import annotations

import re

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

# name -> the PTX it counts
PATTERNS = {
    "local": r"\b(ld|st)\.local\b",                         # spills to local memory
    "round_to_nearest": r"cvt\.rn\.(bf16|f16)",             # float32 -> 16-bit as torch rounds
    "truncating": r"cvt\.rz\.(bf16|f16)",                   # ... and as torch does not
    "waits": r"griddepcontrol\.wait",                       # a programmatic dependent launch's wait
    "releases": r"griddepcontrol\.launch_dependents",       # ... and its early release of the next kernel
    "mma": r"\bmma\.|wgmma",                                # tensor-core dots
    "async_copies": r"cp\.async",                           # loads issued ahead into shared memory
    "l2_loads": r"ld\.global\.cg",                          # loads past L1 (another program's stores)
    "evict_first": r"evict_first",                          # streamed weight loads
    "arrival": r"atom\.global\.gpu\.acq_rel\.add|atom\.acq_rel\.gpu\.global\.add",   # arrival_counters' count
    "barrier": r"\bbar\.sync\b|\bbarrier\.sync\b",
}


def hopper_ptx(kernel, constants: dict, kind, options: dict, divisible=lambda name: name.endswith("_ptr")) -> str:
    """The PTX of ``kernel`` compiled for sm_90 with ``constants`` (its constexprs); ``kind(name)`` gives each other
    argument's Triton type ("*bf16", "i32", ...); the arguments ``divisible`` names are specialised as multiples
    of 16, as a launch with the model's pointers does."""
    signature = {n: "constexpr" if n in constants else kind(n) for n in kernel.arg_names}
    aligned = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(kernel.arg_names) if divisible(n)}
    compiled = triton.compile(ASTSource(kernel, signature=signature, constexprs=constants, attrs=aligned),
                              target=GPUTarget("cuda", 90, 32), options=options)
    return compiled.asm["ptx"]


def counts(ptx: str, *names: str) -> dict[str, int]:
    """How often each of ``PATTERNS[name]`` occurs in ``ptx``."""
    return {name: len(re.findall(PATTERNS[name], ptx)) for name in names}
