"""Launcher for v16_swizzled_double_buffered.cu: one block per BM x BN tile of C, the stages in dynamic shared memory."""

from pathlib import Path

from hello_gpu.ops.matmul.tensor_cores import launch_blocks, tile_constants

TILES = tile_constants(Path(__file__).with_name("v16_swizzled_double_buffered.cu"))
# Unpadded, swizzled stages: a BM x BK tile of A and a BK x BN tile of B, 2 bytes an element (98,304 bytes
# at 128 x 256 x 32 and 4 stages); the C tile of the epilogue reuses them. The kernel traps when given less.
SHARED_BYTES = 2 * TILES["Stages"] * (TILES["BM"] * TILES["BK"] + TILES["BK"] * TILES["BN"])


def run(kernel, a, b, out=None):
    return launch_blocks(kernel, a, b, out, tile_m=TILES["BM"], tile_n=TILES["BN"], threads=TILES["Threads"],
                         shared=SHARED_BYTES)
