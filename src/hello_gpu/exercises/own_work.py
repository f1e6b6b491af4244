"""Is the work the learner's kernel's own? A run() that hands it to torch (``torch.mm``, ``getattr(torch, "m" +
"m")``, ``torch.functional.einsum``) or to numpy passes every correctness case, and PASS would say the kernel is
right when no kernel of theirs computed anything (found from outside: three such matmul "kernels" passed).

Two looks, as the agent's (agent/anticheat.py) but in this process, since an exercise is the learner's own:

- the source, read by :func:`anticheat.find_library_calls` (any ``torch.*`` call but allocation and device
  queries, reached through any alias; numpy; in a .hip file cuBLAS, CUB, ``at::`` ...), its undecidable lookups
  (a computed name) kept as notes;
- every call the checker makes, under a dispatch mode that records each ATen op that computes (allocation,
  views and copies, anticheat.CPU_GLUE_OPS, pass): what the source hid shows here. The timed calls are not
  watched (a dispatch mode costs host time a call); they run the code the watched calls ran.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from ..agent.anticheat import CPU_GLUE_OPS, find_library_calls, static_hints


def source_library_calls(route: str, source: str, companion: str | None) -> tuple[list[str], list[str]]:
    """(reasons, notes) from reading the files: reasons fail the exercise, notes are what no scan can decide."""
    candidate = SimpleNamespace(route=route, source=source, companion=companion)
    return find_library_calls(candidate), static_hints(candidate)


class TorchOpsWatch:
    """Counts the computing ATen ops made inside the calls of functions it wraps."""

    def __init__(self):
        self.ops: Counter = Counter()

    def wrap(self, function):
        from torch.utils._python_dispatch import TorchDispatchMode
        ops, glue = self.ops, CPU_GLUE_OPS

        class Watch(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func._schema.name    # noqa: SLF001 - "aten::mm" for aten.mm.default
                if name not in glue:
                    ops[name] += 1
                return func(*args, **(kwargs or {}))

        def watched(*args, **kwargs):
            with Watch():
                return function(*args, **kwargs)
        return watched

    def reasons(self) -> list[str]:
        if not self.ops:
            return []
        listed = ", ".join(f"{name} ({count} calls)" for name, count in self.ops.most_common())
        return [f"the checked calls computed with torch: {listed}; the work must be done by your own kernel"]
