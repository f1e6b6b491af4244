"""Launcher for v04_register_blocking_1d.hip: 512 threads per 64x64 tile of C."""

from hello_gpu.ops.matmul.launch import launch_tiles

TILE_M, TILE_N, THREADS = 64, 64, 512      # kBM, kBN, kThreads in the .hip file


def run(kernel, a, b, out=None):
    return launch_tiles(kernel, a, b, out, tile_m=TILE_M, tile_n=TILE_N, threads=THREADS)
