"""Launcher for v11_large_warp_tiles.cu: one block per BM x BN tile of C, the stages in dynamic shared memory."""

from pathlib import Path

from hello_gpu.ops.matmul.tensor_cores import launch_blocks, pipelined_shared_bytes, tile_constants

TILES = tile_constants(Path(__file__).with_name("v11_large_warp_tiles.cu"))
SHARED_BYTES = pipelined_shared_bytes(TILES)


def run(kernel, a, b, out=None):
    return launch_blocks(kernel, a, b, out, tile_m=TILES["BM"], tile_n=TILES["BN"], threads=TILES["Threads"],
                         shared=SHARED_BYTES)
