"""What a kernel's name says: which function it is, and who wrote it (hello-gpu, Triton, or a library).

Profilers print kernel names in different spellings. On the H200, torch.profiler (CUPTI) writes
``void vector_add<float>(float const*, float const*, float*, long long)`` and ncu writes
``void vector_add<float>(const T1 *, const T1 *, T1 *, long long)`` (template parameters left as
``T1``); rocprofv3 may truncate to ``vector_add``. :func:`kernel_key` reduces each to the bare function name (``vector_add``), so rows
from different tools can be joined.

The source label is the point of a kernel table: a rung that was meant to run its own kernel but
shows ``at::native::vectorized_elementwise_kernel`` or a cuBLAS ``sm90_xmma_gemm_...`` has fallen
back to a library, and that must be visible at a glance, not after reading a 200-character name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

OURS = "hello-gpu"
TRITON = "triton"
LIBRARY = "library"
OTHER = "other"

# Name patterns of the libraries a PyTorch program calls into, on NVIDIA and on AMD. First match wins.
LIBRARY_PATTERNS: tuple[tuple[str, re.Pattern], ...] = tuple((label, re.compile(pattern, re.IGNORECASE)) for label, pattern in (
    ("PyTorch ATen", r"\bat::|\bc10::|elementwise_kernel|reduce_kernel"),
    ("CUTLASS", r"cutlass"),
    # cuBLAS kernels: sm90_xmma_gemm_..., nvjet_... (Hopper cuBLAS 12.x), ampere_sgemm_..., gemv2T_kernel...
    ("cuBLAS", r"cublas|\bsm\d+_xmma|^xmma_|^nvjet|^(ampere|turing|volta|maxwell|hopper)_|gemv|gemmk|gemmSN"),
    ("cuDNN", r"cudnn"),
    ("CUB/Thrust", r"\bcub::|\bthrust::|\bcub\d*::"),
    ("NCCL", r"nccl"),
    ("FlashAttention", r"flash_?attn|\bflash::"),
    # rocBLAS/hipBLASLt kernels come from Tensile: Cijk_Ailk_Bljk_...
    ("rocBLAS/hipBLASLt", r"^Cijk_|rocblas|hipblaslt|tensile"),
    ("MIOpen", r"miopen"),
    ("Composable Kernel", r"\bck::|ck_tile"),
    ("HIP runtime", r"__amd_rocclr_"),
))

# Kernels torch.compile (Inductor) generates are Triton kernels named triton_<kind>_fused_...
INDUCTOR_KERNEL = re.compile(r"^triton_(poi|red|per|tem|for|unk|mm|bmm)_")


def _without_templates(text: str) -> str:
    """``vector_add<float, std::array<char*, 3> >`` -> ``vector_add``: drop every <...>, nested."""
    result, depth = [], 0
    for character in text:
        if character == "<":
            depth += 1
        elif character == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            result.append(character)
    return "".join(result)


def _without_parameters(text: str) -> str:
    """Cut at the first "(" outside template brackets: the parameter list starts there."""
    depth = 0
    for index, character in enumerate(text):
        if character == "<":
            depth += 1
        elif character == ">":
            depth = max(depth - 1, 0)
        elif character == "(" and depth == 0:
            return text[:index]
    return text


def kernel_key(name: str) -> str:
    """The bare function name of a kernel, the same whichever tool printed it.

    ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` -> ``vectorized_elementwise_kernel``;
    ``void vector_add<float>(const float *, ...)`` -> ``vector_add``; ``add_kernel`` -> ``add_kernel``.
    """
    text = name.strip().replace("(anonymous namespace)", "anonymous_namespace")
    text = _without_templates(_without_parameters(text)).strip()
    words = text.split()
    last = words[-1] if words else text       # drop the return type ("void")
    return last.split("::")[-1] or name.strip()


def library_name(name: str) -> str | None:
    """Which library a kernel name belongs to, or None when no known pattern matches."""
    for label, pattern in LIBRARY_PATTERNS:
        if pattern.search(name):
            return label
    return None


def kernel_source(name: str, *, ours: Iterable[str] = (), triton: Iterable[str] = ()) -> tuple[str, str | None]:
    """(source, library) of a kernel: ``("hello-gpu", None)``, ``("triton", None)``, ``("library", "cuBLAS")``
    or ``("other", None)``.

    ``ours`` and ``triton`` are the bare names (or full names) of the kernels the caller itself launches:
    the ``__global__`` functions of a HIP rung, the ``@triton.jit`` functions of a Triton rung.
    """
    key = kernel_key(name)
    if key in {kernel_key(n) for n in ours}:
        return OURS, None
    if key in {kernel_key(n) for n in triton} or INDUCTOR_KERNEL.match(key):
        return TRITON, None
    library = library_name(name)
    if library is not None:
        return LIBRARY, library
    return OTHER, None


def display_name(name: str, width: int = 56) -> str:
    """A kernel name short enough for a table column: no parameter list, no ``void``, cut with "…"."""
    text = _without_parameters(name.strip()).removeprefix("void ").strip() or name.strip()
    return text if len(text) <= width else text[:width - 1] + "…"
