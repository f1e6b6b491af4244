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
- **compute-bound** (right of the ridge): 1) *tiling* (bigger tiles reuse each loaded value more
  times); 2) *pipelining* (num_stages: the next tile's loads overlap this one's math); 3) num_warps.
- **occupancy-limited** (any bound, when the analysis reports occupancy under 50% or register spills):
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

from ..candidate import Candidate
from .actions import Action, ActionError, LadderStep, catalogue

RULES: dict[str, tuple[str, ...]] = {
    "memory": ("vectorise", "bytes_in_flight", "fewer_passes", "work_per_thread", "tile", "num_warps",
               "block_size", "pipelining", "restructure"),
    "latency": ("fewer_passes", "work_per_thread", "fewer_programs", "tile", "restructure", "num_warps",
                "block_size", "bytes_in_flight", "vectorise"),
    "compute": ("tile", "pipelining", "num_warps", "restructure", "work_per_thread", "block_size"),
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
    return (isinstance(occupancy, (int, float)) and occupancy < OCCUPANCY_LIMIT_PCT) or \
        (isinstance(spills, (int, float)) and spills > 0)


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
        self._proposed: set[str] = set()
        self._catalogues: dict[tuple[str, str | None, str | None], list[Action]] = {}

    def actions_for(self, route: str, op: str | None, ops_root: str | None = None) -> list[Action]:
        key = (route, op, ops_root)
        if key not in self._catalogues:
            self._catalogues[key] = catalogue(route, op, ops_root)
        return self._catalogues[key]

    def ranked(self, actions: list[Action], analysis: dict, seed: int, current: Candidate | None = None) -> list[Action]:
        """Actions in rule-table order: kinds as the table says, ladder steps first within a kind
        (nearest rung first), ties shuffled by the seed."""
        order = kind_order(analysis)
        rng = random.Random(seed)
        tie = {id(action): rng.random() for action in actions}

        def key(action: Action):
            rank = order.index(action.kind) if action.kind in order else len(order)
            structural = 0 if isinstance(action, LadderStep) else 1
            depth = 0
            if isinstance(action, LadderStep) and current is not None:
                depth = action.distance(current.source, current.companion) or 0
            return (rank, structural, depth, tie[id(action)])
        return sorted(actions, key=key)

    def propose(self, context: dict) -> list[Candidate]:
        task, current = context["task"], context["current"]
        history = context.get("history") or []
        analysis = context.get("analysis") or {}
        seed = int(context.get("seed", 0))
        tried = {candidate.source_sha256 for candidate in history} | {current.source_sha256} | self._proposed
        op = None if getattr(task, "problem_path", None) else task.op
        proposals: list[Candidate] = []
        for action in self.ranked(self.actions_for(task.route, op, task.extra.get("ops_root")), analysis, seed,
                                  current):
            if not action.applies(current.source, current.companion):
                continue
            try:
                source, companion, description = action.apply(current.source, current.companion)
            except ActionError:
                continue
            candidate = Candidate(id=None, parent_id=current.id, route=current.route, source=source,
                                  companion=companion, action=description,
                                  hypothesis=f"{action.hypothesis(description)}. Why now: {_predicted(analysis)}.")
            if candidate.source_sha256 in tried:
                continue
            tried.add(candidate.source_sha256)
            self._proposed.add(candidate.source_sha256)
            proposals.append(candidate)
            if len(proposals) >= self.per_round:
                break
        self.exhausted = not proposals
        return proposals
