"""Is vector_add v06's bfloat16 loss its grid? The same kernel launched with two grids, paired.

v06 (one tile per block) is 0.994x torch.add in float32 but 0.90x in bfloat16 at 2^28 (records
vector_add.*, run of commit 01e365d). Its grid is ceil(n / 2048) blocks whatever the dtype; a
bfloat16 block covers 4096 elements, so half of the 131072 blocks find no tile and exit. The lead:
the block scheduler's time on those empty blocks. This launches v06's bfloat16 kernel with the
header's grid and with ceil(n / 4096), checks both against a float64 sum, and pairs each with
torch.add and the two with each other (> 1: faster).

    python benchmarks/vector_add_grid.py > records/nvidia-h200/vector_add-grid.json
"""

from __future__ import annotations

import json

import torch

from hello_gpu.ops import load_op
from softmax_sweep import figures     # benchmarks/ is on the path when this file runs as a script

N = 2**28
BLOCK = 256


def main() -> None:
    op = load_op("vector_add")
    a, b = op.spec.make_inputs(N, "bfloat16", seed=31, device="cuda")
    out = torch.empty_like(a)
    kernel = op.rung("v06_tile_per_block").kernel(dtype="bfloat16")
    expected = op.spec.reference(a, b)
    launches = {grid: (lambda grid=grid: kernel(a, b, out, N, block=BLOCK, grid=grid))
                for grid in (-(-N // 2048), -(-N // 4096))}
    results = []
    for grid, launch in launches.items():
        out.fill_(float("nan"))
        launch()
        torch.testing.assert_close(out.double(), expected, rtol=2**-7, atol=1.2e-38)
        results.append({"grid": grid, "elements_per_block": N // grid, "vs": "torch.add",
                        **figures(launch, lambda: torch.add(a, b), 1.0)})
    header_grid, tile_grid = launches
    results.append({"grid": tile_grid, "vs": f"grid {header_grid}",
                    **figures(launches[tile_grid], launches[header_grid], 1.0)})
    print(json.dumps({"device": torch.cuda.get_device_name(), "n": N, "dtype": "bfloat16",
                      "rung": "v06_tile_per_block", "results": results}, indent=1))


if __name__ == "__main__":
    main()
