"""Persistent programs at the two shapes still short of their targets: a few programs per SM, each looping over rows.

eviction_sweep.py (records/nvidia-h200/eviction-sweep.json, run of commit c01ccac) found:
  1. softmax float32 4096x1024: one row a program on one warp with evict-first loads 1.027x
     torch.compile [1.019, 1.037]; the 1.1x Liger target needs ~1.0x torch.compile x 1.1 / 1.097.
  2. rms_norm bfloat16 8192x4096: no hint and no launch of the two designs above 1.008x Liger; the
     target is 1.05x. Every one-row-a-program launch runs 8192 rows as ~7.8 waves of resident
     programs (8 warps: 8 programs an SM, 1056 at once), each program loading its row, reducing, then
     storing, with nothing loading while it reduces.

A persistent program instead walks rows ``pid, pid + grid, ...`` and ``tl.range(..., num_stages=S)``
lets Triton issue the next row's load while this one is reduced (S >= 2); the rms_norm weight is
read once a program. The sweep runs 1 to 32 programs an SM, 1 to 8 warps and 1 to 3 stages, each
checked against a float64 reference and paired with the peer of its target (> 1: faster).

Found (run of 7963476): no gain. softmax at best 1.022x torch.compile (32 programs an SM, one warp,
no pipelining: one row a program again); rms_norm at best 0.970x Liger. Fewer resident programs
mean fewer bytes in flight, and the pipelined loads through shared memory did not make up for it.

    python benchmarks/persistent_sweep.py > records/nvidia-h200/persistent-sweep.json
"""

from __future__ import annotations

import json

import torch
import triton
import triton.language as tl

from eviction_sweep import rms_norm_case, softmax_case   # benchmarks/ is on the path when run as a script
from hello_gpu.ops.rms_norm.spec import EPS
from softmax_sweep import figures


@triton.jit
def softmax_persistent(x_ptr, out_ptr, rows, row_stride, COLUMNS: tl.constexpr, STAGES: tl.constexpr):
    columns = tl.arange(0, COLUMNS)
    for row in tl.range(tl.program_id(0), rows, tl.num_programs(0), num_stages=STAGES):
        offsets = row.to(tl.int64) * row_stride + columns
        x = tl.load(x_ptr + offsets, eviction_policy="evict_first").to(tl.float32)
        numerator = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + offsets, (numerator / tl.sum(numerator, axis=0)).to(out_ptr.dtype.element_ty))


@triton.jit
def rms_persistent(x_ptr, weight_ptr, out_ptr, rows, row_stride, eps, HIDDEN: tl.constexpr, STAGES: tl.constexpr):
    columns = tl.arange(0, HIDDEN)
    weight = tl.load(weight_ptr + columns).to(tl.float32)
    for row in tl.range(tl.program_id(0), rows, tl.num_programs(0), num_stages=STAGES):
        offsets = row.to(tl.int64) * row_stride + columns
        x = tl.load(x_ptr + offsets).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / HIDDEN + eps)
        tl.store(out_ptr + offsets, (x * scale * weight).to(out_ptr.dtype.element_ty))


def programs_per_sm_choices(warps: int) -> list[int]:
    """Programs an SM can hold at this many warps (2048 threads, at most 32 blocks), and fewer."""
    most = min(32, 64 // warps)
    return [count for count in (2, 4, 8, 16, 32) if count <= most]


def softmax_short_rows(multiprocessors: int) -> dict:
    x, out, expected, baseline = softmax_case(seed=61)
    rows, columns = x.shape
    results = []
    for warps in (1, 2, 4):
        for per_sm in programs_per_sm_choices(warps):
            for stages in (1, 2, 3):
                grid = (min(rows, per_sm * multiprocessors),)

                def launch(grid=grid, warps=warps, stages=stages):
                    softmax_persistent[grid](x, out, rows, x.stride(0), COLUMNS=columns, STAGES=stages,
                                             num_warps=warps)
                out.fill_(float("nan"))
                launch()
                torch.testing.assert_close(out.double(), expected, rtol=2e-5, atol=1e-7)
                results.append({"num_warps": warps, "programs_per_sm": per_sm, "num_stages": stages,
                                **figures(launch, baseline)})
    return {"shape": "4096x1024", "dtype": "float32", "vs": "v00_torch_compile", "configurations": results}


def rms_norm_mid_rows(multiprocessors: int) -> dict:
    x, weight, out, expected, (rtol, atol), baseline = rms_norm_case(seed=62)
    rows, hidden = x.shape
    results = []
    for warps in (4, 8):
        for per_sm in programs_per_sm_choices(warps):
            for stages in (1, 2, 3):
                grid = (min(rows, per_sm * multiprocessors),)

                def launch(grid=grid, warps=warps, stages=stages):
                    rms_persistent[grid](x, weight, out, rows, x.stride(0), EPS, HIDDEN=hidden, STAGES=stages,
                                         num_warps=warps)
                out.fill_(float("nan"))
                launch()
                torch.testing.assert_close(out.double(), expected, rtol=rtol, atol=atol)
                results.append({"num_warps": warps, "programs_per_sm": per_sm, "num_stages": stages,
                                **figures(launch, baseline)})
    return {"shape": "8192x4096", "dtype": "bfloat16", "vs": "peer_liger", "configurations": results}


def main() -> None:
    multiprocessors = torch.cuda.get_device_properties(0).multi_processor_count
    print(json.dumps({"device": torch.cuda.get_device_name(), "multiprocessors": multiprocessors,
                      "softmax": softmax_short_rows(multiprocessors),
                      "rms_norm": rms_norm_mid_rows(multiprocessors)}, indent=1))


if __name__ == "__main__":
    main()
