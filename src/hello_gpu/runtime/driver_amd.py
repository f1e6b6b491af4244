"""Load a code object and launch it through HIP's module API (hip-python), on PyTorch's device.

The AMD twin of :mod:`driver_nvidia`. HIP modules belong to one device, so a module is loaded per
device on first use. Written against hip-python's documented API; it is compile-checked in CI and
has not been run on AMD hardware by this project yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _ok(result, what: str):
    status = result[0] if isinstance(result, tuple) else result
    if int(status) != 0:
        from hip import hip
        raise RuntimeError(f"{what} failed: {status!r}: {hip.hipGetErrorString(status)}")
    if isinstance(result, tuple):
        return result[1] if len(result) == 2 else result[1:]
    return None


@dataclass
class AmdKernelHandle:
    image: bytes
    lowered_name: str
    functions: dict = field(default_factory=dict)    # device index -> hipFunction_t

    @staticmethod
    def load(image: bytes, lowered_name: str) -> "AmdKernelHandle":
        return AmdKernelHandle(image, lowered_name)

    def function(self, device: int):
        if device not in self.functions:
            from hip import hip
            _ok(hip.hipSetDevice(device), "hipSetDevice")
            module = _ok(hip.hipModuleLoadData(self.image), "hipModuleLoadData")
            self.functions[device] = _ok(hip.hipModuleGetFunction(module, self.lowered_name.encode()),
                                         "hipModuleGetFunction")
        return self.functions[device]

    def attribute(self, name: str, device: int) -> int:
        from hip import hip
        attribute = getattr(hip.hipFunction_attribute, name.replace("CU_FUNC_", "HIP_FUNC_"))
        return int(_ok(hip.hipFuncGetAttribute(attribute, self.function(device)), f"hipFuncGetAttribute({name})"))

    def set_max_dynamic_shared(self, nbytes: int, device: int) -> None:
        return None   # HIP allows up to the LDS size without an opt-in

    def parameter_layout(self, count: int) -> list[tuple[int, int]] | None:
        return None   # HIP has no parameter-info query; the signature parser is trusted

    def max_active_blocks(self, block_threads: int, dynamic_shared: int) -> int:
        from hip import hip
        return int(_ok(hip.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(
            self.function(0), block_threads, dynamic_shared), "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor"))

    def launcher(self):
        from hip import hip
        launch = hip.hipModuleLaunchKernel
        current_device = hip.hipGetDevice

        def launch_raw(gx, gy, gz, bx, by, bz, shared, stream, params):
            device = _ok(current_device(), "hipGetDevice")
            _ok(launch(self.function(device), gx, gy, gz, bx, by, bz, shared, stream, params, None),
                "hipModuleLaunchKernel")
        return launch_raw
