"""TMA tensor maps for the Hopper rungs (v12-v14, and attention's v07 through encode_tiled and cached_maps; not a
rung: the registry reads only rung names).

A tensor map (CUtensorMap, 128 opaque bytes) tells the TMA unit where a 2-D tensor lies (base address,
sizes, row stride in bytes), which box one copy moves, and how to swizzle it in shared memory. The driver
builds it on the host (cuTensorMapEncodeTiled). CUDA's usual route passes it as a 128-byte
``const __grid_constant__`` kernel parameter; hello-gpu's runtime packs kernel arguments in 8-byte slots
(runtime/kernel.py), so here both maps travel in one int64 tensor of 2 x 16 elements on the device, and
the kernel acquires them with ``fence.proxy.tensormap::generic`` before its first copy (wgmma_tma.cuh),
as the CUDA programming guide describes for maps in global memory.

Encoding costs microseconds and the copy to the device a synchronising transfer, so the maps are cached
by everything they encode (pointers, sizes, strides, boxes, dtype, device): a hit is exactly the map a
fresh encode would give, whatever happened to the memory in between.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import torch

from hello_gpu.ops.matmul.tensor_cores import checked, kernel_operands
from hello_gpu.runtime.device import ensure_driver

SWIZZLE_BYTES = 128          # CU_TENSOR_MAP_SWIZZLE_128B: a box row of at most 128 bytes (64 bf16)
ATOM_BYTES = 1024            # kAtomBytes in wgmma_tma.cuh: the shared tiles' alignment
BARRIER_BYTES = 256          # kBarrierBytes in wgmma_tma.cuh
MAP_BYTES = 128
CACHE_SIZE = 32

_cache: OrderedDict = OrderedDict()


def map_parameters(tensor: torch.Tensor, box_columns: int, box_rows: int) -> dict:
    """What cuTensorMapEncodeTiled is given for a contiguous 2-D ``tensor`` (rows, columns) and a box of
    box_rows x box_columns: sizes and boxes innermost first, the row stride in bytes."""
    if tensor.dim() != 2 or not tensor.is_contiguous():
        raise ValueError(f"a tensor map here describes a contiguous 2-D tensor; got shape {tuple(tensor.shape)}, "
                         f"strides {tuple(tensor.stride())}")
    rows, columns = tensor.shape
    row_bytes = columns * tensor.element_size()
    if row_bytes % 16 or tensor.data_ptr() % 16:
        raise ValueError(f"TMA needs 16-byte aligned rows: {columns} columns of {tensor.element_size()} bytes at "
                         f"address {tensor.data_ptr():#x} (tensor_cores.kernel_operands pads them)")
    if box_columns * tensor.element_size() > SWIZZLE_BYTES or not (1 <= box_rows <= 256):
        raise ValueError(f"box {box_rows} x {box_columns}: rows of at most {SWIZZLE_BYTES} bytes, at most 256 rows")
    return {"dims": (columns, rows), "strides": (row_bytes,), "box": (box_columns, box_rows)}


def _encode(tensor: torch.Tensor, box_columns: int, box_rows: int) -> np.ndarray:
    """The 128 bytes of the map, as 16 int64."""
    p = map_parameters(tensor, box_columns, box_rows)
    return encode_tiled(tensor, p["dims"], p["strides"], p["box"])


def encode_tiled(tensor: torch.Tensor, dims, strides, box) -> np.ndarray:
    """cuTensorMapEncodeTiled for a bfloat16 / float16 ``tensor`` seen as len(dims) dimensions: ``dims`` and
    ``box`` innermost first, ``strides`` the byte strides of every dimension but the innermost; 128-byte
    swizzle, zeros for elements outside the tensor. The 128 bytes of the map, as 16 int64."""
    from cuda.bindings import driver
    ensure_driver()
    data_type = {torch.bfloat16: driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                 torch.float16: driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16}[tensor.dtype]
    status, encoded = driver.cuTensorMapEncodeTiled(
        data_type, len(dims), tensor.data_ptr(), [driver.cuuint64_t(d) for d in dims],
        [driver.cuuint64_t(s) for s in strides], [driver.cuuint32_t(b) for b in box],
        [driver.cuuint32_t(1)] * len(dims), driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        # NONE fills out-of-bounds elements with zeros, which add nothing to a sum
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if int(status) != 0:
        _, name = driver.cuGetErrorName(status)
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({name.decode() if name else status}) for "
                           f"{tuple(tensor.shape)} {tensor.dtype}: dims {tuple(dims)}, strides {tuple(strides)}, "
                           f"box {tuple(box)}")
    return np.array([int(word) for word in encoded.opaque], dtype=np.uint64).view(np.int64)


def cached_maps(key: tuple, device: torch.device, encode) -> torch.Tensor:
    """The maps ``encode()`` gives (int64 words, 16 a map), on ``device``, cached under ``key``, which must
    name everything they encode (see the module's docstring)."""
    maps = _cache.get(key)
    if maps is None:
        maps = torch.from_numpy(encode()).to(device)
        assert maps.data_ptr() % 64 == 0, "a CUtensorMap must be 64-byte aligned"
        _cache[key] = maps
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return maps


def operand_maps(a: torch.Tensor, b: torch.Tensor, tiles: dict[str, int]) -> torch.Tensor:
    """A's map (boxes of BM rows x BK columns) then B's (BK rows x 64 columns), 2 x 16 int64 on a's device."""
    key = tuple((t.data_ptr(), tuple(t.shape), t.dtype) for t in (a, b)) + (str(a.device), tiles["BM"], tiles["BK"])
    return cached_maps(key, a.device, lambda: np.concatenate([_encode(a, tiles["BK"], tiles["BM"]),
                                                              _encode(b, 64, tiles["BK"])]))


def hopper_shared_bytes(tiles: dict[str, int]) -> int:
    """Dynamic shared memory of a Hopper rung: its stages (BM x BK of A, BK x BN of B, 2 bytes an element),
    room for the mbarriers, and 1024 bytes to align the tiles to the swizzle atom."""
    return tiles["Stages"] * 2 * (tiles["BM"] * tiles["BK"] + tiles["BK"] * tiles["BN"]) + BARRIER_BYTES + ATOM_BYTES


def launch_hopper(kernel, a, b, out, tiles: dict[str, int], *, persistent: bool = False):
    """Check, build or reuse the maps, launch: one block per BM x BN tile of C (grid x over columns, y over
    rows), or with ``persistent`` one block per SM (at most one per tile), each looping over tiles.
    Arguments: (maps, C, M, N, K) with K that of the (possibly padded) operands."""
    out = checked(a, b, out)
    a_used, b_used = kernel_operands(a, b)
    m, n = out.shape
    maps = operand_maps(a_used, b_used, tiles)
    tile_count = (math.ceil(m / tiles["BM"]), math.ceil(n / tiles["BN"]))
    if persistent:
        sm_count = torch.cuda.get_device_properties(a.device).multi_processor_count
        grid = (min(sm_count, tile_count[0] * tile_count[1]),)
    else:
        grid = (tile_count[1], tile_count[0])
    kernel(maps, out, m, n, a_used.shape[1], block=tiles["Threads"], grid=grid, shared_mem=hopper_shared_bytes(tiles))
    # a_used and b_used may be padded copies made for this call, freed on return: PyTorch's allocator hands
    # their memory out again only to work queued after this kernel on the stream, so the kernel reads them intact.
    return out
