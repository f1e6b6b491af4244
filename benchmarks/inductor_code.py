"""What torch.compile writes for a function: its Triton source and the launch each kernel runs with.

The source alone does not say how a kernel is launched: Inductor picks XBLOCK, R0_BLOCK, warps and
stages when it compiles, and may scale R0_BLOCK by the registers used. So the compiled function is
called twice and the launcher each autotuner kept is read back. Used by the sweeps and experiments
that set a rung against torch.compile (rms_norm_sweep.py, softmax_dirty_l2.py).
"""

from __future__ import annotations

import torch


def inductor_kernels(function, *inputs, options: dict | None = None) -> dict:
    """``{"source": the Triton code, "launches": [{"kernel", "candidates", "running"}]}`` for
    ``torch.compile(function, options=options)`` called on ``inputs``."""
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    from torch._inductor.utils import run_and_get_code
    known = len(PyCodeCache.modules)
    compiled = torch.compile(function, options=options)
    _, sources = run_and_get_code(compiled, *inputs)
    compiled(*inputs)                                   # a second call: the launcher chosen is kept

    def described(config) -> dict:
        return {"kwargs": dict(config.kwargs), "num_warps": config.num_warps, "num_stages": config.num_stages}

    launches = []
    for module in PyCodeCache.modules[known:]:
        for name, value in vars(module).items():
            if isinstance(value, CachingAutotuner):
                # configs is emptied (None) once autotuning has picked a launcher
                launches.append({"kernel": name, "candidates": [described(c) for c in value.configs or []],
                                 "running": [described(launcher.config) for launcher in value.launchers]})
    return {"source": "\n".join(sources), "launches": launches}
