"""The scripted policy: offline, deterministic given the seed, a rule table from the diagnosis to actions.

The analysis says what bounds the current kernel (:mod:`hello_gpu.profile.roofline`: memory-, compute-
or latency-bound, and how far from the roof); the table below orders the kinds of action
(:mod:`.actions`) to try for that bound. Within a kind, the ladder's structural steps come first (they
carry a measured design change), nearest rung first, then the parameter moves; ties are broken by a
``random.Random(seed)`` shuffle, so one seed always gives the same sequence.

Rule table, with the reasoning:

- **memory-bound** (left of the ridge; an elementwise op or a reduction is ~0.1-0.25 FLOP/byte, a
  hundred times left of the H200's ridge): the bytes cannot shrink, so make each byte cheaper to
  move. 1) *vectorise*: 16-byte packs cut load instructions 4x (float32) or 8x (bfloat16); vector_add
  v03 -> v04 measured 1.07x float32, 1.65x bfloat16. 2) *more bytes in flight*: Little's law asks
  ~4.2 TB/s x ~600 ns = 2.5 MB in flight over the chip; unrolling independent loads or more resident
  blocks supplies it where occupancy does not. 3) *fewer passes*: softmax v03 reads its row three
  times, v04 once (measured 1.31x v03 at 8192x8192 float32, 1.51x at 4096x32768); one launch instead
  of two for a reduction. 4) work per thread and tile size, then num_warps / block size, which rarely
  matter once the above hold.
- **latency-bound** (within 2 launch overheads, ~13 us on the H200, or < 10% of the roof with a working
  set in L2): fixed costs dominate, so launch less and do more per thread. 1) *fewer passes /
  launches* (each launch costs ~2-3 us on the device, ~6.6 us from Python: reduce_sum v06 -> v07, one
  launch instead of two, measured 1.37x torch.sum at 2^20); 2) *work per thread* (elements, rows or
  packs per thread/program: fewer blocks or programs to schedule); 3) *fewer programs* (rows per
  program, programs per SM down); 4) tile size.
- **compute-bound** (right of the ridge; a 4096^3 matmul does ~680 FLOP per float32 byte, the H200's
  ridge is ~14 for FMAs and ~200 for bf16 tensor cores): 1) *tiling*: a BM x BN tile does 2 BM BN BK
  FLOPs per (BM + BN) BK elements loaded, so 64x64 -> 128x128 doubles the FLOPs per byte (matmul's
  shared-memory tiles, register blocking, warp tiles, Triton's BLOCK_M/N/K); 2) *L2 reuse* (grouped
  tile order: programs running together share slabs of A and B); 3) *pipelining* (num_stages / a
  deeper K step: the next tile's loads overlap this one's math); 4) vectorised loads, 5) num_warps; then
  split-K, which only pays where the tiles cannot fill the SMs. The tensor-core path is a .cu rung
  family (no transform here): the policy names it in ``suggestions``.
- **matmul's shapes** (``preference`` of :mod:`.matmul_actions`): decode (M = 1, 16) is memory-bound on
  the weights: rows beyond M are wasted (BLOCK_M down first, ranked ahead of every kind), and with few
  output tiles split-K puts more programs (weight bytes) in flight; a tile taller than M, a K step
  deeper than half of K, or a GROUP_M spanning every tile row is not proposed.
- **occupancy-limited** (any bound, when the analysis reports occupancy under 50% or register spills;
  compute-bound kernels only on spills: big register tiles run at 12-25% occupancy by design, v07's
  2 blocks of 4 warps an SM):
  resident warps hide latency, so first 1) *block size* (finer blocks pack the register file better:
  at vector_add v05's 56 registers a thread, 65536 / (56 x 256) = 4 blocks of 256, 1024 threads, but
  65536 / (56 x 128) = 9 blocks of 128, 1152 threads), 2) *registers* (``__launch_bounds__``
  min blocks caps registers at 65536 / (B x threads); fewer values per thread; fewer warps), then the
  bound's own rules.
- **unknown** (no profile): the memory-bound order: every ladder here is memory-bound at its benchmark
  shape, so that is the best prior.

After the kinds the table names, every other applicable action follows (so the search does not stop
while something untried applies). A proposal whose source (with its companion) hashes like any
candidate in the history, or one this policy already proposed, is skipped (sha256 of the text).
``exhausted`` is True when no action yields a new source.
"""

from __future__ import annotations

import random

from ...ops.registry import load_op
from ..candidate import Candidate
from .actions import Action, ActionError, LadderStep, catalogue
from .matmul_actions import code_key, matmul_actions, shape_of, tensor_core_suggestion

RULES: dict[str, tuple[str, ...]] = {
    "memory": ("vectorise", "bytes_in_flight", "split_k", "fewer_passes", "work_per_thread", "tile", "num_warps",
               "block_size", "pipelining", "restructure", "l2_reuse"),
    "latency": ("fewer_passes", "work_per_thread", "fewer_programs", "split_k", "tile", "restructure", "num_warps",
                "block_size", "bytes_in_flight", "vectorise"),
    "compute": ("tile", "l2_reuse", "pipelining", "vectorise", "num_warps", "restructure", "work_per_thread",
                "block_size", "split_k"),
    "occupancy": ("block_size", "registers", "num_warps"),
}
RULES["unknown"] = RULES["memory"]

OCCUPANCY_LIMIT_PCT = 50.0      # under half the SM's warp slots filled: too few warps to hide latency


def analysis_value(analysis: dict, *names: str):
    """The first of ``names`` found in the analysis, or in its ``counters`` / ``resources`` (where the
    analyze tool nests what ncu / rocprofv3 and the compiler report)."""
    for place in (analysis, analysis.get("counters"), analysis.get("resources")):
        if isinstance(place, dict):
            for name in names:
                if place.get(name) is not None:
                    return place[name]
    return None


def occupancy_limited(analysis: dict) -> bool:
    occupancy = analysis_value(analysis, "occupancy_pct", "achieved_occupancy_pct")
    spills = analysis_value(analysis, "spill_bytes", "spills", "spill_stores", "spill_loads")
    low = isinstance(occupancy, (int, float)) and occupancy < OCCUPANCY_LIMIT_PCT and analysis.get("bound") != "compute"
    return low or (isinstance(spills, (int, float)) and spills > 0)


def kind_order(analysis: dict) -> tuple[str, ...]:
    """The rule table's kinds for this analysis, most promising first."""
    bound = analysis.get("bound") or "unknown"
    order = RULES.get(bound, RULES["unknown"])
    if occupancy_limited(analysis):
        order = RULES["occupancy"] + tuple(k for k in order if k not in RULES["occupancy"])
    return order


def _predicted(analysis: dict) -> str:
    fraction = analysis.get("fraction_of_attainable")
    bound = analysis.get("bound") or "unknown"
    if isinstance(fraction, (int, float)) and fraction > 0:
        return (f"the current kernel is {bound}-bound at {fraction:.0%} of the attainable roof, so at most "
                f"{1 / fraction:.2f}x is left; expect a step of 1.02x-{min(1 / fraction, 1.5):.2f}x or a loss "
                f"that the accept rule rejects")
    return f"the current kernel is {bound}-bound (no roofline fraction); expect a change within +-10%"


class ScriptedPolicy:
    """``propose(context)`` returns up to ``per_round`` candidates, each one action on the current best."""

    name = "scripted"

    def __init__(self, per_round: int = 1):
        if per_round < 1:
            raise ValueError(f"per_round must be at least 1, got {per_round}")
        self.per_round = per_round
        self.exhausted = False
        self.suggestions: list[str] = []        # what it would do but cannot write as a candidate
        self._proposed: set[str] = set()
        self._catalogues: dict[tuple, list[Action]] = {}

    def actions_for(self, route: str, op: str | None, ops_root: str | None = None, dtype: str | None = None,
                    shape: tuple | None = None) -> list[Action]:
        """The catalogue (ladder steps, generic moves) and, for matmul, its own moves for the timed dtype
        and shape."""
        key = (route, op, ops_root, dtype if op == "matmul" else None, shape if op == "matmul" else None)
        if key not in self._catalogues:
            actions = catalogue(route, op, ops_root)
            if op == "matmul":
                try:
                    t01 = load_op(op, ops_root).rung("t01_block_tile").path.read_text(encoding="utf-8")
                except (KeyError, ValueError, OSError):
                    t01 = ""
                actions = [*actions, *matmul_actions(route, t01, dtype, shape)]
            self._catalogues[key] = actions
        return self._catalogues[key]

    def ranked(self, actions: list[Action], analysis: dict, seed: int, current: Candidate | None = None) -> list[Action]:
        """Actions in rule-table order: kinds as the table says, ladder steps first within a kind
        (nearest rung first), ties shuffled by the seed."""
        order = kind_order(analysis)
        rng = random.Random(seed)
        tie = {id(action): rng.random() for action in actions}

        preferences = {}
        for action in actions:
            preferences[id(action)] = 0.0 if current is None else \
                action.preference(analysis, current.source, current.companion)

        def key(action: Action):
            rank = order.index(action.kind) if action.kind in order else len(order)
            if preferences[id(action)] < 0:         # the analysis calls for it now (decode: BLOCK_M down)
                rank = -1
            structural = 0 if isinstance(action, LadderStep) else 1
            depth = 0
            if isinstance(action, LadderStep) and current is not None:
                depth = action.distance(current.source, current.companion) or 0
            return (rank, structural, depth, preferences[id(action)], tie[id(action)])
        return sorted((a for a in actions if preferences[id(a)] is not None), key=key)

    def propose(self, context: dict) -> list[Candidate]:
        task, current = context["task"], context["current"]
        history = context.get("history") or []
        analysis = context.get("analysis") or {}
        seed = int(context.get("seed", 0))
        tried = {candidate.source_sha256 for candidate in history} | {current.source_sha256} | self._proposed
        # written matmul sources: the same size table is the same kernel, whatever its header says
        tried |= {key for key in (code_key(c.source) for c in [*history, current]) if key is not None}
        op = None if getattr(task, "problem_path", None) else task.op
        dtype = analysis.get("dtype") or (task.dtypes[0] if task.dtypes else None)
        shape = shape_of(analysis) or (tuple(task.bench_shape) if isinstance(task.bench_shape, (tuple, list))
                                       and len(task.bench_shape) == 3 else None)
        actions = [a for a in self.actions_for(task.route, op, task.extra.get("ops_root"), dtype, shape)
                   if a.applies(current.source, current.companion)
                   and (not isinstance(a, LadderStep) or a.covers(task.dtypes))]
        if any(a.family for a in actions):
            # The operator's own moves edit these numbers within its budgets (shared memory, registers,
            # the kernel's static_asserts); the generic moves would edit them blindly.
            actions = [a for a in actions if a.family or isinstance(a, LadderStep)]
        if op == "matmul":
            suggestion = tensor_core_suggestion(task.route, analysis)
            if suggestion and suggestion not in self.suggestions:
                self.suggestions.append(suggestion)
        proposals: list[Candidate] = []
        for action in self.ranked(actions, analysis, seed, current):
            try:
                source, companion, description = action.apply(current.source, current.companion)
            except ActionError:
                continue
            candidate = Candidate(id=None, parent_id=current.id, route=current.route, source=source,
                                  companion=companion, action=description,
                                  hypothesis=f"{action.hypothesis(description)}. Why now: {_predicted(analysis)}.")
            key = code_key(candidate.source)
            if candidate.source_sha256 in tried or key in tried:
                continue
            tried.add(candidate.source_sha256)
            self._proposed.add(candidate.source_sha256)
            if key is not None:
                tried.add(key)
                self._proposed.add(key)
            proposals.append(candidate)
            if len(proposals) >= self.per_round:
                break
        self.exhausted = not proposals
        return proposals
