"""The child process a counter tool profiles: build one rung, call it, and mark the calls that count.

    python -m hello_gpu.profile._target OP RUNG --shape 16777216 --dtype float32 --calls 3

Warm-up calls run first, outside the marked range, so compiling (NVRTC, the Triton JIT) and first
touches of memory are not profiled; then ``--calls`` calls run inside an NVTX range named
:data:`NVTX_RANGE` (roctx on ROCm, through the same ``torch.cuda.nvtx``), with a synchronize inside
it so every kernel ends before the range does. ``ncu --nvtx --nvtx-include "hello_gpu_profile/"``
profiles exactly those kernels, whatever their names: a library fallback included.

``--shape`` is written by :func:`~hello_gpu.ops.shapes.shape_label` (``2^24``, ``1823x781``) and read
back by :func:`~hello_gpu.ops.shapes.parse_shape`, the command line's own parser. Nothing is printed:
a tool's output is the only output.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..ops import load_op
from ..ops.shapes import parse_shape, shape_label

NVTX_RANGE = "hello_gpu_profile"
INPUT_SEED = 0


def target_arguments(op: str, rung: str, shape, dtype: str, *, calls: int, warmup: int, root=None) -> list[str]:
    """The ``-m hello_gpu.profile._target ...`` arguments for one rung (after the Python executable)."""
    label = shape_label(shape)
    try:
        readable = parse_shape(label) == (tuple(shape) if isinstance(shape, (tuple, list)) else shape)
    except ValueError:
        readable = False
    if not readable:                        # a 1-tuple or an empty shape has no label of its own
        raise ValueError(f"shape {shape!r} cannot be passed to the profiled process: write it as "
                         f"an int (1-D) or a tuple of two or more sizes")
    arguments = ["-m", "hello_gpu.profile._target", op, rung, "--shape", label, "--dtype", dtype,
                 "--calls", str(calls), "--warmup", str(warmup)]
    if root is not None:
        arguments += ["--root", str(root)]
    return arguments


def child_environment() -> dict:
    """The parent's environment, with this package importable in the child wherever it lives."""
    environment = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parents[2])
    paths = [package_parent] + [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    environment["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return environment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hello_gpu.profile._target")
    parser.add_argument("op")
    parser.add_argument("rung")
    parser.add_argument("--shape", type=parse_shape, required=True)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--root")
    args = parser.parse_args(argv)

    import torch

    op = load_op(args.op, args.root)
    built = op.rung(args.rung).build()
    inputs = op.spec.make_inputs(args.shape, args.dtype, seed=INPUT_SEED, distribution="normal", device="cuda")
    for _ in range(args.warmup):
        built(*inputs)
    torch.cuda.synchronize()
    with torch.cuda.nvtx.range(NVTX_RANGE):
        for _ in range(args.calls):
            built(*inputs)
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
