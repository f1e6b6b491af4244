"""GPU tier for the kernel runtime (``pytest -m gpu``): real launches on the device, every dtype,
scalars packed as their C types, 2-D grids, shared memory, streams, and each pre-launch check.

Outputs are poisoned (NaN or a sentinel) before a launch so an element the kernel did not write
fails; inputs are fresh random values for every test, never zeros.
"""

import math

import pytest
import torch

import hello_gpu as hg

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]

VECTOR_ADD = r"""
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}"""


@pytest.fixture
def generator():
    return torch.Generator(device="cuda").manual_seed(torch.seed() % 2**31)


def randn(*shape, generator, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", generator=generator).to(dtype)


def test_readme_example(generator):
    vector_add = hg.hip(VECTOR_ADD, entry="vector_add")
    a = randn(4097, generator=generator)
    b = torch.randn_like(a)
    c = vector_add(a, b, block=256)
    torch.testing.assert_close(c, a + b)


@pytest.mark.parametrize("n", [1, 31, 1000, 4097, 1 << 20])
def test_vector_add_sizes_with_poisoned_output(n, generator):
    vector_add = hg.hip(VECTOR_ADD)
    a, b = randn(n, generator=generator), randn(n, generator=generator)
    out = torch.full_like(a, float("nan"))
    result = vector_add(a, b, out)
    assert result is out
    torch.testing.assert_close(out.double(), a.double() + b.double(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("c_type, dtype", [
    ("float", torch.float32), ("__half", torch.float16), ("__nv_bfloat16", torch.bfloat16),
    ("int", torch.int32), ("int64_t", torch.int64), ("double", torch.float64),
])
def test_every_element_type(c_type, dtype, generator):
    # Arithmetic in float (or the integer type) so every dtype goes through the same kernel text.
    source = f"""
    __global__ void twice_plus(const {c_type}* x, const {c_type}* y, {c_type}* out, int n) {{
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) out[i] = x[i] + x[i] + y[i];
    }}"""
    kernel = hg.hip(source)
    n = 4097
    if dtype.is_floating_point:
        x, y = randn(n, generator=generator, dtype=dtype), randn(n, generator=generator, dtype=dtype)
    else:
        x = torch.randint(-10**6, 10**6, (n,), device="cuda", dtype=dtype, generator=generator)
        y = torch.randint(-10**6, 10**6, (n,), device="cuda", dtype=dtype, generator=generator)
    out = kernel(x, y)
    assert out.dtype == dtype and out.shape == x.shape
    expected = x + x + y
    if dtype.is_floating_point:
        torch.testing.assert_close(out, expected)
    else:
        assert torch.equal(out, expected)


def test_scalars_are_packed_as_declared(generator):
    # 0.1 as a float is 0.100000001490116; as a double 0.1. A double packed for a float parameter
    # (or the reverse) reads garbage, which this comparison would catch.
    source = r"""
    __global__ void axpby(const double* x, double* out, float alpha, double beta, int64_t offset,
                          int n, bool negate) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) {
        double v = (double)alpha * x[i] + beta + (double)offset;
        out[i] = negate ? -v : v;
      }
    }"""
    kernel = hg.hip(source)
    x = randn(3000, generator=generator, dtype=torch.float64)
    out = kernel(x, alpha=0.1, beta=0.1, offset=2**40, negate=True)
    expected = -(float(torch.tensor(0.1, dtype=torch.float32)) * x + 0.1 + 2.0**40)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_two_dimensional_grid_and_block(generator):
    source = r"""
    __global__ void transpose(const float* x, float* y, int rows, int cols) {
      int c = blockIdx.x * blockDim.x + threadIdx.x;
      int r = blockIdx.y * blockDim.y + threadIdx.y;
      if (r < rows && c < cols) y[(int64_t)c * rows + r] = x[(int64_t)r * cols + c];
    }"""
    kernel = hg.hip(source)
    rows, cols = 1823, 781
    x = randn(rows, cols, generator=generator)
    y = torch.full((cols, rows), float("nan"), device="cuda")
    kernel(x, y, rows=rows, cols=cols, block=(32, 8), grid=(math.ceil(cols / 32), math.ceil(rows / 8)))
    assert torch.equal(y, x.t())


@pytest.mark.parametrize("shared_bytes", [1024 * 4, 100 * 1024])
def test_dynamic_shared_memory(shared_bytes, generator):
    # Reverse each block's segment through shared memory; 100 KB needs the >48 KB opt-in.
    source = r"""
    __global__ void reverse_blocks(const float* x, float* y, int n) {
      HIP_DYNAMIC_SHARED(float, tile)
      int per_thread = REPEAT;
      int base = blockIdx.x * blockDim.x * per_thread;
      for (int k = 0; k < per_thread; ++k) {
        int i = base + k * blockDim.x + threadIdx.x;
        tile[k * blockDim.x + threadIdx.x] = i < n ? x[i] : 0.0f;
      }
      __syncthreads();
      int count = blockDim.x * per_thread;
      for (int k = 0; k < per_thread; ++k) {
        int local = k * blockDim.x + threadIdx.x;
        int i = base + local;
        if (i < n) y[i] = tile[count - 1 - local];
      }
    }"""
    block = 256
    repeat = shared_bytes // (4 * block)
    kernel = hg.hip(source, defines={"REPEAT": repeat})
    segment = block * repeat
    n = segment * 5
    x = randn(n, generator=generator)
    y = kernel(x, block=block, grid=n // segment, shared_mem=shared_bytes)
    assert torch.equal(y, x.view(-1, segment).flip(1).reshape(-1))


def test_warp_shuffle_reduction_with_hip_names(generator):
    source = r"""
    __global__ void block_sum(const float* x, float* out, int n) {
      __shared__ float partial[1024 / HG_WARP_SIZE];
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      float v = i < n ? x[i] : 0.0f;
      for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) v += __shfl_down(v, offset);
      int lane = threadIdx.x % HG_WARP_SIZE, warp = threadIdx.x / HG_WARP_SIZE;
      if (lane == 0) partial[warp] = v;
      __syncthreads();
      if (warp == 0) {
        v = lane < blockDim.x / HG_WARP_SIZE ? partial[lane] : 0.0f;
        for (int offset = HG_WARP_SIZE / 2; offset > 0; offset /= 2) v += __shfl_xor(v, offset);
        if (lane == 0) out[blockIdx.x] = v;
      }
    }"""
    kernel = hg.hip(source)
    n, block = 4097, 512
    x = randn(n, generator=generator)
    blocks = math.ceil(n / block)
    out = torch.full((blocks,), float("nan"), device="cuda")
    kernel(x, out, block=block)
    padded = torch.nn.functional.pad(x.double(), (0, blocks * block - n)).view(blocks, block).sum(1)
    torch.testing.assert_close(out.double(), padded, rtol=1e-5, atol=1e-4)


def test_several_outputs_come_back_as_a_tuple(generator):
    source = r"""
    __global__ void split(const float* x, float* positive, int* is_positive, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) { positive[i] = fmaxf(x[i], 0.0f); is_positive[i] = x[i] > 0.0f; }
    }"""
    x = randn(4097, generator=generator)
    positive, flags = hg.hip(source)(x)
    assert torch.equal(positive, x.clamp(min=0)) and flags.dtype == torch.int32
    assert torch.equal(flags.bool(), x > 0)


def test_non_default_stream(generator):
    kernel = hg.hip(VECTOR_ADD)
    a, b = randn(1 << 22, generator=generator), randn(1 << 22, generator=generator)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = kernel(a, b)                       # the current stream is now `stream`
    explicit = kernel(a, b, stream=stream)
    stream.synchronize()
    torch.testing.assert_close(out, a + b)
    torch.testing.assert_close(explicit, a + b)
    # the launch really went to that stream: an event recorded after it completes with it
    event = torch.cuda.Event()
    kernel(a, b, out, stream=stream)
    event.record(stream)
    event.synchronize()


def test_original_course_style_kernel(generator):
    source = r"""#include <hip/hip_runtime.h>

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int idx = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (idx < n) {
        c[idx] = a[idx] + b[idx];
    }
}
"""
    a = randn(1 << 20, generator=generator)
    b = randn(1 << 20, generator=generator)
    c = torch.full_like(a, float("nan"))
    hg.hip(source, entry="vector_add")(a, b, c, a.numel(), block=256)
    torch.testing.assert_close(c, a + b)


def test_template_kernel(generator):
    source = "template <typename T, int BLOCK>\n__global__ void scale(const T* x, T* y, T alpha, int n) {\n" \
             "  int i = blockIdx.x * BLOCK + threadIdx.x; if (i < n) y[i] = alpha * x[i];\n}"
    kernel = hg.hip(source, entry="scale<float, 128>")
    x = randn(1000, generator=generator)
    torch.testing.assert_close(kernel(x, alpha=1.5, block=128), 1.5 * x)


def test_prepared_launcher_reuses_buffers(generator):
    kernel = hg.hip(VECTOR_ADD)
    a, b = randn(4097, generator=generator), randn(4097, generator=generator)
    launch = kernel.prepare(a, b)
    launch.outputs[0].fill_(float("nan"))
    result = launch()
    assert result is launch.outputs[0]
    torch.testing.assert_close(result, a + b)
    a.copy_(randn(4097, generator=generator))      # same buffers, new values: the launcher sees them
    launch()
    torch.testing.assert_close(launch.result, a + b)


def test_empty_input_returns_empty_output():
    out = hg.hip(VECTOR_ADD)(torch.empty(0, device="cuda"), torch.empty(0, device="cuda"))
    assert out.shape == (0,)


def test_resources_from_the_driver_match_ptxas():
    kernel = hg.hip(VECTOR_ADD)
    resources = kernel.resources
    assert resources.source == "driver"
    from hello_gpu.runtime.resources import parse_ptxas_report
    assert resources.registers_per_thread == parse_ptxas_report(kernel.binary.log)["registers"]
    assert resources.max_threads_per_block == 1024
    assert "vector_add" in kernel.asm("sass")


# ---------------------------------------------------------------- checks through real calls


def poisoned_call(kernel, *args, **kwargs):
    """Make the call, which must be refused, and prove the output was not touched (no launch)."""
    out = torch.full((4097,), float("nan"), device="cuda")
    with pytest.raises(hg.KernelArgumentError) as caught:
        kernel(*args, out=out, **kwargs) if "out" in kernel.signature.describe() else kernel(*args, **kwargs)
    assert torch.isnan(out).all()
    return str(caught.value)


@pytest.fixture
def inputs(generator):
    return randn(4097, generator=generator), randn(4097, generator=generator)


def test_refuses_cpu_tensor(inputs):
    a, _ = inputs
    message = poisoned_call(hg.hip(VECTOR_ADD), a, torch.randn(4097))
    assert "parameter 'b' (const float*): tensor is on cpu" in message


def test_refuses_wrong_dtype(inputs):
    a, b = inputs
    assert "'b' (const float*) expects dtype torch.float32, got torch.float16" in poisoned_call(
        hg.hip(VECTOR_ADD), a, b.half())


def test_refuses_non_contiguous(inputs, generator):
    a, _ = inputs
    strided = randn(4097 * 2, generator=generator)[::2]
    assert "'b' (const float*): tensor is not contiguous" in poisoned_call(hg.hip(VECTOR_ADD), a, strided)


def test_refuses_output_overlapping_input(inputs):
    a, b = inputs
    with pytest.raises(hg.KernelArgumentError, match="output 'out' overlaps input 'a'"):
        hg.hip(VECTOR_ADD)(a, b, a)


def test_refuses_missing_and_wrong_scalars(inputs):
    a, b = inputs
    source = "__global__ void axpy(const float* x, float* y, float alpha, int n) { }"
    kernel = hg.hip(source)
    with pytest.raises(hg.KernelArgumentError, match=r"missing scalar 'alpha' \(float\)"):
        kernel(a, b)
    with pytest.raises(hg.KernelArgumentError, match="'alpha' .* expects a number, got str"):
        kernel(a, b, alpha="2")
    with pytest.raises(hg.KernelArgumentError, match="'n' .* expects an integer, got float"):
        kernel(a, b, alpha=2.0, n=4097.0)


def test_refuses_too_many_and_too_few_arguments(inputs):
    a, b = inputs
    kernel = hg.hip(VECTOR_ADD)
    with pytest.raises(hg.KernelArgumentError, match="takes 4 arguments, got 5 positional"):
        kernel(a, b, torch.empty_like(a), 4097, 1)
    with pytest.raises(hg.KernelArgumentError, match=r"missing input 'b' \(const float\*\)"):
        kernel(a)


def test_refuses_launch_configurations_over_the_limits(inputs):
    a, b = inputs
    kernel = hg.hip(VECTOR_ADD)
    with pytest.raises(hg.LaunchConfigError, match="the device allows at most 1024"):
        kernel(a, b, block=2048)
    with pytest.raises(hg.LaunchConfigError, match="grid dimension y=70000 exceeds the device limit 65535"):
        kernel(a, b, grid=(1, 70000))
    with pytest.raises(hg.LaunchConfigError, match="exceeds the device limit of .* bytes per block"):
        kernel(a, b, shared_mem=1 << 20)


def test_kernel_register_limit_caps_the_block():
    heavy = r"""
    __global__ void __launch_bounds__(128) heavy(const float* x, float* y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] = x[i];
    }"""
    kernel = hg.hip(heavy)
    x = torch.randn(4097, device="cuda")
    with pytest.raises(hg.LaunchConfigError, match="this kernel can run at most 128 per block"):
        kernel(x, block=256)


def test_refuses_tensor_on_another_gpu(inputs):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    a, b = inputs
    with pytest.raises(hg.KernelArgumentError, match="other tensors on cuda:0"):
        hg.hip(VECTOR_ADD)(a, b.to("cuda:1"))


def test_a_call_signature_is_checked_once_and_its_plan_holds_no_tensor(generator, key_path):     # conftest.py
    import gc
    import weakref
    kernel = hg.hip(VECTOR_ADD)
    a, b = randn(4099, generator=generator), randn(4099, generator=generator)
    out = torch.full_like(a, float("nan"))
    assert kernel(a, b, out, a.numel()) is out and torch.equal(out, a + b)
    assert len(kernel._plans) == 1
    assert all(isinstance(key, bytes if key_path == "compiled key" else tuple) for key in kernel._plans)
    # New tensors (new addresses, new values) of the same signature: the same plan, right results.
    for _ in range(3):
        a, b = randn(4099, generator=generator), randn(4099, generator=generator)
        out = torch.full_like(a, float("nan"))
        assert kernel(a, b, out, a.numel()) is out and torch.equal(out, a + b)
    assert len(kernel._plans) == 1
    # The output left out is allocated afresh each call, never the previous call's tensor.
    first, second = kernel(a, b), kernel(b, a)
    assert first.data_ptr() != second.data_ptr() and torch.equal(first, a + b) and torch.equal(second, b + a)
    assert len(kernel._plans) == 2
    # Another size, a different launch shape: a new signature, checked again.
    assert torch.equal(kernel(a[:31], b[:31]), a[:31] + b[:31])
    with pytest.raises(hg.LaunchConfigError):
        kernel(a, b, out, a.numel(), block=4096)
    # The plans keep packed pointers only: the tensors can be freed.
    probe = weakref.ref(out)
    del out, first, second
    gc.collect()
    assert probe() is None


def _error_of(call):
    with pytest.raises((hg.KernelArgumentError, hg.LaunchConfigError)) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize("case", ["other dtype", "cpu tensor", "non-contiguous", "output overlaps input",
                                  "output is an input", "misaligned float4"])
def test_every_check_still_holds_after_a_signature_was_planned(case, generator, key_path):
    """The same shapes with one thing wrong, after a good call planned the signature: the same error
    as a fresh kernel gives, never a launch."""
    source = VECTOR_ADD if case != "misaligned float4" else r"""
    __global__ void copy4(const float4* x, float4* y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n / 4) y[i] = x[i];
    }"""
    planned, fresh = hg.hip(source), hg.hip(source)
    n = 4096
    a, b = randn(n, generator=generator), randn(n, generator=generator)
    out = torch.full_like(a, float("nan"))
    if case == "misaligned float4":
        planned(a, out, n)
        storage = randn(n + 1, generator=generator)
        bad = lambda kernel: kernel(storage[1:], out, n)  # noqa: E731
    else:
        planned(a, b, out, n)
        bad_inputs = {
            "other dtype": lambda: (a.double(), b, out),
            "cpu tensor": lambda: (a.cpu(), b, out),
            "non-contiguous": lambda: (randn(2 * n, generator=generator)[::2], b, out),
            "output overlaps input": lambda: (a, b, a),
            "output is an input": lambda: (a, out, out),
        }[case]()
        bad = lambda kernel: kernel(*bad_inputs, n)  # noqa: E731
    before = out.clone()
    message = _error_of(lambda: bad(planned))
    assert message == _error_of(lambda: bad(fresh))
    torch.cuda.synchronize()
    assert torch.equal(out, before) or case in ("output is an input",), "nothing may launch on a refused call"


def test_kernel_calls_and_prepared_launches_replay_in_a_cuda_graph(generator, key_path):
    """Captured once, replayed on fresh data copied into the captured inputs: right every time."""
    kernel = hg.hip(VECTOR_ADD)
    a, b = randn(4097, generator=generator), randn(4097, generator=generator)
    out, out_prepared = torch.empty_like(a), torch.empty_like(a)
    kernel(a, b, out, a.numel())                      # plan the signature before capture
    prepared = kernel.prepare(b, a, out_prepared, a.numel())
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kernel(a, b, out, a.numel())
        prepared()
    for _ in range(3):
        a.copy_(randn(4097, generator=generator))
        b.copy_(randn(4097, generator=generator))
        out.fill_(float("nan"))
        out_prepared.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, a + b) and torch.equal(out_prepared, b + a)


SCALED_ADD = r"""
__global__ void scaled_add(float* out, float alpha, const float* x, const float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = alpha * x[i] + y[i];
}"""


def test_planned_calls_write_pointers_around_scalars_and_follow_launch_options(generator, key_path):
    """Pointers in slots 0, 2 and 3 (two packed runs around alpha): every planned call right on fresh
    tensors, with default launch options and with block/grid given (a key of its own)."""
    kernel = hg.hip(SCALED_ADD)
    n = 5000
    for options in ({}, {"block": 128, "grid": (n + 127) // 128}, {"block": [64], "grid": [(n + 63) // 64]}):
        for alpha in (0.5, 0.5, -3.0, -3.0):
            x, y = randn(n, generator=generator), randn(n, generator=generator)
            out = torch.full_like(x, float("nan"))
            assert kernel(out, alpha, x, y, n, **options) is out
            torch.testing.assert_close(out, alpha * x + y)
    assert len(kernel._plans) == 6           # 3 launch options x 2 alphas


def test_a_float_block_is_refused_after_the_same_int_block_was_planned(generator, key_path):
    planned, fresh = hg.hip(VECTOR_ADD), hg.hip(VECTOR_ADD)
    a, b = randn(4096, generator=generator), randn(4096, generator=generator)
    out = torch.empty_like(a)
    planned(a, b, out, 4096, block=256)
    planned(a, b, out, 4096, block=128)
    for bad in ({"block": 256.0}, {"block": 128.0}, {"shared_mem": 0.0}):
        message = _error_of(lambda: planned(a, b, out, 4096, **bad))
        assert message == _error_of(lambda: fresh(a, b, out, 4096, **bad))
