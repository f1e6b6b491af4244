"""Launcher for v05_flash_decoding.hip: the split kernel, then the merge kernel; prefill shapes go to v04.

(1) ``attention_flash_decoding<T>``: 4 warps a block, grid (row groups, chunks, B x H_kv), where a row
group is 4 of a KV head's group x S_q (query, head) rows and a chunk ``chunk_keys`` keys; it writes
float32 partials (max, sum, unnormalised output) of each row and chunk. (2)
``attention_decode_combine_{T}``: one block of 128 threads per row, grid (group x S_q, B x H_kv).

``split`` picks the chunks: whole block steps (4 warps x a warp's 32 or 64 keys), enough chunks for
BLOCKS_PER_SM blocks per SM, none empty. A KV head with more than DECODE_ROWS rows (prefill) runs v04's
kernel, unchanged, compiled from v04_causal_block_skipping.hip (PREFILL_SOURCE), where it is declared: v05.hip
includes that file, but the signature parser reads only v05's own text.
"""

import math
from pathlib import Path

import torch

from hello_gpu.ops.attention.launch import FUSED_WARPS, MAX_GRID_Y, prepare, run_fused, sibling, softmax_scale_log2, \
    warp_size
from hello_gpu.runtime.signature import parse_signature

DECODE_ROWS = 64         # (query, head) rows of a KV head up to which the keys are split (t06's threshold)
BLOCK_ROWS = 4           # kDecodeRows in the .hip file: rows a block
BLOCKS_PER_SM = 3        # blocks of 128 threads an SM holds at 148 registers a thread (compile-check, sm_90)
COMBINE_THREADS = 128    # kMaxDim: one thread per column of a row
PACK_BYTES = 16          # the split kernel reads K and V 16 bytes at a time
PREFILL_SOURCE = Path(__file__).with_name("v04_causal_block_skipping.hip")
PREFILL_KERNEL = "attention_causal_skipping<{T}>"          # v04's entry, for the dtype of v05's own

# Resolved when the rung is built (this module is imported then), not at its first prefill call: a kernel
# looked up in the wrong file fails the build, on any machine, with the parser's message.
parse_signature(PREFILL_SOURCE.read_text(encoding="utf-8"), PREFILL_KERNEL.replace("{T}", "float"))


def split(kv_len: int, blocks_per_chunk: int, blocks_wanted: int, step: int) -> tuple[int, int]:
    """(chunk_keys, chunks): chunks of whole ``step``-key steps, as many as ``blocks_wanted`` blocks need
    when each chunk is read by ``blocks_per_chunk`` blocks (B x H_kv x row groups), at most one per step,
    and none empty (the last may be shorter)."""
    steps = math.ceil(kv_len / step)
    wanted = max(1, min(steps, math.ceil(blocks_wanted / blocks_per_chunk)))
    chunk_keys = math.ceil(steps / wanted) * step
    return chunk_keys, math.ceil(kv_len / chunk_keys)


def blocks_wanted(device: torch.device) -> int:
    """BLOCKS_PER_SM blocks for every SM (multiprocessor, compute unit) of the device."""
    from hello_gpu.runtime.device import device_info
    return BLOCKS_PER_SM * device_info(device.index).multiprocessors


def check_aligned(k: torch.Tensor, v: torch.Tensor) -> None:
    """k and v are read 16 bytes at a time: each must start at a 16-byte aligned address (a fresh tensor
    does; a contiguous view starting mid-buffer may not). Refused by name, never read misaligned."""
    for name, tensor in (("k", k), ("v", v)):
        if tensor.data_ptr() % PACK_BYTES:
            raise ValueError(f"attention: v05 reads {name} 16 bytes at a time, but {name} starts at an address "
                             f"{tensor.data_ptr() % PACK_BYTES} bytes past a 16-byte boundary: pass {name}.clone()")


def prefill_kernel(kernel):
    """v04's kernel for the dtype and arch of ``kernel`` (v05's entry), compiled from v04's file."""
    return sibling(kernel, PREFILL_KERNEL, source=PREFILL_SOURCE)


def run(kernel, q, k, v, causal, out=None, *, chunk_keys=None):
    """``chunk_keys`` (tests only) forces the split: any positive number of keys a chunk."""
    d, out = prepare(q, k, v, causal, out)
    rows = d.group * d.q_len
    if rows > DECODE_ROWS:
        return run_fused(prefill_kernel(kernel), q, k, v, causal, out, heads_first=True)
    check_aligned(k, v)
    row_groups = math.ceil(rows / BLOCK_ROWS)
    heads_in_flight = d.batch * d.kv_heads
    if chunk_keys is None:
        chunk_keys, chunks = split(d.kv_len, heads_in_flight * row_groups, blocks_wanted(q.device),
                                   FUSED_WARPS * warp_size(q))
    elif type(chunk_keys) is not int or chunk_keys < 1:
        raise ValueError(f"attention: chunk_keys must be a positive int, got {chunk_keys!r}")
    else:
        chunks = math.ceil(d.kv_len / chunk_keys)
    for what, size in (("chunks", chunks), ("B x H_kv", heads_in_flight)):
        if size > MAX_GRID_Y:
            raise ValueError(f"attention: {size} {what} exceed a grid dimension ({MAX_GRID_Y}); v05 launches one "
                             f"block per (4 rows, chunk, batch x KV head)")
    part_acc = torch.empty((heads_in_flight, row_groups, chunks, BLOCK_ROWS, d.head_dim), dtype=torch.float32,
                           device=q.device)
    part_stats = torch.empty((heads_in_flight, row_groups, chunks, BLOCK_ROWS, 2), dtype=torch.float32,
                             device=q.device)
    kernel(q, k, v, part_acc, part_stats, d.heads, d.kv_heads, d.q_len, d.kv_len, d.head_dim, chunk_keys,
           softmax_scale_log2(d), int(d.causal), block=FUSED_WARPS * warp_size(q),
           grid=(row_groups, chunks, heads_in_flight))
    sibling(kernel, "attention_decode_combine_{T}")(part_acc, part_stats, out, d.heads, d.kv_heads, d.q_len,
                                                    d.head_dim, chunks, block=COMBINE_THREADS,
                                                    grid=(rows, heads_in_flight))
    return out
