"""CPU evidence for the matmul and linear rungs that missed their predictions on the H200 (run of 8b07192),
and for the prediction of linear t02_streaming_gemv (not measured yet).

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
from types import SimpleNamespace

from hello_gpu.ops import load_op

MULTIPLY = ("FFMA", "HMMA", "HGMMA")
SIMT = (("v05_register_blocking_2d", 256, 0), ("v06_vectorized", 256, 0), ("v07_warp_tiling", 128, 0),
        ("v08_tuned_tiles", 256, 0), ("v17_prefetch_double_buffer", 256, 0), ("v19_thread_tile_8x16", 128, 0))
# (rung, threads a block, dynamic shared bytes its launcher asks for: v10 4 x 18,944, v11 4 x 27,136, v16 4 x 24,576)
TENSOR = (("v09_mma_sync", 256, 0), ("v10_cp_async_pipeline", 256, 75_776), ("v11_large_warp_tiles", 256, 108_544),
          ("v16_swizzled_double_buffered", 256, 98_304))
# Hopper rungs whose epilogues are compared: v14 stores C from the consumers' registers, v18 through shared
# memory and TMA.
HOPPER = ("v14_persistent_grouped", "v18_tma_store_epilogue")
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


def wide_path(body: list[dict]) -> list[dict]:
    """The loop as the 16-byte path runs it: its basic blocks less those holding a 4-byte global load
    (LDG.E without .128: the element-by-element edge path that K = 517 or an odd address takes). A loop
    with no 16-byte load is returned whole."""
    if not any(y["op"].startswith("LDG") and ".128" in y["op"] for y in body):
        return body
    targets = {int(m.group(1), 16) for y in body if (m := re.search(r"BRA (?:0x([0-9a-f]+))", y["text"]))}
    blocks, current = [], []
    for instruction in body:
        if instruction["address"] in targets and current:
            blocks.append(current)
            current = []
        current.append(instruction)
        if instruction["op"] == "BRA":
            blocks.append(current)
            current = []
    blocks.append(current)
    scalar = [b for b in blocks if any(y["op"].startswith("LDG") and ".128" not in y["op"] for y in b)]
    return [y for b in blocks if b not in scalar for y in b]


def register_banks(body: list[dict]) -> tuple[int, int, float]:
    """(FFMAs, those reading all three sources from one register bank, reused operands an FFMA). Bank =
    register number % 2 and a ``.reuse`` operand comes from the operand cache: the Volta-era reading of the
    public microbenchmarks; NVIDIA documents no register-bank rule for Hopper."""
    ffma = [y["text"] for y in body if y["op"].startswith("FFMA")]
    same_bank = reused = 0
    for text in ffma:
        sources = [part.strip() for part in text.split(None, 1)[1].split(",")][1:]
        reused += sum(source.endswith(".reuse") for source in sources)
        banks = {int(source[1:]) % 2 for source in sources if re.fullmatch(r"R\d+", source)}
        same_bank += len(banks) == 1 and all(re.fullmatch(r"R\d+", source) for source in sources)
    return len(ffma), same_bank, reused / max(1, len(ffma))


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
        sass = kernel.asm("sass")
        print(describe(f"  {dtype}", sass))
        if dtype == "float32":
            body = main_loop(instructions(sass))
            wide = wide_path(body)
            fmas = sum(y["op"].startswith("FFMA") for y in wide)
            ffma, same_bank, reused = register_banks(body)
            print(f"  {'16-byte path' if wide != body else 'whole loop'}: {len(wide)} instructions, {fmas} FFMA ({fmas / len(wide):.1%}); {same_bank} of {ffma} "
                  f"FFMA read three sources from one register bank; {reused:.2f} reused operands an FFMA")


def hopper_epilogues(dtype: str) -> None:
    """Where each Hopper rung's C goes: 4-byte global stores (STG) from the consumer threads, or shared stores (STS)
    that the TMA engine writes out (UTMASTG); with the wgmmas, loads and barriers beside them. Whole-kernel counts:
    the epilogue holds these kernels' only stores. Shared bytes: what each launcher asks for."""
    from hello_gpu.ops.matmul.tensor_cores import tile_constants
    from hello_gpu.ops.matmul.tensor_maps import hopper_shared_bytes
    from hello_gpu.ops.rung import load_module
    op = load_op("matmul")
    for rung_id in HOPPER:
        rung = op.rung(rung_id)
        tiles = tile_constants(rung.path)
        shared = hopper_shared_bytes(tiles)
        if "OutputTiles" in tiles:
            shared += load_module(rung.companion, f"matmul_{rung_id}_for_evidence").OUTPUT_BYTES
        kernel = rung.kernel(arch=rung.metadata.target[1], dtype=dtype)
        ops = Counter(y["op"].split(".")[0] for y in instructions(kernel.asm("sass")))
        names = ("HGMMA", "UTMALDG", "STG", "STS", "UTMASTG", "BAR", "SYNCS")
        counts = ", ".join(f"{name} {ops[name]}" for name in names)
        print(f"{rung_id:<34} {kernel.resources.registers_per_thread} registers, {tiles['Threads']} threads, "
              f"{shared} B shared: {kernel.occupancy(tiles['Threads'], shared_mem=shared)}")
        print(f"  {dtype:<32} {counts}")


def triton_sass(function, constants: dict, dtype: str, warps: int, stages: int,
                descriptors: dict | None = None, types: dict | None = None) -> tuple[str, str, str]:
    """SASS, the TTGIR and the resources (registers, shared bytes) of a Triton kernel compiled for sm_90
    without a GPU. Pointers are ``*dtype``, other arguments i32 unless ``types`` names them (``{"scale": "fp32"}``);
    ``descriptors``: {argument: block shape} of the host-side tensor descriptors it takes."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from hello_gpu.runtime.kernel import _disassemble_cubin, _tool
    names = function.arg_names
    descriptors = descriptors or {}
    signature = {n: "constexpr" if n in constants else ("*" + dtype if n.endswith("_ptr") else (types or {}).get(n, "i32"))
                 for n in names}
    signature.update({n: f"tensordesc<{dtype}[{', '.join(map(str, box))}]>" for n, box in descriptors.items()})
    divisible = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names)
                 if signature[n] != "constexpr" and n not in descriptors}
    compiled = triton.compile(ASTSource(function, signature=signature, constexprs=constants, attrs=divisible),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    with tempfile.TemporaryDirectory() as directory:
        cubin = Path(directory) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([_tool("cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True).stdout
    used = re.search(r"REG:(\d+)", usage)
    local = re.search(r"LOCAL:(\d+)", usage)
    resources = (f"{used.group(1) if used else '?'} registers, {compiled.metadata.shared} B shared, "
                 f"{local.group(1) if local else '?'} B local")
    return _disassemble_cubin(compiled.asm["cubin"]), compiled.asm["ttgir"], resources


def persistent_tma_lines(dtype: str = "bf16") -> list[str]:
    """t05's configurations, each compiled as its autotuner would launch it: registers, shared and local
    bytes, and the whole kernel's wgmma (HGMMA), TMA loads and stores (UTMALDG, UTMASTG), cp.async
    (LDGSTS) and local-memory (STL, LDL: spills) instructions."""
    from hello_gpu.ops.rung import load_module
    module = load_module(load_op("matmul").rung("t05_persistent_tma").path, "matmul_t05_for_evidence")
    lines = []
    for config in module.CONFIGS:
        sizes = config.kwargs
        # The boxes the launcher gives each descriptor for this configuration (its pre_hook sets them).
        holders = {name: SimpleNamespace() for name in ("a_desc", "b_desc", "c_desc")}
        module._set_boxes({**holders, **sizes})
        boxes = {name: holder.block_shape for name, holder in holders.items()}
        sass, _, resources = triton_sass(module.persistent_tma_kernel, dict(sizes), dtype, config.num_warps,
                                         config.num_stages, descriptors=boxes)
        ops = Counter(y["op"].split(".")[0] for y in instructions(sass))
        lines.append(f"t05 candidate {sizes['BLOCK_M']}x{sizes['BLOCK_N']}x{sizes['BLOCK_K']} w{config.num_warps} "
                     f"s{config.num_stages}: {resources}; whole kernel "
                     + ", ".join(f"{op} {ops[op]}" for op in ("HGMMA", "UTMALDG", "UTMASTG", "LDGSTS", "STL", "LDL")))
    return lines


def triton_kernels() -> None:
    from hello_gpu.ops.rung import load_module
    grouped = load_module(load_op("matmul").rung("t02_grouped_order").path, "matmul_t02_for_evidence").grouped_kernel
    for block_m, block_n, block_k, warps, stages in TRITON_MATMUL:
        constants = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": 8, "IEEE": False}
        sass, _, resources = triton_sass(grouped, constants, "bf16", warps, stages)
        ops = Counter(y["op"].split(".")[0] for y in instructions(sass))
        print(f"t04 candidate {block_m}x{block_n}x{block_k} w{warps} s{stages}: {resources}; whole kernel "
              f"HGMMA {ops['HGMMA']}, LDGSTS (cp.async) {ops['LDGSTS']}, UTMALDG (TMA) {ops['UTMALDG']}")
    for line in persistent_tma_lines():
        print(line)
    row_block = load_module(load_op("linear").rung("t01_row_block").path, "linear_t01_for_evidence").row_block_kernel
    for dtype, ieee in (("fp32", True), ("bf16", False)):
        constants = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 256, "IEEE": ieee}
        sass, ttgir, resources = triton_sass(row_block, constants, dtype, 4, 3)
        print(describe(f"linear t01_row_block {dtype}", sass) + f"; {resources}")
        for layout in re.findall(r"^#shared\d* = .*$", ttgir, flags=re.M):
            print(f"  {layout}")


# linear t02 (dtype, BLOCK_M, ROWS, stages): its base configuration at M = 1, the most sums a thread keeps
# (M x ROWS = 64) in bf16 and float32, M = 16 in bf16, which t02 leaves to t01 (the reason is here), and
# M x ROWS = 128, which it never compiles (the spills are here).
STREAMING_GEMV = (("bf16", 1, 4, 3), ("bf16", 8, 8, 3), ("bf16", 16, 4, 3), ("bf16", 16, 8, 3), ("fp32", 1, 4, 3),
                  ("fp32", 16, 4, 3))


def streaming_gemv() -> None:
    """linear t02: the weight's 16-byte cp.async copies, spills, and instructions a weight element in the
    main loop (each thread holds ROWS x PACK weight elements a step), against the ~18 (bf16) and ~37
    (float32) an SM can issue per element at 0.85 of copy bandwidth."""
    from hello_gpu.ops.rung import load_module
    t02 = load_module(load_op("linear").rung("t02_streaming_gemv").path, "linear_t02_for_evidence")
    for dtype, block_m, rows, stages in STREAMING_GEMV:
        pack = 4 if dtype == "fp32" else 8
        constants = {"BLOCK_M": block_m, "PACK": pack, "EVEN_K": True, "ROWS": rows, "WARPS": t02.WARPS,
                     "STAGES": stages}
        sass, ttgir, resources = triton_sass(t02.streaming_gemv_kernel, constants, dtype, t02.WARPS, stages)
        code = instructions(sass)
        ops = Counter(y["op"] for y in code)
        body = main_loop(code)
        print(f"linear t02 {dtype} M={block_m:<2} ROWS={rows} stages={stages}: {resources}; cp.async 16 B "
              f"(LDGSTS.E.BYPASS.128) {ops['LDGSTS.E.BYPASS.128']}, local memory (spills) "
              f"{sum(op.startswith(('LDL', 'STL')) for op in ops.elements())}; loop {len(body)} instructions, "
              f"{len(body) / (rows * pack):.1f} a weight element")
        # Each weight row's buffer is [warps, lanes, pack], the pack fastest: 16 bytes between lanes.
        for layout in sorted(set(re.findall(r"^#shared\d* = .*$", ttgir, flags=re.M))):
            print(f"  {layout}")


if __name__ == "__main__":
    compiled_rungs("matmul", "float32", SIMT)
    compiled_rungs("matmul", "bfloat16", TENSOR)
    hopper_epilogues("bfloat16")
    compiled_rungs("linear", "bfloat16", (("v01_warp_per_row", 256, 0),))
    compiled_rungs("linear", "float32", (("v01_warp_per_row", 256, 0),))
    triton_kernels()
    streaming_gemv()
