"""Keep CUPTI attached after torch.profiler stops, so that a CUDA graph captured later in the process works.

When torch.profiler stops, Kineto may tear CUPTI down and re-initialise it on the next use. PyTorch's own
comments (torch/profiler/profiler.py, torch/__init__.py's compile wrapper) say CUDA graphs "do not work well
with CUPTI teardown": with CUDA 12 the second re-initialisation after a teardown crashes. PyTorch turns the
teardown off itself, but only where it already knows of graphs: a profiler started after a graph was
captured, or a ``torch.compile(mode="reduce-overhead")`` wrapper built. A profile taken *before* any graph
(course chapter 18 profiles the 1B eager, then runs the backends that capture graphs, and its notebook
kernel died there on the H200 in session 21: the suspected cause, not yet confirmed on a GPU; the GPU tier's
tests/test_profile_gpu.py runs that order) gets no such protection. So every profiler this project
starts sets the same two variables first, unless the user set them.
"""

from __future__ import annotations

import os


def keep_cupti_for_graphs() -> None:
    """Set ``TEARDOWN_CUPTI=0`` and ``DISABLE_CUPTI_LAZY_REINIT=1`` (as PyTorch does for graphs) unless set."""
    os.environ.setdefault("TEARDOWN_CUPTI", "0")
    os.environ.setdefault("DISABLE_CUPTI_LAZY_REINIT", "1")
