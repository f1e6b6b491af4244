"""Launcher for v13_warp_specialized.cu: the tensor maps, then one block of 3 warpgroups per 128x256 tile of C."""

from pathlib import Path

from hello_gpu.ops.matmul.tensor_cores import tile_constants
from hello_gpu.ops.matmul.tensor_maps import launch_hopper

TILES = tile_constants(Path(__file__).with_name("v13_warp_specialized.cu"))


def run(kernel, a, b, out=None):
    return launch_hopper(kernel, a, b, out, TILES)
