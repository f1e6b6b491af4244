"""Known wrong: t07's flash-decoding with the partial of one chunk lost before the merge.

parent: t07_parallel_merge
change: t07's split and chunk kernel, then chunk (chunks // 2) of every row emptied (maximum -inf, sum
  0, output 0: what a merge that skipped it would see) before t07's merge; with one chunk, that one.
  Decode shapes only (at most 64 rows a KV head): not a t9x rung, which must fail at every edge shape
hypothesis: none; this rung exists so that a test proves the checker rejects a merge that drops one
  chunk at each chunk count t07's tests force (1, 2, 3, 33)
deterministic: yes, as t07
"""

from hello_gpu.ops.attention.launch import prepare
from hello_gpu.ops.rung import load_module
from hello_gpu.ops.sources import OPS_DIR

_t07 = load_module(OPS_DIR / "attention" / "t07_parallel_merge.py", "attention_t07_for_merge_drops_one_chunk")


def run(q, k, v, causal, out=None):
    d, out = prepare(q, k, v, causal, out)
    if d.group * d.q_len > _t07._t06.DECODE_ROWS:
        raise ValueError("merge_drops_one_chunk: decode shapes only (at most 64 rows a KV head)")
    part_acc, part_stats, chunks, block_m = _t07.partials(q, k, v, d)
    dropped = chunks // 2
    part_stats[:, dropped, :, 0] = float("-inf")
    part_stats[:, dropped, :, 1] = 0.0
    part_acc[:, dropped] = 0.0
    return _t07.merge(part_acc, part_stats, out, d, chunks, block_m)
