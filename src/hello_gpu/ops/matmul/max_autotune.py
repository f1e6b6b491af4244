"""torch.compile in max-autotune with its compile time bounded, for the matmul and linear peers (not a rung:
the registry reads only rung names; their records hash this file with them).

Inductor's "max-autotune-no-cudagraphs" options: its Triton GEMM templates and ATen's vendor-BLAS call
timed at each shape, the fastest kept. No CUDA graphs (mode "max-autotune" adds them): the time is the
kernels', as for every rung. Backends ATEN and TRITON: CUTLASS's templates compile for minutes, and
Inductor's CPP backend is for CPU tensors. The DEFAULT search space (EXHAUSTIVE multiplies the
candidates). Each shape's template precompilation stops after SECONDS: the templates not compiled by
then are dropped from the search (Inductor marks them failed and times the rest), never waited for.
"""

from hello_gpu.ops.rung import compile_per_shape

SECONDS = 120
OPTIONS = {"max_autotune": True, "coordinate_descent_tuning": True, "triton.cudagraphs": False,
           "max_autotune_gemm_backends": "ATEN,TRITON", "max_autotune_gemm_search_space": "DEFAULT",
           "precompilation_timeout_seconds": SECONDS}


def compiled(function):
    """``function`` compiled per shape with OPTIONS (hello_gpu.ops.rung.compile_per_shape)."""
    return compile_per_shape(function, OPTIONS)
