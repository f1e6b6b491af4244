"""Kernel tables (CPU tier): kernel names and sources, torch.profiler traces parsed, the table rendered.

The CUDA traces under tests/fixtures/profile/ are real: torch.profiler (torch 2.11, CUDA 13) on the
H200, 10 profiled calls each. The ROCm trace is hand-made in kineto's format (see the README there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from rich.console import Console

from hello_gpu.profile.kernel_names import display_name, kernel_key, kernel_source
from hello_gpu.profile.kernel_table import CALL_LABEL, KernelTable, kernel_table, table_from_trace
from hello_gpu.profile.ncu import METRICS, counters_from_output

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "profile"
ATEN_ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")


def trace(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def text_of(renderable, width: int = 220) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


# ------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize("name, key", [
    ("void vector_add<float>(float const*, float const*, float*, long long)", "vector_add"),   # CUPTI's (H200)
    ("void vector_add<float>(const T1 *, const T1 *, T1 *, long long)", "vector_add"),        # ncu's (H200)
    ("void vector_add<float>(const float *, const float *, float *, long)", "vector_add"),
    ("triton_red_fused_sum_0", "triton_red_fused_sum_0"),                                    # Inductor, both tools
    ("vector_add", "vector_add"),                                                          # rocprofv3 truncated
    (ATEN_ADD, "vectorized_elementwise_kernel"),
    ("add_kernel", "add_kernel"),
    ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4>(long)",
     "distribution_elementwise_grid_stride_kernel"),
])
def test_kernel_key_is_the_bare_function_name_whoever_printed_it(name, key):
    assert kernel_key(name) == key


@pytest.mark.parametrize("name, ours, triton, expected", [
    ("void vector_add<float>(float const*, float const*, float*, long)", ["vector_add"], [], ("hello-gpu", None)),
    ("add_kernel", [], ["add_kernel"], ("triton", None)),
    ("triton_poi_fused_add_0", [], [], ("triton", None)),                 # torch.compile's Inductor kernel
    (ATEN_ADD, ["vector_add"], [], ("library", "PyTorch ATen")),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel"
     "__5x_cublas", [], [], ("library", "cuBLAS")),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", [], [], ("library", "cuBLAS")),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_nn_align4>(Params)", [], [],
     ("library", "CUTLASS")),
    ("Cijk_Ailk_Bljk_SB_MT64x64x16_MI16x16x4x1_SN_1LDSB0", [], [], ("library", "rocBLAS/hipBLASLt")),
    ("my_mystery_kernel", ["vector_add"], [], ("other", None)),
])
def test_kernel_source_shows_a_library_fallback(name, ours, triton, expected):
    assert kernel_source(name, ours=ours, triton=triton) == expected


def test_our_own_kernel_wins_over_a_library_looking_name():
    # A rung may call its kernel "reduce_kernel"; the rung's own name list decides, not the pattern.
    assert kernel_source("reduce_kernel(float const*, float*, int)", ours=["reduce_kernel"])[0] == "hello-gpu"


def test_display_name_drops_parameters_and_return_type_and_cuts_long_names():
    assert display_name("void vector_add<float>(float const*, float const*, float*, long)") == "vector_add<float>"
    short = display_name(ATEN_ADD, width=30)
    assert len(short) == 30 and short.endswith("…") and short.startswith("at::native::vectorized")


# ------------------------------------------------------------------------------------------ traces


# Device durations of the 10 profiled calls in the H200 traces (microseconds, as the trace has them).
V01_DURATIONS = [63.135, 62.687, 62.047, 62.143, 62.624, 61.919, 62.687, 62.719, 61.855, 61.951]
V00_DURATIONS = [47.744, 47.583, 47.135, 47.2, 47.007, 48.672, 48.224, 48.449, 47.136, 47.104]


def test_cuda_trace_of_a_hip_rung():
    table = table_from_trace(trace("torch_trace_cuda_vector_add_v01.json"), ours=["vector_add"])
    assert table.calls == 10                          # ten "hello_gpu.call#i" annotations
    [row] = table.rows
    assert row.name == "void vector_add<float>(float const*, float const*, float*, long long)"
    assert row.key == "vector_add" and row.source == "hello-gpu"
    assert row.launches == 10                         # launched by cuLaunchKernel (category cuda_driver)
    assert row.grid == (65536, 1, 1) and row.block == (256, 1, 1)
    assert row.registers_per_thread == 16 and row.shared_memory_bytes == 0
    assert row.total_seconds == pytest.approx(sum(V01_DURATIONS) * 1e-6)
    assert table.per_call_seconds == pytest.approx([d * 1e-6 for d in V01_DURATIONS])
    assert table.fallback_warning() is None
    assert table.share(row) == pytest.approx(1.0)


def test_cuda_trace_of_the_strided_rung():
    table = table_from_trace(trace("torch_trace_cuda_vector_add_v02.json"), ours=["vector_add_chunked"])
    [row] = table.rows
    assert row.key == "vector_add_chunked" and row.source == "hello-gpu" and row.launches == 10
    assert row.grid == (4096, 1, 1) and row.block == (256, 1, 1)      # 2^24 / (256 threads x 16 elements)
    assert row.registers_per_thread == 25 and row.shared_memory_bytes == 0
    assert row.mean_seconds == pytest.approx(201.6254e-6)              # 3.2x v01's 62.4 us


def test_cuda_trace_of_two_triton_kernels_from_torch_compile():
    table = table_from_trace(trace("torch_trace_cuda_reduce_sum_v00_compile.json"))
    assert table.calls == 10 and [row.name for row in table.rows] == ["triton_red_fused_sum_0", "triton_per_fused_sum_1"]
    first, second = table.rows
    assert (first.source, second.source) == ("triton", "triton")       # Inductor's names say so
    assert (first.grid, first.block, first.registers_per_thread, first.shared_memory_bytes) == \
        ((128, 1, 1), (512, 1, 1), 26, 64)
    assert (second.grid, second.block, second.registers_per_thread, second.shared_memory_bytes) == \
        ((1, 1, 1), (64, 1, 1), 16, 8)
    assert first.launches == second.launches == 10
    assert first.total_seconds == pytest.approx(18.048e-6) and second.total_seconds == pytest.approx(10.594e-6)
    assert len(table.per_call_seconds) == 10 and table.per_call_seconds[0] == pytest.approx((1.952 + 1.057) * 1e-6)
    assert sum(table.per_call_seconds) == pytest.approx(table.total_seconds)


def test_a_rung_that_fell_back_to_torch_is_called_out():
    # The trace of torch.add, read as if a HIP rung named vector_add had produced it: a fallback.
    table = table_from_trace(trace("torch_trace_cuda_vector_add_v00.json"), ours=["vector_add"])
    [row] = table.rows
    assert row.name == ATEN_ADD and (row.source, row.library) == ("library", "PyTorch ATen")
    assert row.grid == (16384, 1, 1) and row.block == (128, 1, 1) and row.registers_per_thread == 32
    assert table.per_call_seconds == pytest.approx([d * 1e-6 for d in V00_DURATIONS])   # cudaLaunchKernel launches
    assert table.library_share() == pytest.approx(1.0)
    assert "100% of the device time is in library kernels (PyTorch ATen)" in table.fallback_warning()


def test_a_torch_rung_is_all_library_and_that_is_no_fallback():
    table = table_from_trace(trace("torch_trace_cuda_vector_add_v00.json"))     # no own kernels named
    assert table.rows[0].source == "library" and table.fallback_warning() is None


def test_rocm_trace_takes_shared_memory_from_the_launch_and_splits_launch_shapes():
    table = table_from_trace(trace("torch_trace_rocm_reduce_sum_v03.json"), ours=["reduce_sum_sequential_addressing"])
    assert table.calls == 2
    assert [row.grid[0] for row in table.rows] == [4096, 16, 1]          # one row per launch shape, largest time first
    for row in table.rows:
        assert row.source == "hello-gpu" and row.launches == 2 and row.block == (256, 1, 1)
        assert row.shared_memory_bytes == 1024      # only on the hipModuleLaunchKernel event, joined by correlation
        assert row.registers_per_thread is None     # ROCm traces carry no register count
    assert table.per_call_seconds == pytest.approx([(9.62 + 2.41 + 2.12) * 1e-6] * 2)


def test_events_without_kernels_or_labels():
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1.0, "dur": 2.0, "args": {}},
              {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "ts": 3.0, "dur": 1.0, "args": {}}]
    table = table_from_trace(events, calls=4)
    assert table.rows == [] and table.calls == 4 and table.per_call_seconds == []
    assert "no device kernels were recorded" in table.notes[0]


def test_dims_and_shared_memory_given_in_other_spellings():
    events = [{"ph": "X", "cat": "Kernel", "name": "k", "ts": 10.0, "dur": 4.0,
               "args": {"grid": "(8, 2, 1)", "block": 128, "static shared memory": 256,
                        "dynamic shared memory": 4096, "registers per thread": "40"}}]
    [row] = table_from_trace({"traceEvents": events}).rows
    assert row.grid == (8, 2, 1) and row.block == (128, 1, 1)
    assert row.shared_memory_bytes == 4352 and row.registers_per_thread == 40


# ------------------------------------------------------------------------------------------ profiling


def test_kernel_table_runs_torch_profiler_for_real(tmp_path):
    """On this CPU machine: the real profiler runs, exports its trace, and the table says there were no kernels."""
    import torch
    calls = []
    a, b = torch.randn(64), torch.randn(64)

    def add(x, y):
        calls.append(1)
        return x + y

    saved = tmp_path / "trace.json"
    table = kernel_table(add, a, b, warmup=2, repeats=3, trace_path=saved)
    assert len(calls) == 5 and table.calls == 3
    exported = json.loads(saved.read_text())
    labels = [e["name"] for e in exported["traceEvents"] if e.get("cat") == "user_annotation"]
    assert labels == [f"{CALL_LABEL}#{i}" for i in range(3)]
    if not torch.cuda.is_available():
        assert table.rows == [] and "no device kernels" in table.notes[0]


def test_every_profiler_start_keeps_cupti_attached_for_later_graphs(monkeypatch):
    """CUDA graphs crash after a CUPTI teardown (PyTorch's comment in torch/profiler/profiler.py): the kernel
    table, the model profile and the agent's profiled calls all set PyTorch's own workaround before they start,
    and a value the user set is kept."""
    import torch
    from hello_gpu.agent.anticheat import ProfiledCalls
    from hello_gpu.models.profile import profile_steps

    starts = [lambda: kernel_table(torch.add, torch.ones(4), torch.ones(4), warmup=0, repeats=1),
              lambda: profile_steps(lambda: torch.ones(4) * 2, steps=1, warmup=0),
              lambda: ProfiledCalls()]
    for start in starts:
        monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
        monkeypatch.delenv("DISABLE_CUPTI_LAZY_REINIT", raising=False)
        start()
        assert os.environ["TEARDOWN_CUPTI"] == "0" and os.environ["DISABLE_CUPTI_LAZY_REINIT"] == "1"
    monkeypatch.setenv("TEARDOWN_CUPTI", "1")
    starts[0]()
    assert os.environ["TEARDOWN_CUPTI"] == "1"


def test_hello_gpu_profile_is_the_package_and_calls_kernel_table():
    """Issue 6 asks for ``hello_gpu.profile(fn, ...)``: the subpackage of that name is callable."""
    import torch

    import hello_gpu
    import hello_gpu.profile as package
    assert hello_gpu.profile is package and isinstance(package, types.ModuleType) and callable(package)
    assert package.kernel_table is kernel_table and package.KernelTable is KernelTable    # still the package
    a, b = torch.randn(64), torch.randn(64)
    table = hello_gpu.profile(torch.add, a, b, warmup=1, repeats=2, title="torch.add")
    assert isinstance(table, KernelTable) and table.calls == 2 and table.title == "torch.add"
    if not torch.cuda.is_available():
        assert table.rows == [] and "no device kernels" in table.notes[0]


def test_import_hello_gpu_stays_light_and_profile_comes_on_first_use():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                                       os.environ.get("PYTHONPATH", "")]))
    code = ("import sys, hello_gpu; print('torch' in sys.modules, 'hello_gpu.profile' in sys.modules, "
            "'profile' in dir(hello_gpu)); p = hello_gpu.profile; print(type(p).__name__, p.__name__, callable(p), "
            "'torch' in sys.modules); hello_gpu.no_such_thing")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    lines = result.stdout.split("\n")
    assert lines[0] == "False False True"                       # no torch, no profile package on import hello_gpu
    assert lines[1] == "_CallableModule hello_gpu.profile True False"   # the package, callable, still no torch
    assert "AttributeError: module 'hello_gpu' has no attribute 'no_such_thing'" in result.stderr


# ------------------------------------------------------------------------------------------ rendering


def test_rendered_table_without_counters():
    table = table_from_trace(trace("torch_trace_rocm_reduce_sum_v03.json"), ours=["reduce_sum_sequential_addressing"],
                             title="reduce_sum v03")
    text = text_of(table)
    assert "reduce_sum v03 (2 calls profiled)" in text
    assert "reduce_sum_sequential_addressing" in text and "hello-gpu" in text and "4096" in text
    assert "DRAM MB/call" not in text                 # no counters, no counter columns


def test_counters_join_the_table_and_counted_bytes_meet_measured_bytes():
    """CUPTI and ncu spell the kernel differently ("float const*" / "const T1 *"): joined by bare name."""
    table = table_from_trace(trace("torch_trace_cuda_vector_add_v01.json"), ours=["vector_add"], title="v01")
    table.counted_bytes = 3 * 4 * 2**24               # the work model: read a and b, write out
    result = counters_from_output((FIXTURES / "ncu_raw_vector_add_v01.csv").read_text(), 0, calls=3,
                                  metrics=list(METRICS))
    table.with_counters(result)
    row = table.rows[0]
    assert row.counters is not None and row.counters.sectors_per_request == pytest.approx(4.0)
    assert row.counters.name == "void vector_add<float>(const T1 *, const T1 *, T1 *, long long)" != row.name
    comparison = table.bytes_comparison()
    assert comparison["measured_dram_bytes"] == pytest.approx(189_524_053.33)
    assert comparison["dram_read_bytes"] == pytest.approx(134_228_565.33)
    assert comparison["dram_write_bytes"] == pytest.approx(55_295_488)
    # Below the counted bytes: part of the output is still in the 60 MB L2 when the kernel ends.
    assert comparison["measured_over_counted"] == pytest.approx(0.9414, abs=1e-4)
    text = text_of(table, width=260)
    assert "DRAM MB/call" in text and "long_scoreboard 41.0" in text
    assert "bytes per call: counted 201 MB (work model), measured DRAM 190 MB (read 134, write 55.3): 0.94x" in text
    data = table.to_dict()
    assert data["kernels"][0]["counters"]["sectors_per_request"] == pytest.approx(4.0)
    assert data["kernels"][0]["counters"]["extra"] == {}
    assert data["kernels"][0]["launches_per_call"] == 1 and data["bytes"] == comparison
    json.dumps(data, allow_nan=False)                 # plain JSON, for records


def test_counters_of_two_triton_kernels_join_their_rows():
    table = table_from_trace(trace("torch_trace_cuda_reduce_sum_v00_compile.json"))
    table.with_counters(counters_from_output((FIXTURES / "ncu_raw_reduce_sum_v00_compile.csv").read_text(), 0,
                                             calls=3, metrics=list(METRICS)))
    first, second = table.rows
    assert first.counters.key == "triton_red_fused_sum_0" and second.counters.key == "triton_per_fused_sum_1"
    assert first.counters.launches == second.counters.launches == 3
    assert first.counters.dram_read_bytes / 3 == pytest.approx(4_198_059, abs=1)    # 2^20 floats: 4.19 MB
    assert table.bytes_comparison()["measured_dram_bytes"] == pytest.approx(4_201_898.67)


def test_counters_without_a_matching_kernel_leave_the_row_empty_and_say_why():
    table = table_from_trace(trace("torch_trace_cuda_vector_add_v00.json"))
    result = counters_from_output((FIXTURES / "ncu_permission_error.txt").read_text(), 1, calls=3,
                                  metrics=list(METRICS))
    table.with_counters(result)
    assert table.rows[0].counters is None
    assert any("ERR_NVGPUCTRPERM" in note for note in table.notes)
    assert table.bytes_comparison() is None
    assert isinstance(table, KernelTable) and "ERR_NVGPUCTRPERM" in text_of(table)
