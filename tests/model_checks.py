"""Checks the tests of the hello-gpu backend's fused model kernels share (imported by those test files)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from hello_gpu.models import build_model, compare_greedy, make_runner
from hello_gpu.models.llama import CONFIGS


def assert_forced_decode_gives_eagers_logits(name: str | tuple[str, ...], dtype: torch.dtype, device: str) -> None:
    """A greedy decode of the tiny model at batch 1 with the replacement ``name`` (or each of several) forced in
    (checked, not timed): the prompt's rows run the operations it composes, each decode step the kernel; every
    step's logits within the backend's bound of eager's and the same tokens."""
    names = (name,) if isinstance(name, str) else tuple(name)
    model = build_model(CONFIGS["tiny"], dtype=dtype, seed=8, device=device)
    prompt = torch.randint(0, CONFIGS["tiny"].vocab_size, (1, 5), generator=torch.Generator().manual_seed(12))
    eager = make_runner(model, "eager", batch=1, max_seq=11)
    ours = make_runner(model, "hello-gpu", batch=1, max_seq=11, force=list(names))
    assert set(names) <= set(ours.used()), ours.used()
    result = compare_greedy(eager, ours, prompt.to(device), 6)
    assert result.ok, result.summary()


def always_faster(baseline, kernel):
    """A timer for choose_replacements that says 1.5x [1.4, 1.6], "faster", without timing: the tests of the
    decision itself."""
    return SimpleNamespace(verdict="faster", speedup=SimpleNamespace(value=1.5, ci95=(1.4, 1.6)))
