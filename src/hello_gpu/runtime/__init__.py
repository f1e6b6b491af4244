"""runtime/: where a kernel runs. Compile inline HIP/CUDA source, check arguments, launch on tensors."""

from .compiler import Binary, CompileOptions, cache_dir
from .device import DeviceInfo, device_info, gpu_vendor
from .errors import CompileError, HelloGpuError, KernelArgumentError, LaunchConfigError, NoGpuError
from .kernel import Kernel, PreparedLaunch, cuda, empty_launches, hip
from .loader import KernelModule, load
from .program import ProgramError
from .signature import Parameter, Signature, SignatureError, parse_signature

__all__ = [
    "Binary", "CompileError", "CompileOptions", "DeviceInfo", "HelloGpuError", "Kernel", "KernelArgumentError",
    "KernelModule", "LaunchConfigError", "NoGpuError", "Parameter", "PreparedLaunch", "ProgramError", "Signature",
    "SignatureError", "cache_dir", "cuda", "device_info", "empty_launches", "gpu_vendor", "hip", "load", "parse_signature",
]
