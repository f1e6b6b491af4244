"""Launcher for v18_tma_store_epilogue.cu: v14's launch (the operand maps, one block per SM, at most one per
tile) plus a third tensor map, C's, which the TMA stores write through, and the C tile's shared memory.

TMA writes C in 16-byte pieces of rows that must start 16 bytes apart, so C is stored directly only when N
is a multiple of 8 and C is 16-byte aligned; any other C (N = 781, an out= view at an odd element) is
computed into a padded (M, N8) tensor and copied out: one extra pass over C, only at such shapes (every
benchmark shape stores directly).
"""

from pathlib import Path

from hello_gpu.ops.matmul.tensor_cores import ALIGNMENT, PIECE, checked, kernel_operands, tile_constants
from hello_gpu.ops.matmul.tensor_maps import cached_maps, encode_tiled, launch_hopper, map_parameters

TILES = tile_constants(Path(__file__).with_name("v18_tma_store_epilogue.cu"))
OUTPUT_BOX = (64, 64)        # columns, rows: 128 bytes (the swizzle's row) of a consumer warpgroup's 64 rows
OUTPUT_BYTES = TILES["OutputTiles"] * 2 * TILES["BM"] * TILES["BN"]       # after the stages; 64 KiB


def output_map(c):
    """C's tensor map (64 x 64 boxes, 128-byte swizzle, as the kernel's stage_output lays them), cached by
    everything it encodes, like the operands' maps."""
    parameters = map_parameters(c, *OUTPUT_BOX)
    key = ("output", c.data_ptr(), tuple(c.shape), c.dtype, str(c.device), OUTPUT_BOX)
    return cached_maps(key, c.device, lambda: encode_tiled(c, parameters["dims"], parameters["strides"],
                                                           parameters["box"]))


def stores_directly(c) -> bool:
    """Whether TMA can write ``c`` (contiguous, as checked() made sure) where it lies."""
    return c.shape[1] % PIECE == 0 and c.data_ptr() % ALIGNMENT == 0


def _with_output_map(kernel):
    """launch_hopper's call, (maps, C, M, N, K), with C's map added and the C tile's bytes on the shared memory."""
    def launch(maps, c, m, n, k, *, shared_mem, **options):
        kernel(maps, output_map(c), c, m, n, k, shared_mem=shared_mem + OUTPUT_BYTES, **options)
    return launch


def run(kernel, a, b, out=None):
    out = checked(a, b, out)
    if out.numel() == 0:                         # no tile to write (and no map of an empty C to encode)
        return out
    if stores_directly(out):
        return launch_hopper(_with_output_map(kernel), a, b, out, TILES, persistent=True)
    a_used, b_used = kernel_operands(a, b)       # (M, K8), (K8, N8): B's padding columns are zeros
    padded = launch_hopper(_with_output_map(kernel), a_used, b_used, None, TILES, persistent=True)
    return out.copy_(padded[:, :out.shape[1]])
