"""runtime/triton_jit (CPU tier): a real Triton compile error, made by compiling for sm_90 ahead of time
(Triton's compiler needs no GPU when given the target), placed at its line in the kernel's file.

Each test runs in a fresh child process without TRITON_INTERPRET: Triton's mode is fixed for a process
when triton.language is first imported, and the CPU tier imports it in interpreter mode (conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")

SRC = Path(__file__).resolve().parents[1] / "src"
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

CHILD = textwrap.dedent('''
    import json, sys
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from hello_gpu.ops.rung import MODULE_PREFIX, load_module
    from hello_gpu.runtime.triton_jit import compile_error_location, jit_functions, kernel_resources, modules_named

    module = load_module(sys.argv[1], "test_bad_arange")
    source = ASTSource(module.bad_kernel, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                                     "BLOCK": "constexpr"}, constexprs={"BLOCK": 1024})
    try:
        triton.compile(source, target=GPUTarget("cuda", 90, 32))
        error = None
    except Exception as caught:
        error = caught
    print(json.dumps({
        "jit_functions": [f.__name__ for f in jit_functions([module])],
        "message": str(error),
        "where": compile_error_location(error, modules_named(MODULE_PREFIX)),
        "where_without_its_module": compile_error_location(error, []),
        "where_of_a_plain_error": compile_error_location(ValueError("no node here"), [module]),
        "resources": kernel_resources([module]),
    }))
''')


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("triton-jit") / "t01_bad_arange.py"
    path.write_text(KERNEL_FILE, encoding="utf-8")
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    environment.update(PYTHONPATH=str(SRC), TRITON_DEFAULT_FP_FUSION="1")
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=300,
                          env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_compile_error_is_placed_at_its_line_in_the_kernels_file(compiled):
    assert KERNEL_FILE.splitlines()[BAD_LINE - 1].strip().startswith("offsets =")
    assert compiled["jit_functions"] == ["bad_kernel"]
    assert "power of 2" in compiled["message"]
    where = compiled["where"]
    assert (where["file"], where["line"], where["function"]) == ("t01_bad_arange.py", BAD_LINE, "bad_kernel")
    assert KERNEL_FILE.splitlines()[BAD_LINE - 1][where["column"]:].startswith("tl.arange")


def test_an_error_without_a_position_or_from_elsewhere_has_no_location(compiled):
    assert compiled["where_without_its_module"] is None          # its kernel is not among the modules given
    assert compiled["where_of_a_plain_error"] is None
    assert compiled["resources"] == []                          # compiled ahead of time, never launched
