"""CPU tier for a checked kernel call's plan (runtime.kernel): what a call signature's key holds (built in
Python, or in C++ by the compiled replay's extension), and how a plan writes its pointers into the packed
argument buffer. The launches themselves need a GPU
(tests/gpu/test_runtime_gpu.py holds a test per check on the planned path)."""

import numpy as np
import pytest
import torch

import hello_gpu as hg
from hello_gpu.runtime.kernel import _argument_parts, _options_key, pointer_runs

SCALED_ADD = r"""
__global__ void scaled_add(float* out, float alpha, const float* x, const float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = alpha * x[i] + y[i];
}"""


@pytest.fixture(scope="module")
def kernel():
    try:
        return hg.hip(SCALED_ADD)
    except hg.NoGpuError as error:
        pytest.skip(f"no compiler to check the kernel with: {error}")


def test_pointers_are_packed_run_by_run_and_the_scalars_between_them_stay(kernel):
    """out (slot 0), alpha (1), x (2), y (3), n (4): two runs of pointers around the float alpha."""
    slots = [kernel.signature.parameters.index(p) for p in kernel._pointers]
    assert slots == [0, 2, 3]
    runs = pointer_runs(slots)
    assert [(offset, first, end) for _, offset, first, end in runs] == [(0, 0, 1), (16, 1, 3)]
    tensors = [torch.empty(5), torch.randn(5), torch.randn(5)]
    buffer, _ = kernel._pack({"out": tensors[0], "alpha": 0.5, "x": tensors[1], "y": tensors[2], "n": 5})
    scalars = buffer[[1, 4]].copy()
    pointers = (0x7F00_0000_1000, 0x7F00_0000_2000, 0x7F00_0000_3000)      # another call's tensors
    for pack, offset, first, end in runs:
        pack(buffer, offset, *pointers[first:end])
    assert [int(value) for value in buffer[[0, 2, 3]]] == list(pointers)
    assert np.array_equal(buffer[[1, 4]], scalars)
    assert buffer[1:2].view(np.float32)[0] == np.float32(0.5)


def test_one_run_when_the_pointers_come_first():
    ((_, offset, first, end),) = pointer_runs([0, 1, 2])
    assert (offset, first, end) == (0, 0, 3)
    assert pointer_runs([]) == []


def test_a_key_holds_what_the_checks_read():
    a = torch.randn(16, 64)
    same = torch.randn(16, 64)
    assert _argument_parts((a, 5)) == _argument_parts((same, 5))
    # another dtype, the same shape not contiguous, another shape: each fails a check the first call
    # passed, or sizes the launch differently, so each is another key
    for other in (a.double(), torch.randn(64, 16).t(), torch.randn(16, 65), torch.randn(1024)):
        assert _argument_parts((other, 5)) != _argument_parts((a, 5)), (other.shape, other.stride())
    assert _argument_parts((a, 5)) != _argument_parts((a, 5.0)) != _argument_parts((a, True))
    # a tensor subclass or a NumPy scalar: no key, so always the full path with its checks
    assert _argument_parts((torch.nn.Parameter(a), 5)) is None
    assert _argument_parts((a, np.int32(5))) is None


def test_the_compiled_key_holds_what_the_checks_read(extension):
    """The compiled replay's signature(*args), the key of a common call once it is built (extension:
    tests/conftest.py): the same distinctions as _argument_parts, strides and alignment besides."""
    signature = extension.signature
    a = torch.randn(16, 64)
    assert signature(a, 5) == signature(torch.randn(16, 64), 5)
    misaligned = torch.randn(16 * 64 + 1)[1:].view(16, 64)          # contiguous, 4 bytes past 16-byte alignment
    for other in (a.double(), torch.randn(64, 16).t(), torch.randn(16, 65), torch.randn(1024), a.to("meta"),
                  misaligned):
        assert signature(other, 5) != signature(a, 5), (other.shape, other.stride(), other.device)
    assert len({signature(a, 5), signature(a, 5.0), signature(a, True)}) == 3
    assert signature(a, 5) != signature(a) != signature(a, a)
    # a NumPy scalar or a tensor subclass it was not configured with: no key, so always the full path
    assert signature(a, np.int32(5)) is None and signature(a, 2**70) is None
    assert signature(a.as_subclass(_OtherTensor), 5) is None
    assert isinstance(signature(torch.nn.Parameter(a), 5), bytes)


class _OtherTensor(torch.Tensor):
    pass


def test_compiled_data_pointers_are_each_tensors_data_ptr(extension):
    a = torch.randn(4, 8)
    assert extension.data_pointers(a, a[1:], a.t()) == (a.data_ptr(), a[1:].data_ptr(), a.data_ptr())
    assert extension.data_pointers() == ()
    with pytest.raises(TypeError, match="argument 1 is int, not a tensor"):
        extension.data_pointers(a, 5)


def test_launch_options_that_the_full_path_refuses_get_no_key():
    a = torch.randn(8)
    assert _options_key((a,), {}, 256.0, None, 0, None) is None           # 256.0 == 256 in a dict
    assert _options_key((a,), {}, 256, None, False, None) is None         # False == 0 in a dict
    assert _options_key((a,), {}, 256, (4.0, 1), 0, None) is None
    assert _options_key((a,), {}, 256, None, 0, True) is None
    assert _options_key((a,), {}, [128, 2], [4, 1], 0, None) == _options_key((a,), {}, (128, 2), (4, 1), 0, None)
    assert _options_key((a,), {}, 128, None, 0, None) != _options_key((a,), {}, (128,), None, 0, None)
    # keyword arguments are part of the key: never the key of the same values by position
    by_keyword = _options_key((), {"x": a}, 256, None, 0, None)
    assert by_keyword is not None and by_keyword != _argument_parts((a,))


def test_a_refused_call_is_refused_every_time_and_plans_nothing(kernel, key_path):      # key_path: conftest.py
    out, x, y = torch.empty(64), torch.randn(64), torch.randn(64)
    messages = set()
    for _ in range(2):
        with pytest.raises((hg.KernelArgumentError, hg.NoGpuError)) as caught:
            kernel(out, 0.5, x, y, 64)
        messages.add(str(caught.value))
    assert len(messages) == 1 and not kernel._plans
