"""Launcher for v06_mma_sync.cu: 4 warps per (128 query rows, batch x head); grid (ceil(S_q / 128), B x H);
dynamic shared memory for Q and two stages of K and V, sized from the kernel file's own constants. The
kernel is chosen by D: the entry attention_mma_sync_d128<T> (the kernel the rung machinery compiles per
dtype) for D = 128, its sibling attention_mma_sync_d64_bfloat16 / _half (launch.sibling) for D = 64.

Beyond launch.prepare's checks (shapes, one dtype, D in {64, 128}, H a multiple of H_kv, contiguous):
bfloat16 or float16 only (mma.sync m16n8k16 multiplies 16-bit inputs; float32 runs on the SIMT rungs),
and q, k, v and out starting on a 16-byte boundary (cp.async copies 16 bytes from a 16-byte aligned
address; every row is 128 or 256 bytes, so the rows are then aligned too). A view that starts elsewhere
is refused by name, never copied behind the caller's back.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from hello_gpu.ops.attention.launch import MAX_GRID_Y, prepare, sibling, softmax_scale_log2

SOURCE = Path(__file__).with_name("v06_mma_sync.cu")
DTYPES = (torch.bfloat16, torch.float16)
ALIGNMENT = 16                  # bytes: a cp.async source
D64_KERNEL = "attention_mma_sync_d64_{T}"      # {T}: the entry's dtype suffix (launch.SIBLING_SUFFIXES)


def constants(source: Path = SOURCE) -> dict[str, int]:
    """``{"Warps": 4, "Threads": 128, "BlockRows": 128, ...}``: every ``kNAME = number`` of the file's
    ``constexpr int`` lines, so the launch always matches the kernel."""
    found: dict[str, int] = {}
    for line in re.findall(r"^constexpr int ([^;(]*);", Path(source).read_text(encoding="utf-8"), re.M):
        found.update({name: int(value) for name, value in re.findall(r"\bk([A-Za-z]+) = (\d+)\b", line)})
    missing = {"Warps", "Threads", "RowTiles", "BlockRows", "TileKeys", "ScoreKeys", "Stages", "Pad"} - set(found)
    if missing:
        raise ValueError(f"{source}: no 'constexpr int k{sorted(missing)[0]} = ...' line to read the launch from")
    return found


TILES = constants()


def shared_bytes(head_dim: int, itemsize: int = 2) -> int:
    """The kernel's dynamic shared memory (its shared_elements<D>() x 2 bytes): Q's rows and, per stage,
    K's and V's, each row padded by TILES["Pad"] elements. The kernel traps when given less."""
    rows = TILES["BlockRows"] + 2 * TILES["Stages"] * TILES["TileKeys"]
    return rows * (head_dim + TILES["Pad"]) * itemsize


def checked(q, k, v, causal, out=None):
    """(dims, out) after launch.prepare's checks and this rung's own: dtype, alignment, grid."""
    d, out = prepare(q, k, v, causal, out)
    if q.dtype not in DTYPES:
        raise ValueError(f"attention v06_mma_sync: q, k, v are {q.dtype}; this rung takes bfloat16 or float16 "
                         f"(mma.sync.m16n8k16 multiplies 16-bit inputs; float32 runs on v01-v04)")
    for name, tensor in (("q", q), ("k", k), ("v", v), ("out", out)):
        if tensor.data_ptr() % ALIGNMENT:
            raise ValueError(f"attention v06_mma_sync: {name} starts {tensor.data_ptr() % ALIGNMENT} bytes past a "
                             f"16-byte boundary; cp.async and the paired stores need 16-byte aligned tensors: "
                             f"pass {name}.clone()")
    if d.batch * d.heads > MAX_GRID_Y:
        raise ValueError(f"attention v06_mma_sync: B x H = {d.batch * d.heads} exceeds the grid's second "
                         f"dimension ({MAX_GRID_Y}); this rung launches one block per 128 query rows per head")
    return d, out


def kernel_for(kernel, head_dim: int):
    """The kernel compiled for ``head_dim``: ``kernel`` itself (the entry, D = 128) or its D = 64 sibling
    from the same source, arch and dtype."""
    return kernel if head_dim == 128 else sibling(kernel, D64_KERNEL)


def run(kernel, q, k, v, causal, out=None):
    d, out = checked(q, k, v, causal, out)
    grid = (-(-d.q_len // TILES["BlockRows"]), d.batch * d.heads)
    kernel_for(kernel, d.head_dim)(q, k, v, out, d.heads, d.kv_heads, d.q_len, d.kv_len, softmax_scale_log2(d),
                                   int(d.causal), block=TILES["Threads"], grid=grid,
                                   shared_mem=shared_bytes(d.head_dim))
    return out
