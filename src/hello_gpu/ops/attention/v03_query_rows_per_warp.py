"""Launcher for v03_query_rows_per_warp.hip: v02's grid and block (4 warps per 16 query rows, batch x head)."""

from hello_gpu.ops.attention.launch import run_fused


def run(kernel, q, k, v, causal, out=None):
    return run_fused(kernel, q, k, v, causal, out)
