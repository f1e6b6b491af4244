"""CPU evidence for the matmul and linear rungs that missed their predictions on the H200 (run of 8b07192).

No GPU: each C++ rung is compiled for the arch its header declares (NVRTC, as the ladder builds it), each
Triton kernel by triton.compile for sm_90 with the 16-divisibility the JIT gives 4096-sized arguments,
and the SASS main loop (the backward branch with the most FFMA / HMMA / HGMMA) is read for:

- registers, shared memory and resident warps an SM (ptxas and the repository's occupancy table);
- instructions an iteration and how many are the multiply (FFMA, HMMA, HGMMA);
- serial global round trips an iteration: register-staged loads (LDG) issued before the first instruction
  that waits for one of them; a kernel that loads, waits, stores and loads again pays one latency each time;
- issue distance from each LDS / LDSM to the first instruction that waits for it (the shared-memory latency,
  ~30 cycles, is hidden only by the instructions in between or by other warps).

The wait and scoreboard fields come from the control bits of each instruction's second 64-bit word (bits
41-44 stall cycles, 46-48 the scoreboard an instruction sets, 52-57 the ones it waits for), the layout the
public Volta-and-later disassemblers decode; NVIDIA does not document it, so treat those two columns as a
reading of the compiler's schedule, not as a measurement.

    python benchmarks/matmul_sass_evidence.py
"""

from __future__ import annotations

import re
import statistics
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from hello_gpu.ops import load_op

MULTIPLY = ("FFMA", "HMMA", "HGMMA")
SIMT = (("v05_register_blocking_2d", 256, 0), ("v06_vectorized", 256, 0), ("v07_warp_tiling", 128, 0),
        ("v08_tuned_tiles", 256, 0))
# (rung, threads a block, dynamic shared bytes its launcher asks for: v10 4 x 18,944, v11 4 x 27,136)
TENSOR = (("v09_mma_sync", 256, 0), ("v10_cp_async_pipeline", 256, 75_776), ("v11_large_warp_tiles", 256, 108_544))
# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages): the three bfloat16 candidates of t04's autotuner, t03's first.
TRITON_MATMUL = ((128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4))


def instructions(sass: str) -> list[dict]:
    """Each SASS instruction with its opcode and control bits (never-executed ``@!PT`` padding left out)."""
    lines = sass.splitlines()
    found = []
    for number, line in enumerate(lines[:-1]):
        match = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);\s+/\* 0x[0-9a-f]{16} \*/", line)
        second = re.search(r"/\* 0x([0-9a-f]{16}) \*/", lines[number + 1])
        if not match or not second or "@!PT" in match.group(2):
            continue
        control = int(second.group(1), 16) >> 41
        text = re.sub(r"^@!?U?P[T0-9]+\s+", "", match.group(2).strip())
        found.append({"address": int(match.group(1), 16), "text": text, "op": text.split()[0],
                      "stall": control & 0xF, "sets": (control >> 5) & 7, "waits": (control >> 11) & 0x3F})
    return found


def main_loop(code: list[dict]) -> list[dict]:
    """The body of the backward branch whose body holds the most multiply instructions."""
    loops = []
    for instruction in code:
        target = re.search(r"BRA (?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", instruction["text"])
        backward = target and target.group(1) and int(target.group(1), 16) <= instruction["address"]
        if instruction["op"] == "BRA" and backward:
            start = int(target.group(1), 16)
            loops.append([y for y in code if start <= y["address"] <= instruction["address"]])
    return max(loops, key=lambda body: sum(y["op"].startswith(MULTIPLY) for y in body))


def serial_round_trips(body: list[dict]) -> int:
    """Runs of global loads into registers, each ended by an instruction that waits for one of them. Where
    the loop has a 16-byte path (LDG.E.128) beside its element-by-element edge path, only the 16-byte path
    counts: it is the one every benchmark shape takes."""
    wide = any(y["op"].startswith("LDG") and ".128" in y["op"] for y in body)
    pending, runs = set(), 0
    for instruction in body:
        if instruction["op"].startswith("LDG") and (".128" in instruction["op"] or not wide):
            runs += not pending
            pending.add(instruction["sets"])
        elif any(instruction["waits"] >> board & 1 for board in pending):
            pending = set()
    return runs


def shared_load_distances(body: list[dict]) -> list[int]:
    """Instructions issued between each LDS / LDSM that sets a scoreboard and the first one waiting on it."""
    distances = []
    for index, instruction in enumerate(body):
        if instruction["op"].startswith(("LDS", "LDSM")) and instruction["sets"] != 7:
            for gap, later in enumerate(body[index + 1:]):
                if later["waits"] >> instruction["sets"] & 1:
                    distances.append(gap)
                    break
    return distances


def describe(name: str, sass: str) -> str:
    body = main_loop(instructions(sass))
    ops = Counter(y["op"].split(".")[0] for y in body)
    multiply = sum(ops[kind] for kind in MULTIPLY)
    distances = shared_load_distances(body)
    near = f" median {statistics.median(distances):.0f} (min {min(distances)})" if distances else " (none)"
    return (f"{name:<34} loop {len(body):>5} instructions, {multiply:>5} multiply ({len(body) / multiply:.1f} "
            f"instructions a multiply), LDS/LDSM {ops['LDS'] + ops['LDSM']:>3}, "
            f"serial global round trips {serial_round_trips(body)}; LDS/LDSM to first use:{near}")


def compiled_rungs(op_name: str, dtype: str, rungs) -> None:
    op = load_op(op_name)
    for rung_id, threads, dynamic_shared in rungs:
        kernel = op.rung(rung_id).kernel(dtype=dtype)
        occupancy = kernel.occupancy(threads, shared_mem=dynamic_shared)
        print(f"{rung_id:<34} {kernel.resources.registers_per_thread} registers, {threads} threads, "
              f"{kernel.resources.static_shared_bytes + dynamic_shared} B shared: {occupancy}")
        print(describe(f"  {dtype}", kernel.asm("sass")))


def triton_sass(function, constants: dict, dtype: str, warps: int, stages: int,
                types: dict | None = None) -> tuple[str, str, str]:
    """SASS, the TTGIR and the resources (registers, shared bytes) of a Triton kernel compiled for sm_90
    without a GPU. Pointers are ``*dtype``, other arguments i32 unless ``types`` names them (``{"scale": "fp32"}``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from hello_gpu.runtime.kernel import _disassemble_cubin, _tool
    names = function.arg_names
    signature = {n: "constexpr" if n in constants else ("*" + dtype if n.endswith("_ptr") else (types or {}).get(n, "i32"))
                 for n in names}
    divisible = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if signature[n] != "constexpr"}
    compiled = triton.compile(ASTSource(function, signature=signature, constexprs=constants, attrs=divisible),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    with tempfile.TemporaryDirectory() as directory:
        cubin = Path(directory) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([_tool("cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True).stdout
    used = re.search(r"REG:(\d+)", usage)
    resources = f"{used.group(1) if used else '?'} registers, {compiled.metadata.shared} B shared"
    return _disassemble_cubin(compiled.asm["cubin"]), compiled.asm["ttgir"], resources


def triton_kernels() -> None:
    from hello_gpu.ops.rung import load_module
    grouped = load_module(load_op("matmul").rung("t02_grouped_order").path, "matmul_t02_for_evidence").grouped_kernel
    for block_m, block_n, block_k, warps, stages in TRITON_MATMUL:
        constants = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": 8, "IEEE": False}
        sass, _, resources = triton_sass(grouped, constants, "bf16", warps, stages)
        ops = Counter(y["op"].split(".")[0] for y in instructions(sass))
        print(f"t04 candidate {block_m}x{block_n}x{block_k} w{warps} s{stages}: {resources}; whole kernel "
              f"HGMMA {ops['HGMMA']}, LDGSTS (cp.async) {ops['LDGSTS']}, UTMALDG (TMA) {ops['UTMALDG']}")
    row_block = load_module(load_op("linear").rung("t01_row_block").path, "linear_t01_for_evidence").row_block_kernel
    for dtype, ieee in (("fp32", True), ("bf16", False)):
        constants = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 256, "IEEE": ieee}
        sass, ttgir, resources = triton_sass(row_block, constants, dtype, 4, 3)
        print(describe(f"linear t01_row_block {dtype}", sass) + f"; {resources}")
        for layout in re.findall(r"^#shared\d* = .*$", ttgir, flags=re.M):
            print(f"  {layout}")


if __name__ == "__main__":
    compiled_rungs("matmul", "float32", SIMT)
    compiled_rungs("matmul", "bfloat16", TENSOR)
    compiled_rungs("linear", "bfloat16", (("v01_warp_per_row", 256, 0),))
    compiled_rungs("linear", "float32", (("v01_warp_per_row", 256, 0),))
    triton_kernels()
