"""runtime/triton_jit (CPU tier): a real Triton compile error, made by compiling for sm_90 ahead of time
(Triton's compiler needs no GPU when given the target), placed at its line in the kernel's file."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

KERNEL_FILE = '''"""A Triton rung whose kernel does not compile: tl.arange needs a power-of-two length."""

import triton
import triton.language as tl


@triton.jit
def bad_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, 1000)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)
'''
BAD_LINE = 9                     # the tl.arange line of KERNEL_FILE, counted from 1


def _compile_for_sm_90(function):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    source = ASTSource(function, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                       constexprs={"BLOCK": 1024})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32))


def test_a_compile_error_is_placed_at_its_line_in_the_kernels_file(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)     # @triton.jit must make a JIT function
    from hello_gpu.ops.rung import MODULE_PREFIX, load_module
    from hello_gpu.runtime.triton_jit import compile_error_location, jit_functions, modules_named
    assert KERNEL_FILE.splitlines()[BAD_LINE - 1].strip().startswith("offsets =")
    path = tmp_path / "t01_bad_arange.py"
    path.write_text(KERNEL_FILE, encoding="utf-8")
    module = load_module(path, "test_bad_arange")
    assert [f.__name__ for f in jit_functions([module])] == ["bad_kernel"]
    with pytest.raises(Exception, match="power of 2") as caught:
        _compile_for_sm_90(module.bad_kernel)
    where = compile_error_location(caught.value, modules_named(MODULE_PREFIX))
    assert where is not None, str(caught.value)
    assert (where["file"], where["line"], where["function"]) == ("t01_bad_arange.py", BAD_LINE, "bad_kernel")
    assert KERNEL_FILE.splitlines()[BAD_LINE - 1][where["column"]:].startswith("tl.arange")


def test_an_error_without_a_position_or_from_elsewhere_has_no_location(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from hello_gpu.ops.rung import load_module
    from hello_gpu.runtime.triton_jit import compile_error_location, kernel_resources
    path = tmp_path / "t02_bad_arange.py"
    path.write_text(KERNEL_FILE, encoding="utf-8")
    module = load_module(path, "test_bad_arange_2")
    assert compile_error_location(ValueError("no node here"), [module]) is None
    with pytest.raises(Exception) as caught:
        _compile_for_sm_90(module.bad_kernel)
    assert compile_error_location(caught.value, []) is None            # its kernel is not among the modules
    assert kernel_resources([module]) == []                            # compiled ahead of time, never launched
