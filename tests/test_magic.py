"""``%%hip`` / ``%%cuda`` cell magics (CPU tier): real NVRTC (and clang) compiles, no GPU needed."""

from __future__ import annotations

import pytest

pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell

from IPython.core.error import UsageError

import hello_gpu
from hello_gpu.runtime import gpu_vendor
from hello_gpu.runtime.clang_hip import INSTALL_HINT, find_clang

VECTOR_ADD = """\
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""

# Line 3 uses an undeclared name.
BROKEN = """\
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i] + not_declared;
}
"""

WARP_SUM = """\
__global__ void warp_sum(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
  if ((threadIdx.x & 31) == 0 && i < n) out[i / 32] = v;
}
"""

BLOCKED = """\
static_assert(BLOCK == 128, "BLOCK must be 128");
__global__ void scale(const float* x, float* out, float factor, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) out[i] = x[i] * factor;
}
"""


# A whole program in a cell: two kernels, a template, host code that NVRTC could not take.
PROGRAM = """\
#include <hip/hip_runtime.h>
#include <vector>
__global__ void add_one(float* x, std::size_t n) {
  std::size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
template <int K>
__global__ void times(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = K * x[i];
}
int main() {
  std::vector<float> h(16);
  float* d;
  hipMalloc(&d, 64);
  hipLaunchKernelGGL(add_one, dim3(1), dim3(16), 0, 0, d, 16);
  return 0;
}
"""


@pytest.fixture
def shell(monkeypatch, tmp_path):
    monkeypatch.setenv("HG_CACHE_DIR", str(tmp_path / "cache"))
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "hello_gpu")
    yield shell
    for name in ("vector_add", "warp_sum", "scale", "other", "program"):
        shell.user_ns.pop(name, None)


def test_hip_magic_compiles_and_binds_kernel(shell, capsys):
    result = shell.run_cell_magic("hip", "vector_add --entry vector_add --arch sm_90", VECTOR_ADD)
    assert result is None
    kernel = shell.user_ns["vector_add"]
    assert isinstance(kernel, hello_gpu.Kernel)
    assert kernel.binary.arch == "sm_90"
    assert len(kernel.signature.parameters) == 4
    assert kernel.file_name == "vector_add.hip"
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_entry_defaults_to_name_and_falls_back_to_only_kernel(shell):
    shell.run_cell_magic("hip", "vector_add --arch sm_90 -O2", VECTOR_ADD)
    assert shell.user_ns["vector_add"].entry == "vector_add"
    assert shell.user_ns["vector_add"].options.optimization == "-O2"
    shell.run_cell_magic("hip", "other --arch sm_90", VECTOR_ADD)  # NAME is not a kernel: the only one
    assert shell.user_ns["other"].entry == "vector_add"
    assert shell.user_ns["other"].file_name == "other.hip"


def test_cuda_magic_with_warp_shuffle(shell, capsys):
    shell.run_cell_magic("cuda", "warp_sum --arch sm_90 --fast-math", WARP_SUM)
    kernel = shell.user_ns["warp_sum"]
    assert isinstance(kernel, hello_gpu.Kernel)
    assert kernel.dialect == "cuda" and kernel.file_name == "warp_sum.cu"
    assert kernel.binary.arch == "sm_90"
    assert kernel.options.fast_math
    assert capsys.readouterr().err == ""


def test_define_reaches_the_compiler(shell, capsys):
    shell.run_cell_magic("hip", "scale --arch sm_90 -D BLOCK=128", BLOCKED)
    assert shell.user_ns["scale"].binary.arch == "sm_90"
    del shell.user_ns["scale"]

    with pytest.raises(UsageError, match="BLOCK must be 128") as caught:
        shell.run_cell_magic("hip", "scale --arch sm_90 -D BLOCK=64", BLOCKED)
    assert "scale.hip:2:" in str(caught.value)        # the %%hip line is the cell's line 1
    assert "scale" not in shell.user_ns


def test_help_as_the_readme_shows_it(shell, capsys):
    # Alone in a cell: IPython refuses an empty cell magic, so the extension turns it into %hip --help.
    result = shell.run_cell("%%hip --help")
    out, err = capsys.readouterr()
    assert result.success, err
    assert "usage: %%hip" in out and "--entry" in out and "--arch" in out
    assert "empty" not in out + err and "Traceback" not in out + err
    assert shell.run_cell_magic("hip", "vector_add --help", VECTOR_ADD) is None
    assert shell.run_cell("%%cuda -h").success
    assert "usage: %%cuda" in capsys.readouterr().out
    assert "vector_add" not in shell.user_ns


def test_failed_compile_fails_the_cell_at_the_cells_own_line(shell, capsys):
    result = shell.run_cell("%%hip vector_add --arch sm_90\n" + BROKEN)
    out, err = capsys.readouterr()
    assert not result.success                         # the notebook shows the cell as failed
    assert isinstance(result.error_in_exec, UsageError)
    # BROKEN's third line is the cell's fourth: the %%hip line counts as line 1.
    assert "vector_add.hip:4:" in err and "    4 |" in err
    assert "not_declared" in err and "^" in err
    assert "Traceback" not in out + err
    assert "vector_add" not in shell.user_ns

    shell.user_ns["vector_add"] = sentinel = object()
    assert not shell.run_cell("%%hip vector_add --arch sm_90\n" + BROKEN).success
    assert shell.user_ns["vector_add"] is sentinel


def test_whole_program_cell_binds_every_kernel(shell, capsys):
    shell.run_cell_magic("hip", "program --arch sm_90", PROGRAM)
    program = shell.user_ns["program"]
    assert program.kernels == ["add_one", "times"]
    assert program.add_one.signature.parameters[1].c_type == "std::size_t"
    assert program.add_one.binary.arch == "sm_90"
    assert program["times<3>"].binary.lowered_name == "_Z5timesILi3EEvPKfPfi"
    assert [part.what for part in program.left_out] == ["#include <vector>", "function main()"]
    out = capsys.readouterr().out
    assert 'program.add_one, program["times<...>"]' in out


def test_signature_error_names_the_type(shell):
    with pytest.raises(UsageError, match=r"has type 'std::string'") as caught:
        shell.run_cell_magic("hip", "k --arch sm_90", "__global__ void k(float* x, std::string s) {}\n")
    assert "struct" not in str(caught.value)
    assert "size_t" in str(caught.value)              # the message lists what is supported


@pytest.mark.skipif(gpu_vendor() is not None, reason="checks the GPU-less path")
def test_without_arch_or_gpu_compiles_for_a_check_target(shell, capsys):
    shell.run_cell_magic("hip", "vector_add", VECTOR_ADD)
    kernel = shell.user_ns["vector_add"]
    assert isinstance(kernel, hello_gpu.Kernel)
    assert kernel.binary.arch == "sm_90"
    out, err = capsys.readouterr()
    assert "compiled for sm_90 as a check" in out
    with pytest.raises(UsageError, match="not_declared"):      # a mistake shows at once, not at the first call
        shell.run_cell_magic("hip", "vector_add", BROKEN)


@pytest.mark.skipif(find_clang() is None, reason=f"no clang for the AMD path ({INSTALL_HINT})")
def test_amd_arch_without_hip_python_compiles_through_clang(shell, capsys):
    shell.run_cell_magic("hip", "vector_add --arch gfx1201", VECTOR_ADD)
    kernel = shell.user_ns["vector_add"]
    assert kernel.binary.arch == "gfx1201" and kernel.binary.vendor == "amd"
    assert "amdgcn-amd-amdhsa--gfx1201" in kernel.asm("isa")
    with pytest.raises(UsageError, match=r"vector_add.hip:4:\d+: error: use of undeclared identifier 'not_declared'"):
        shell.run_cell_magic("hip", "vector_add --arch gfx1201", BROKEN)


@pytest.mark.parametrize("line", ["vector_add --bogus", "vector_add -O9", "", "vector_add 'unclosed",
                                  "not-a-name --arch sm_90"])
def test_bad_arguments_are_a_one_line_usage_error(shell, capsys, line):
    with pytest.raises(UsageError) as caught:
        shell.run_cell_magic("hip", line, VECTOR_ADD)
    message = str(caught.value)
    assert message.startswith("%%hip: error:")
    assert len(message.strip().splitlines()) == 1
    assert "vector_add" not in shell.user_ns
