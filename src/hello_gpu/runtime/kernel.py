"""``hg.hip(source, entry=...)`` -> a :class:`Kernel` you call on PyTorch tensors.

The calling convention comes from the kernel's C signature (see :mod:`signature`): ``const T*`` is an
input tensor, ``T*`` an output (allocated like the first input when not passed, and returned),
integer scalars named ``n``/``numel``/``N``/``size`` default to the first input's element count, and
every other scalar is passed by keyword and packed as its declared C type.

Every argument is checked before anything is launched; a refused call raises
:class:`KernelArgumentError` naming the parameter and what was expected.
"""

from __future__ import annotations

import math
import subprocess
import tempfile
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .compiler import Binary, CompileOptions, compile_source
from .device import DeviceInfo, arch_limits, device_info, gpu_vendor, torch_module
from .checks import (bind_arguments, check_no_overlap, check_shared_memory, check_tensor, launch_dimensions,
                     normalise_dims, pack_scalar)
from .errors import KernelArgumentError, LaunchConfigError, NoGpuError
from .resources import Occupancy, Resources, estimate_occupancy, resources_from_ptxas
from .signature import Signature, list_kernels, parse_signature

DEFAULT_BLOCK = 256
_POINTER_BYTES = 8


def _torch_dtype(name: str):
    torch = torch_module()
    return getattr(torch, name)


RECENT_LAUNCHES = 8          # repeated calls remembered per kernel


def _current_raw_stream(device: int) -> int:
    """PyTorch's current stream on ``device`` as a raw handle.

    ``torch.cuda.current_stream()`` builds a Python Stream object (~10 us per call on the H200
    machine); the raw query PyTorch's own compiler uses is one C call. Fall back where it is absent.
    """
    torch = torch_module()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


@dataclass
class PreparedLaunch:
    """A launch with every argument checked and packed: calling it only launches.

    Made by :meth:`Kernel.prepare`; use it in timing loops. ``outputs`` holds the output tensors
    (allocated once) and ``result`` what a normal call would have returned.
    """

    kernel: "Kernel"
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    stream: int
    outputs: tuple
    keep_alive: tuple           # tensors and the packed argument buffer the launch points into
    params_address: int
    device: int

    def __post_init__(self):
        self._launch_raw = self.kernel._launcher()
        self._arguments = (*self.grid, *self.block, self.shared_mem, self.stream, self.params_address)
        self._skip = math.prod(self.grid) == 0
        self._current_device = torch_module().cuda.current_device

    @property
    def result(self):
        if not self.outputs:
            return None
        return self.outputs[0] if len(self.outputs) == 1 else self.outputs

    def __call__(self):
        if not self._skip:
            if self._current_device() == self.device:
                self._launch_raw(*self._arguments)
            else:   # the launch goes to the current context: make it the tensors' device
                with torch_module().cuda.device(self.device):
                    self._launch_raw(*self._arguments)
        return self.result


class Kernel:
    """A kernel compiled from inline source, callable on PyTorch tensors."""

    def __init__(self, source: str, entry: str | None = None, *, dialect: str = "hip", arch: str | None = None,
                 defines=None, std: str = "c++17", include_dirs=(), optimization: str = "-O3",
                 fast_math: bool = False, name: str | None = None, use_cache: bool = True):
        if not isinstance(source, str) or "__global__" not in source:
            raise ValueError("source must be a string holding at least one __global__ kernel")
        if entry is None:
            kernels = list_kernels(source)
            if len(kernels) != 1:
                raise ValueError(f"the source defines {len(kernels)} kernels ({', '.join(kernels) or 'none'}); "
                                 f"say which one with entry=")
            entry = kernels[0]
        self.source = source
        self.entry = entry
        self.dialect = dialect
        self.signature: Signature = parse_signature(source, entry)
        self.file_name = name or f"{self.signature.function}.{'hip' if dialect == 'hip' else 'cu'}"
        self.options = CompileOptions.make(defines, std, include_dirs, optimization, fast_math)
        self.use_cache = use_cache
        self._requested_arch = arch
        self._binary: Binary | None = None
        self._handle_object = None
        self._layout_checked = False
        self._shared_limit_set: dict[int, int] = {}
        self._attributes: dict[tuple[str, int], int] = {}
        self._launch_raw = None
        # repeat key -> PreparedLaunch without tensors, most recent last (see __call__). Several, since
        # one operator may launch a kernel a few times per call (a reduction level by level).
        self._recent_launches: OrderedDict = OrderedDict()
        # The signature sorted once, so a call does no re-sorting.
        parameters = self.signature.parameters
        self._pointers = tuple(p for p in parameters if p.is_pointer)
        self._inputs = tuple(p for p in parameters if p.is_input)
        self._outputs = tuple(p for p in parameters if p.is_output)
        self._scalars = tuple(p for p in parameters if not p.is_pointer)
        self._sizes = tuple(p for p in parameters if p.is_size)
        self._scalar_bytes = tuple(8 if p.is_pointer else np.dtype(p.dtype).itemsize for p in parameters)
        self._slot_offsets = np.arange(max(len(parameters), 1), dtype=np.uint64) * np.uint64(8)
        # Compile now when the target is known, so errors show at definition time.
        if arch is not None or gpu_vendor() is not None:
            self.compile()

    # ------------------------------------------------------------------ compile and inspect
    @property
    def vendor(self) -> str:
        if self._requested_arch:
            return "amd" if self._requested_arch.startswith("gfx") else "nvidia"
        vendor = gpu_vendor()
        if vendor is None:
            raise NoGpuError("no GPU is visible and no arch was given: pass arch='sm_90' (or 'gfx1201')")
        return vendor

    @property
    def arch(self) -> str:
        return self._requested_arch or device_info().arch

    def compile(self) -> Binary:
        """Compile (or load from the disk cache) for ``arch``; repeated calls return the same binary."""
        if self._binary is None:
            self._binary = compile_source(self.source, self.entry, file_name=self.file_name, dialect=self.dialect,
                                          vendor=self.vendor, arch=self.arch, options=self.options,
                                          use_cache=self.use_cache)
        return self._binary

    @property
    def binary(self) -> Binary:
        return self.compile()

    def _handle(self):
        if self._handle_object is None:
            binary = self.compile()
            vendor = gpu_vendor()
            if vendor is None:
                raise NoGpuError("launching a kernel needs a GPU; none is visible to PyTorch")
            if vendor != binary.vendor or (self._requested_arch and self._requested_arch.rstrip("af") != device_info().arch):
                raise LaunchConfigError(f"kernel was compiled for {binary.arch}, the GPU is {device_info().arch}")
            if vendor == "nvidia":
                from .driver_nvidia import NvidiaKernelHandle
                self._handle_object = NvidiaKernelHandle.load(binary.image, binary.lowered_name)
            else:
                from .driver_amd import AmdKernelHandle
                self._handle_object = AmdKernelHandle.load(binary.image, binary.lowered_name)
        return self._handle_object

    @property
    def resources(self) -> Resources:
        """Registers, shared memory, stack/spills, max threads per block (driver when a GPU is here)."""
        binary = self.compile()
        from_log = resources_from_ptxas(binary.log, arch_limits(binary.arch))
        if gpu_vendor() is None:
            return from_log
        handle, device = self._handle(), device_info().index
        return Resources(
            handle.attribute("CU_FUNC_ATTRIBUTE_NUM_REGS", device),
            handle.attribute("CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES", device),
            handle.attribute("CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES", device),
            from_log.spill_store_bytes, from_log.spill_load_bytes,
            handle.attribute("CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK", device), "driver")

    def occupancy(self, block: int | tuple = DEFAULT_BLOCK, shared_mem: int = 0) -> Occupancy:
        """Estimated blocks and warps per multiprocessor for this block size and dynamic shared memory."""
        threads = math.prod(normalise_dims(block, "block"))
        limits = arch_limits(self.compile().arch)
        if limits is None:
            raise ValueError(f"no occupancy table for arch {self.arch}")
        resources = self.resources
        return estimate_occupancy(limits, threads, resources.registers_per_thread,
                                  resources.static_shared_bytes + shared_mem)

    def asm(self, kind: str = "sass") -> str:
        """Assembly: ``"ptx"`` or ``"sass"`` on NVIDIA, ``"isa"`` on AMD."""
        binary = self.compile()
        if binary.vendor == "nvidia":
            if kind == "ptx":
                return binary.ptx
            if kind == "sass":
                return _disassemble_cubin(binary.image)
            raise ValueError(f"asm kind on NVIDIA is 'ptx' or 'sass', got {kind!r}")
        if kind != "isa":
            raise ValueError(f"asm kind on AMD is 'isa', got {kind!r}")
        return _disassemble_amd(binary.image)

    def __repr__(self) -> str:
        state = f"compiled for {self._binary.arch}" if self._binary else "not compiled yet"
        return f"<hello_gpu.Kernel {self.signature.describe()} [{self.dialect}, {state}]>"

    def _check_layout(self) -> None:
        """Compare our argument sizes with the compiled kernel's own parameter table, once."""
        if self._layout_checked:
            return
        layout = self._handle().parameter_layout(len(self.signature.parameters))
        if layout is not None:
            for parameter, expected, (_, size) in zip(self.signature.parameters, self._scalar_bytes, layout):
                if expected != size:
                    raise KernelArgumentError(
                        f"parameter {parameter.name!r}: hello-gpu packs {expected} bytes for "
                        f"{parameter.c_type}, the compiled kernel expects {size}")
        self._layout_checked = True

    def _launch_config(self, info: DeviceInfo, block, grid, shared_mem, element_count: int | None):
        grid_dims, block_dims = launch_dimensions(
            info, block=block, grid=grid, element_count=element_count,
            kernel_max_threads=self._attribute("CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK", info.index),
            registers_per_thread=self._attribute("CU_FUNC_ATTRIBUTE_NUM_REGS", info.index))
        static = self._attribute("CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES", info.index)
        shared = check_shared_memory(info, static, shared_mem)
        # Above 48 KB a kernel must opt in to more dynamic shared memory (CUDA); raise its limit once.
        if shared > info.shared_per_block - static and self._shared_limit_set.get(info.index, 0) < shared:
            self._handle().set_max_dynamic_shared(shared, info.index)
            self._shared_limit_set[info.index] = shared
        return grid_dims, block_dims, shared

    def _attribute(self, name: str, device: int) -> int:
        """A compiled-kernel attribute, cached: it never changes after compilation."""
        key = (name, device)
        if key not in self._attributes:
            self._attributes[key] = self._handle().attribute(name, device)
        return self._attributes[key]

    def _stream_handle(self, stream, device: int) -> int:
        torch = torch_module()
        if stream is None:
            return _current_raw_stream(device)
        if isinstance(stream, torch.cuda.Stream):
            if stream.device.index != device:
                raise LaunchConfigError(f"stream is on cuda:{stream.device.index}, the tensors on cuda:{device}")
            return stream.cuda_stream
        if isinstance(stream, int) and not isinstance(stream, bool):
            return stream
        raise LaunchConfigError(f"stream must be a torch.cuda.Stream or a raw stream handle (int), got {type(stream).__name__}")

    def _launcher(self):
        if self._launch_raw is None:
            self._launch_raw = self._handle().launcher()
        return self._launch_raw

    def _pack(self, bound: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Every argument in its own 8-byte slot of one buffer, and the array of slot addresses the
        launch API takes (``void** kernelParams``). Slots are 8 bytes: no parameter here is larger."""
        parameters = self.signature.parameters
        slots = np.zeros(max(len(parameters), 1), dtype=np.uint64)
        for index, parameter in enumerate(parameters):
            value = bound[parameter.name]
            if parameter.is_pointer:
                slots[index] = value.data_ptr()
            else:
                slots[index:index + 1].view(np.uint8)[:self._scalar_bytes[index]] = pack_scalar(parameter, value).view(np.uint8)
        addresses = slots.ctypes.data + self._slot_offsets
        return slots, addresses

    def prepare(self, *args, block=DEFAULT_BLOCK, grid=None, shared_mem: int = 0, stream=None,
                **kwargs) -> PreparedLaunch:
        """Check and pack a call once; the returned launcher launches with no further Python work."""
        torch = torch_module()
        signature = self.signature
        bound = bind_arguments(signature, args, kwargs)
        # Tensors first: the first one fixes the device and the inferred sizes.
        device = None
        first_input = None
        for parameter in self._pointers:
            if parameter.name in bound:
                check_tensor(parameter, bound[parameter.name], device)
                device = bound[parameter.name].device.index
                if parameter.is_input and first_input is None:
                    first_input = bound[parameter.name]
        missing_inputs = [p for p in self._inputs if p.name not in bound]
        if missing_inputs:
            raise KernelArgumentError("missing input " + ", ".join(f"{p.name!r} ({p.c_type})" for p in missing_inputs))
        if device is None:
            device = torch.cuda.current_device()
        info = device_info(device)
        outputs = []
        for parameter in self._outputs:
            if parameter.name not in bound:
                if first_input is None:
                    raise KernelArgumentError(
                        f"output {parameter.name!r} ({parameter.c_type}) was not passed and there is no input "
                        f"tensor to allocate it like; pass {parameter.name}=torch.empty(...)")
                dtype = first_input.dtype if parameter.dtype == "any" else _torch_dtype(parameter.dtype)
                bound[parameter.name] = torch.empty(first_input.shape, dtype=dtype, device=first_input.device)
            outputs.append(bound[parameter.name])
        if len(self._pointers) > 1:
            check_no_overlap(signature, bound)
        sized_by = first_input if first_input is not None else next(
            (bound[p.name] for p in self._pointers), None)
        element_count = sized_by.numel() if sized_by is not None else None
        for parameter in self._scalars:
            if parameter.name in bound:
                continue
            if parameter.is_size and element_count is not None:
                bound[parameter.name] = element_count
            else:
                raise KernelArgumentError(
                    f"missing scalar {parameter.name!r} ({parameter.c_type}); pass {parameter.name}=...")
        slots, addresses = self._pack(bound)
        grid_count = int(bound[self._sizes[0].name]) if self._sizes else element_count
        grid_dims, block_dims, shared = self._launch_config(info, block, grid, shared_mem, grid_count)
        stream_handle = self._stream_handle(stream, device)
        self._check_layout()
        tensors = tuple(bound[p.name] for p in self._pointers)
        return PreparedLaunch(self, grid_dims, block_dims, shared, stream_handle, tuple(outputs),
                              (tensors, slots, addresses), int(addresses.ctypes.data), device)

    def __call__(self, *args, block=DEFAULT_BLOCK, grid=None, shared_mem: int = 0, stream=None, **kwargs):
        """Check, allocate outputs, launch; returns the output (one) or a tuple (several), None if none.

        A call repeating the previous one exactly (the same tensors: address, shape, strides, dtype;
        the same scalars, launch shape and stream; every argument passed, outputs included) reuses its
        checked and packed launch: the checks could only give the same answer again. That takes a
        call from ~33 us of host time to a few, which matters in a timing loop of a short kernel.
        """
        key = self._repeat_key(args, kwargs, block, grid, shared_mem, stream)
        cached = self._recent_launches.get(key) if key is not None else None
        if cached is not None:
            self._recent_launches.move_to_end(key)
            cached()
            return self._outputs_of(args, kwargs)
        launch = self.prepare(*args, block=block, grid=grid, shared_mem=shared_mem, stream=stream, **kwargs)
        if key is not None:
            # Keep the packed arguments, not the tensors: a cached launch must not hold memory alive.
            # (A hit means the caller passed tensors at those very addresses, alive now.)
            self._recent_launches[key] = replace(launch, outputs=(), keep_alive=launch.keep_alive[1:])
            if len(self._recent_launches) > RECENT_LAUNCHES:
                self._recent_launches.popitem(last=False)
        return launch()

    def _repeat_key(self, args, kwargs, block, grid, shared_mem, stream):
        """What must be equal for a call to repeat the last one; None when the call cannot be reused."""
        if len(args) + len(kwargs) != len(self.signature.parameters):
            return None                         # an output to allocate, or an inferred size: a fresh prepare
        torch = torch_module()
        parts = []
        for value in (*args, *(kwargs[name] for name in sorted(kwargs))):
            if isinstance(value, torch.Tensor):
                parts.append((value.data_ptr(), tuple(value.shape), value.stride(), value.dtype, value.device))
            elif isinstance(value, (bool, int, float)):
                parts.append((type(value), value))
            else:
                return None
        if stream is None:
            stream = ("current", _current_raw_stream(torch.cuda.current_device()))
        elif not isinstance(stream, int):
            stream = getattr(stream, "cuda_stream", None) or id(stream)
        as_key = lambda dims: tuple(dims) if isinstance(dims, list) else dims  # noqa: E731 - lists are not hashable
        return (tuple(sorted(kwargs)), tuple(parts), as_key(block), as_key(grid), shared_mem, stream)

    def _outputs_of(self, args, kwargs):
        values = [args[index] if index < len(args) else kwargs[parameter.name]
                  for index, parameter in enumerate(self.signature.parameters) if parameter.is_output]
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)


def _tool(name: str) -> str | None:
    """nvdisasm/cuobjdump: CUDA toolkit (cuda.pathfinder), then Triton's bundled copy, then PATH."""
    import shutil
    try:
        from cuda import pathfinder
        found = pathfinder.find_nvidia_binary_utility(name)
        if found:
            return found
    except Exception:  # noqa: BLE001 - not found is the common case
        pass
    try:
        import triton
        candidate = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    return shutil.which(name)


def _disassemble_cubin(image: bytes) -> str:
    tool = _tool("cuobjdump")
    flags = ["--dump-sass"]
    if tool is None:
        tool, flags = _tool("nvdisasm"), ["--print-line-info"]
    if tool is None:
        raise FileNotFoundError("SASS needs cuobjdump or nvdisasm (CUDA toolkit or the triton package); "
                                "neither was found. kernel.asm('ptx') works without them.")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "kernel.cubin"
        path.write_bytes(image)
        done = subprocess.run([tool, *flags, str(path)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(tool).name} failed: {done.stderr.strip()}")
    return done.stdout


def _disassemble_amd(image: bytes) -> str:
    import shutil
    tool = shutil.which("llvm-objdump") or shutil.which("llvm-objdump-19") or "/opt/rocm/llvm/bin/llvm-objdump"
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "kernel.co"
        path.write_bytes(image)
        done = subprocess.run([tool, "-d", str(path)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"llvm-objdump failed: {done.stderr.strip()}")
    return done.stdout


def hip(source: str, entry: str | None = None, **options) -> Kernel:
    """A HIP-dialect kernel: runs on AMD through hipRTC and on NVIDIA through NVRTC with a prelude."""
    return Kernel(source, entry, dialect="hip", **options)


def cuda(source: str, entry: str | None = None, **options) -> Kernel:
    """A CUDA-dialect kernel: runs on NVIDIA through NVRTC and on AMD through hipRTC with a prelude."""
    return Kernel(source, entry, dialect="cuda", **options)
