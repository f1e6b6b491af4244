"""When the search stops: rounds, time, patience, the roofline reached, or a policy with nothing left.

:meth:`StopRules.reason` returns the first rule that fires as a sentence (recorded in the store as the
run's stop reason), or None to go on. The rules are checked between rounds, never inside one, so a
stopped run always ends on a round whose candidates are all finished.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

DEFAULT_ROUNDS = 12
DEFAULT_PATIENCE = 4
DEFAULT_TARGET_FRACTION = 0.9


@dataclass
class SearchState:
    """What the rules look at: rounds done, seconds spent, rounds since the last accept, the best's
    fraction of its attainable roofline bound (None where unknown: no GPU), the policy's word."""

    rounds_done: int = 0
    elapsed_s: float = 0.0
    rounds_since_accept: int = 0
    fraction_of_roofline: float | None = None
    policy_exhausted: bool = False


@dataclass
class StopRules:
    max_rounds: int = DEFAULT_ROUNDS
    time_budget_s: float | None = None
    patience: int | None = DEFAULT_PATIENCE
    target_fraction: float | None = DEFAULT_TARGET_FRACTION

    def __post_init__(self):
        if self.max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0, got {self.max_rounds}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be >= 1 round, got {self.patience}")
        if self.target_fraction is not None and not 0 < self.target_fraction <= 1.5:
            raise ValueError(f"target_fraction must be in (0, 1.5], got {self.target_fraction}")

    def reason(self, state: SearchState) -> str | None:
        """The first rule that fires, as recorded; None while the search should go on."""
        if state.fraction_of_roofline is not None and self.target_fraction is not None \
                and state.fraction_of_roofline >= self.target_fraction:
            return (f"target reached: the best is at {state.fraction_of_roofline:.0%} of its attainable roofline "
                    f"bound (target {self.target_fraction:.0%})")
        if state.policy_exhausted:
            return "policy exhausted: it has no further candidates to propose"
        if state.rounds_done > self.max_rounds:
            # A resumed run asked for fewer rounds in all than it had done ("--rounds 1" after 3): say
            # that, not "3 of 1 done".
            return (f"max rounds: {self.max_rounds} in all, and the run had already done {state.rounds_done} "
                    f"(on resume, --rounds counts every round of the run)")
        if state.rounds_done >= self.max_rounds:
            return f"max rounds: {state.rounds_done} of {self.max_rounds} done"
        if self.time_budget_s is not None and state.elapsed_s >= self.time_budget_s:
            return f"time budget: {state.elapsed_s:.0f} s spent of {self.time_budget_s:.0f} s"
        if self.patience is not None and state.rounds_since_accept >= self.patience:
            return f"patience: no candidate accepted in the last {state.rounds_since_accept} rounds"
        return None

    def to_dict(self) -> dict:
        return asdict(self)
