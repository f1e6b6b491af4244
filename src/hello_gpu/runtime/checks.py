"""The checks every kernel call passes before anything is launched.

Each function takes plain values (a :class:`Parameter`, a tensor, the device's limits) and raises
:class:`KernelArgumentError` / :class:`LaunchConfigError` with a message that names the parameter and
says what was expected. They hold no GPU state, so they are tested without a GPU as well.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .device import DeviceInfo, torch_module
from .errors import KernelArgumentError, LaunchConfigError
from .signature import Parameter, Signature


def bind_arguments(signature: Signature, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Positional arguments fill parameters in declaration order; keywords by name."""
    names = [p.name for p in signature.parameters]
    if len(args) > len(names):
        raise KernelArgumentError(
            f"{signature.describe()} takes {len(names)} arguments, got {len(args)} positional")
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names:
            raise KernelArgumentError(f"{signature.entry} has no parameter {key!r}; its parameters are {names}")
        if key in bound:
            raise KernelArgumentError(f"parameter {key!r} given both by position and by keyword")
        bound[key] = value
    return bound


def lazy_view(tensor) -> str | None:
    """Why a kernel cannot read ``tensor``'s memory as its values, or None. PyTorch keeps some results as
    lazy views of memory that holds other values: ``z.conj().imag`` (a real tensor) is -memory with the
    negative bit set (``is_neg()``), ``z.conj()`` is conj(memory) (``is_conj()``). Torch's own operators
    read the bit; a kernel gets a pointer, reads the memory and would return, or write, the wrong sign."""
    if tensor.is_neg():
        return ("is a lazily negated view (is_neg(): its memory holds -x, as z.conj().imag does); "
                "pass .resolve_neg()")
    if tensor.is_conj():
        return "is a lazily conjugated view (is_conj(): its memory holds conj(x)); pass .resolve_conj()"
    return None


def unindexable(tensor) -> str | None:
    """Why ``tensor`` is no strided array in memory that a kernel can index, or None: a nested tensor (its
    rows kept apart, or of different lengths) or a layout other than torch.strided (sparse COO/CSR/CSC/BSR/
    BSC, mkldnn). Asked before anything reads its strides: a sparse COO tensor reports strides (0, 0), a
    CSR one has none, and a nested one of equal rows says it is contiguous, so their own errors name
    the wrong problem or none (a hello_gpu.Kernel took a nested tensor's buffer before this check)."""
    if tensor.is_nested:
        return ("is a nested tensor (torch.nested: its rows are kept apart, or of different lengths); pass each "
                "row, or .to_padded_tensor(0.0) with the padding masked")
    if tensor.layout is not torch_module().strided:
        return f"has layout {tensor.layout}, not strided memory; pass .to_dense()"
    return None


def check_tensor(parameter: Parameter, value: Any, device: int | None, device_type: str = "cuda") -> None:
    """A tensor for a pointer parameter: right device, dtype, contiguous, aligned for vector types."""
    torch = torch_module()
    where = f"parameter {parameter.name!r} ({parameter.c_type})"
    if not isinstance(value, torch.Tensor):
        raise KernelArgumentError(f"{where} expects a torch.Tensor, got {type(value).__name__}")
    layout = unindexable(value)
    if layout is not None:
        raise KernelArgumentError(f"{where}: tensor {layout}")
    if value.device.type != device_type:
        raise KernelArgumentError(f"{where}: tensor is on {value.device}; move it to the GPU with .cuda()")
    if device is not None and value.device.index != device:
        raise KernelArgumentError(
            f"{where}: tensor is on {device_type}:{value.device.index}, other tensors on {device_type}:{device}")
    if parameter.dtype != "any" and value.dtype != getattr(torch, parameter.dtype):
        raise KernelArgumentError(
            f"{where} expects dtype torch.{parameter.dtype}, got {value.dtype}; convert with .to(torch.{parameter.dtype})")
    lazy = lazy_view(value)
    if lazy is not None:
        raise KernelArgumentError(f"{where}: tensor {lazy}")
    if not value.is_contiguous():
        raise KernelArgumentError(
            f"{where}: tensor is not contiguous (strides {tuple(value.stride())}); pass .contiguous()")
    if parameter.lanes > 1:
        width = parameter.lanes * value.element_size()
        if value.numel() % parameter.lanes:
            raise KernelArgumentError(f"{where}: {value.numel()} elements is not a multiple of {parameter.lanes}")
        if value.data_ptr() % width:
            raise KernelArgumentError(f"{where}: data is not aligned to {width} bytes")


def pack_scalar(parameter: Parameter, value: Any) -> np.ndarray:
    """The scalar as its declared C type: a Python float for a `float` is 4 bytes, not a double."""
    where = f"parameter {parameter.name!r} ({parameter.c_type})"
    if isinstance(value, torch_module().Tensor):
        raise KernelArgumentError(f"{where} is a scalar; got a tensor (use .item() if you mean its value)")
    dtype = np.dtype(parameter.dtype)
    is_bool = isinstance(value, (bool, np.bool_))
    if parameter.kind == "int":
        if is_bool or not isinstance(value, (int, np.integer)):
            raise KernelArgumentError(f"{where} expects an integer, got {type(value).__name__} {value!r}")
        limits = _integer_limits(parameter.dtype)
        if not limits.min <= int(value) <= limits.max:
            raise KernelArgumentError(
                f"{where}: {value} does not fit in {parameter.c_type} [{limits.min}, {limits.max}]; "
                f"declare it int64_t in the kernel")
        return np.array([int(value)], dtype=dtype)
    if parameter.kind == "float":
        if is_bool or not isinstance(value, (int, float, np.integer, np.floating)):
            raise KernelArgumentError(f"{where} expects a number, got {type(value).__name__} {value!r}")
        return np.array([value], dtype=dtype)
    if not is_bool:
        raise KernelArgumentError(f"{where} expects True or False, got {type(value).__name__} {value!r}")
    return np.array([value], dtype=dtype)


@functools.lru_cache(maxsize=None)
def _integer_limits(dtype: str) -> np.iinfo:
    return np.iinfo(np.dtype(dtype))


def check_no_overlap(signature: Signature, bound: dict[str, Any]) -> None:
    """An output sharing memory with any other argument would make the result depend on timing."""
    def span(tensor) -> tuple[int, int]:
        start = tensor.data_ptr()
        return start, start + tensor.numel() * tensor.element_size()

    pointers = [p for p in signature.parameters if p.is_pointer]
    for index, output in enumerate(pointers):
        if not output.is_output:
            continue
        out_start, out_end = span(bound[output.name])
        for other_index, other in enumerate(pointers):
            if other_index == index or (other.is_output and other_index < index):
                continue   # each pair of outputs is looked at once
            start, end = span(bound[other.name])
            if out_end > out_start and end > start and out_start < end and start < out_end:
                role = "input" if other.is_input else "output"
                raise KernelArgumentError(
                    f"output {output.name!r} overlaps {role} {other.name!r} in memory; an output must not "
                    f"alias another argument (pass a separate tensor)")


def normalise_dims(value: Any, what: str) -> tuple[int, int, int]:
    """``256`` or ``(16, 16)`` -> ``(256, 1, 1)`` / ``(16, 16, 1)``."""
    if type(value) is int and value >= 1:      # the common case, checked first: block=256
        return (value, 1, 1)
    is_int = lambda d: isinstance(d, (int, np.integer)) and not isinstance(d, bool)  # noqa: E731
    dims = (value,) if is_int(value) else tuple(value) if isinstance(value, (tuple, list)) else None
    if dims is None or not 1 <= len(dims) <= 3 or not all(is_int(d) for d in dims):
        raise LaunchConfigError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    if any(d < 1 for d in dims):
        raise LaunchConfigError(f"{what} dimensions must be >= 1, got {tuple(int(d) for d in dims)}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))  # type: ignore[return-value]


def launch_dimensions(info: DeviceInfo, *, block: Any, grid: Any, element_count: int | None,
                      kernel_max_threads: int, registers_per_thread: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block) after checking both against the device's and the kernel's limits.

    A grid left out is ``ceil(n / threads per block)``; ``n == 0`` gives an empty grid (no launch).
    """
    block_dims = normalise_dims(block, "block")
    threads = math.prod(block_dims)
    if threads > info.max_threads_per_block:
        raise LaunchConfigError(f"block {block_dims} has {threads} threads; the device allows at most "
                                f"{info.max_threads_per_block} per block")
    for axis, (size, limit) in enumerate(zip(block_dims, info.max_block_dims)):
        if size > limit:
            raise LaunchConfigError(f"block dimension {'xyz'[axis]}={size} exceeds the device limit {limit}")
    if threads > kernel_max_threads:
        raise LaunchConfigError(
            f"block {block_dims} has {threads} threads; this kernel can run at most {kernel_max_threads} per "
            f"block ({registers_per_thread} registers per thread); use a smaller block or __launch_bounds__({threads})")
    if grid is None:
        if element_count is None:
            raise LaunchConfigError("the kernel has no tensor or size argument to size the grid from; pass grid=")
        grid_dims = (math.ceil(element_count / threads), 1, 1)
    else:
        grid_dims = normalise_dims(grid, "grid")
    for axis, (size, limit) in enumerate(zip(grid_dims, info.max_grid_dims)):
        if size > limit:
            raise LaunchConfigError(f"grid dimension {'xyz'[axis]}={size} exceeds the device limit {limit}")
    return grid_dims, block_dims


def check_shared_memory(info: DeviceInfo, static_bytes: int, dynamic_bytes: Any) -> int:
    """Dynamic shared memory in bytes, after checking static + dynamic against the device's opt-in limit."""
    if isinstance(dynamic_bytes, bool) or not isinstance(dynamic_bytes, (int, np.integer)) or dynamic_bytes < 0:
        raise LaunchConfigError(f"shared_mem must be a non-negative int (bytes), got {dynamic_bytes!r}")
    if static_bytes + dynamic_bytes > info.shared_per_block_optin:
        raise LaunchConfigError(
            f"shared memory {static_bytes} static + {dynamic_bytes} dynamic = {static_bytes + dynamic_bytes} bytes "
            f"exceeds the device limit of {info.shared_per_block_optin} bytes per block")
    return int(dynamic_bytes)
