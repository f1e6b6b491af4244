"""What a compiled kernel costs the chip: registers, shared memory, spills, and the occupancy that follows.

Registers and shared memory decide how many blocks fit on one multiprocessor at once; that is the
first number to look at when a kernel cannot hide memory latency. Without a GPU the figures come from
the compiler's report (``ptxas -v``); with one, from the driver's function attributes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .device import ArchLimits


@dataclass(frozen=True)
class Occupancy:
    block_threads: int
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limited_by: str               # "threads", "blocks", "registers" or "shared memory"

    @property
    def fraction(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm if self.max_warps_per_sm else 0.0

    def __str__(self) -> str:
        return (f"{self.blocks_per_sm} blocks/SM of {self.block_threads} threads = {self.warps_per_sm}/"
                f"{self.max_warps_per_sm} warps ({self.fraction:.0%}), limited by {self.limited_by}")


@dataclass(frozen=True)
class Resources:
    registers_per_thread: int
    static_shared_bytes: int
    local_bytes: int              # stack frame per thread (arrays indexed at run time, spills)
    spill_store_bytes: int | None   # None: the compiler's report was not available
    spill_load_bytes: int | None
    max_threads_per_block: int    # what this kernel can launch with, given its registers
    source: str                   # "ptxas" or "driver"

    def occupancy(self, limits: ArchLimits, block_threads: int, dynamic_shared_bytes: int = 0) -> Occupancy:
        return estimate_occupancy(limits, block_threads, self.registers_per_thread,
                                  self.static_shared_bytes + dynamic_shared_bytes)


def parse_ptxas_report(log: str) -> dict[str, int]:
    """Pick the numbers out of ``-Xptxas=-v`` lines ("Used 10 registers, ... 1024 bytes smem")."""
    def number(pattern: str) -> int:
        match = re.search(pattern, log)
        return int(match.group(1)) if match else 0

    return {
        "registers": number(r"Used (\d+) registers"),
        "shared": number(r"(\d+) bytes smem"),
        "stack": number(r"(\d+) bytes stack frame"),
        "spill_stores": number(r"(\d+) bytes spill stores"),
        "spill_loads": number(r"(\d+) bytes spill loads"),
    }


def resources_from_ptxas(log: str, limits: ArchLimits | None) -> Resources:
    report = parse_ptxas_report(log)
    if "Used " not in log:      # no -v report (see CUDA_CACHE_DISABLE in hello_gpu/__init__.py)
        report["spill_stores"] = report["spill_loads"] = None
    registers = max(report["registers"], 1)
    max_threads = 1024
    if limits is not None:
        per_warp = _round_up(registers * limits.warp_size, limits.register_granularity)
        max_threads = min(1024, (limits.registers_per_sm // per_warp) * limits.warp_size)
    return Resources(report["registers"], report["shared"], report["stack"], report["spill_stores"],
                     report["spill_loads"], max_threads, "ptxas")


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def estimate_occupancy(limits: ArchLimits, block_threads: int, registers_per_thread: int,
                       shared_bytes_per_block: int) -> Occupancy:
    """Blocks per multiprocessor from the four limits; the smallest one wins and is named."""
    warps_per_block = -(-block_threads // limits.warp_size)
    max_warps = limits.max_threads_per_sm // limits.warp_size
    candidates = {
        "threads": max_warps // warps_per_block,
        "blocks": limits.max_blocks_per_sm,
    }
    if registers_per_thread:
        per_warp = _round_up(registers_per_thread * limits.warp_size, limits.register_granularity)
        candidates["registers"] = limits.registers_per_sm // (per_warp * warps_per_block)
    if shared_bytes_per_block:
        candidates["shared memory"] = limits.shared_per_sm // shared_bytes_per_block
    limited_by = min(candidates, key=lambda k: candidates[k])
    blocks = max(candidates[limited_by], 0)
    return Occupancy(block_threads, blocks, blocks * warps_per_block, max_warps, limited_by)
