"""Launcher for v09_mma_sync.cu: one block of 256 threads per 128x128 tile of C, static shared memory."""

from pathlib import Path

from hello_gpu.ops.matmul.tensor_cores import launch_blocks, tile_constants

TILES = tile_constants(Path(__file__).with_name("v09_mma_sync.cu"))


def run(kernel, a, b, out=None):
    return launch_blocks(kernel, a, b, out, tile_m=TILES["BM"], tile_n=TILES["BN"], threads=TILES["Threads"])
