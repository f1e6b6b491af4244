"""The checks every call passes before launch, exercised without a GPU (CPU tensors stand in where
only dtype, layout or memory overlap matter; the GPU tier repeats them through real calls)."""

import numpy as np
import pytest
import torch

from hello_gpu.runtime.checks import (bind_arguments, check_no_overlap, check_shared_memory, check_tensor,
                                      launch_dimensions, normalise_dims, pack_scalar)
from hello_gpu.runtime.device import DeviceInfo
from hello_gpu.runtime.errors import KernelArgumentError, LaunchConfigError
from hello_gpu.runtime.signature import parse_signature

# The H200's limits as its driver reports them (cuDeviceGetAttribute on the device machine).
H200 = DeviceInfo(index=0, name="NVIDIA H200", vendor="nvidia", arch="sm_90", multiprocessors=132, warp_size=32,
                  max_threads_per_block=1024, max_block_dims=(1024, 1024, 64),
                  max_grid_dims=(2**31 - 1, 65535, 65535), shared_per_block=48 * 1024,
                  shared_per_block_optin=227 * 1024, l2_bytes=60 * 1024 * 1024, memory_bytes=141 * 10**9,
                  registers_per_sm=65536, max_threads_per_sm=2048)

SIGNATURE = parse_signature(
    "__global__ void k(const float* a, const float* b, float* out, float alpha, double beta, int n, "
    "int64_t big, bool flag) {}", "k")
A, B, OUT, ALPHA, BETA, N, BIG, FLAG = SIGNATURE.parameters


def test_bind_positional_then_keywords():
    x = torch.randn(3)
    assert bind_arguments(SIGNATURE, (x, x), {"alpha": 2.0}) == {"a": x, "b": x, "alpha": 2.0}


def test_bind_refuses_too_many_unknown_and_duplicates():
    with pytest.raises(KernelArgumentError, match="takes 8 arguments, got 9 positional"):
        bind_arguments(SIGNATURE, tuple(range(9)), {})
    with pytest.raises(KernelArgumentError, match="has no parameter 'gamma'"):
        bind_arguments(SIGNATURE, (), {"gamma": 1})
    with pytest.raises(KernelArgumentError, match="'a' given both by position and by keyword"):
        bind_arguments(SIGNATURE, (1,), {"a": 1})


def test_float_scalar_is_packed_as_four_bytes_and_double_as_eight():
    alpha = pack_scalar(ALPHA, 0.1)
    beta = pack_scalar(BETA, 0.1)
    assert alpha.nbytes == 4 and alpha.dtype == np.float32 and alpha[0] == np.float32(0.1)
    assert beta.nbytes == 8 and beta[0] == 0.1
    assert pack_scalar(N, 7).nbytes == 4 and pack_scalar(BIG, 2**40).nbytes == 8
    assert pack_scalar(ALPHA, 3).dtype == np.float32          # an int is a fine value for a float
    assert pack_scalar(FLAG, True).nbytes == 1


@pytest.mark.parametrize("parameter, value, message", [
    (N, 2.5, r"'n' \(int\) expects an integer, got float"),
    (N, True, "expects an integer, got bool"),
    (N, 2**31, r"does not fit in int \[-2147483648, 2147483647\]; declare it int64_t"),
    (ALPHA, "1.0", "expects a number, got str"),
    (FLAG, 1, "expects True or False"),
    (ALPHA, torch.tensor(1.0), "is a scalar; got a tensor"),
])
def test_scalar_of_the_wrong_kind(parameter, value, message):
    with pytest.raises(KernelArgumentError, match=message):
        pack_scalar(parameter, value)


def test_tensor_checks_name_the_parameter():
    check_tensor(A, torch.randn(5), None, device_type="cpu")
    with pytest.raises(KernelArgumentError, match=r"'a' \(const float\*\): tensor is on cpu; move it to the GPU"):
        check_tensor(A, torch.randn(5), None)   # the real device type: cuda
    with pytest.raises(KernelArgumentError, match=r"'a' \(const float\*\) expects dtype torch.float32, got torch.float16"):
        check_tensor(A, torch.randn(5).half(), None, device_type="cpu")
    with pytest.raises(KernelArgumentError, match="'b' .* expects a torch.Tensor, got list"):
        check_tensor(B, [1.0, 2.0], None, device_type="cpu")
    with pytest.raises(KernelArgumentError, match="not contiguous"):
        check_tensor(A, torch.randn(4, 4).t(), None, device_type="cpu")


def test_vector_pointer_needs_whole_vectors():
    (parameter,) = parse_signature("__global__ void k(const float4* x) {}", "k").parameters
    check_tensor(parameter, torch.randn(8), None, device_type="cpu")
    with pytest.raises(KernelArgumentError, match="7 elements is not a multiple of 4"):
        check_tensor(parameter, torch.randn(7), None, device_type="cpu")
    with pytest.raises(KernelArgumentError, match="not aligned to 16 bytes"):
        check_tensor(parameter, torch.randn(9)[1:], None, device_type="cpu")


def test_output_overlapping_an_input_is_refused():
    base = torch.randn(100)
    bound = {"a": base[:50], "b": torch.randn(50), "out": base[25:75]}
    with pytest.raises(KernelArgumentError, match="output 'out' overlaps input 'a'"):
        check_no_overlap(SIGNATURE, bound)
    bound["out"] = base[50:]          # adjacent, not overlapping
    check_no_overlap(SIGNATURE, bound)


def test_two_outputs_overlapping_each_other():
    signature = parse_signature("__global__ void k(const float* x, float* y, float* z) {}", "k")
    base = torch.randn(10)
    with pytest.raises(KernelArgumentError, match="output 'y' overlaps output 'z'"):
        check_no_overlap(signature, {"x": torch.randn(10), "y": base, "z": base[5:]})


def test_dims():
    assert normalise_dims(256, "block") == (256, 1, 1)
    assert normalise_dims((16, 16), "block") == (16, 16, 1)
    for bad in ((1, 2, 3, 4), 0, (4, -1), 2.0, "256", True):
        with pytest.raises(LaunchConfigError, match="block"):
            normalise_dims(bad, "block")


def launch(**overrides):
    arguments = dict(block=256, grid=None, element_count=4097, kernel_max_threads=1024, registers_per_thread=16)
    arguments.update(overrides)
    return launch_dimensions(H200, **arguments)


def test_default_grid_is_ceil_n_over_block():
    assert launch() == ((17, 1, 1), (256, 1, 1))
    assert launch(element_count=0)[0] == (0, 1, 1)      # empty input: nothing to launch
    assert launch(grid=(3, 4))[0] == (3, 4, 1)


@pytest.mark.parametrize("overrides, message", [
    (dict(block=2048), "has 2048 threads; the device allows at most 1024"),
    (dict(block=(1, 1, 128)), "block dimension z=128 exceeds the device limit 64"),
    (dict(block=1024, kernel_max_threads=512, registers_per_thread=128), "this kernel can run at most 512 per block"),
    (dict(grid=(1, 70000)), "grid dimension y=70000 exceeds the device limit 65535"),
    (dict(grid=2**31), "grid dimension x=2147483648 exceeds"),
    (dict(element_count=None), "pass grid="),
])
def test_launch_limits(overrides, message):
    with pytest.raises(LaunchConfigError, match=message):
        launch(**overrides)


def test_shared_memory_limit():
    assert check_shared_memory(H200, 1024, 64 * 1024) == 64 * 1024
    with pytest.raises(LaunchConfigError, match="1024 static \\+ 232448 dynamic = 233472 bytes exceeds the device limit of 232448"):
        check_shared_memory(H200, 1024, 227 * 1024)
    with pytest.raises(LaunchConfigError, match="non-negative int"):
        check_shared_memory(H200, 0, -1)
