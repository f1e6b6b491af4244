"""Launcher for v03_shared_tiles.hip: blocks of 32x32 threads, one per 32x32 tile of C (grid x over columns)."""

from hello_gpu.ops.matmul.launch import launch_tiles

TILE = 32             # kTile in the .hip file


def run(kernel, a, b, out=None):
    return launch_tiles(kernel, a, b, out, tile_m=TILE, tile_n=TILE, threads=(TILE, TILE))
