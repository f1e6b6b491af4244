"""CPU tier for runtime.triton_replay's plan: how a replay allocates its result. A plan is built from
its recorded result layout alone (no launch: launching needs a GPU, tests/gpu/test_triton_replay.py)."""

import torch

from hello_gpu.runtime.triton_replay import _UNKNOWN, _contiguous_strides, _Plan


def plan_returning(shape, stride, dtype=torch.float32) -> _Plan:
    plan = _Plan.__new__(_Plan)
    plan.result_layout = (tuple(shape), tuple(stride), dtype, torch.device("cpu"))
    plan.result_shape = tuple(shape)
    plan._empty_strided, plan._empty_like, plan._like = torch.empty_strided, torch.empty_like, _UNKNOWN
    return plan


def test_a_result_laid_out_like_an_input_is_allocated_like_it():
    plan = plan_returning((16, 4096), (4096, 1))
    x = torch.randn(16, 4096)
    result = plan.allocate((torch.randn(4096), x))
    assert plan._like == 1
    assert result.shape == x.shape and result.stride() == x.stride() and result.dtype == x.dtype
    assert result.data_ptr() != x.data_ptr()


def test_a_result_like_no_input_is_allocated_as_recorded():
    cases = [plan_returning((16, 4096), (4096, 1), torch.float32),    # inputs of another dtype
             plan_returning((4096, 16), (1, 4096)),                    # a transposed result
             plan_returning((16, 4096), (8192, 2))]                    # a strided result: inputs too, but not dense
    inputs = [(torch.randn(16, 4096, dtype=torch.float16),), (torch.randn(4096, 16),),
              (torch.randn(16, 8192)[:, ::2],)]
    for plan, call_inputs in zip(cases, inputs):
        result = plan.allocate(call_inputs)
        assert plan._like is None
        assert (tuple(result.shape), result.stride(), result.dtype) == plan.result_layout[:3]


def test_a_reshaped_plan_learns_its_allocation_again():
    plan = plan_returning((64, 64), _contiguous_strides((64, 64)))
    plan.allocate((torch.randn(64, 64),))
    assert plan._like == 0
    reshaped = plan.reshaped((4, 16, 64))
    assert reshaped._like is _UNKNOWN
    result = reshaped.allocate((torch.randn(4, 16, 64),))
    assert reshaped._like == 0 and result.shape == (4, 16, 64) and result.is_contiguous()


def test_a_replay_hands_the_launch_the_new_pointers_and_the_current_stream():
    """The replay's one launch, with a stand-in for Triton's C entry point: the recorded arguments with
    the call's input and result pointers (as ints) and the stream current at the call."""
    seen = []
    plan = plan_returning((16, 4096), (4096, 1))
    plan.device, plan._device_guard = -1, None
    plan._current_device, plan._raw_stream = (lambda: -1), (lambda device: 777)
    recorded = [16, 1, 1, 0, "function", "flags", "x", "result", 4096]
    plan.launches = [(lambda *arguments: seen.append(arguments), recorded, [(6, 0), (7, -1)], True)]
    for _ in range(3):
        x = torch.randn(16, 4096)
        result = plan((x,))
        assert result.shape == x.shape and result.data_ptr() != x.data_ptr()
        assert seen[-1] == (16, 1, 1, 777, "function", "flags", x.data_ptr(), result.data_ptr(), 4096)
    assert recorded == [16, 1, 1, 0, "function", "flags", "x", "result", 4096]      # the recording is unchanged


def test_a_plan_holds_no_tensor_of_the_call_it_recorded(monkeypatch):
    """A plan is built from a recorded call (its inputs and result) and kept for the process; it must not keep
    those tensors: the hello-gpu backend's linear timing recorded its plans on random weights of every
    projection shape of the 8B, and 1.49 GB stayed allocated through the decode and every later backend's
    peak. Both kinds of launch are recorded here (Triton's C entry point, the Python level), then replayed."""
    import gc
    import weakref

    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)          # a CPU build has none
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 777, raising=False)
    seen = []

    def c_entry(*arguments):
        seen.append(("C", *arguments))

    def python_launch(launcher, *arguments):
        seen.append(("Python", launcher, *arguments))

    x, weight, result = torch.randn(1, 64), torch.randn(256, 64), torch.empty(1, 256)
    kernel_arguments = ("metadata", None, None, None, x, weight, result, 1, 256, 64)
    inner_arguments = (4, 1, 1, 0, "function", False, False, None, None, *kernel_arguments)
    launches = [("launcher", 4, 1, 1, 0, "function", kernel_arguments, (c_entry, inner_arguments)),
                ("python launcher", 4, 1, 1, 0, "function", kernel_arguments, None)]
    plan = _Plan(launches, (x, weight), result, 0, python_launch)
    recorded = [weakref.ref(tensor) for tensor in (x, weight, result)]
    del x, weight, result, kernel_arguments, inner_arguments, launches
    gc.collect()
    assert [ref() for ref in recorded] == [None, None, None], "the plan keeps the recorded call's tensors alive"

    x, weight = torch.randn(1, 64), torch.randn(256, 64)
    out = plan((x, weight))
    assert out.shape == (1, 256)
    c_call, python_call = seen
    assert c_call == ("C", 4, 1, 1, 777, "function", False, False, None, None, "metadata", None, None, None,
                      x.data_ptr(), weight.data_ptr(), out.data_ptr(), 1, 256, 64)
    assert python_call[:6] == ("Python", "python launcher", 4, 1, 1, 777)
    assert python_call[6:] == ("function", "metadata", None, None, None, x, weight, out, 1, 256, 64)
    assert python_call[11] is x and python_call[12] is weight and python_call[13] is out
