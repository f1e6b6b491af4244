"""The compute-bound moves of the scripted policy, for the matmul operator's two starting points.

Triton (from ``t01_block_tile`` or a candidate this module wrote): every move reads the sizes from the
source, changes one of them for the dtype class being timed, and writes the whole kernel file again
from :func:`render_triton` (a grouped-order tile kernel with an optional split-K pass and a separate
size table per dtype class). The first move on t01 also rewrites t01 into that form: with GROUP_M = 1
and SPLIT_K = 1 it computes exactly what t01 computes, in the same order. float32 always keeps
``input_precision="ieee"`` (TF32 errs by ~5e-4 relative, 50x the float32 bound of the checker).

HIP (the warp-tiled SIMT kernel of ``v07_warp_tiling`` and anything with its ``constexpr`` names): the
nine tile sizes move together with the launcher's ``TILE_M`` / ``TILE_N`` / ``THREADS``, and only to
configurations that satisfy ``warp_tiling.h``'s static_asserts (mirrored in :func:`warp_tiles_valid`).
The structural SIMT steps (shared-memory tiles, register blocking, vectorised loads, warp tiles) are the
ladder's own rungs (:class:`~.actions.LadderStep`); the tensor-core path (``mma.sync`` / ``wgmma``,
``.cu`` files) cannot be a candidate (candidates are ``.hip`` or Triton files), so the policy names it
as a suggestion (:func:`tensor_core_suggestion`) instead of proposing it.

Each action has ``preference(analysis)``: None where the analysis says the move does not fit (a taller
tile than M rows, split-K with enough tiles to fill the GPU), else a number, lower first, used inside a
kind of the rule table.

Budgets, H200 (sm_90): 227 KiB of shared memory a block (232448 bytes), 48 KiB of static
``__shared__`` without opt-in, 65536 registers an SM, 132 SMs.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

from .actions import Action, HipFile, PythonFile, Site, structure_signature

SHARED_BYTES_PER_BLOCK = 232448          # dynamic shared memory one block may use on sm_90 (227 KiB)
STATIC_SHARED_BYTES = 48 * 1024          # static __shared__ arrays, without the opt-in attribute
SM_COUNT = 132                           # H200; the shape rules only need its order of magnitude
# float32 accumulators one thread holds: past ~128 (plus the operands) ptxas spills on sm_90 (v07:
# 128 sums, 203 registers; Triton's 128x256 tile with 8 warps: 128 a thread).
MAX_ACCUMULATORS_PER_THREAD = 128
TILE_LADDER = (16, 32, 64, 128, 256)      # tl.dot needs every dimension >= 16
BLOCK_K_LADDER = (16, 32, 64, 128)
GROUP_LADDER = (1, 8, 16)                 # 1: row-major order (t01); 8: the usual grouped order
SPLIT_LADDER = (1, 2, 4, 8, 16)
WARPS_LADDER = (2, 4, 8, 16)
STAGES_LADDER = (2, 3, 4, 5, 6)
ITEMSIZE = {"16-bit": 2, "float32": 4}
TEMPLATE_MARKER = "# hello-gpu agent template: triton matmul 1"
# The rendered file claims the matmul records as every rung of the ladder does. The claim lines are
# joined here, not written out, so that this module itself claims no record: `records check` reads a
# claim line in every source file under src/, and a template's lines are not a kernel of this file.
RECORD_CLAIMS = "\n".join("# hello-gpu: " + f"record matmul.{dtype}" for dtype in ("float32", "bfloat16"))
SIZE_NAMES = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K", "num_warps", "num_stages")


def dtype_class(dtype: str | None) -> str:
    return "float32" if dtype in (None, "float32") else "16-bit"


def shape_of(analysis: dict) -> tuple[int, int, int] | None:
    """(M, N, K) of the timed shape, from the analysis (``"4096x4096x4096"``), or None."""
    text = analysis.get("shape") if isinstance(analysis, dict) else None
    if isinstance(text, str) and re.fullmatch(r"\d+x\d+x\d+", text):
        m, n, k = (int(part) for part in text.split("x"))
        return m, n, k
    if isinstance(text, (tuple, list)) and len(text) == 3:
        return tuple(int(part) for part in text)
    return None


# ============================================================================================ Triton
def shared_bytes(sizes: dict, itemsize: int) -> int:
    """Shared memory of the pipelined tile loads: num_stages copies of a BM x BK and a BK x BN tile."""
    return sizes["num_stages"] * (sizes["BLOCK_M"] + sizes["BLOCK_N"]) * sizes["BLOCK_K"] * itemsize


def accumulators_per_thread(sizes: dict) -> float:
    return sizes["BLOCK_M"] * sizes["BLOCK_N"] / (32 * sizes["num_warps"])


def fits(sizes: dict, itemsize: int) -> bool:
    """Shared memory within the block's 227 KiB; accumulators within MAX_ACCUMULATORS_PER_THREAD and,
    with ~40 registers for operands and addresses, within the register file's share of a thread
    (65536 / threads, at most 255: 16 warps leave 128, so a 256x256 tile there would spill)."""
    accumulators = accumulators_per_thread(sizes)
    threads = 32 * sizes["num_warps"]
    return (shared_bytes(sizes, itemsize) <= SHARED_BYTES_PER_BLOCK
            and accumulators <= MAX_ACCUMULATORS_PER_THREAD
            and accumulators + 40 <= min(255, 65536 // threads) and threads <= 1024)


def tile_intensity(sizes: dict, itemsize: int) -> float:
    """FLOPs per byte of tile loaded into shared memory: 2 BM BN BK / ((BM + BN) BK itemsize)."""
    return 2 * sizes["BLOCK_M"] * sizes["BLOCK_N"] / ((sizes["BLOCK_M"] + sizes["BLOCK_N"]) * itemsize)


def tile_traffic(sizes: dict, itemsize: int, shape) -> float:
    """Bytes the tile loads ask of L2 / DRAM at ``shape``: A is read once per column of tiles, B once per
    row of tiles."""
    m, n, k = shape
    return (m * k * math.ceil(n / sizes["BLOCK_N"]) + k * n * math.ceil(m / sizes["BLOCK_M"])) * itemsize


def _sizes_text(sizes: dict) -> str:
    return "{" + ", ".join(f'"{name}": {sizes[name]}' for name in SIZE_NAMES) + "}"


def render_triton(table: dict[str, dict], change: str, hypothesis: str, prediction: str) -> str:
    """The whole Triton matmul file for this size table ({"16-bit": {...}, "float32": {...}})."""
    def prose(text: str) -> str:
        words, lines, line = " ".join(text.split()).replace('"""', "'''").replace("\\", "/").split(" "), [], ""
        for word in words:
            if line and len(line) + 1 + len(word) > 100:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}".strip()
        lines.append(line)
        return "\n  ".join(lines)
    return f'''"""Triton matmul written by the agent's scripted policy: grouped tile order, split-K, sizes per dtype class.

parent: t01_block_tile
change: {prose(change)}
hypothesis: {prose(hypothesis)}
prediction: {prose(prediction)}
outcome: not measured yet
deterministic: yes, each tile of C is one program's sum over its K slice in order, and split-K slices
  are added by one program per element in slice order
"""

{TEMPLATE_MARKER}
{RECORD_CLAIMS}

import torch
import triton
import triton.language as tl

from hello_gpu.ops.matmul.launch import checked_output

# dtype class -> sizes. float32 runs tl.dot as IEEE FMAs (no TF32: it errs by ~5e-4, 50x the float32
# bound) with 4-byte tiles, twice the shared memory of 16-bit ones, so each class has its own.
SIZES = {{"16-bit": {_sizes_text(table["16-bit"])},
         "float32": {_sizes_text(table["float32"])}}}
# The split-K pass: one program adds the SPLIT_K float32 partials of 1024 elements of C.
ADD_PARTIALS = {{"BLOCK": 1024, "num_warps": 4}}
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@triton.jit
def tile_kernel(a_ptr, b_ptr, c_ptr, partial_ptr, M, N, K, stride_am, stride_bk, stride_cm, k_per_split,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                SPLIT_K: tl.constexpr, IEEE: tl.constexpr):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n                        # programs in one group of GROUP_M tile rows
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)   # the last group may be shorter
    within = pid % per_group
    pid_m = first_m + within % rows_in_group             # down the group's tile rows first (GROUP_M = 1:
    pid_n = within // rows_in_group                      # row-major order), then the next column of tiles
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    columns = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + rows[:, None].to(tl.int64) * stride_am      # 64-bit: row * stride may pass 2^31
    k_start = split * k_per_split                        # this program's slice of K (all of it: SPLIT_K = 1)
    k_end = tl.minimum(K, k_start + k_per_split)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_rows + k[None, :], mask=(rows[:, None] < M) & (k[None, :] < k_end), other=0.0)
        b = tl.load(b_ptr + k[:, None].to(tl.int64) * stride_bk + columns[None, :],
                    mask=(k[:, None] < k_end) & (columns[None, :] < N), other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
    inside = (rows[:, None] < M) & (columns[None, :] < N)
    if SPLIT_K == 1:
        c = c_ptr + rows[:, None].to(tl.int64) * stride_cm + columns[None, :]
        tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=inside)
    else:                                                # float32 partials of (SPLIT_K, M, N), this slice's
        partial = partial_ptr + (split * M + rows[:, None]).to(tl.int64) * N + columns[None, :]
        tl.store(partial, acc, mask=inside)


@triton.jit
def add_partials_kernel(partial_ptr, c_ptr, elements, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    """C (contiguous, ``elements`` of it) = the sum of the SPLIT_K partials, in slice order."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < elements
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for split in tl.static_range(SPLIT_K):
        total += tl.load(partial_ptr + split * elements + offsets, mask=inside, other=0.0)
    tl.store(c_ptr + offsets, total.to(c_ptr.dtype.element_ty), mask=inside)


def run(a, b, out=None):
    out = checked_output(a, b, out, DTYPES)
    (m, k), n = a.shape, b.shape[1]
    if out.numel() == 0:
        return out
    sizes = SIZES["float32" if a.dtype == torch.float32 else "16-bit"]
    split = sizes["SPLIT_K"]
    # Each slice is a whole number of BLOCK_K steps; with K < SPLIT_K * BLOCK_K the last slices are
    # empty and add zeros.
    k_per_split = triton.cdiv(triton.cdiv(k, split), sizes["BLOCK_K"]) * sizes["BLOCK_K"]
    partials = out if split == 1 else torch.empty((split, m, n), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(m, sizes["BLOCK_M"]) * triton.cdiv(n, sizes["BLOCK_N"]), split)
    tile_kernel[grid](a, b, out, partials, m, n, k, a.stride(0), b.stride(0), out.stride(0), k_per_split,
                      BLOCK_M=sizes["BLOCK_M"], BLOCK_N=sizes["BLOCK_N"], BLOCK_K=sizes["BLOCK_K"],
                      GROUP_M=sizes["GROUP_M"], SPLIT_K=split, IEEE=a.dtype == torch.float32,
                      num_warps=sizes["num_warps"], num_stages=sizes["num_stages"])
    if split > 1:
        add_partials_kernel[(triton.cdiv(m * n, ADD_PARTIALS["BLOCK"]),)](
            partials, out, m * n, SPLIT_K=split, BLOCK=ADD_PARTIALS["BLOCK"], num_warps=ADD_PARTIALS["num_warps"])
    return out
'''


def _strip_launch_options(source: str) -> str:
    return re.sub(r",\s*num_(?:warps|stages)\s*=\s*\d+", "", source)


def t01_sizes(source: str, t01_text: str) -> dict | None:
    """t01's sizes read off a source with t01's structure (its launch may carry num_warps / num_stages):
    {"BLOCK_M": 64, ...}, or None where the source is not t01's kernel."""
    if structure_signature(_strip_launch_options(source), None, "triton") != \
            structure_signature(_strip_launch_options(t01_text), None, "triton"):
        return None
    found = {name: site.value for name, site in python_constant_sites(source, "source").items()}
    if not {"BLOCK_M", "BLOCK_N", "BLOCK_K"} <= set(found):
        return None
    warps = re.search(r"num_warps\s*=\s*(\d+)", source)
    stages = re.search(r"num_stages\s*=\s*(\d+)", source)
    return {"BLOCK_M": found["BLOCK_M"], "BLOCK_N": found["BLOCK_N"], "BLOCK_K": found["BLOCK_K"], "GROUP_M": 1,
            "SPLIT_K": 1, "num_warps": int(warps.group(1)) if warps else 4,       # Triton's defaults on NVIDIA
            "num_stages": int(stages.group(1)) if stages else 3}


def template_sizes(source: str) -> dict[str, dict] | None:
    """The size table of a source :func:`render_triton` wrote (and nothing else changed), or None."""
    if TEMPLATE_MARKER not in source:
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    table = None
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id == "SIZES":
            try:
                table = ast.literal_eval(statement.value)
            except ValueError:
                return None
    if not isinstance(table, dict) or set(table) != set(ITEMSIZE) or \
            any(not isinstance(sizes, dict) or set(sizes) != set(SIZE_NAMES) for sizes in table.values()):
        return None
    if structure_signature(source, None, "triton") != structure_signature(render_triton(table, "x", "x", "x"), None,
                                                                          "triton"):
        return None                        # the kernel was edited by hand: not ours to rewrite
    return table


def code_key(source: str) -> str | None:
    """What makes two written Triton sources the same kernel: their size table (the header's prose
    differs with the move that wrote it, so a move back would hash as new). None for other sources."""
    table = template_sizes(source)
    return None if table is None else repr(sorted((group, sorted(sizes.items())) for group, sizes in table.items()))


@dataclass
class TritonMatmulMove(Action):
    """One size of the Triton matmul, for the dtype class being timed, one step along its ladder.

    ``parameter`` is a name of SIZE_NAMES; moving a tile dimension up doubles num_warps as well where
    the accumulators would pass MAX_ACCUMULATORS_PER_THREAD (a compound move, said in the description)."""

    parameter: str = "BLOCK_N"
    ladder: tuple[int, ...] = TILE_LADDER
    t01_text: str = ""
    dtype: str = "bfloat16"
    shape: tuple | None = None                 # (M, N, K) timed, for the hypothesis's figures and preference
    family = "matmul"

    def read(self, source: str) -> tuple[dict[str, dict], bool] | None:
        table = template_sizes(source)
        if table is not None:
            return table, False
        sizes = t01_sizes(source, self.t01_text) if self.t01_text else None
        if sizes is None:
            return None
        return {"16-bit": dict(sizes), "float32": dict(sizes)}, True

    def moved(self, sizes: dict) -> tuple[dict, list[str]] | None:
        """The new sizes and the changes in words, or None where the move leaves the budgets."""
        old = sizes[self.parameter]
        if old not in self.ladder:
            return None
        index = self.ladder.index(old) + self.direction
        if not 0 <= index < len(self.ladder):
            return None
        new_sizes = {**sizes, self.parameter: self.ladder[index]}
        changes = [f"{self.parameter} {old} -> {new_sizes[self.parameter]}"]
        if self.parameter in ("BLOCK_M", "BLOCK_N") and self.direction > 0 \
                and accumulators_per_thread(new_sizes) > MAX_ACCUMULATORS_PER_THREAD:
            new_sizes["num_warps"] = sizes["num_warps"] * 2
            changes.append(f"num_warps {sizes['num_warps']} -> {new_sizes['num_warps']} (keeps "
                           f"{accumulators_per_thread(new_sizes):.0f} accumulators a thread)")
        if not fits(new_sizes, ITEMSIZE[dtype_class(self.dtype)]):
            return None
        return new_sizes, changes

    def _plan(self, source, companion):
        read = self.read(source)
        if read is None:
            return None
        table, from_t01 = read
        group = dtype_class(self.dtype)
        result = self.moved(table[group])
        if result is None:
            return None
        new_sizes, changes = result
        description = f"{', '.join(changes)} ({group})"
        if from_t01:
            description += "; t01's kernel rewritten as the agent's grouped / split-K tile kernel with t01's sizes"
        return ("render", {**table, group: new_sizes}, description, table[group])

    def apply(self, source, companion=None):
        plan = self._plan(source, companion)
        if plan is None:
            raise ValueError(f"{self.name} does not apply to this source")
        _, table, description, old_sizes = plan
        group = dtype_class(self.dtype)
        reasoning, prediction = self.explain(old_sizes, table[group])
        self._last = (description, reasoning, prediction)
        text = render_triton(table, description, reasoning, prediction)
        return text, companion, description

    def hypothesis(self, description: str) -> str:
        last = getattr(self, "_last", None)
        if last is None or last[0] != description:
            return super().hypothesis(description)
        return f"{description}: {last[1]}. Prediction: {last[2]}"

    def explain(self, old: dict, new: dict) -> tuple[str, str]:
        """(hypothesis, prediction) of this move, with the FLOPs / bytes behind it."""
        itemsize = ITEMSIZE[dtype_class(self.dtype)]
        shape = self.shape or (4096, 4096, 4096)
        facts = (f"per K step a program loads ({new['BLOCK_M']} + {new['BLOCK_N']}) x {new['BLOCK_K']} elements for "
                 f"{2 * new['BLOCK_M'] * new['BLOCK_N'] * new['BLOCK_K']:,} FLOPs: {tile_intensity(new, itemsize):.0f} "
                 f"FLOP/B of tile (was {tile_intensity(old, itemsize):.0f}); tile loads at {'x'.join(map(str, shape))} "
                 f"{tile_traffic(new, itemsize, shape) / 1e9:.2f} GB (was {tile_traffic(old, itemsize, shape) / 1e9:.2f}); "
                 f"shared memory {shared_bytes(new, itemsize) // 1024} KiB of 227, "
                 f"{accumulators_per_thread(new):.0f} accumulators a thread")
        reason = self.reason
        ratio = tile_traffic(old, itemsize, shape) / max(1.0, tile_traffic(new, itemsize, shape))
        if self.parameter in ("BLOCK_M", "BLOCK_N", "BLOCK_K") and self.direction > 0:
            prediction = (f"tile traffic {ratio:.2f}x lower; where the loads bound the loop, up to {min(ratio, 1.6):.2f}x "
                          f"faster, less once the tensor cores (or FMAs) are the limit")
        elif self.parameter == "SPLIT_K" and self.direction > 0:
            tiles = math.ceil(shape[0] / new["BLOCK_M"]) * math.ceil(shape[1] / new["BLOCK_N"])
            prediction = (f"{tiles} tiles x {new['SPLIT_K']} slices = {tiles * new['SPLIT_K']} programs for "
                          f"{SM_COUNT} SMs (was {tiles * old['SPLIT_K']}); the partials add "
                          f"{2 * 4 * new['SPLIT_K'] * shape[0] * shape[1] / 1e6:.1f} MB of traffic; expect 1.1-1.6x "
                          f"where too few programs kept too few weight bytes in flight")
        else:
            prediction = "within +-15%: a balance move (latency hiding against registers / shared memory)"
        return f"{reason}. {facts}", prediction

    def preference(self, analysis: dict, source: str, companion: str | None = None) -> float | None:
        """None where the timed shape makes this move pointless; else lower first."""
        shape = shape_of(analysis) or self.shape
        read = self.read(source)
        if shape is None or read is None:
            return 0.0
        m, n, k = shape
        sizes = read[0][dtype_class(self.dtype)]
        tiles = math.ceil(m / sizes["BLOCK_M"]) * math.ceil(n / sizes["BLOCK_N"])
        up = self.direction > 0
        if self.parameter == "BLOCK_M" and up and sizes["BLOCK_M"] >= m:
            return None                     # the tile already covers every row (decode: M = 1 or 16)
        if self.parameter == "BLOCK_N" and up and sizes["BLOCK_N"] >= n:
            return None
        if self.parameter == "BLOCK_K" and up and sizes["BLOCK_K"] * 2 > k:
            return None
        if self.parameter == "BLOCK_M" and not up:
            # Shrinking the rows pays where they are wasted (M below the tile); elsewhere it lowers the reuse.
            return -1.0 if m < sizes["BLOCK_M"] else 5.0
        if self.parameter == "SPLIT_K":
            if up and (tiles * sizes["SPLIT_K"] >= 2 * SM_COUNT or k // (2 * sizes["SPLIT_K"]) < 4 * sizes["BLOCK_K"]):
                return None                 # enough programs already, or slices of fewer than 4 K steps
            return 0.0
        if self.parameter == "GROUP_M" and up and math.ceil(m / sizes["BLOCK_M"]) < 2 * sizes["GROUP_M"]:
            return None                     # one group already spans every tile row
        if self.parameter in ("BLOCK_M", "BLOCK_N") and up:
            # The smaller side first: it raises the intensity 2 BM BN / (BM + BN) the most.
            other = sizes["BLOCK_N" if self.parameter == "BLOCK_M" else "BLOCK_M"]
            return 0.0 if sizes[self.parameter] <= other else 1.0
        if self.parameter == "BLOCK_K" and up:
            return 2.0
        return 0.0


# Kinds: "tile" (raise the FLOPs per loaded byte), "l2_reuse", "pipelining", "num_warps", "split_k",
# "registers" (smaller tiles or fewer stages: more programs resident, fewer spills).
TRITON_MOVES = (
    ("BLOCK_M", TILE_LADDER, "tile", "registers",
     "taller tiles: each B element loaded from L2 serves twice the rows (arithmetic intensity per program up)",
     "shorter tiles: fewer rows wasted where M is below the tile (decode), fewer accumulators, more programs"),
    ("BLOCK_N", TILE_LADDER, "tile", "registers",
     "wider tiles: each A element loaded serves twice the columns (arithmetic intensity per program up)",
     "narrower tiles: twice the programs for the SMs and half the accumulators a thread"),
    ("BLOCK_K", BLOCK_K_LADDER, "tile", "registers",
     "deeper K steps: half the loop trips and barriers, longer loads per row (more bytes in flight per step)",
     "shallower K steps: half the shared memory a stage, so more stages or programs fit"),
    ("GROUP_M", GROUP_LADDER, "l2_reuse", "l2_reuse",
     "grouped tile order: the programs running together cover GROUP_M tile rows x a few columns, so the same "
     "A and B slabs are reused from L2 instead of re-read from DRAM",
     "fewer tile rows per group: a smaller working set where the group's slabs overflow L2"),
    ("SPLIT_K", SPLIT_LADDER, "split_k", "split_k",
     "split-K: too few output tiles to fill 132 SMs (skinny / decode shapes), so each tile's K loop is cut "
     "into slices run by separate programs (more weight bytes in flight), added in order by a second pass",
     "fewer K slices: less partial-sum traffic where the tiles already fill the SMs"),
    ("num_stages", STAGES_LADDER, "pipelining", "registers",
     "one more stage of tile loads in flight while the current K step multiplies (latency hidden)",
     "one stage fewer: less shared memory a program, so more programs resident"),
    ("num_warps", WARPS_LADDER, "num_warps", "num_warps",     # fewer warps: more registers a thread, not fewer
     "twice the warps a program: half the accumulators a thread and more warps to hide load latency",
     "half the warps: more accumulators a thread, fewer warps to synchronise"),
)


def triton_matmul_actions(t01_text: str, dtype: str, shape: tuple | None = None) -> list[Action]:
    actions: list[Action] = []
    for parameter, ladder, kind_up, kind_down, why_up, why_down in TRITON_MOVES:
        for direction, kind, why in ((+1, kind_up, why_up), (-1, kind_down, why_down)):
            actions.append(TritonMatmulMove(name=f"{parameter} {'up' if direction > 0 else 'down'}", route="triton",
                                            kind=kind, direction=direction, reason=why, parameter=parameter,
                                            ladder=ladder, t01_text=t01_text, dtype=dtype,
                                            shape=shape))
    return actions


# ============================================================================================ HIP warp tiles
WARP_TILE_NAMES = ("kBM", "kBN", "kBK", "kWM", "kWN", "kWNITER", "kTM", "kTN", "kThreads")
LAUNCHER_NAMES = {"kBM": "TILE_M", "kBN": "TILE_N", "kThreads": "THREADS"}
LANES = 32
REGISTERS_BESIDE_SUMS = 75


_CONSTEXPR_LIST = re.compile(r"\bconstexpr\s+int\s+([^;]+);")
_DECLARATOR = re.compile(r"\s*(\w+)\s*=\s*(\d+)\s*$")


def constexpr_sites(source: str) -> dict[str, Site]:
    """``constexpr int a = 1, b = 2;`` declarations with literal values (comments masked): name -> site.
    A declarator with an expression (``kThreads = kBM * kBN / kTM``) is not a site."""
    code = HipFile(source).code
    found: dict[str, Site] = {}
    for match in _CONSTEXPR_LIST.finditer(code):
        offset = match.start(1)
        for part in match.group(1).split(","):
            declared = _DECLARATOR.match(part)
            if declared:
                start = offset + declared.start(2)
                found[declared.group(1)] = Site("source", start, start + len(declared.group(2)),
                                                int(declared.group(2)), declared.group(1))
            offset += len(part) + 1
    return found


def python_constant_sites(text: str, file: str) -> dict[str, Site]:
    """Module-level ``NAME = 1`` and ``A, B = 1, 2`` integer assignments: name -> site."""
    parsed = PythonFile(text, file)
    found = parsed.constants()
    for statement in parsed.tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Tuple) and isinstance(statement.value, ast.Tuple):
            for target, value in zip(statement.targets[0].elts, statement.value.elts):
                if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and type(value.value) is int:
                    found[target.id] = parsed.site(value, target.id)
    return found


def warp_tiles_valid(t: dict) -> bool:
    """``warp_tiling.h``'s static_asserts (and its loaders'), in Python, plus the budgets: at most
    MAX_ACCUMULATORS_PER_THREAD sums a thread and 48 KiB of static shared memory."""
    bm, bn, bk, wm, wn, wniter, tm, tn, threads = (t[name] for name in WARP_TILE_NAMES)
    if min(bm, bn, bk, wm, wn, wniter, tm, tn, threads) <= 0 or wm > bm or wn > bn or bm % wm or bn % wn:
        return False
    if (wm * wn) % (LANES * tm * tn * wniter):
        return False
    wmiter = (wm * wn) // (LANES * tm * tn * wniter)
    if wmiter < 1 or wm % wmiter or wn % wniter:
        return False
    wsubm, wsubn = wm // wmiter, wn // wniter
    if wsubn % tn or wsubm % tm or (wsubn // tn) * (wsubm // tm) != LANES:
        return False
    if (bm // wm) * (bn // wn) * LANES != threads or threads > 1024:
        return False
    if tm % 4 or tn % 4 or bk % 4:
        return False
    a_pieces, b_pieces = bk // 4, bn // 4                # stage_a_transposed / stage_b: whole passes
    if threads % a_pieces or bm % (threads // a_pieces) or threads % b_pieces or bk % (threads // b_pieces):
        return False
    sums = wmiter * tm * wniter * tn
    # Registers: the sums plus ~75 for the operands and addresses (v07: 128 sums, 203 registers), under
    # what __launch_bounds__(threads) leaves a thread: 65536 / threads, at most 255.
    registers = sums + REGISTERS_BESIDE_SUMS
    return sums <= MAX_ACCUMULATORS_PER_THREAD and registers <= min(255, 65536 // threads) \
        and bk * (bm + bn) * 4 <= STATIC_SHARED_BYTES


def warp_tile_facts(t: dict) -> str:
    wmiter = (t["kWM"] * t["kWN"]) // (LANES * t["kTM"] * t["kTN"] * t["kWNITER"])
    sums = wmiter * t["kTM"] * t["kWNITER"] * t["kTN"]
    reads = wmiter * t["kTM"] + t["kWNITER"] * t["kTN"]
    intensity = 2 * t["kBM"] * t["kBN"] / ((t["kBM"] + t["kBN"]) * 4)
    return (f"block tile {t['kBM']}x{t['kBN']}x{t['kBK']} ({intensity:.0f} FLOP per global byte staged), "
            f"{t['kThreads']} threads in {t['kThreads'] // LANES} warp tiles of {t['kWM']}x{t['kWN']}, "
            f"{sums} sums a thread from {reads} shared loads per k ({sums / reads:.1f} FMAs a load), "
            f"{t['kBK'] * (t['kBM'] + t['kBN']) * 4 // 1024} KiB of shared memory")


def solve_warp_tiles(t: dict) -> dict | None:
    """A valid configuration with ``t``'s BM, BN, BK, TM, TN and threads: the warp tile (WM, WN, WNITER)
    nearest the current one (WNITER nearest on a log scale, then the squarest warp tile)."""
    options = []
    for wm in (16, 32, 64, 128, 256):
        for wn in (16, 32, 64, 128, 256):
            for wniter in (1, 2, 4, 8):
                trial = {**t, "kWM": wm, "kWN": wn, "kWNITER": wniter}
                if warp_tiles_valid(trial):
                    options.append((abs(math.log2(wniter / t["kWNITER"])), abs(math.log2(wm / wn)), wm != t["kWM"],
                                    trial))
    return min(options, key=lambda option: option[:3])[3] if options else None


def _warp_moves(t: dict, what: str, direction: int) -> dict | None:
    if what == "threads":
        trial = {**t, "kThreads": t["kThreads"] * 2 if direction > 0 else t["kThreads"] // 2}
    elif what == "thread tile":                          # register blocking: TM 4 <-> 8
        trial = {**t, "kTM": t["kTM"] * 2 if direction > 0 else t["kTM"] // 2}
    else:
        name = {"BM": "kBM", "BN": "kBN", "BK": "kBK"}[what]
        trial = {**t, name: t[name] * 2 if direction > 0 else t[name] // 2}
    if trial["kTM"] not in (4, 8) or trial["kBK"] not in (8, 16, 32) or trial["kThreads"] not in (64, 128, 256, 512):
        return None
    solved = solve_warp_tiles(trial)
    if solved is None and what in ("BM", "BN") and direction > 0 and trial["kThreads"] < 512:
        # twice the tile over the same threads would pass the accumulator budget: twice the warps too
        solved = solve_warp_tiles({**trial, "kThreads": trial["kThreads"] * 2})
    return solved


@dataclass
class HipWarpTiles(Action):
    """One tile size of a warp-tiled SIMT matmul (v07's ``constexpr`` names), the others re-solved to a
    valid configuration, in the kernel and its launcher together."""

    what: str = "BN"
    family = "matmul"

    def sites(self, source: str, companion: str | None) -> tuple[dict, dict[str, Site], dict[str, Site]] | None:
        constants = constexpr_sites(source)
        if not all(name in constants for name in WARP_TILE_NAMES) or companion is None:
            return None
        launcher = python_constant_sites(companion, "companion")
        if not all(name in launcher for name in LAUNCHER_NAMES.values()):
            return None
        values = {name: constants[name].value for name in WARP_TILE_NAMES}
        if any(launcher[LAUNCHER_NAMES[name]].value != values[name] for name in LAUNCHER_NAMES):
            return None                     # the launcher disagrees with the kernel: not one configuration
        return values, constants, launcher

    def _plan(self, source, companion):
        found = self.sites(source, companion)
        if found is None:
            return None
        values, constants, launcher = found
        new = _warp_moves(values, self.what, self.direction)
        if new is None or new == values:
            return None
        source_edits = [constants[name].to(new[name]) for name in WARP_TILE_NAMES if new[name] != values[name]]
        companion_edits = [launcher[LAUNCHER_NAMES[name]].to(new[name]) for name in LAUNCHER_NAMES
                           if new[name] != values[name]]
        changed = ", ".join(f"{name} {values[name]} -> {new[name]}" for name in WARP_TILE_NAMES
                            if new[name] != values[name])
        self._last = (values, new)
        return source_edits, companion_edits, f"warp-tiled sizes: {changed}"

    def hypothesis(self, description: str) -> str:
        old, new = getattr(self, "_last", (None, None))
        if old is None:
            return f"{description}: {self.reason}"
        return (f"{description}: {self.reason}. Now {warp_tile_facts(new)}; was {warp_tile_facts(old)}. Prediction: "
                f"0.9x-1.15x (the sizes tuned per GPU were worth 5-15% in the SGEMM worklogs; more sums a thread "
                f"than ~128 would spill)")



HIP_MOVES = (
    ("BN", "tile", "registers", "a wider block tile: each A element staged serves twice the columns",
     "a narrower block tile: twice the blocks for the SMs, fewer sums a thread"),
    ("BM", "tile", "registers", "a taller block tile: each B element staged serves twice the rows",
     "a shorter block tile: twice the blocks, fewer sums a thread"),
    ("BK", "pipelining", "registers", "a deeper K step: half the barriers per FMA, longer loads in flight",
     "a shallower K step: half the shared memory, more blocks resident"),
    ("threads", "num_warps", "registers", "twice the warp tiles a block: more warps to hide shared-memory latency",
     "half the warp tiles: twice the sums a thread (more reuse of each loaded value)"),
    ("thread tile", "tile", "registers", "register blocking TM 4 -> 8: twice the sums a thread from the same B "
     "values (more FMAs per shared load)", "register blocking TM 8 -> 4: half the registers, more blocks resident"),
)


def hip_matmul_actions() -> list[Action]:
    actions: list[Action] = []
    for what, kind_up, kind_down, why_up, why_down in HIP_MOVES:
        actions.append(HipWarpTiles(name=f"warp tiles {what} up", route="hip", kind=kind_up, direction=+1,
                                    reason=why_up, what=what))
        actions.append(HipWarpTiles(name=f"warp tiles {what} down", route="hip", kind=kind_down, direction=-1,
                                    reason=why_down, what=what))
    return actions


def tensor_core_suggestion(route: str, analysis: dict) -> str | None:
    """What the policy says it cannot do itself: the tensor-core path is a .cu rung family
    (v09_mma_sync -> v11, wgmma), not a transform of a .hip or Triton candidate."""
    bound, fraction = analysis.get("bound"), analysis.get("fraction_of_attainable")
    if route != "hip" or bound != "compute":
        return None
    where = f" at {fraction:.0%} of the FMA roof" if isinstance(fraction, (int, float)) else ""
    return (f"compute-bound{where} on the SIMT (FMA) path: the next factor is the tensor cores, which no .hip "
            f"candidate here can reach: bfloat16 / float16 through mma.sync (matmul v09_mma_sync.cu -> "
            f"v11_large_warp_tiles.cu) or Hopper wgmma; float32 inputs would need TF32 or a split into bfloat16 "
            f"terms, which the float32 bound (1e-5) refuses for TF32")


def matmul_actions(route: str, t01_text: str, dtype: str | None, shape: tuple | None) -> list[Action]:
    """The moves for a matmul task on ``route``, timed at ``dtype`` and ``shape``; ``t01_text`` is the
    ladder's t01_block_tile (the Triton structure the first move rewrites)."""
    if route == "triton":
        return triton_matmul_actions(t01_text, dtype or "float32", shape)   # the spec's first dtype
    return hip_matmul_actions()
