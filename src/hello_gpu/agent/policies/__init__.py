"""Policies: what to try next. ``scripted`` (default, offline, deterministic with a seed) and ``llm`` (any
OpenAI-compatible chat endpoint).

A policy has ``name``, ``exhausted`` and ``propose(context) -> list[Candidate]``. ``context`` holds
``task`` (:class:`~hello_gpu.agent.task.Task`), ``current`` (the current best candidate), ``history``
(every candidate so far, with states and reasons), ``analysis`` (at least ``bound``: "memory" |
"compute" | "latency" | "unknown" and ``fraction_of_attainable``; optionally ``occupancy_pct``,
``dram_bytes_per_call``, ``top_stall``, ``registers``, ``spills``), ``round`` and ``seed``. Each
proposed candidate has ``parent_id = current.id``, the whole new source (and launcher), ``action`` and
``hypothesis``. The LLM policy raises :class:`LLMError` when its endpoint gives nothing usable.
"""

from __future__ import annotations

import inspect

from .llm import LLMError, LLMPolicy
from .scripted import ScriptedPolicy

POLICIES = {"scripted": ScriptedPolicy, "llm": LLMPolicy}


def make_policy(name: str, **options):
    """``make_policy("scripted", per_round=1)`` or ``make_policy("llm", base_url=..., model=...)``."""
    try:
        policy = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}") from None
    accepted = [p for p in inspect.signature(policy).parameters if p != "self"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:    # a typo (modle=) must not be ignored silently
        raise ValueError(f"the {name} policy takes no option {', '.join(unknown)}; its options: {', '.join(accepted)}")
    return policy(**options)


__all__ = ["LLMError", "LLMPolicy", "POLICIES", "ScriptedPolicy", "make_policy"]
