"""``hello-gpu model profile``: where a whole model's time goes, by category, and what replacing each could buy.

A few steps (decode steps of the Llama, forward passes of the vision model) run under ``torch.profiler``,
each inside a ``record_function("hello_gpu.call#i")`` range (:data:`hello_gpu.profile.kernel_table.CALL_LABEL`,
the convention of the kernel table). Every operation the model runs is inside a labelled range
``hello_gpu.model/<category>/<op>``: the Llama's :class:`~hello_gpu.models.llama.ModelOps` through
:func:`~hello_gpu.models.llama.labelled_ops`, the vision model's leaf modules through forward hooks.

- **On a GPU** each kernel is assigned to the range its launch happened in (the launch's correlation
  id), else classified by its name (:func:`category_of_name`: hello-gpu's own model kernels by
  :data:`MODEL_KERNELS`, as a captured CUDA graph replays them outside any range, and their time is their
  operation's (:func:`operation_of_name`), so a graph's profile has a roofline row for those operations;
  Inductor and library kernels by pattern); the time the GPU sat idle within the steps is "launch gaps".
- **On the CPU** there are no kernels: each labelled range's own duration is its operation's time, and
  the rest of the step (Python, framework dispatch, unlabelled glue) is "host, unlabelled".

:func:`categorize_trace` is a pure function of the exported Chrome trace. With the share ``s`` of a
category, replacing it by an infinitely fast kernel bounds the whole speed-up at ``1 / (1 - s)``
(Amdahl), and by a kernel ``k`` times faster at ``1 / (1 - s + s / k)``.
"""

from __future__ import annotations

import bisect
import json
import math
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..profile import is_kernel_event, is_launch_event
from ..profile.kernel_names import display_name, kernel_key
from ..profile.cupti_teardown import keep_cupti_for_graphs
from ..profile.kernel_table import CALL_LABEL
from .llama import LABEL_PREFIX, OP_CATEGORIES
from .work import operation_roofline, step_work

LAUNCH_GAPS = "launch gaps"
HOST = "host, unlabelled"

# A kernel's or an op's category from its name, first match wins; for what ran outside a labelled range.
NAME_PATTERNS = {
    "attention": r"flash|fmha|attention|sdpa|scaled_dot_product",
    "convolution": r"conv|implicit_gemm|winograd|cudnn|miopen",
    "GEMM/GEMV": r"gemm|gemv|nvjet|xmma|cutlass|^Cijk_|matmul|\bmm\b|aten::(mm|addmm|bmm|linear)$|triton_tem_|splitk",
    "norm": r"norm|rsqrt",
    "sampling": r"argmax|topk|multinomial|sample",
    "reduction": r"triton_red_|triton_per_|reduce_kernel|\bsum\b|\bmean\b",
    "pooling": r"pool",
    "elementwise": r"elementwise|vectorized|triton_poi_|copy|cat|index|fill|silu|relu|mul|add|embedding|gather|scatter",
}
COMPILED_PATTERNS = [(category, re.compile(pattern, re.IGNORECASE)) for category, pattern in NAME_PATTERNS.items()]


# The operation of each kernel that hello_gpu.models launches (its Triton function's name), for the kernels of a
# captured CUDA graph: their launches happened at capture, so no labelled range holds them, and names such as
# split_kernel or _rope_and_write say nothing to the patterns above (an H100 profile of the hello-gpu step had
# its attention under "other"). tests/test_models_run.py checks every launched kernel of the package is here.
MODEL_KERNELS = {
    "add_rms_norm_kernel": "add_rms_norm",
    "_write_rows": "cache_write",
    "split_kernel": "attention", "merge_kernel": "attention",
    "gate_up_swiglu_kernel": "gate_up_swiglu",
    "gemv_add_rms_norm_kernel": "linear_add_rms_norm",
    "gemv_add_kernel": "linear_add",
    "norm_gate_up_swiglu_kernel": "norm_gate_up_swiglu",
    "norm_qkv_rope_write_kernel": "norm_qkv_rope_cache_write",
    "early_weight_gemv_kernel": "linear",
    "span_kernel": "prefill_attention", "prefill_kernel": "prefill_attention",
    "qkv_rope_write_kernel": "qkv_rope_cache_write",
    "_rope_and_write": "rope_cache_write",
    "_rope_q_and_k": "rope",
    "_swiglu_rows": "swiglu",
}


# Operations whose calls may run kernels that are not hello_gpu.models' own (linear: a ladder rung's GEMV or a
# library's for the head and a prompt's rows): their own kernels' time by name alone may be part of their calls only.
SHARED_OPERATIONS = frozenset({"linear"})


def operation_of_name(name: str) -> str | None:
    """The operation whose every call is this kernel's work, for a kernel no labelled range holds (a captured
    graph's); None for any other kernel, and for an operation of :data:`SHARED_OPERATIONS`."""
    operation = MODEL_KERNELS.get(kernel_key(name))
    return None if operation in SHARED_OPERATIONS else operation


def category_of_name(name: str) -> str:
    operation = MODEL_KERNELS.get(kernel_key(name))
    if operation is not None:
        return OP_CATEGORIES[operation]
    return next((category for category, pattern in COMPILED_PATTERNS if pattern.search(name)), "other")


@dataclass
class ProfileRow:
    name: str                    # a kernel (GPU) or a labelled operation (CPU)
    category: str
    calls: int
    seconds: float

    def to_dict(self) -> dict:
        return {"name": self.name, "category": self.category, "calls": self.calls, "seconds": self.seconds}


def amdahl(share: float, faster: float = math.inf) -> float:
    """The whole model's speed-up bound when a part of share ``share`` runs ``faster`` times faster: infinite where
    that part is the whole step and takes no time (a compiled or graphed step profiled on the CPU is one range)."""
    share = min(share, 1.0)
    rest = 1 - share + share / faster
    return 1 / rest if rest > 0 else math.inf


@dataclass
class ModelProfile:
    title: str
    device: str                  # "gpu" (kernel times) or "cpu" (labelled ranges on the host)
    steps: int
    wall_seconds: float          # the profiled steps, end to end
    categories: dict[str, float] = field(default_factory=dict)
    rows: list[ProfileRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Seconds of each labelled operation (ModelOps name) over all steps: its kernels' time on a GPU,
    # its range's host time on the CPU; empty where nothing was labelled (a compiled step, a graph).
    operations: dict[str, float] = field(default_factory=dict)
    roofline: list[dict] = field(default_factory=list)       # hello_gpu.models.work.operation_roofline rows

    # region amdahl
    def share(self, category: str) -> float:
        return self.categories.get(category, 0.0) / self.wall_seconds if self.wall_seconds else 0.0

    def amdahl(self, category: str, faster: float = math.inf) -> float:
        """The whole model's speed-up bound when ``category`` runs ``faster`` times faster."""
        return amdahl(self.share(category), faster)
    # endregion amdahl

    def ranked_categories(self) -> list[tuple[str, float]]:
        return sorted(self.categories.items(), key=lambda item: -item[1])

    def to_dict(self) -> dict:
        return {"kind": "model-profile", "title": self.title, "device": self.device, "steps": self.steps,
                "wall_seconds": self.wall_seconds, "notes": self.notes,
                "categories": [{"category": c, "seconds": s, "share": self.share(c), "amdahl_bound": _finite(self.amdahl(c)),
                                "amdahl_bound_2x": _finite(self.amdahl(c, 2.0))} for c, s in self.ranked_categories()],
                "rows": [{**row.to_dict(), "share": row.seconds / self.wall_seconds if self.wall_seconds else 0.0}
                         for row in self.rows],
                "operations": self.operations, "roofline": self.roofline}


def _ranges(events: list[dict], prefix: str) -> list[tuple[float, float, str]]:
    found = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), str(e["name"])) for e in events
             if e.get("ph") == "X" and e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(prefix)]
    return sorted(found)


def _innermost(ranges: list[tuple[float, float, str]], moment: float) -> str | None:
    """The name of the range containing ``moment``: labelled ranges do not nest, so it is the last one
    that starts at or before it, if that one has not ended."""
    index = bisect.bisect_right(ranges, (moment, float("inf"), "")) - 1
    return ranges[index][2] if index >= 0 and ranges[index][1] >= moment else None


def parse_label(label: str) -> tuple[str, str]:
    """"hello_gpu.model/GEMM/GEMV/linear" -> ("GEMM/GEMV", "linear"): a category may hold a "/", an op not."""
    category, _, operation = label.removeprefix(LABEL_PREFIX).rpartition("/")
    return category, operation


def _busy(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of intervals (kernels on several streams may overlap)."""
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    return total + (current_end - current_start if current_end is not None else 0.0)


def categorize_trace(trace, *, title: str = "model") -> ModelProfile:
    """A :class:`ModelProfile` from a torch.profiler Chrome trace (the exported dict or its event list)."""
    events = [e for e in (trace.get("traceEvents", []) if isinstance(trace, dict) else trace) if isinstance(e, dict)]
    calls = _ranges(events, CALL_LABEL)
    labels = _ranges(events, LABEL_PREFIX)
    wall = sum(end - start for start, end, _ in calls) * 1e-6          # trace times are microseconds
    kernels = [e for e in events if is_kernel_event(e)]
    profile = ModelProfile(title, "gpu" if kernels else "cpu", len(calls), wall)
    rows: dict[tuple[str, str], ProfileRow] = {}

    def add(name: str, category: str, seconds: float) -> None:
        row = rows.setdefault((name, category), ProfileRow(name, category, 0, 0.0))
        row.calls += 1
        row.seconds += seconds
        profile.categories[category] = profile.categories.get(category, 0.0) + seconds

    if kernels:
        launches = {e["args"]["correlation"]: e for e in events if is_launch_event(e)}
        intervals, by_name = [], set()
        for kernel in kernels:
            args = kernel.get("args") if isinstance(kernel.get("args"), dict) else {}
            launch = launches.get(args.get("correlation"))
            label = _innermost(labels, float(launch["ts"])) if launch else None
            name, seconds = str(kernel.get("name", "?")), float(kernel.get("dur", 0.0)) * 1e-6
            add(display_name(name), parse_label(label)[0] if label else category_of_name(name), seconds)
            operation = parse_label(label)[1] if label else operation_of_name(name)
            if operation:
                profile.operations[operation] = profile.operations.get(operation, 0.0) + seconds
                if not label:
                    by_name.add(operation)
            intervals.append((float(kernel["ts"]), float(kernel["ts"]) + float(kernel.get("dur", 0.0))))
        if by_name:
            profile.notes.append(f"timed by their kernels' names, no range holding their launches (a captured graph): "
                                 f"{', '.join(sorted(by_name))}; operations that also run other kernels (a ladder "
                                 f"rung's, a library's: {', '.join(sorted(SHARED_OPERATIONS))}) are not")
        gaps = max(wall - _busy(intervals) * 1e-6, 0.0)
        profile.categories[LAUNCH_GAPS] = gaps
        if not launches:
            profile.notes.append("no launch events in the trace: kernels classified by name only")
    else:
        for start, end, label in labels:
            category, operation = parse_label(label)
            add(operation, category, (end - start) * 1e-6)
            profile.operations[operation] = profile.operations.get(operation, 0.0) + (end - start) * 1e-6
        labelled = sum(profile.categories.values())
        profile.categories[HOST] = max(wall - labelled, 0.0)
        profile.notes.append("CPU: each operation's host time (its labelled range); no kernels, no launch gaps")
    profile.rows = sorted(rows.values(), key=lambda row: -row.seconds)
    return profile


def profile_steps(step, *, steps: int = 5, warmup: int = 2, title: str = "model",
                  trace_path: Path | None = None) -> ModelProfile:
    """Run ``step()`` ``warmup`` times, then ``steps`` times under torch.profiler; categorise the trace."""
    from torch.profiler import ProfilerActivity, profile, record_function, supported_activities

    on_gpu = torch.cuda.is_available() and ProfilerActivity.CUDA in supported_activities()

    def synchronize():
        if on_gpu:
            torch.cuda.synchronize()

    for _ in range(warmup):
        step()
    synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    keep_cupti_for_graphs()
    with profile(activities=activities) as profiler:
        for index in range(steps):
            with record_function(f"{CALL_LABEL}#{index}"):
                step()
                synchronize()
    with tempfile.TemporaryDirectory(prefix="hello-gpu-model-trace-") as folder:
        path = Path(trace_path) if trace_path is not None else Path(folder) / "trace.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        profiler.export_chrome_trace(str(path))
        trace = json.loads(path.read_text(encoding="utf-8"))
    return categorize_trace(trace, title=title)


def profile_llama(model, *, backend: str = "eager", batch: int = 1, prompt: int = 512, phase: str = "decode",
                  steps: int = 5, trace_path: Path | None = None) -> ModelProfile:
    """Decode steps (at position ``prompt``) or prefills of ``prompt`` tokens, operations labelled.

    Eager (and hello-gpu on the CPU) run with labelled operations; compiled steps and CUDA graphs fuse or
    hide the operations, so their kernels are classified by name."""
    from .backends import make_runner
    from .llama import labelled_ops

    if phase not in ("decode", "prefill"):
        raise ValueError(f"phase must be decode or prefill, got {phase!r}")
    runner = make_runner(model, backend, batch=batch, max_seq=prompt + 1, prompt=prompt)
    # Eager (and hello-gpu without its CUDA graph) calls the model itself with labelled operations; a
    # compiled step or a captured graph runs as it is, its kernels classified by name.
    direct = backend == "eager" or (backend.startswith("hello-gpu") and model.device.type != "cuda")
    ops = labelled_ops(runner.ops)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, model.config.vocab_size, (batch, prompt), generator=generator).to(model.device)
    positions = torch.arange(prompt + 1, device=model.device)
    token = tokens[:, -1:]

    def prefill():
        if direct:
            return model(tokens, positions[:prompt], runner.cache, ops=ops, last_only=True)
        return runner.prefill(tokens, positions[:prompt])

    def decode():
        if direct:
            return model(token, positions[prompt:], runner.cache, ops=ops)
        return runner.decode(token, positions[prompt:])

    with torch.no_grad():
        prefill()                      # the cache holds the prompt before the first decode step
    title = f"{model.config.name} {phase}, {backend}, batch {batch}, prompt {prompt}"
    with torch.no_grad():
        profile = profile_steps(decode if phase == "decode" else prefill, steps=steps, title=title,
                                trace_path=trace_path)
    work = step_work(model.config, model.dtype, batch=batch, tokens=1 if phase == "decode" else prompt,
                     cache_length=runner.cache.max_seq, last_only=phase == "prefill",
                     fused=profile.operations)
    seconds = {name: total / max(profile.steps, 1) for name, total in profile.operations.items()}
    profile.roofline = operation_roofline(seconds, work, _roofs(model.device, model.dtype),
                                          str(model.dtype).removeprefix("torch."))
    if not profile.operations:
        profile.notes.append("no labelled operations in this backend's steps (compiled or captured) and none of our "
                             "own kernels: no roofline per operation; the eager backend has one")
    return profile


def _roofs(device: torch.device, dtype: torch.dtype):
    """The roofs of this GPU for ``dtype``: the ceilings hello-gpu measured here (cached) and the
    datasheet (bench/specs.json); None on the CPU."""
    if device.type != "cuda":
        return None
    from ..bench import cached_ceilings
    from ..profile import roofs_from
    from ..runtime.device import device_info
    info = device_info(device.index)
    cached = cached_ceilings(allow_partial=True)
    ceilings = [("hello-gpu ceilings (cached)", cached.to_dict())] if cached is not None else []
    return roofs_from({"name": info.name, "arch": info.arch}, str(dtype).removeprefix("torch."), ceilings)


# ------------------------------------------------------------------------------------------ vision

# What hello-gpu's operators can and cannot replace, per category of a network.
# region replaceable
REPLACEABLE = {
    "GEMM/GEMV": "hello_gpu.ops.matmul (a matmul ladder, level with torch.mm on large squares) and "
                 "hello_gpu.ops.linear (F.linear's shapes; a GEMV rung for 1-16 rows)",
    "attention": "hello_gpu.ops.attention (prefill and decode rungs over contiguous q, K, V; causal or none, "
                 "no arbitrary mask)",
    "norm": "RMSNorm: hello_gpu.ops.rms_norm (a LayerNorm or BatchNorm is a different operator: no)",
    "convolution": "no: there is no convolution ladder",
    "pooling": "no: there is no pooling ladder",
    "reduction": "a sum: hello_gpu's reduce_sum ladder (its rungs, not yet a model operation)",
    "elementwise": "no dedicated ladder; vector_add shows the pattern (fusion into the neighbour is the real fix)",
    "sampling": "softmax: hello_gpu.ops.softmax where a softmax is taken; greedy argmax: no",
    LAUNCH_GAPS: "a CUDA graph of the whole step (the hello-gpu backend captures its decode step)",
    HOST: "a CUDA graph or torch.compile removes most of the Python per step (on a GPU)",
}
# endregion replaceable

VISION_MODULE_CATEGORIES = {"Conv2d": "convolution", "BatchNorm2d": "norm", "ReLU": "elementwise",
                            "MaxPool2d": "pooling", "AdaptiveAvgPool2d": "pooling", "Linear": "GEMM/GEMV"}


class SmallCNN(torch.nn.Module):
    """Our own ResNet-like network for when torchvision is absent: a stem, three residual stages, pooling
    and a classifier; 0.7 M parameters at 64x64."""

    def __init__(self, classes: int = 1000, width: int = 32):
        super().__init__()
        nn = torch.nn

        def block(channels_in, channels_out, stride):
            return nn.ModuleDict({
                "body": nn.Sequential(nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False),
                                      nn.BatchNorm2d(channels_out), nn.ReLU(),
                                      nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False),
                                      nn.BatchNorm2d(channels_out)),
                "skip": nn.Sequential(nn.Conv2d(channels_in, channels_out, 1, stride, bias=False),
                                      nn.BatchNorm2d(channels_out)),
                "out": nn.ReLU()})

        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.stages = nn.ModuleList([block(width, width, 1), block(width, 2 * width, 2),
                                     block(2 * width, 4 * width, 2)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * width, classes)

    def forward(self, x):
        x = self.stem(x)
        for stage in self.stages:
            x = stage["out"](stage["body"](x) + stage["skip"](x))
        return self.fc(self.pool(x).flatten(1))


def vision_model(device, dtype, *, seed: int = 0):
    """(model, name): torchvision's ResNet-50 with random weights if torchvision is installed, else :class:`SmallCNN`."""
    torch.manual_seed(seed)
    try:
        from torchvision.models import resnet50
        model, name = resnet50(weights=None), "resnet50 (torchvision, random weights)"
    except ImportError:
        model, name = SmallCNN(), "small CNN (ours; torchvision is not installed)"
    return model.to(device=device, dtype=dtype).eval(), name


# region vision-profile
def label_modules(model) -> list:
    """Forward hooks that put each leaf module of a known kind inside a labelled range; returns the handles."""
    from torch.autograd.profiler import record_function
    handles = []
    for module in model.modules():
        category = VISION_MODULE_CATEGORIES.get(type(module).__name__)
        if category is None:
            continue
        label = f"{LABEL_PREFIX}{category}/{type(module).__name__}"

        def enter(module, inputs, label=label):
            module._hello_gpu_range = record_function(label)
            module._hello_gpu_range.__enter__()

        def leave(module, inputs, output):
            module._hello_gpu_range.__exit__(None, None, None)
        handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
    return handles


def profile_vision(*, device="cpu", dtype=torch.float32, batch: int = 8, size: int = 224, steps: int = 5,
                   trace_path: Path | None = None) -> ModelProfile:
    model, name = vision_model(device, dtype)
    images = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(1)).to(device=device, dtype=dtype)
    handles = label_modules(model) if torch.device(device).type != "cuda" else []
    try:
        with torch.no_grad():
            result = profile_steps(lambda: model(images), steps=steps, title=f"{name}, batch {batch}, {size}x{size}",
                                   trace_path=trace_path)
    finally:
        for handle in handles:
            handle.remove()
    return result
# endregion vision-profile


def bound_text(bound: float | None, sign: str = "x") -> str:
    """An Amdahl bound as a table shows it: ``1.31x``, or ``unbounded`` where the part is the whole step (a record
    keeps that as null: JSON has no infinity)."""
    return "unbounded" if bound is None or math.isinf(bound) else f"{bound:.2f}{sign}"


def _finite(bound: float) -> float | None:
    return None if math.isinf(bound) else bound


def profile_table(profile: ModelProfile, top: int = 15):
    """Rich tables: the categories with their shares and Amdahl bounds, the top rows, and (where the
    operations were labelled) each operation on the roofline."""
    from rich.table import Table
    categories = Table(title=f"{profile.title}: {profile.steps} steps, {profile.wall_seconds / profile.steps * 1e3:.3f} "
                             f"ms a step ({profile.device})" if profile.steps else profile.title)
    for column in ("category", "share", "ms/step", "bound if free", "bound if 2x", "hello-gpu replacement"):
        categories.add_column(column, justify="left" if column in ("category", "hello-gpu replacement") else "right")
    for category, seconds in profile.ranked_categories():
        categories.add_row(category, f"{profile.share(category):.1%}", f"{seconds / max(profile.steps, 1) * 1e3:.3f}",
                           bound_text(profile.amdahl(category)), bound_text(profile.amdahl(category, 2.0)),
                           REPLACEABLE.get(category, ""))
    rows = Table(title=f"top {min(top, len(profile.rows))} {'kernels' if profile.device == 'gpu' else 'operations'} "
                       f"by time share")
    for column in ("name", "category", "calls/step", "share", "us/call"):
        rows.add_column(column, justify="left" if column in ("name", "category") else "right")
    for row in profile.rows[:top]:
        rows.add_row(row.name, row.category, f"{row.calls / max(profile.steps, 1):g}",
                     f"{row.seconds / profile.wall_seconds:.1%}" if profile.wall_seconds else "-",
                     f"{row.seconds / row.calls * 1e6:.1f}")
    if not profile.roofline:
        return categories, rows
    roofline = Table(title="each operation on the roofline (counted FLOPs and bytes of a step; hello_gpu.models.work)")
    for column in ("operation", "us/step", "GFLOP/s", "GB/s", "FLOP/B", "bound", "of roof"):
        roofline.add_column(column, justify="left" if column in ("operation", "bound") else "right")
    for entry in profile.roofline:
        fraction = entry["fraction_of_roof"]
        roofline.add_row(entry["operation"], f"{entry['seconds_per_step'] * 1e6:.1f}", f"{entry['flop_per_s'] / 1e9:,.1f}",
                         f"{entry['bytes_per_s'] / 1e9:,.1f}",
                         f"{entry['intensity']:.3g}" if entry["intensity"] else "-",
                         entry["bound"] or "-", f"{fraction:.0%}" if fraction is not None else "-")
    return categories, rows, roofline
