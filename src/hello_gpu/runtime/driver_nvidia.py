"""Load a cubin and launch it through the CUDA driver API (cuda.bindings), on PyTorch's context.

``cuLibraryLoadData`` gives a context-independent library: the driver loads it into each device's
context on first use, so one compile serves every GPU of the same arch. PyTorch uses each device's
primary context, which is the context current on the thread after ``torch.cuda.device(i)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .device import ensure_driver


def _ok(result, what: str):
    status = result[0]
    if int(status) != 0:
        from cuda.bindings import driver
        _, name = driver.cuGetErrorName(status)
        _, text = driver.cuGetErrorString(status)
        raise RuntimeError(f"{what} failed: {name.decode() if name else status!r}: "
                           f"{text.decode() if text else ''}")
    return result[1] if len(result) == 2 else result[1:]


@dataclass
class NvidiaKernelHandle:
    library: object
    kernel: object       # CUkernel
    function: object     # CUfunction view of the same kernel, as cuLaunchKernel takes it

    @staticmethod
    def load(image: bytes, lowered_name: str) -> "NvidiaKernelHandle":
        from cuda.bindings import driver
        ensure_driver()
        library = _ok(driver.cuLibraryLoadData(image, None, None, 0, None, None, 0), "cuLibraryLoadData")
        kernel = _ok(driver.cuLibraryGetKernel(library, lowered_name.encode()), "cuLibraryGetKernel")
        return NvidiaKernelHandle(library, kernel, driver.CUfunction(int(kernel)))

    def attribute(self, name: str, device: int) -> int:
        from cuda.bindings import driver
        attribute = getattr(driver.CUfunction_attribute, name)
        return int(_ok(driver.cuKernelGetAttribute(attribute, self.kernel, device), f"cuKernelGetAttribute({name})"))

    def set_max_dynamic_shared(self, nbytes: int, device: int) -> None:
        from cuda.bindings import driver
        attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _ok(driver.cuKernelSetAttribute(attribute, nbytes, self.kernel, device), "cuKernelSetAttribute")

    def parameter_layout(self, count: int) -> list[tuple[int, int]]:
        """(offset, size) of each parameter, as compiled: checks our packing against the compiler's."""
        from cuda.bindings import driver
        return [tuple(int(v) for v in _ok(driver.cuKernelGetParamInfo(self.kernel, index), "cuKernelGetParamInfo"))
                for index in range(count)]

    def max_active_blocks(self, block_threads: int, dynamic_shared: int) -> int:
        from cuda.bindings import driver
        return int(_ok(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            self.function, block_threads, dynamic_shared), "cuOccupancyMaxActiveBlocksPerMultiprocessor"))

    def launcher(self):
        """The raw launch call; arguments: grid(3), block(3), shared, stream handle, params address."""
        from cuda.bindings import driver
        launch, function, stream_type = driver.cuLaunchKernel, self.function, driver.CUstream

        streams: dict = {}              # handle -> CUstream: building one costs ~0.5 us a launch

        def launch_raw(gx, gy, gz, bx, by, bz, shared, stream, params):
            wrapped = streams.get(stream)
            if wrapped is None:
                if len(streams) > 64:
                    streams.clear()
                wrapped = streams[stream] = stream_type(stream)
            status, = launch(function, gx, gy, gz, bx, by, bz, shared, wrapped, params, 0)
            if status:
                _ok((status,), "cuLaunchKernel")
        return launch_raw
