"""Launcher for v08_tuned_tiles.hip: one block per BM x BN tile of C, as the kernel was compiled.

The tile sizes live in the .hip file (HG_MATMUL_* defaults) and, during a sweep, in the defines the
sweep compiles with; the launcher reads them from the kernel's own compile options so the grid always
matches the kernel it launches.
"""

import re
from pathlib import Path

from hello_gpu.ops.matmul.launch import launch_tiles

SOURCE = Path(__file__).with_name("v08_tuned_tiles.hip")
TILE_NAMES = ("BM", "BN", "BK", "WM", "WN", "WNITER", "TM", "TN", "THREADS")


def default_tiles() -> dict[str, int]:
    """The HG_MATMUL_* defaults written in the .hip file: {"BM": 128, ...}."""
    text = SOURCE.read_text(encoding="utf-8")
    found = dict(re.findall(r"^#define HG_MATMUL_([A-Z]+) (\d+)$", text, re.M))
    missing = [name for name in TILE_NAMES if name not in found]
    if missing:
        raise ValueError(f"{SOURCE}: no #define HG_MATMUL_{missing[0]} default")
    return {name: int(found[name]) for name in TILE_NAMES}


DEFAULTS = default_tiles()


def tiles_of(kernel) -> dict[str, int]:
    """The tile sizes ``kernel`` was compiled with: its HG_MATMUL_* defines over the file's defaults."""
    defines = dict(getattr(getattr(kernel, "options", None), "defines", None) or ())
    chosen = {name.removeprefix("HG_MATMUL_"): int(value) for name, value in defines.items()
              if name.startswith("HG_MATMUL_")}
    return {**DEFAULTS, **chosen}


def run(kernel, a, b, out=None):
    tiles = tiles_of(kernel)
    return launch_tiles(kernel, a, b, out, tile_m=tiles["BM"], tile_n=tiles["BN"], threads=tiles["THREADS"])
