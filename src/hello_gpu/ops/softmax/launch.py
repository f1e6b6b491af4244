"""What every softmax HIP launcher of this ladder shares (not a rung: the registry reads only rung names).

The kernels find row r at r * columns, so x and out must be contiguous, and anything else is refused
with a ValueError that names the problem, never silently copied (a copy would be timed too).
"""

import torch


def checked_output(x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """The output tensor (allocated like x when None), after checking what the kernels assume."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        shape = tuple(getattr(x, "shape", ()))
        raise ValueError(f"softmax rungs take a 2-D (rows, columns) tensor; got shape {shape}")
    if not x.is_contiguous():
        raise ValueError(f"softmax rungs need a contiguous input (row stride = columns); got strides "
                         f"{tuple(x.stride())}: pass x.contiguous()")
    rows, columns = x.shape
    if columns >= 2**30 or rows >= 2**31:
        # The kernels index columns with an int and step past the end by up to a few thousand before
        # their loop test: 2^30 keeps that far from overflow. Rows index blocks, also as int.
        raise ValueError(f"softmax rungs take fewer than 2^30 columns and 2^31 rows; got {tuple(x.shape)}")
    out = torch.empty_like(x) if out is None else out
    if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {tuple(x.shape)} {x.dtype} tensor on {x.device}; got "
                         f"{tuple(out.shape)} {out.dtype} on {out.device}")
    return out


def warp_size(x: torch.Tensor) -> int:
    """32 on NVIDIA, 32 or 64 on AMD: the kernels' shuffles assume whole warps."""
    from hello_gpu.runtime.device import device_info
    return device_info(x.device.index).warp_size
