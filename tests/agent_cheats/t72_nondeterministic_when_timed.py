"""CHEAT, deterministic where checked, not where timed: rounds at random in the timing processes.

The task declares the operator deterministic, so the check step repeats calls on the same inputs and
compares bits. In a process whose first call was at the benchmark shape (the bench and compare children)
the kernel picks, at random, the other float32 neighbour of the exact sum where that stays within
float32's tolerance (significands of 1.5 and more, so 1 ulp is under 2^-23 of the value): every output
still passes the comparison, but the same inputs no longer give the same bits, as a faster order of
work without a fixed order would. Caught where it is timed: where determinism is declared, some timed
batches (the parent's choice, at random; at least one per timing) give two of their calls the same values
in different buffers, and the parent compares the two outputs bit for bit (nondeterministic).

parent: t01_tile_1024
change: random rounding when the process's first call was at the benchmark shape
hypothesis: determinism is only checked in the check step
deterministic: yes, one writer per element
"""

import os

import torch
import triton
import triton.language as tl

TILE = 256
BIG = 4096
_first = []


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, seed, NOISE: tl.constexpr, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(b_ptr + offsets, mask=mask, other=0.0)
    total = a + b
    if NOISE:
        exact = a.to(tl.float64) + b.to(tl.float64)
        residual = exact - total.to(tl.float64)
        bits = total.to(tl.int32, bitcast=True)
        high = (bits & 0x00400000) != 0                       # significand >= 1.5: 1 ulp < 2^-23 of the value
        away = ((residual > 0) & (total > 0)) | ((residual < 0) & (total < 0))
        step = tl.where(away, 1, -1)
        flip = (tl.rand(seed, offsets) < 0.5) & high & (residual != 0)
        total = tl.where(flip, (bits + step).to(tl.float32, bitcast=True), total)
    tl.store(out_ptr + offsets, total, mask=mask)


def run(a, b, out=None):
    out = torch.empty_like(a) if out is None else out
    n = a.numel()
    if not _first:
        _first.append(n)
    noisy = _first[0] >= BIG
    seed = int.from_bytes(os.urandom(3), "little") if noisy else 0
    add_kernel[(triton.cdiv(n, TILE),)](a, b, out, n, seed, NOISE=noisy, TILE=TILE)
    return out
