"""Launcher for v02_fused_block_steps.hip: one block of 4 warps per (16 query rows, batch x head); grid
(ceil(S_q / 16), B x H)."""

from hello_gpu.ops.attention.launch import run_fused


def run(kernel, q, k, v, causal, out=None):
    return run_fused(kernel, q, k, v, causal, out)
