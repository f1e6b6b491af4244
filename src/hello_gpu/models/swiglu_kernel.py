"""SwiGLU in one Triton kernel: the hello-gpu backend's replacement for ``llama.swiglu``.

Eager ``F.silu(gate) * up`` is two kernels (the SiLU, then the multiply), and the SiLU's result makes a
round trip through memory, rounded to bf16 on the way. One kernel reads the fused gate/up projection's
output once (at 8B decode, batch 1: 2 x 14336 values, 57 KB in bf16) and writes the product, computed
in float32 and rounded once. The bytes are too few to matter; the launch is what the kernel saves:
32 launches a decode step at 8B (about 1.2 us each from a CUDA graph), the prediction ~40 us a step.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .dependent_launch import checked, launch_options, wait_then_release


@triton.jit
def _swiglu_rows(gate_up_ptr, out_ptr, width, row_stride, BLOCK: tl.constexpr, PDL: tl.constexpr):
    wait_then_release(PDL)
    row = tl.program_id(0)
    columns = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = columns < width
    source = gate_up_ptr + row * row_stride
    gate = tl.load(source + columns, mask=inside, other=0.0).to(tl.float32)
    up = tl.load(source + width + columns, mask=inside, other=0.0).to(tl.float32)
    silu = gate / (1.0 + tl.exp(-gate))
    tl.store(out_ptr + row * width + columns, (silu * up).to(out_ptr.dtype.element_ty), mask=inside)


BLOCK = 1024      # 14336 / 1024 = 14 programs a row at 8B: enough to spread one token over the SMs' loads


def swiglu(gate_up: torch.Tensor, pdl: bool = False) -> torch.Tensor:
    """:func:`hello_gpu.models.llama.swiglu`: ``silu(gate) * up`` for ``gate_up = [gate | up]`` on the last
    dimension, float16, bfloat16 or float32, rows of contiguous values. ``pdl``: launched as a programmatic
    dependent launch (:mod:`.dependent_launch`)."""
    if gate_up.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"swiglu: gate_up is {gate_up.dtype}; the kernel takes float16, bfloat16 or float32")
    if gate_up.dim() < 1 or gate_up.shape[-1] % 2:
        raise ValueError(f"swiglu: the last dimension holds gate and up, so it must be even; got {tuple(gate_up.shape)}")
    width = gate_up.shape[-1] // 2
    rows = gate_up.reshape(-1, 2 * width)           # a view for the model's contiguous (B, T, 2I)
    if rows.stride(-1) != 1:
        raise ValueError("swiglu: the last dimension must be contiguous")
    pdl = checked(pdl, gate_up.device)
    out = torch.empty((*gate_up.shape[:-1], width), device=gate_up.device, dtype=gate_up.dtype)
    if out.numel():
        _swiglu_rows[(rows.shape[0], triton.cdiv(width, BLOCK))](rows, out, width, rows.stride(0), BLOCK=BLOCK,
                                                                 PDL=pdl, **launch_options(pdl))
    return out
