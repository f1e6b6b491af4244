"""``%%hip`` / ``%%cuda`` cell magics (CPU tier): real NVRTC compiles with --arch, no GPU needed."""

from __future__ import annotations

import pytest

pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell

import hello_gpu
from hello_gpu.runtime import gpu_vendor

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


@pytest.fixture
def shell(monkeypatch, tmp_path):
    monkeypatch.setenv("HG_CACHE_DIR", str(tmp_path / "cache"))
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "hello_gpu")
    yield shell
    for name in ("vector_add", "warp_sum", "scale", "other"):
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
    capsys.readouterr()

    shell.run_cell_magic("hip", "scale --arch sm_90 -D BLOCK=64", BLOCKED)
    assert "scale" not in shell.user_ns
    err = capsys.readouterr().err
    assert "BLOCK must be 128" in err
    assert "Traceback" not in err


def test_help_prints_usage_and_binds_nothing(shell, capsys):
    assert shell.run_cell_magic("hip", "vector_add --help", VECTOR_ADD) is None
    out, err = capsys.readouterr()
    assert "--entry" in out and "usage: %%hip" in out
    assert "Traceback" not in out + err
    assert "vector_add" not in shell.user_ns


def test_compile_error_shows_user_line_and_keeps_old_binding(shell, capsys):
    assert shell.run_cell_magic("hip", "vector_add --arch sm_90", BROKEN) is None
    out, err = capsys.readouterr()
    assert "vector_add.hip:3:" in err
    assert "not_declared" in err and "^" in err
    assert "Traceback" not in out + err
    assert "vector_add" not in shell.user_ns

    shell.user_ns["vector_add"] = sentinel = object()
    shell.run_cell_magic("hip", "vector_add --arch sm_90", BROKEN)
    assert shell.user_ns["vector_add"] is sentinel


def test_signature_error_is_shown_without_traceback(shell, capsys):
    two = VECTOR_ADD + "__global__ void other_kernel(float* x) {}\n"
    shell.run_cell_magic("hip", "other --arch sm_90", two)  # NAME matches no kernel and there are two
    out, err = capsys.readouterr()
    assert "vector_add" in err and "other_kernel" in err
    assert "Traceback" not in out + err
    assert "other" not in shell.user_ns


@pytest.mark.skipif(gpu_vendor() is not None, reason="checks the GPU-less lazy path")
def test_without_arch_or_gpu_binds_and_notes_not_compiled(shell, capsys):
    shell.run_cell_magic("hip", "vector_add", VECTOR_ADD)
    kernel = shell.user_ns["vector_add"]
    assert isinstance(kernel, hello_gpu.Kernel)
    assert len(kernel.signature.parameters) == 4
    out, err = capsys.readouterr()
    assert "not compiled" in out and "--arch sm_90" in out
    assert "Traceback" not in out + err


@pytest.mark.parametrize("line", ["vector_add --bogus", "vector_add -O9", "", "vector_add 'unclosed",
                                  "not-a-name --arch sm_90"])
def test_bad_arguments_print_one_line_usage_error(shell, capsys, line):
    assert shell.run_cell_magic("hip", line, VECTOR_ADD) is None
    out, err = capsys.readouterr()
    assert err.startswith("%%hip: error:")
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in out + err
    assert "vector_add" not in shell.user_ns
