"""Launcher for v14_persistent_grouped.cu: the tensor maps, then one block per SM (at most one per tile)."""

from pathlib import Path

from hello_gpu.ops.matmul.tensor_cores import tile_constants
from hello_gpu.ops.matmul.tensor_maps import launch_hopper

TILES = tile_constants(Path(__file__).with_name("v14_persistent_grouped.cu"))


def run(kernel, a, b, out=None):
    return launch_hopper(kernel, a, b, out, TILES, persistent=True)
