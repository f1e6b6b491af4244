"""How fast can the bytes of each missed target move at all? Copies of the same tensor, paired with the target's peer.

Three of issue 5's targets stay missed after the ladders of commits d982f25 and e343abb:
  1. softmax float32 4096x1024, >= 1.1x Liger: t10 1.083x [1.078, 1.098];
  2. rms_norm bfloat16 8192x4096, >= 1.05x Liger: t07 1.007x [1.000, 1.012], and no launch, hint
     or persistent design in eviction_sweep.py and persistent_sweep.py above 1.008x;
  3. softmax float32 8192x8192, >= 1.4x torch.compile: 1.15x.
Each of these operators reads its input once and writes its output once. So no kernel of it can be
faster than the fastest copy of the same tensor: if every copy here is below the target's ratio
over the peer, the target needs fewer bytes, not a better kernel. Timed with the ladder's cold
flush and paired with the peer (> 1: faster), with the 95% interval:
  - ``torch copy_``: ``out.copy_(x)``;
  - ``row copy``: a Triton copy with the best rung's launch (one row a program), no arithmetic;
  - ``tile copy``: a Triton copy in 16 KiB tiles, 4 warps, evict-first loads (vector_add's design);
  - the best rung itself, for scale.
The rms_norm copies also read the weight, as the operator does.

Found (run of d4a32f2): softmax 4096x1024, the fastest copy 1.079x Liger and t10 1.078x; rms_norm
8192x4096, torch copy_ 1.050x Liger but our Triton copies 0.968-0.989x and t07 1.006x; softmax
8192x8192, torch copy_ 1.186x torch.compile. All three targets are at or above the fastest copy.

    python benchmarks/copy_floor.py > records/nvidia-h200/copy-floor.json
"""

from __future__ import annotations

import json

import torch
import triton
import triton.language as tl

from hello_gpu.ops import load_op
from softmax_sweep import figures     # benchmarks/ is on the path when this file runs as a script

TILE_BYTES = 16 * 1024


@triton.jit
def row_copy(x_ptr, out_ptr, weight_ptr, row_stride, COLUMNS: tl.constexpr, WEIGHT: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * row_stride + tl.arange(0, COLUMNS)
    x = tl.load(x_ptr + offsets, eviction_policy="evict_first")
    if WEIGHT:      # rms_norm reads the weight every row (from L2): so does its copy
        x = x * tl.load(weight_ptr + tl.arange(0, COLUMNS), eviction_policy="evict_last")
    tl.store(out_ptr + offsets, x)


@triton.jit
def tile_copy(x_ptr, out_ptr, TILE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, eviction_policy="evict_first"))


def floors(op_name: str, shape, dtype: str, peer_id: str, best_id: str, row_warps: int) -> dict:
    op = load_op(op_name)
    inputs = op.spec.make_inputs(shape, dtype, seed=71, device="cuda")
    x = inputs[0]
    weight = inputs[1] if len(inputs) > 1 else x       # softmax: never read (WEIGHT=False)
    out = torch.empty_like(x)
    rows, columns = x.shape
    peer_rung = op.rung(peer_id).build()
    peer_rung(*inputs)                                  # a peer imports its package at its first call
    baseline = lambda: peer_rung(*inputs)              # noqa: E731
    best = op.rung(best_id).build()
    tile = TILE_BYTES // x.element_size()
    assert x.numel() % tile == 0 and x.is_contiguous()

    def launch_row_copy():
        row_copy[(rows,)](x, out, weight, x.stride(0), COLUMNS=columns, WEIGHT=len(inputs) > 1, num_warps=row_warps)

    functions = {
        "torch copy_": lambda: out.copy_(x),
        f"row copy ({row_warps} warps a row)": launch_row_copy,
        "tile copy (16 KiB, 4 warps)": lambda: tile_copy[(x.numel() // tile,)](x, out, TILE=tile, num_warps=4),
        best_id: lambda: best(*inputs),
    }
    results = []
    for name, function in functions.items():
        out.fill_(float("nan"))
        function()
        if "copy" in name and name != "torch copy_" and len(inputs) == 1:
            assert torch.equal(out, x), name            # a copy that does not copy is no floor
        results.append({"function": name, **figures(function, baseline, seconds=1.0)})
    return {"op": op_name, "shape": "x".join(map(str, shape)), "dtype": dtype, "vs": peer_id, "results": results}


def main() -> None:
    print(json.dumps({"device": torch.cuda.get_device_name(), "floors": [
        floors("softmax", (4096, 1024), "float32", "peer_liger", "t10_one_warp_per_row", row_warps=1),
        floors("rms_norm", (8192, 4096), "bfloat16", "peer_liger", "t07_static_width", row_warps=8),
        floors("softmax", (8192, 8192), "float32", "v00_torch_compile", "t10_one_warp_per_row", row_warps=16),
    ]}, indent=1))


if __name__ == "__main__":
    main()
