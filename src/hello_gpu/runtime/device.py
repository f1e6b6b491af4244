"""Which GPU is here, what it is, and what it allows (block, grid and shared-memory limits).

On NVIDIA the limits come from the driver (cuda.bindings); on AMD from PyTorch's device properties
(its ROCm build reports the HIP values). Without a GPU, :data:`ARCH_LIMITS` still lets the compile
and occupancy tools answer for a named arch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .errors import NoGpuError


@dataclass(frozen=True)
class ArchLimits:
    """Per-multiprocessor limits that decide occupancy. Numbers from the CUDA/ROCm programming guides."""

    warp_size: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    shared_per_sm: int            # bytes usable by blocks
    max_shared_per_block: int     # bytes with the opt-in attribute set
    register_granularity: int = 256   # registers are allocated per warp in units of this


ARCH_LIMITS: dict[str, ArchLimits] = {
    "sm_80": ArchLimits(32, 2048, 32, 65536, 255, 164 * 1024, 163 * 1024),
    "sm_86": ArchLimits(32, 1536, 16, 65536, 255, 100 * 1024, 99 * 1024),
    "sm_89": ArchLimits(32, 1536, 24, 65536, 255, 100 * 1024, 99 * 1024),
    "sm_90": ArchLimits(32, 2048, 32, 65536, 255, 228 * 1024, 227 * 1024),
    "sm_100": ArchLimits(32, 2048, 32, 65536, 255, 228 * 1024, 227 * 1024),
    "sm_120": ArchLimits(32, 1536, 32, 65536, 255, 100 * 1024, 99 * 1024),
    # AMD: a CU holds 4 SIMDs (CDNA) or 2 (RDNA WGP halves); LDS is 64 KB per workgroup.
    "gfx942": ArchLimits(64, 2048, 32, 4 * 512 * 64, 512, 64 * 1024, 64 * 1024, 8 * 64),
    "gfx90a": ArchLimits(64, 2048, 32, 4 * 512 * 64, 512, 64 * 1024, 64 * 1024, 8 * 64),
    "gfx1100": ArchLimits(32, 2048, 32, 4 * 1536 * 32, 256, 64 * 1024, 64 * 1024, 16 * 32),
    "gfx1201": ArchLimits(32, 2048, 32, 4 * 1536 * 32, 256, 64 * 1024, 64 * 1024, 16 * 32),
}


def arch_limits(arch: str) -> ArchLimits | None:
    base = arch.rstrip("af") if arch.startswith("sm_") else arch.split(":")[0]
    return ARCH_LIMITS.get(base)


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    vendor: str                   # "nvidia" or "amd"
    arch: str                     # "sm_90", "gfx1201"
    multiprocessors: int          # SMs or CUs
    warp_size: int
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    shared_per_block: int         # bytes without opt-in
    shared_per_block_optin: int   # bytes a kernel may ask for after raising its limit
    l2_bytes: int
    memory_bytes: int
    registers_per_sm: int
    max_threads_per_sm: int


def torch_module():
    """PyTorch, imported late: the compile path works without it."""
    import torch
    return torch


def gpu_vendor() -> str | None:
    """``"nvidia"``, ``"amd"`` or ``None`` when PyTorch sees no GPU (or is not installed)."""
    try:
        torch = torch_module()
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return "amd" if getattr(torch.version, "hip", None) else "nvidia"


def require_gpu() -> str:
    vendor = gpu_vendor()
    if vendor is None:
        raise NoGpuError(
            "no GPU is visible to PyTorch (torch.cuda.is_available() is False); kernels can still be "
            "compiled with an explicit arch, e.g. hg.hip(src, arch='sm_90').compile()")
    return vendor


def _driver_attribute(name: str, device: int) -> int:
    from cuda.bindings import driver
    status, value = driver.cuDeviceGetAttribute(getattr(driver.CUdevice_attribute, name), device)
    if int(status) != 0:
        raise RuntimeError(f"cuDeviceGetAttribute({name}) failed: {status!r}")
    return int(value)


def ensure_driver() -> None:
    from cuda.bindings import driver
    status, = driver.cuInit(0)
    if int(status) != 0:
        raise RuntimeError(f"cuInit failed: {status!r}")


@functools.lru_cache(maxsize=None)
def device_info(index: int | None = None) -> DeviceInfo:
    """Properties and limits of GPU ``index`` (default: PyTorch's current device)."""
    vendor = require_gpu()
    torch = torch_module()
    if index is None:
        index = torch.cuda.current_device()
    properties = torch.cuda.get_device_properties(index)
    if vendor == "nvidia":
        ensure_driver()
        a = functools.partial(_driver_attribute, device=index)
        major, minor = a("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"), a("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
        return DeviceInfo(
            index, properties.name, vendor, f"sm_{major}{minor}",
            a("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"), a("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
            a("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
            (a("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X"), a("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y"),
             a("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z")),
            (a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X"), a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y"),
             a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z")),
            a("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
            a("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            a("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"), int(properties.total_memory),
            a("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR"),
            a("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"))
    arch = properties.gcnArchName.split(":")[0]
    return DeviceInfo(
        index, properties.name, vendor, arch, properties.multi_processor_count, properties.warp_size,
        1024, (1024, 1024, 1024), (2**31 - 1, 2**31 - 1, 2**31 - 1),
        int(properties.shared_memory_per_block), int(getattr(properties, "shared_memory_per_block_optin",
                                                             properties.shared_memory_per_block)),
        int(getattr(properties, "L2_cache_size", 0)), int(properties.total_memory),
        int(getattr(properties, "regs_per_multiprocessor", 0)), int(properties.max_threads_per_multi_processor))
