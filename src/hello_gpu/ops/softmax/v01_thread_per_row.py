"""Launcher for v01_thread_per_row.hip: one thread per row, 64 threads per block.

64 rather than the usual 256: a thread per row gives only `rows` threads, and the blocks are what
spread them over the 132 SMs. 8192 rows make 128 blocks of 64 (one per SM on 128 SMs); blocks of 256
would make 32, leaving 100 SMs idle. 4096 rows make 64 blocks.
"""

import math

import torch

BLOCK = 64          # threads (rows) per block: two warps


def run(kernel, x, out=None):
    if x.dim() != 2:
        raise ValueError(f"softmax rungs take a 2-D (rows, columns) tensor; got shape {tuple(x.shape)}")
    if not x.is_contiguous():
        # The kernel finds row r at r * columns; a strided view would be read wrong, so refuse it
        # rather than copy it silently (a copy would also be timed as part of the kernel).
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
    kernel(x, out, rows, columns, block=BLOCK, grid=math.ceil(rows / BLOCK))
    return out
