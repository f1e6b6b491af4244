"""Triton, t06 with the chunks' partials merged all at once: no loop over the chunks, one program per row.

parent: t06_flash_decoding
change: t06's split and chunk kernel unchanged (imported); its merge (one program per batch x KV head
  walking the chunks in order, all BLOCK_M = 16 rows of which 4 are live at S_q = 1, G = 4) becomes
  one program per (live row, batch x KV head, DIM_BLOCK columns) that loads the row's partials of
  every chunk at once, a [CHUNKS_P2, DIM_BLOCK] float32 tile (chunks padded to a power of two and
  masked), and reduces over the chunks with tl.max and tl.sum: out = sum_c 2^(m_c - m) acc_c /
  sum_c 2^(m_c - m) l_c, m = max_c m_c. DIM_BLOCK = 1024 / CHUNKS_P2 columns (at most HEAD_DIM): a
  tile of 1024 floats, 8 a thread at 4 warps, and ptxas issues all of a program's loads before the
  first use (at 4096 floats a tile it issued them in ~5 groups, each after the last was used: sm_90
  code of Triton 3.9). 32 chunks at D = 128: 32 columns, 4 programs a row. Prefill shapes go where
  t06 sends them (t05)
hypothesis: at 1x32x8x1x32768x128 t06 cuts the keys into 32 chunks of 1024 (256 programs, one wave),
  but its merge runs 8 programs, each walking the 32 chunks in a loop that Triton does not pipeline
  (its pipeliner only schedules loads that feed a tl.dot, or loops given num_stages) and that ptxas
  does not unroll (the chunk count is a run-time value): in the sm_90 code (Triton 3.9) an iteration
  issues its 8 KiB of partials and 3 statistics in three groups, each after a use of the one before,
  so ~3 dependent L2 round trips an iteration (the 2 MiB of partials were just written: L2 hits,
  ~0.15-0.3 us each under this light load), ~96 in all: ~15-29 us of the 64.4 us measured (the
  ~134 MB of K and V at the ~4.4 TB/s t06 reaches at B=16 take ~31 us, ~35 us with the launch and the
  wave's ramp: the chunk kernel is pipelined, cp.async into two stages of K and V tiles, 70 KiB of
  shared memory, ~32-64 KiB in flight a program where ~33 KiB an SM would do). Here the merge is 128 programs (4 rows x 8 KV heads x 4 column blocks) of one
  round trip each: 4 KiB of partials a program, ~1.5-2 us with the launch between the kernels. At
  B=16 there are 3 chunks and t06's 128 merge programs take ~2-3 us of 487 us: nothing to win there.
  At 1x32x8x1x4096x128 (16.8 MB, ~4 us of reads) t06 also cuts 32 chunks (of 128 keys) and the same
  serial merge should dominate its time
prediction: ~41 us (37-47 us) at 1x32x8x1x32768x128 bfloat16: ~1.55x t06 (64.4 us in the record of
  89ae604), ~1.2x v00_torch (49.3 us), ~3.3 TB/s of KV reads, ~0.77x the copy bandwidth (4.25 TB/s;
  the issue asks 0.8x: 39.5 us); ~1.0x t06 at 16x32x8x1x32768x128 (the merge is <1% there);
  ~2.5-3x t06 at 1x32x8x1x4096x128
outcome: not measured yet
deterministic: yes, the chunk kernel is t06's and the merge's reductions run over a tile whose shape
  and layout depend only on the problem's shape, with no atomics: bit-identical run to run. Not
  bitwise equal to t06: t06 rescales a running sum at every chunk (32 roundings of the accumulator)
  where this scales each chunk's partial once, by 2^(m_c - m), and adds them in tl.sum's tree order;
  both are within the checker's tolerance of the float64 reference
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

from pathlib import Path

import torch
import triton
import triton.language as tl

from hello_gpu.ops.attention.launch import dot_precision, prepare, softmax_scale_log2
from hello_gpu.ops.rung import load_module

_t06 = load_module(Path(__file__).resolve().parent / "t06_flash_decoding.py", "attention_t06_for_t07")
chunk_kernel = _t06.chunk_kernel    # the partial (max, sum, output) of each row of a KV head over one chunk

MERGE_TILE = 1024      # floats of partial output a merge program holds: 8 a thread at 4 warps (see the header)
WARPS = 4


@triton.jit(do_not_specialize=("heads", "kv_heads", "q_len", "chunks"))
def merge_kernel(part_acc_ptr, part_stats_ptr, out_ptr, heads, kv_heads, q_len, chunks,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, CHUNKS_P2: tl.constexpr, DIM_BLOCK: tl.constexpr):
    """Columns [d DIM_BLOCK, (d + 1) DIM_BLOCK) of one row of one KV head, from all of its chunks' partials
    at once; a row that saw no key (every chunk's maximum -inf, sum 0) gets 0."""
    row = tl.program_id(0)                   # (query, head in group), query major, as in t06's partials
    bkv = tl.program_id(1)
    dim = tl.program_id(2) * DIM_BLOCK + tl.arange(0, DIM_BLOCK)
    c = tl.arange(0, CHUNKS_P2)
    real = c < chunks
    part = (bkv.to(tl.int64) * chunks + c) * BLOCK_M + row             # this row's partial in each chunk
    chunk_max = tl.load(part_stats_ptr + part * 2, mask=real, other=float("-inf"))
    chunk_sum = tl.load(part_stats_ptr + part * 2 + 1, mask=real, other=0.0)
    chunk_acc = tl.load(part_acc_ptr + part[:, None] * HEAD_DIM + dim[None, :], mask=real[:, None], other=0.0)
    row_max = tl.max(chunk_max, axis=0)
    safe = tl.where(row_max == float("-inf"), 0.0, row_max)
    weight = tl.exp2(chunk_max - safe)       # 0 for padding and for a chunk this row sees no key of
    row_sum = tl.sum(chunk_sum * weight, axis=0)
    acc = tl.sum(chunk_acc * weight[:, None], axis=0)
    out = tl.where(row_sum > 0, acc / row_sum, 0.0)
    group = heads // kv_heads
    head = (bkv // kv_heads) * heads + (bkv % kv_heads) * group + row % group
    tl.store(out_ptr + (head.to(tl.int64) * q_len + row // group) * HEAD_DIM + dim, out.to(out_ptr.dtype.element_ty))


def merge_tile(chunks: int, head_dim: int) -> tuple[int, int]:
    """(CHUNKS_P2, DIM_BLOCK): the chunk count padded to a power of two, and the columns a program merges so
    that its tile holds at most MERGE_TILE floats (32 columns at 32 chunks)."""
    chunks_p2 = triton.next_power_of_2(chunks)
    return chunks_p2, max(1, min(head_dim, MERGE_TILE // chunks_p2))


def partials(q, k, v, d):
    """t06's split and chunk kernel: (part_acc, part_stats, chunks, block_m), laid out as t06 lays them out."""
    block_m = max(16, triton.next_power_of_2(d.group * d.q_len))     # tl.dot takes 16 rows at least
    heads_in_flight = d.batch * d.kv_heads
    chunk, chunks = _t06.split(d.kv_len, heads_in_flight, _t06.programs_wanted(q.device))
    part_acc = torch.empty((heads_in_flight, chunks, block_m, d.head_dim), dtype=torch.float32, device=q.device)
    part_stats = torch.empty((heads_in_flight, chunks, block_m, 2), dtype=torch.float32, device=q.device)
    chunk_kernel[(chunks, heads_in_flight)](q, k, v, part_acc, part_stats, d.heads, d.kv_heads, d.q_len, d.kv_len,
                                            chunk, chunks, softmax_scale_log2(d), CAUSAL=d.causal,
                                            HEAD_DIM=d.head_dim, BLOCK_M=block_m, BLOCK_N=_t06.BLOCK_N,
                                            PRECISION=dot_precision(q), num_warps=_t06.WARPS)
    return part_acc, part_stats, chunks, block_m


def merge(part_acc, part_stats, out, d, chunks, block_m):
    """One program per (live row, batch x KV head, DIM_BLOCK columns); the padded rows of the partials are
    never read."""
    chunks_p2, dim_block = merge_tile(chunks, d.head_dim)
    grid = (d.group * d.q_len, d.batch * d.kv_heads, d.head_dim // dim_block)
    merge_kernel[grid](part_acc, part_stats, out, d.heads, d.kv_heads, d.q_len, chunks, HEAD_DIM=d.head_dim,
                       BLOCK_M=block_m, CHUNKS_P2=chunks_p2, DIM_BLOCK=dim_block, num_warps=WARPS)
    return out


def run(q, k, v, causal, out=None):
    d, out = prepare(q, k, v, causal, out)
    if d.group * d.q_len > _t06.DECODE_ROWS:
        return _t06.run(q, k, v, causal, out=out)          # prefill: t06 hands it to t05
    part_acc, part_stats, chunks, block_m = partials(q, k, v, d)
    return merge(part_acc, part_stats, out, d, chunks, block_m)
