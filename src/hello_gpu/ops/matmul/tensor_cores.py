"""What the tensor-core launchers of this ladder share (v09-v14; not a rung: the registry reads only rung names).

The kernels move A and B in 16-byte pieces (8 bfloat16 / float16 elements): cp.async and ldmatrix in the
mma.sync rungs, TMA in the Hopper rungs, which also needs every row to start 16 bytes after the previous
one. So they take A (M, K) and B (K, ldb) with K and ldb multiples of 8 and both 16-byte aligned, and
write C (M, N) row-major with N <= ldb. Operands that are not so (K = 517, N = 781, a view at an odd
offset) run on zero-padded copies: the zeros add nothing to any sum, and the copies cost two extra
passes over A and B, paid only at such shapes (every benchmark shape has K and N multiples of 8).

Each ``.cu`` rung declares its tile sizes once, as ``constexpr int kBM = 128, ...`` lines;
:func:`tile_constants` reads them from the file so the grid always matches the kernel.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch

from hello_gpu.ops.matmul.launch import checked_output

DTYPES = (torch.bfloat16, torch.float16)
PIECE = 8                    # elements in 16 bytes
ALIGNMENT = 16               # bytes: cp.async / TMA sources


def tile_constants(source: Path) -> dict[str, int]:
    """``{"BM": 128, "BN": 128, ...}``: every ``kNAME = number`` of the file's ``constexpr int`` lines."""
    text = Path(source).read_text(encoding="utf-8")
    found: dict[str, int] = {}
    for line in re.findall(r"^constexpr int ([^;]*);", text, re.M):
        found.update({name: int(value) for name, value in re.findall(r"\bk([A-Za-z]+) = (\d+)\b", line)})
    if not found:
        raise ValueError(f"{source}: no 'constexpr int kBM = ...' line to read the tile sizes from")
    return found


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _aligned(tensor: torch.Tensor) -> bool:
    return tensor.data_ptr() % ALIGNMENT == 0


def kernel_operands(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a, b)`` as the kernels read them: themselves when K and N are multiples of 8 and both are
    16-byte aligned, else zero-padded copies of (M, K8) and (K8, N8) (K8, N8: rounded up to 8)."""
    m, k = a.shape
    n = b.shape[1]
    k8, n8 = _round_up(k, PIECE), _round_up(n, PIECE)
    if k8 == k and n8 == n and _aligned(a) and _aligned(b):
        return a, b
    a_used = a.new_zeros((m, k8))
    a_used[:, :k] = a
    b_used = b.new_zeros((k8, n8))
    b_used[:k, :n] = b
    return a_used, b_used


def checked(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """C (allocated when None) after the shared checks, in bfloat16 or float16 only."""
    return checked_output(a, b, out, dtypes=DTYPES)


def launch_blocks(kernel, a, b, out, *, tile_m: int, tile_n: int, threads: int, shared: int = 0):
    """One block per tile_m x tile_n tile of C (grid x over columns, y over rows); arguments
    (A, B, C, M, N, K, ldb) with A and B as :func:`kernel_operands` gives them."""
    out = checked(a, b, out)
    a_used, b_used = kernel_operands(a, b)
    m, n = out.shape
    grid = (math.ceil(n / tile_n), math.ceil(m / tile_m))
    kernel(a_used, b_used, out, m, n, a_used.shape[1], b_used.shape[1], block=threads, grid=grid, shared_mem=shared)
    return out


def pipelined_shared_bytes(tiles: dict[str, int]) -> int:
    """Dynamic shared memory of the cp.async rungs: per stage a BM x (BK + 8) tile of A and a BK x (BN + 8)
    tile of B (rows padded by 16 bytes), 2 bytes an element; the kernels trap when given less."""
    per_stage = tiles["BM"] * (tiles["BK"] + PIECE) + tiles["BK"] * (tiles["BN"] + PIECE)
    return 2 * per_stage * tiles["Stages"]
