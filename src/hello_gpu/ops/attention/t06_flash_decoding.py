"""Triton, flash-decoding: for a few query rows against a long KV cache, the keys are split across programs.

parent: t05_gqa_shared_kv_tiles
change: when a KV head's group has at most 64 (query, head) rows (decode: S_q = 1, G = 4), the keys
  are cut into equal chunks of whole 64-key tiles, one program per (chunk, batch x KV head), enough
  chunks for ~2 programs per SM; each writes its rows' partial (max, sum, unnormalised output) in
  float32, and a second kernel merges a row's partials in chunk order (the online-softmax merge of
  t02's notes, applied to whole chunks). Prefill shapes go to t05 unchanged
hypothesis: decode reads the KV cache once (K and V: 128 MiB at B=1, S_kv=32768, 8 KV heads, D=128 bf16) and
  does ~2 FLOPs a byte: memory-bound. t05 runs one program per (batch, KV head): 8 at B=1, each
  streaming 16 MiB alone, far from the 4.8 TB/s that takes ~all SMs' loads in flight. 264 programs
  of one 128 KiB ... 512 KiB chunk each keep every SM busy; the partials (B H_kv chunks x 16 rows
  x 129 floats) are <2% of the cache bytes. Expect >= 0.8x copy bandwidth at B=1, S_kv=32768 (the
  issue's target) where t05 reaches ~0.1x, and ~t05 at B=16 (already 128 programs)
prediction: ~3.9 TB/s of KV reads at 1x32x8x1x32768x128 bfloat16 (~8x t05); ~1.1x t05 at 16x32x8x1x32768x128
outcome: 2,083 GB/s (0.49x copy) at 1x32x8x1x32768x128 bfloat16 (predicted ~3.9 TB/s: missed, -47%), 64.4 us, 6.880x
  t05 [6.824, 6.952] (~8x), 0.772x SDPA [0.768, 0.782]; 1.015x t05 [1.013, 1.018] at 16x32x8x1x32768x128 (~1.1x),
  4,410 GB/s (1.04x copy) (records attention.bfloat16, run of 89ae604)
deterministic: yes, each chunk reduces in order and the merge visits chunks in order
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

from pathlib import Path

import torch
import triton
import triton.language as tl

from hello_gpu.ops.attention.launch import LENGTHS, dot_precision, prepare, softmax_scale_log2
from hello_gpu.ops.rung import load_module

_t05 = load_module(Path(__file__).resolve().parent / "t05_gqa_shared_kv_tiles.py", "attention_t05_for_t06")
key_tile = _t05.key_tile           # t04's online-softmax step, with the chunk's end as the keys' end

DECODE_ROWS = 64          # (query, head) rows of a KV head up to which the keys are split
BLOCK_N = 64              # keys per step
WARPS = 4
PROGRAMS_PER_SM = 2
INTERPRETER_PROGRAMS = 4  # no GPU to size the split for: enough chunks to exercise the merge


@triton.jit(do_not_specialize=(*LENGTHS, "chunk", "chunks"))
def chunk_kernel(q_ptr, k_ptr, v_ptr, part_acc_ptr, part_stats_ptr, heads, kv_heads, q_len, kv_len, chunk,
                 chunks, scale_log2, CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    """The partial (max, sum, output) of every row of one KV head over keys [c chunk, (c + 1) chunk)."""
    group = heads // kv_heads
    c = tl.program_id(0)
    bkv = tl.program_id(1)
    rows = tl.arange(0, BLOCK_M)
    query = rows // group
    head = (bkv // kv_heads) * heads + (bkv % kv_heads) * group + rows % group
    dim = tl.arange(0, HEAD_DIM)
    live = rows < group * q_len
    q = tl.load(q_ptr + ((head.to(tl.int64) * q_len + query) * HEAD_DIM)[:, None] + dim[None, :],
                mask=live[:, None], other=0.0)
    k_base = k_ptr + bkv.to(tl.int64) * kv_len * HEAD_DIM
    v_base = v_ptr + bkv.to(tl.int64) * kv_len * HEAD_DIM
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    stop = tl.minimum(kv_len, (c + 1) * chunk)
    for start in range(c * chunk, stop, BLOCK_N):
        row_max, row_sum, acc = key_tile(q, k_base, v_base, start, stop, query, row_max, row_sum, acc, q_len, kv_len,
                                         scale_log2, True, CAUSAL, HEAD_DIM, BLOCK_N, PRECISION)
    part = (bkv.to(tl.int64) * chunks + c) * BLOCK_M + rows                      # this program's rows
    tl.store(part_acc_ptr + part[:, None] * HEAD_DIM + dim[None, :], acc)
    tl.store(part_stats_ptr + part * 2, row_max)
    tl.store(part_stats_ptr + part * 2 + 1, row_sum)


@triton.jit(do_not_specialize=("heads", "kv_heads", "q_len", "chunks"))
def merge_kernel(part_acc_ptr, part_stats_ptr, out_ptr, heads, kv_heads, q_len, chunks,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Merge the chunks' partials of one KV head's rows, in chunk order; a row that saw no key gets 0."""
    group = heads // kv_heads
    bkv = tl.program_id(0)
    rows = tl.arange(0, BLOCK_M)
    dim = tl.arange(0, HEAD_DIM)
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for c in range(0, chunks):
        part = (bkv.to(tl.int64) * chunks + c) * BLOCK_M + rows
        chunk_max = tl.load(part_stats_ptr + part * 2)
        chunk_sum = tl.load(part_stats_ptr + part * 2 + 1)
        chunk_acc = tl.load(part_acc_ptr + part[:, None] * HEAD_DIM + dim[None, :])
        new_max = tl.maximum(row_max, chunk_max)
        safe = tl.where(new_max == float("-inf"), 0.0, new_max)
        mine, theirs = tl.exp2(row_max - safe), tl.exp2(chunk_max - safe)
        row_sum = row_sum * mine + chunk_sum * theirs
        acc = acc * mine[:, None] + chunk_acc * theirs[:, None]
        row_max = new_max
    out = tl.where(row_sum[:, None] > 0, acc / row_sum[:, None], 0.0)
    query = rows // group
    head = (bkv // kv_heads) * heads + (bkv % kv_heads) * group + rows % group
    live = rows < group * q_len
    tl.store(out_ptr + ((head.to(tl.int64) * q_len + query) * HEAD_DIM)[:, None] + dim[None, :],
             out.to(out_ptr.dtype.element_ty), mask=live[:, None])


def programs_wanted(device: torch.device) -> int:
    """How many programs keep the device busy: PROGRAMS_PER_SM per SM, or a few in the interpreter."""
    if device.type != "cuda":
        return INTERPRETER_PROGRAMS
    from hello_gpu.runtime.device import device_info
    return PROGRAMS_PER_SM * device_info(device.index).multiprocessors


def split(kv_len: int, heads_in_flight: int, programs: int) -> tuple[int, int]:
    """(chunk, chunks): whole BLOCK_N tiles a chunk, enough chunks for ``programs`` programs, none empty."""
    tiles = triton.cdiv(kv_len, BLOCK_N)
    wanted = max(1, min(tiles, triton.cdiv(programs, heads_in_flight)))
    chunk = triton.cdiv(tiles, wanted) * BLOCK_N
    return chunk, triton.cdiv(kv_len, chunk)


def run(q, k, v, causal, out=None):
    d, out = prepare(q, k, v, causal, out)
    rows = d.group * d.q_len
    if rows > DECODE_ROWS:
        return _t05.run(q, k, v, causal, out=out)
    block_m = max(16, triton.next_power_of_2(rows))          # tl.dot takes 16 rows at least
    heads_in_flight = d.batch * d.kv_heads
    chunk, chunks = split(d.kv_len, heads_in_flight, programs_wanted(q.device))
    part_acc = torch.empty((heads_in_flight, chunks, block_m, d.head_dim), dtype=torch.float32, device=q.device)
    part_stats = torch.empty((heads_in_flight, chunks, block_m, 2), dtype=torch.float32, device=q.device)
    chunk_kernel[(chunks, heads_in_flight)](q, k, v, part_acc, part_stats, d.heads, d.kv_heads, d.q_len, d.kv_len,
                                            chunk, chunks, softmax_scale_log2(d), CAUSAL=d.causal,
                                            HEAD_DIM=d.head_dim, BLOCK_M=block_m, BLOCK_N=BLOCK_N,
                                            PRECISION=dot_precision(q), num_warps=WARPS)
    merge_kernel[(heads_in_flight,)](part_acc, part_stats, out, d.heads, d.kv_heads, d.q_len, chunks,
                                     HEAD_DIM=d.head_dim, BLOCK_M=block_m, num_warps=WARPS)
    return out
