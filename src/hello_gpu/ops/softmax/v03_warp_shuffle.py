"""Launcher for v03_warp_shuffle.hip: one block of 256 threads per row (grid = rows), as v02.

256 threads: 8 warps, so 8 blocks (2048 threads, the SM's limit) fit on an SM at up to 32 registers a
thread; each thread reads every 256th column. The kernel's cross-warp step assumes exactly this size
(8 warps of 32, or 4 wavefronts of 64).
"""

import torch

BLOCK = 256          # must equal kBlock in the .hip file


def run(kernel, x, out=None):
    if x.dim() != 2:
        raise ValueError(f"softmax rungs take a 2-D (rows, columns) tensor; got shape {tuple(x.shape)}")
    if not x.is_contiguous():
        # Row r is read at r * columns: refuse a strided view rather than copy it silently.
        raise ValueError(f"softmax rungs need a contiguous input (row stride = columns); got strides "
                         f"{tuple(x.stride())}: pass x.contiguous()")
    rows, columns = x.shape
    if columns >= 2**30 or rows >= 2**31:
        # The kernel indexes columns with an int and steps past the end by up to a few thousand before
        # its loop test: 2^30 keeps that far from overflow. Rows index blocks, also as int.
        raise ValueError(f"softmax rungs take fewer than 2^30 columns and 2^31 rows; got {tuple(x.shape)}")
    out = torch.empty_like(x) if out is None else out
    if out.shape != x.shape or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {tuple(x.shape)} {x.dtype} tensor; got "
                         f"{tuple(out.shape)} {out.dtype}")
    if x.numel() == 0:
        return out
    kernel(x, out, rows, columns, block=BLOCK, grid=rows)
    return out
