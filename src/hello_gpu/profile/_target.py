"""The child process a counter tool profiles: build one rung, call it, and mark the calls that count.

    python -m hello_gpu.profile._target OP RUNG --shape 16777216 --dtype float32 --calls 3

Warm-up calls run first, outside the marked range, so compiling (NVRTC, the Triton JIT) and first
touches of memory are not profiled; then ``--calls`` calls run inside an NVTX range named
:data:`NVTX_RANGE` (roctx on ROCm, through the same ``torch.cuda.nvtx``), with a synchronize inside
it so every kernel ends before the range does. ``ncu --nvtx --nvtx-include "hello_gpu_profile/"``
profiles exactly those kernels, whatever their names: a library fallback included.

``--shape`` is JSON (``16777216`` or ``[1823, 781]``) so the parent passes a shape without a parser
of its own. Nothing is printed: a tool's output is the only output.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

NVTX_RANGE = "hello_gpu_profile"
INPUT_SEED = 0


def _shape(text: str):
    value = json.loads(text)
    return tuple(value) if isinstance(value, list) else int(value)


def target_arguments(op: str, rung: str, shape, dtype: str, *, calls: int, warmup: int, root=None) -> list[str]:
    """The ``-m hello_gpu.profile._target ...`` arguments for one rung (after the Python executable)."""
    arguments = ["-m", "hello_gpu.profile._target", op, rung, "--shape", json.dumps(shape), "--dtype", dtype,
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
    parser.add_argument("--shape", type=_shape, required=True)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--root")
    args = parser.parse_args(argv)

    import torch

    from ..ops import load_op
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
