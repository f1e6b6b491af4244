"""What every matmul HIP launcher of this ladder shares (not a rung: the registry reads only rung names).

The kernels read A at row * K + k and B at k * N + column, so both must be contiguous row-major and C
is written the same way: anything else (B given as ``weight.t()``, a strided view) is refused with a
ValueError naming the tensor, never silently copied (a copy would be timed too). The transposed-B
layout is the ``linear`` operator's.
"""

import math

import torch

# M, N and K are C ints; an index such as row * K + k is formed in 64 bits, but a tile loop adds up to
# a tile (256) to a row or column index, which must not wrap.
INT_LIMIT = 2**31 - 256


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def check_operands(op: str, pairs, dtypes, hint: str) -> None:
    """Each (name, tensor) of ``pairs`` is a contiguous 2-D tensor of one of ``dtypes``, all of one dtype
    and device; else a ValueError naming the operator, the tensor and what to do (``hint``)."""
    for name, tensor in pairs:
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != 2:
            raise ValueError(f"{op}: {name} must be a 2-D tensor, got shape {tuple(getattr(tensor, 'shape', ()))}")
        if tensor.dtype not in dtypes:
            raise ValueError(f"{op}: {name} is {_name(tensor.dtype)}; these kernels take "
                             f"{', '.join(_name(d) for d in dtypes)}")
        if not tensor.is_contiguous():
            raise ValueError(f"{op}: {name} must be contiguous row-major; its strides are {tuple(tensor.stride())}. "
                             f"{hint}")
    (first, a), *others = pairs
    for name, tensor in others:
        if tensor.dtype != a.dtype or tensor.device != a.device:
            raise ValueError(f"{op}: {first} is {_name(a.dtype)} on {a.device} and {name} {_name(tensor.dtype)} on "
                             f"{tensor.device}; they must match")


def output_for(op: str, a: torch.Tensor, m: int, n: int, k: int, out: torch.Tensor | None) -> torch.Tensor:
    """C of (m, n) like ``a``: ``out`` after checking it, or a new tensor; sizes checked against INT_LIMIT."""
    if max(m, n, k) >= INT_LIMIT:
        raise ValueError(f"{op}: M={m}, N={n}, K={k}: each must be below 2^31 - 256")
    if out is None:
        return torch.empty((m, n), dtype=a.dtype, device=a.device)
    if tuple(out.shape) != (m, n) or out.dtype != a.dtype or out.device != a.device or not out.is_contiguous():
        raise ValueError(f"{op}: out must be a contiguous ({m}, {n}) {_name(a.dtype)} tensor on {a.device}; got "
                         f"{tuple(out.shape)} {_name(out.dtype)} on {out.device}, strides {tuple(out.stride())}")
    return out


def checked_output(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, dtypes=(torch.float32,)) -> torch.Tensor:
    """C (allocated when None), after checking what the kernels assume: A (M, K) and B (K, N) contiguous,
    of one of ``dtypes``, on one device."""
    check_operands("matmul", (("a", a), ("b", b)), dtypes,
                   "For B = weight.t() of an nn.Linear weight use the linear operator; else pass b.contiguous()")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns must equal b's rows")
    return output_for("matmul", a, a.shape[0], b.shape[1], a.shape[1], out)


def launch_tiles(kernel, a, b, out, *, tile_m: int, tile_n: int, threads):
    """Check, then launch one block per (tile_m x tile_n) tile of C: grid x over the columns, y over the
    rows (N = 128256 makes 1002 column tiles of 128; y is limited to 65535 tiles: M < 8.3 million)."""
    out = checked_output(a, b, out)
    m, k = a.shape
    n = b.shape[1]
    if out.numel() == 0:
        return out
    grid = (math.ceil(n / tile_n), math.ceil(m / tile_m))
    kernel(a, b, out, m, n, k, block=threads, grid=grid)
    return out
