"""Launcher for v19_thread_tile_8x16.hip: 128 threads per 128x128 tile of C."""

from hello_gpu.ops.matmul.launch import launch_tiles

TILE_M, TILE_N, THREADS = 128, 128, 128      # kBM, kBN, kThreads in the .hip file


def run(kernel, a, b, out=None):
    return launch_tiles(kernel, a, b, out, tile_m=TILE_M, tile_n=TILE_N, threads=THREADS)
