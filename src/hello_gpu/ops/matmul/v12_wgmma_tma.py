"""Launcher for v12_wgmma_tma.cu: the tensor maps, then one block (one warpgroup) per 128x128 tile of C."""

from pathlib import Path

from hello_gpu.ops.matmul.tensor_cores import tile_constants
from hello_gpu.ops.matmul.tensor_maps import launch_hopper

TILES = tile_constants(Path(__file__).with_name("v12_wgmma_tma.cu"))


def run(kernel, a, b, out=None):
    return launch_hopper(kernel, a, b, out, TILES)
