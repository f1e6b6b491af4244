"""Launcher for v07_wgmma_tma.cu: Q's, K's and V's tensor maps, then one block of 3 warpgroups per
(batch x head, 128 query rows); grid (B x H, ceil(S_q / 128)), the query tiles taken in reverse along y.

The maps (matmul's tensor_maps: encoded on the host, passed in global memory, cached by what they encode)
see each (B, heads, S, D) tensor as 3-D: D columns, S rows, B x heads planes, in boxes of 64 columns x 128
rows x 1 plane (one 128-byte swizzle row a box row). A box that runs past a head's last row gets zeros
there, never the next head's rows. The kernel reads D = 64 or 128 (spec.dims refuses any other D) of
bfloat16 or float16, from CUDA tensors TMA can address (q, k and v 16-byte aligned; out is written from
registers, in pairs where it is 4-byte aligned); anything else is refused here, by name, before a map is
encoded or a kernel touched.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from hello_gpu.ops.attention.launch import MAX_GRID_Y, prepare, softmax_scale_log2
from hello_gpu.ops.matmul.tensor_cores import tile_constants
from hello_gpu.ops.matmul.tensor_maps import ATOM_BYTES, BARRIER_BYTES, SWIZZLE_BYTES, cached_maps, encode_tiled

TILES = tile_constants(Path(__file__).with_name("v07_wgmma_tma.cu"))
DTYPES = (torch.bfloat16, torch.float16)
PANEL_COLUMNS = SWIZZLE_BYTES // 2          # 64 16-bit elements: a box row is one 128-byte swizzle row
TMA_ALIGNMENT = 16                          # bytes: a tensor map's base address


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """What this kernel needs beyond spec.dims_of and launch.prepare (which check shapes, D, contiguity)."""
    if q.dtype not in DTYPES:
        raise ValueError(f"attention v07 (wgmma + TMA): q is {q.dtype}; this kernel takes bfloat16 or float16 "
                         f"(wgmma multiplies 16-bit inputs into float32)")
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if tensor.data_ptr() % TMA_ALIGNMENT:
            raise ValueError(f"attention v07 (wgmma + TMA): {name} starts at address {tensor.data_ptr():#x}, not "
                             f"{TMA_ALIGNMENT}-byte aligned (a view at an odd offset): TMA cannot address it; pass "
                             f"{name}.clone()")
    if q.device.type != "cuda":
        raise ValueError(f"attention v07 (wgmma + TMA): the tensors are on {q.device}; this kernel runs on an "
                         f"NVIDIA sm_90 GPU (CUDA tensors)")


def sequence_map_parameters(tensor: torch.Tensor, box_rows: int) -> dict:
    """What cuTensorMapEncodeTiled is given for a contiguous (B, heads, S, D) tensor: dims (D, S, B x heads)
    and boxes (64, box_rows, 1), innermost first; the byte strides of a row and of a head."""
    batch, heads, length, head_dim = tensor.shape
    size = tensor.element_size()
    return {"dims": (head_dim, length, batch * heads), "strides": (head_dim * size, length * head_dim * size),
            "box": (PANEL_COLUMNS, box_rows, 1)}


def attention_maps(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Q's, K's and V's maps, 3 x 16 int64 on q's device (boxes of 128 query rows, 128 keys)."""
    boxes = ((q, TILES["BlockM"]), (k, TILES["BlockN"]), (v, TILES["BlockN"]))
    key = tuple((t.data_ptr(), tuple(t.shape), t.dtype) for t in (q, k, v)) + (str(q.device), TILES["BlockM"],
                                                                               TILES["BlockN"])

    def encode() -> np.ndarray:
        words = []
        for tensor, rows in boxes:
            p = sequence_map_parameters(tensor, rows)
            words.append(encode_tiled(tensor, p["dims"], p["strides"], p["box"]))
        return np.concatenate(words)
    return cached_maps(key, q.device, encode)


def shared_bytes(head_dim: int) -> int:
    """Dynamic shared memory: Q's tile, kStages x (K's and V's tiles), 128 rows x D x 2 bytes each, room for the
    mbarriers, and 1024 bytes to align the tiles to the swizzle atom (160 KiB + 1.25 KiB at D = 128)."""
    tile = TILES["BlockM"] * head_dim * 2
    return tile + TILES["Stages"] * 2 * tile + BARRIER_BYTES + ATOM_BYTES


def run(kernel, q, k, v, causal, out=None):
    d, out = prepare(q, k, v, causal, out)
    check_inputs(q, k, v)
    query_tiles = -(-d.q_len // TILES["BlockM"])
    if query_tiles > MAX_GRID_Y:
        raise ValueError(f"attention v07: {query_tiles} query tiles of {TILES['BlockM']} rows exceed the grid's "
                         f"second dimension ({MAX_GRID_Y}): S_q = {d.q_len} is too long for this launch")
    maps = attention_maps(q, k, v)
    kernel(maps, out, d.heads, d.kv_heads, d.q_len, d.kv_len, d.head_dim, softmax_scale_log2(d), int(d.causal),
           block=TILES["Threads"], grid=(d.batch * d.heads, query_tiles), shared_mem=shared_bytes(d.head_dim))
    return out
