"""What every rms_norm HIP launcher of this ladder shares (not a rung: the registry reads only rung names).

The kernels index row r at r * columns, so x, weight and out must be contiguous, and anything else is
refused with a ValueError that names the problem, never silently copied.
"""

import torch

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# rows and columns are C ints; a loop adds up to a block (1024) to a column index, which must not wrap.
INT_LIMIT = 2**31 - 1024


def checked_output(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """The output tensor (allocated like x when None), after checking what the kernels assume."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        shape = tuple(getattr(x, "shape", ()))
        raise ValueError(f"rms_norm: x must be a 2-D tensor (rows, columns), got shape {shape}")
    if x.dtype not in DTYPES:
        raise ValueError(f"rms_norm: x has dtype {x.dtype}; these kernels take float32, bfloat16 or float16")
    if not x.is_contiguous():
        raise ValueError(f"rms_norm: x must be contiguous (row r at r * columns); its strides are {x.stride()}. "
                         f"Pass x.contiguous() if a copy is what you want")
    rows, columns = x.shape
    if rows >= INT_LIMIT or columns >= INT_LIMIT:
        raise ValueError(f"rms_norm: {rows}x{columns} is too large; rows and columns must be below 2^31 - 1024")
    if not isinstance(weight, torch.Tensor) or tuple(weight.shape) != (columns,):
        raise ValueError(f"rms_norm: weight must have shape ({columns},) to match x's columns, "
                         f"got {tuple(getattr(weight, 'shape', ()))}")
    if weight.dtype != x.dtype:
        raise ValueError(f"rms_norm: weight is {weight.dtype} and x is {x.dtype}; they must be the same dtype")
    if not weight.is_contiguous():
        raise ValueError(f"rms_norm: weight must be contiguous; its stride is {weight.stride()}")
    if weight.device != x.device:
        raise ValueError(f"rms_norm: weight is on {weight.device} and x on {x.device}")
    if out is None:
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    if tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(f"rms_norm: out must be {tuple(x.shape)} {x.dtype} on {x.device}, "
                         f"got {tuple(out.shape)} {out.dtype} on {out.device}")
    if not out.is_contiguous():
        raise ValueError(f"rms_norm: out must be contiguous; its strides are {out.stride()}")
    return out
