"""Do two backends compute the same model? Logits step by step through a greedy decode (issue 23, part 4).

:func:`compare_greedy` runs a reference runner (eager) and a candidate side by side, each with its own
KV cache. The reference decodes greedily; the candidate is fed the reference's tokens (teacher
forcing), so the two see the same context at every step and their logits are comparable at every
step, even after a near tie made them choose differently once.

The yardstick is the exact answer, not eager: the same weights run once more in float64
(:func:`exact_logits`, the weights widened one projection at a time), fed the same tokens. Per step:

- each side's error, ``max |logits - exact|`` over the batch and the vocabulary; the candidate passes the
  step when its error is at most ERROR_FACTOR times eager's own (eager's error is what the model's dtype
  costs: two bf16 programs that round differently are each that far from the exact logits);
- the largest gap to eager, reported;
- whether the greedy tokens agree (each row's argmax); where they do not, the reference's margin between
  its token and the candidate's: a divergence is a near tie when that margin is within the two sides'
  errors together (it must be: the candidate's logits are within its error of the exact ones).

Why not a fixed tolerance on the gap to eager: the first one (2^-5 of the step's largest logit, the bf16
"a few units of rounding" guess) failed torch.compile itself on the H100 (8B, 256 steps: compile's gap to
eager 0.369, 2.1x that tolerance), while a kernel that drops a block of work is off by far more than any
rounding (tests/test_models_backends.py). Measuring the dtype's own error in the same run needs no guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F

from .backends import Runner, greedy_tokens
from .llama import EAGER_OPS, KVCache

# A candidate may be this many times as far from the exact logits as eager is, step by step. Two programs of
# the same dtype rounding differently are each about as far: the largest of 128k errors moves little from
# one to the other, so 2x is room for chance, while a kernel accumulating in bf16 where eager keeps float32
# (16x the rounding) or dropping work (the whole logit) is far outside.
ERROR_FACTOR = 2.0
# Eager's error can be 0 at a step (a float64 model is the exact computation itself) or tiny by luck: the
# allowance never goes below this share of the step's largest |exact logit|, a few roundings of the dtype.
ERROR_FLOOR = {torch.bfloat16: 2**-9, torch.float16: 2**-12, torch.float32: 2**-22, torch.float64: 2**-48}
EXACT_CHUNK = 32              # generated positions per exact forward: (B, 32, vocab) float64 logits at a time


@dataclass
class LogitComparison:
    reference: str
    candidate: str
    factor: float
    floor: float                                               # ERROR_FLOOR of the model's dtype
    gaps: list[float] = field(default_factory=list)            # per step: max |candidate - reference|
    scales: list[float] = field(default_factory=list)          # per step: max |exact|
    errors: list[float] = field(default_factory=list)          # per step: max |candidate - exact|
    reference_errors: list[float] = field(default_factory=list)   # per step: max |reference - exact|
    agree: list[bool] = field(default_factory=list)            # per step: every row's greedy token agrees
    divergences: list[dict] = field(default_factory=list)      # {step, row, reference_token, candidate_token, margin}

    @property
    def steps(self) -> int:
        return len(self.gaps)

    @property
    def first_divergence(self) -> int | None:
        return next((step for step, same in enumerate(self.agree) if not same), None)

    def own_error(self, step: int) -> float:
        """Eager's error at ``step``, never below the floor."""
        return max(self.reference_errors[step], self.floor * self.scales[step])

    def allowed(self, step: int) -> float:
        return self.factor * self.own_error(step)

    def ratio(self, step: int) -> float:
        """The candidate's error over eager's own at ``step`` (at most ``factor`` to pass)."""
        own = self.own_error(step)
        return self.errors[step] / own if own else (0.0 if self.errors[step] == 0 else float("inf"))

    @property
    def worst_step(self) -> int | None:
        return max(range(self.steps), key=self.ratio) if self.steps else None

    @property
    def worst_ratio(self) -> float | None:
        step = self.worst_step
        return None if step is None else self.ratio(step)

    def step_ok(self, step: int) -> bool:
        return self.errors[step] <= self.allowed(step)

    @property
    def ok(self) -> bool:
        return all(self.step_ok(step) for step in range(self.steps)) and self.near_ties

    @property
    def near_ties(self) -> bool:
        """Every divergence is a near tie: the reference's margin between the two tokens is within the two
        sides' errors at that step (the candidate's taken at its allowance)."""
        return all(d["margin"] <= self.own_error(d["step"]) + self.allowed(d["step"]) for d in self.divergences)

    def summary(self) -> str:
        worst = self.worst_step
        if worst is None:
            return "no steps compared"
        text = (f"{self.candidate} vs {self.reference}: error against float64 at most {self.ratio(worst):.2g}x "
                f"{self.reference}'s own (worst at step {worst}: {self.errors[worst]:.3g} against "
                f"{self.own_error(worst):.3g}; {self.factor:g}x allowed), max gap to {self.reference} "
                f"{max(self.gaps):.3g}, greedy tokens agree at {sum(self.agree)}/{self.steps} steps")
        first = self.first_divergence
        if first is not None:
            d = next(d for d in self.divergences if d["step"] == first)
            text += (f"; first divergence at step {first} (row {d['row']}: {d['reference_token']} vs "
                     f"{d['candidate_token']}, reference margin {d['margin']:.3g})")
        return text + (": OK" if self.ok else ": FAIL")

    def to_dict(self) -> dict:
        return {"reference": self.reference, "candidate": self.candidate, "factor": self.factor, "floor": self.floor,
                "ok": self.ok, "worst_ratio": self.worst_ratio, "near_ties": self.near_ties,
                "first_divergence": self.first_divergence, "gaps": self.gaps, "scales": self.scales,
                "errors": self.errors, "reference_errors": self.reference_errors, "agree": self.agree,
                "divergences": self.divergences, "summary": self.summary()}


# region compare-step
def compare_step(result: LogitComparison, step: int, reference: torch.Tensor, candidate: torch.Tensor,
                 exact: torch.Tensor) -> None:
    """Add one step's logits ``(B, V)`` to ``result``: the reference's, the candidate's and the exact ones."""
    reference, candidate, exact = reference.double(), candidate.double(), exact.double()
    result.gaps.append((candidate - reference).abs().max().item())
    result.scales.append(exact.abs().max().item())
    result.errors.append((candidate - exact).abs().max().item())
    result.reference_errors.append((reference - exact).abs().max().item())
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
    ``(B, V)`` and greedy tokens ``(B, 1)`` per step, and the exact logits of the same steps, on the CPU (a
    run's GPU memory is not changed by them: 66 MB of bf16 logits and 131 MB of float32 exact ones for 256
    steps of the 8B's 128,256-token vocabulary at batch 1)."""

    backend: str
    model: object
    prompt: torch.Tensor
    logits: list[torch.Tensor] = field(default_factory=list)
    tokens: list[torch.Tensor] = field(default_factory=list)
    exact: list[torch.Tensor] = field(default_factory=list)


# The model's own forward in float64: tokens embedded and every projection computed with the weight widened
# at the call (one weight at a time: the 8B's largest, the 128,256 x 4096 head, is 4.2 GB in float64, not the
# 64 GB of a float64 copy of the model); norms, rotations and attention follow their inputs' dtype.
EXACT_OPS = replace(EAGER_OPS, embed=lambda tokens, weight: F.embedding(tokens, weight).double(),
                    linear=lambda x, weight: F.linear(x, weight.double()))


@torch.no_grad()
def exact_logits(model, prompt: torch.Tensor, tokens: list[torch.Tensor]) -> list[torch.Tensor]:
    """The float64 logits ``(B, V)`` of each step of a decode fed ``tokens`` (``(B, 1)`` each) after ``prompt``:
    step 0's after the prompt, step s's after ``tokens[s - 1]``. One prefill of the prompt, then the fed
    tokens EXACT_CHUNK at a time through a float64 cache. Kept on the CPU, in float32 for a 16-bit model
    (2^-24 of a logit is nothing next to its bf16 error) and in float64 otherwise."""
    batch, length = prompt.shape
    steps = len(tokens)
    keep = torch.float32 if model.dtype in (torch.bfloat16, torch.float16) else torch.float64
    cache = KVCache(model.config, batch, length + steps, device=model.device, dtype=torch.float64)
    positions = torch.arange(length + steps, device=prompt.device)
    found = [model(prompt, positions[:length], cache, ops=EXACT_OPS, last_only=True)[:, -1].to(keep).cpu()]
    for start in range(0, steps - 1, EXACT_CHUNK):
        fed = torch.cat(tokens[start:min(start + EXACT_CHUNK, steps - 1)], dim=1)
        logits = model(fed, positions[length + start:length + start + fed.shape[1]], cache, ops=EXACT_OPS)
        found.extend(logits.to(keep).cpu().unbind(1))
    return found


@torch.no_grad()
def record_reference(reference: Runner, prompt: torch.Tensor, new_tokens: int) -> ReferenceDecode:
    """One greedy decode of ``reference`` after ``prompt``, its logits and tokens kept step by step, and the
    exact logits of the same decode."""
    record = ReferenceDecode(reference.backend, reference.model, prompt)

    def on_logits(step: int, logits: torch.Tensor) -> None:
        record.logits.append(logits.cpu())
        record.tokens.append(reference.ops.sample(logits)[:, None])

    greedy_tokens(reference, prompt, new_tokens, on_logits=on_logits)
    record.exact = exact_logits(reference.model, prompt, record.tokens)
    return record


@torch.no_grad()
def compare_with(record: ReferenceDecode, candidate: Runner, *, factor: float = ERROR_FACTOR) -> LogitComparison:
    """``candidate`` fed the reference's tokens (teacher forcing), its logits compared with the recorded
    and the exact ones at every step (see the module). The candidate's cache must hold the whole decode."""
    if candidate.model is not record.model:
        raise ValueError("compare_greedy: the two runners must run the same model (the same weights)")
    steps = len(record.logits)
    if len(record.tokens) != steps or len(record.exact) != steps:
        raise ValueError(f"compare_with: the reference record holds {steps} step(s) of logits, {len(record.tokens)} of "
                         f"tokens and {len(record.exact)} of exact logits; each step needs all three (record_reference "
                         f"fills them; for a record made by hand, record.exact = exact_logits(model, prompt, tokens))")
    result = LogitComparison(record.backend, candidate.backend, factor, ERROR_FLOOR[candidate.model.dtype])
    prompt, length = record.prompt, record.prompt.shape[1]
    if length + len(record.logits) > candidate.cache.max_seq:
        raise ValueError(f"{length} prompt + {len(record.logits)} new tokens exceed the candidate's cache "
                         f"({candidate.cache.max_seq} positions)")
    positions = torch.arange(length + len(record.logits), device=prompt.device)
    logits = candidate.prefill(prompt, positions[:length])[:, -1].cpu()
    for step, (reference, exact) in enumerate(zip(record.logits, record.exact, strict=True)):
        if step > 0:            # the candidate's logits after the reference's previous token
            logits = candidate.decode(record.tokens[step - 1], positions[length + step - 1:length + step])[:, -1].cpu()
        compare_step(result, step, reference, logits, exact)
    return result


def compare_greedy(reference: Runner, candidate: Runner, prompt: torch.Tensor, new_tokens: int, *,
                   factor: float = ERROR_FACTOR) -> LogitComparison:
    """Compare ``candidate`` with ``reference`` over a greedy decode of ``new_tokens`` after ``prompt``
    (see the module). Both runners must be of the same model, with caches for the whole decode."""
    if candidate.model is not reference.model:
        raise ValueError("compare_greedy: the two runners must run the same model (the same weights)")
    return compare_with(record_reference(reference, prompt, new_tokens), candidate, factor=factor)
