"""Do two backends compute the same model? Logits step by step through a greedy decode (issue 23, part 4).

:func:`compare_greedy` runs a reference runner (eager) and a candidate side by side, each with its own
KV cache. The reference decodes greedily; the candidate is fed the reference's tokens (teacher
forcing), so the two see the same context at every step and their logits are comparable at every
step, even after a near tie made them choose differently once. Per step:

- the largest logit gap ``max |candidate - reference|`` over the batch and the vocabulary, against the
  tolerance ``rtol * max |reference logit|`` of that step;
- whether the greedy tokens agree (each row's argmax);
- where they do not, the reference's margin between its token and the candidate's: a divergence is
  explained when that margin is itself within the tolerance (a near tie), and is a failure otherwise.

The result passes when every step's gap is within tolerance and every divergence is a near tie.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .backends import Runner, greedy_tokens

# Gap allowed per step, as a fraction of the step's largest |reference logit|. bf16 holds 8 significant
# bits (a logit's rounding alone is 2^-9 of it); 32 layers of bf16 activations rounded differently by
# another kernel move logits by a few of those units, so 2^-5 (about 8 units) for bf16, 2^-8 for fp16
# (3 more bits). To be confirmed by the first H200 runs; a kernel that drops a block of work moves
# logits by far more (tests/test_models_backends.py).
LOGIT_RTOL = {torch.bfloat16: 2**-5, torch.float16: 2**-8, torch.float32: 1e-4, torch.float64: 1e-9}


@dataclass
class LogitComparison:
    reference: str
    candidate: str
    rtol: float
    gaps: list[float] = field(default_factory=list)            # per step: max |candidate - reference|
    scales: list[float] = field(default_factory=list)          # per step: max |reference|
    agree: list[bool] = field(default_factory=list)            # per step: every row's greedy token agrees
    divergences: list[dict] = field(default_factory=list)      # {step, row, reference_token, candidate_token, margin}

    @property
    def steps(self) -> int:
        return len(self.gaps)

    @property
    def first_divergence(self) -> int | None:
        return next((step for step, same in enumerate(self.agree) if not same), None)

    @property
    def worst_step(self) -> int | None:
        ratios = [gap / (self.rtol * scale) if scale else float("inf") for gap, scale in zip(self.gaps, self.scales)]
        return max(range(len(ratios)), key=ratios.__getitem__) if ratios else None

    def gap_ok(self, step: int) -> bool:
        return self.gaps[step] <= self.rtol * self.scales[step]

    @property
    def ok(self) -> bool:
        return all(self.gap_ok(step) for step in range(self.steps)) and self.near_ties

    @property
    def worst_ratio(self) -> float | None:
        """The largest gap over its step's tolerance (at most 1 when every step is within it)."""
        step = self.worst_step
        if step is None:
            return None
        allowed = self.rtol * self.scales[step]
        return self.gaps[step] / allowed if allowed else (0.0 if self.gaps[step] == 0 else float("inf"))

    @property
    def near_ties(self) -> bool:
        """Every divergence is a near tie: the reference's margin between the two tokens is within tolerance."""
        return all(d["margin"] <= self.rtol * self.scales[d["step"]] for d in self.divergences)

    def summary(self) -> str:
        worst = self.worst_step
        if worst is None:
            return "no steps compared"
        text = (f"{self.candidate} vs {self.reference}: max logit gap {max(self.gaps):.3g} (worst at step {worst}: "
                f"{self.gaps[worst]:.3g} against {self.rtol * self.scales[worst]:.3g} allowed), greedy tokens agree "
                f"at {sum(self.agree)}/{self.steps} steps")
        first = self.first_divergence
        if first is not None:
            d = next(d for d in self.divergences if d["step"] == first)
            text += (f"; first divergence at step {first} (row {d['row']}: {d['reference_token']} vs "
                     f"{d['candidate_token']}, reference margin {d['margin']:.3g})")
        return text + (": OK" if self.ok else ": FAIL")

    def to_dict(self) -> dict:
        return {"reference": self.reference, "candidate": self.candidate, "rtol": self.rtol, "ok": self.ok,
                "worst_ratio": self.worst_ratio, "near_ties": self.near_ties, "first_divergence": self.first_divergence, "gaps": self.gaps, "scales": self.scales,
                "agree": self.agree, "divergences": self.divergences, "summary": self.summary()}


# region compare-step
def compare_step(result: LogitComparison, step: int, reference: torch.Tensor, candidate: torch.Tensor) -> None:
    """Add one step's logits ``(B, V)`` to ``result``."""
    reference, candidate = reference.double(), candidate.double()
    result.gaps.append((candidate - reference).abs().max().item())
    result.scales.append(reference.abs().max().item())
    ours, theirs = reference.argmax(-1), candidate.argmax(-1)
    result.agree.append(bool(torch.equal(ours, theirs)))
    for row in torch.nonzero(ours != theirs).flatten().tolist():
        margin = (reference[row, ours[row]] - reference[row, theirs[row]]).item()
        result.divergences.append({"step": step, "row": row, "reference_token": int(ours[row]),
                                   "candidate_token": int(theirs[row]), "margin": margin})
# endregion compare-step


@dataclass
class ReferenceDecode:
    """A reference runner's greedy decode, kept to compare candidates with one after another: its logits
    ``(B, V)`` and greedy tokens ``(B, 1)`` per step, on the CPU (a run's GPU memory is not changed by
    them: 66 MB of bf16 logits for 256 steps of the 8B's 128,256-token vocabulary at batch 1)."""

    backend: str
    model: object
    prompt: torch.Tensor
    logits: list[torch.Tensor] = field(default_factory=list)
    tokens: list[torch.Tensor] = field(default_factory=list)


@torch.no_grad()
def record_reference(reference: Runner, prompt: torch.Tensor, new_tokens: int) -> ReferenceDecode:
    """One greedy decode of ``reference`` after ``prompt``, its logits and tokens kept step by step."""
    record = ReferenceDecode(reference.backend, reference.model, prompt)

    def on_logits(step: int, logits: torch.Tensor) -> None:
        record.logits.append(logits.cpu())
        record.tokens.append(reference.ops.sample(logits)[:, None])

    greedy_tokens(reference, prompt, new_tokens, on_logits=on_logits)
    return record


@torch.no_grad()
def compare_with(record: ReferenceDecode, candidate: Runner, *, rtol: float | None = None) -> LogitComparison:
    """``candidate`` fed the reference's tokens (teacher forcing), its logits compared with the recorded
    ones at every step (see the module). The candidate's cache must hold the whole decode."""
    if candidate.model is not record.model:
        raise ValueError("compare_greedy: the two runners must run the same model (the same weights)")
    dtype = candidate.model.dtype
    result = LogitComparison(record.backend, candidate.backend, rtol if rtol is not None else LOGIT_RTOL[dtype])
    prompt, length = record.prompt, record.prompt.shape[1]
    if length + len(record.logits) > candidate.cache.max_seq:
        raise ValueError(f"{length} prompt + {len(record.logits)} new tokens exceed the candidate's cache "
                         f"({candidate.cache.max_seq} positions)")
    positions = torch.arange(length + len(record.logits), device=prompt.device)
    logits = candidate.prefill(prompt, positions[:length])[:, -1].cpu()
    for step, reference in enumerate(record.logits):
        if step > 0:            # the candidate's logits after the reference's previous token
            logits = candidate.decode(record.tokens[step - 1], positions[length + step - 1:length + step])[:, -1].cpu()
        compare_step(result, step, reference, logits)
    return result


def compare_greedy(reference: Runner, candidate: Runner, prompt: torch.Tensor, new_tokens: int, *,
                   rtol: float | None = None) -> LogitComparison:
    """Compare ``candidate`` with ``reference`` over a greedy decode of ``new_tokens`` after ``prompt``
    (see the module). Both runners must be of the same model, with caches for the whole decode."""
    if candidate.model is not reference.model:
        raise ValueError("compare_greedy: the two runners must run the same model (the same weights)")
    return compare_with(record_reference(reference, prompt, new_tokens), candidate, rtol=rtol)
