"""What the agent optimises: an operator of hello_gpu.ops on one route, from one starting rung."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Task:
    """``op`` names a folder of ``hello_gpu.ops`` (its spec gives the reference, inputs, tolerances,
    shapes and work model); ``start`` the rung the search starts from; ``route`` "hip" or "triton".

    ``check_shapes`` default to the spec's EDGE_SHAPES, ``bench_shape`` to its largest BENCH_SHAPES,
    ``dtypes`` to the spec's DTYPES, ``distributions`` to the spec's DISTRIBUTIONS (the ones the
    ladder checks too: values near overflow, rows of -inf), never fewer than two. A KernelBench-style problem becomes a Task through
    :func:`hello_gpu.agent.kernelbench.load_problem` (``problem_path`` set, ``op`` then its name).
    """

    op: str
    start: str
    route: str
    dtypes: tuple[str, ...] = ()
    check_shapes: tuple = ()
    bench_shape: object = None
    seeds: int = 3
    distributions: tuple[str, ...] = ()          # () = the spec's DISTRIBUTIONS
    deterministic: bool = False
    # Kernels on other CUDA streams allowed, when the call joins them to the caller's stream before it
    # returns (the timer's end event then waits for them); threads and graphs stay refused.
    side_streams: bool = False
    problem_path: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.route not in ("hip", "triton"):
            raise ValueError(f"route must be hip or triton, got {self.route!r}")
        if self.seeds < 3:
            raise ValueError(f"at least 3 fresh seeds per check (got {self.seeds})")
        if self.distributions and len(self.distributions) < 2:
            raise ValueError(f"at least 2 input distributions per check (got {self.distributions})")
