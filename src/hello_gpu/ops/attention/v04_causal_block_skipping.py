"""Launcher for v04_causal_block_skipping.hip: 4 warps per (batch x head, 16 query rows); grid
(B x H, ceil(S_q / 16)), the query blocks taken in reverse along y by the kernel."""

from hello_gpu.ops.attention.launch import run_fused


def run(kernel, q, k, v, causal, out=None):
    return run_fused(kernel, q, k, v, causal, out, heads_first=True)
