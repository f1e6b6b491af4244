"""Launcher for v01_materialised_three_kernels.hip: scores, softmax rows, weighted values, in that order.

Kernel (1): blocks of 256 threads along the keys, grid (S_kv / 256, S_q, B H); (2): one 256-thread block
a score row; (3): one block of D threads per (query, batch x head). The float32 scores buffer (4 B H
S_q S_kv bytes: 8.6 GB at 4x32x4096x4096) is allocated here, after check_scores_fit has said it fits.
"""

import math

import torch

from hello_gpu.ops.attention.launch import check_scores_fit, prepare, sibling, softmax_scale_log2

SCORE_BLOCK = 256
ROW_BLOCK = 256


def run(kernel, q, k, v, causal, out=None):
    d, out = prepare(q, k, v, causal, out)
    rows = d.batch * d.heads * d.q_len
    check_scores_fit(rows * d.kv_len * 4, q.device)
    scores = torch.empty((rows, d.kv_len), dtype=torch.float32, device=q.device)
    kernel(q, k, scores, d.heads, d.kv_heads, d.q_len, d.kv_len, d.head_dim, softmax_scale_log2(d), int(d.causal),
           block=SCORE_BLOCK, grid=(math.ceil(d.kv_len / SCORE_BLOCK), d.q_len, d.batch * d.heads))
    sibling(kernel, "attention_softmax_rows")(scores, d.kv_len, block=ROW_BLOCK, grid=rows)
    sibling(kernel, "attention_weighted_values_{T}")(scores, v, out, d.heads, d.kv_heads, d.q_len, d.kv_len, d.head_dim,
                                                 block=d.head_dim, grid=(d.q_len, d.batch * d.heads))
    return out
