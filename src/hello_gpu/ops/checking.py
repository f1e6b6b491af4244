"""``check_rung``: is a rung correct, on fresh inputs, in ways a lucky or lazy kernel cannot fake?

For each (dtype, shape, distribution, seed) case:

1. Fresh inputs from the spec (three seeds drawn at random each run, and recorded: a rung that
   returns a cached answer fails on the next seed; a failure can be replayed from its seed).
2. The output is **poisoned**: filled with NaN and passed as ``out=`` where the rung accepts one, so
   an element it never writes stays NaN. Where it allocates its own output, a NaN buffer of the same
   size is freed just before the call, so PyTorch's caching allocator hands the rung NaN memory rather
   than a previous run's correct answer.
3. The inputs are compared bit for bit before and after: a rung that writes into its inputs fails.
4. The output is compared with the spec's float64 reference under its tolerance, and its invariants.
5. A rung declaring ``deterministic: yes`` (or any rung, where the spec requires it) runs a second
   time on the same inputs and must give the same bits.

Memory scales with the problem (issue 17: a 6.4 GB softmax input made the old checker ask for 12 GiB
more on a full H200). The stated bound, on the device: the problem's own footprint (its inputs and one
output) plus at most twice that footprint for the checker's copies (the inputs kept to prove them
unchanged; then the first output kept for the bitwise repeat, and the repeat's own output), plus
CHECK_CHUNK_BYTES of float64 work at a time: ``memory_bound(footprint) = 3 x footprint + 1 GiB``. A copy
the device's free memory cannot hold goes to host memory instead. A spec whose outputs are large gives
its reference in chunks of output rows (``reference_chunks``, a :class:`ReferenceChunks`): each chunk
is computed in float64, compared and dropped, so a float64 copy of the whole output never exists.

Shared cases. A ladder checks every rung on the same cases, so it makes each (shape, dtype, seed,
distribution) once (a :class:`CaseCache`): the inputs, a kept copy of them, the tolerance and the
reference, all on the rungs' device, then runs every rung against them. Each rung still gets its own
freshly poisoned output; after each rung (after its bitwise repeat too) the inputs are compared bit for
bit with the kept copy, and a rung that wrote into them fails and the inputs are restored from the copy
before the next rung. Before, each of attention's 19 rungs rebuilt the 4x32x32x4096x4096x128 inputs,
their block probe (on the CPU: 6.5 s on a 2-core box) and two float64 references (the ladder did not
finish in 290 s on the H200). A shared case keeps its reference only where the device still has
``memory_bound(footprint)`` free beside it, else recomputes it per rung as a lone check does, and
:func:`check_rung` on its own (no cache given) makes each case for one use and drops it, within the
bound above.

Besides the spec's distributions, every (dtype, shape) gets:

- a **probe** case (:mod:`.probes`): inputs whose answer a kernel that drops, repeats or misplaces one
  block of work cannot match (reduce_sum's is exact in float32, with zero tolerance);
- **layout** cases: the same values as non-contiguous tensors (every tensor input a strided ``x[..., ::2]``
  view; the first 2-D input transposed). The rung must either give the right answer or refuse before
  launching with a :class:`~.rung.LayoutError` naming the tensor and its strides (what
  :class:`~.rung.BuiltRung` does for every rung that indexes raw pointers); a wrong answer fails.

The report's "error / allowed" is the worst element's error over the error its tolerance allows: a
pass is at most 1, whatever the magnitudes (a sum of 2^60-scaled values errs by 1e30 and passes).

Options. A spec's inputs are tensors, optionally followed by plain Python options (a bool, an int, a
float: attention's ``causal``), passed to the rung by position like the tensors. Options are what they
are: never copied, re-laid out or poisoned, and immutable, so "inputs unchanged" concerns the tensors
only. Plain values, not 0-d tensors, because a rung then reads them without a PyTorch operation, and
runtime.triton_replay keys a call on their values: its launches stay replayable.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from .probes import PROBE, probe_inputs, tolerance_override
from .rung import BuiltRung, LayoutError, Rung
from .shapes import numel, shape_label

# What a spec without DISTRIBUTIONS is checked on; a spec lists more ("near_overflow") where they apply.
DEFAULT_DISTRIBUTIONS = ("normal", "large")
SEED_COUNT = 3
# The Triton interpreter runs one program in ~0.6 ms of Python: on the CPU tier only the edge shapes up to this
# many elements are checked (a few dozen programs a case; 1823x781 would take seconds a case).
INTERPRETER_MAX_ELEMENTS = 2**16
INTERPRETER_BFLOAT16 = "bfloat16 arithmetic is wrong in the Triton interpreter (TRITON_INTERPRET=1): checked on a GPU"
# The non-contiguous layouts every rung is checked on (the distribution names of those cases).
STRIDED = "layout x[..., ::2]"
TRANSPOSED = "layout transposed"
LAYOUTS = (STRIDED, TRANSPOSED)
# Whether a rung reads strides does not depend on the size: the layout cases run on shapes up to this many
# elements (a strided copy of a 2^28 benchmark input would be 2 GiB more for nothing new).
LAYOUT_MAX_ELEMENTS = 2**22


# float64 work the checker does at a time (a chunk of the reference and its comparison), on top of the copies.
CHECK_CHUNK_BYTES = 2**30
CHECK_COPIES = 2          # footprints the checker may hold besides the problem's own (see the module's notes)


def memory_bound(footprint_bytes: int) -> int:
    """Device bytes a case may hold at most: the problem's footprint (inputs and one output), twice that
    again for the checker's copies, and CHECK_CHUNK_BYTES of float64 work."""
    return (1 + CHECK_COPIES) * footprint_bytes + CHECK_CHUNK_BYTES


@dataclass
class ReferenceChunks:
    """A reference given in chunks of output rows (its leading dimension), for outputs whose float64
    copy would not fit: ``chunks()`` yields ``(start, stop, expected)`` covering ``range(shape[0])`` in
    order, ``expected`` the reference for output rows ``start:stop``, on the inputs' device.

    ``dtype`` is what the reference was computed in; where it is not float64 (an operation that cannot be
    split into rows and whose float64 forward does not fit), ``rtol_factor`` widens the relative
    tolerance honestly (the reference then carries rounding of the same size as the kernel's) and
    ``note`` says so in the evidence."""

    shape: tuple
    chunks: Callable[[], Iterator[tuple[int, int, Any]]]
    dtype: str = "float64"
    rtol_factor: float = 1.0
    note: str = ""


def fresh_seeds(count: int = SEED_COUNT) -> tuple[int, ...]:
    """New seeds every run (from the OS), so no rung can be tuned to, or cache, one fixed input."""
    chooser = random.SystemRandom()
    return tuple(chooser.randrange(2**31) for _ in range(count))


@dataclass
class CaseResult:
    """One checked case. ``passed`` is None when the case was skipped (``reason`` says why)."""

    shape: str
    dtype: str
    seed: int | None
    distribution: str | None
    passed: bool | None
    reason: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    error_over_allowed: float | None = None       # worst error / its tolerance: <= 1 passes
    refused: str | None = None                    # a layout case the rung refused clearly (LayoutError)
    note: str = ""          # how the reference was computed, where not the spec's plain float64

    @property
    def skipped(self) -> bool:
        return self.passed is None


@dataclass
class CheckReport:
    """Every case of one rung. ``skipped``: the whole rung could not run here; ``error``: it did not build."""

    rung: str
    seeds: tuple[int, ...]
    cases: list[CaseResult] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None
    deterministic_checked: bool = False

    @property
    def ran(self) -> list[CaseResult]:
        return [case for case in self.cases if not case.skipped]

    @property
    def failures(self) -> list[CaseResult]:
        return [case for case in self.cases if case.passed is False]

    @property
    def passed(self) -> bool:
        """Built, ran at least one case, and failed none."""
        return self.skipped is None and self.error is None and bool(self.ran) and not self.failures

    @property
    def status(self) -> str:
        if self.skipped is not None or (self.error is None and not self.ran):
            return "skipped"
        return "pass" if self.passed else "FAIL"

    @property
    def reason(self) -> str:
        """The first thing wrong (or why nothing ran); empty when it passed."""
        if self.skipped or self.error:
            return self.skipped or self.error
        if self.failures:
            case = self.failures[0]
            return f"{case.shape} {case.dtype} {case.distribution} seed {case.seed}: {case.reason}"
        if not self.ran:
            return "; ".join(sorted({case.reason for case in self.cases})) or "no cases"
        return ""

    def _worst(self, key: str) -> float | None:
        values = [getattr(case, key) for case in self.ran if getattr(case, key) is not None]
        return max(values) if values else None

    def evidence(self) -> dict:
        """The correctness part of a record entry (finite numbers only: records are strict JSON)."""
        ran = self.ran
        return {"passed": self.passed, "cases": len(ran), "seeds": list(self.seeds),
                "shapes": sorted({case.shape for case in ran}, key=lambda s: (len(s), s)),
                "dtypes": sorted({case.dtype for case in ran}),
                "distributions": sorted({case.distribution for case in ran}),
                "max_abs_error": self._worst("max_abs_error"), "max_rel_error": self._worst("max_rel_error"),
                "max_error_over_allowed": _finite(self.worst_error_over_allowed),
                "layouts_refused": sorted({case.distribution for case in ran if case.refused}),
                "deterministic_checked": self.deterministic_checked,
                **({"reference_notes": sorted({case.note for case in ran if case.note})}
                   if any(case.note for case in ran) else {}),
                "checks": ["poisoned output", "inputs unchanged", "float64 reference", "invariants",
                           "block probe", "non-contiguous inputs"]
                          + (["bitwise repeat"] if self.deterministic_checked else [])}

    @property
    def worst_error_over_allowed(self) -> float | None:
        """The largest error / tolerance of the cases that ran (inf: an exact answer missed; None: none compared)."""
        return self._worst("error_over_allowed")


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


# ---------------------------------------------------------------------------------------- helpers


def _torch():
    import torch
    return torch


def tensor_bits(tensor):
    """The tensor's bytes as integers: NaN == NaN and -0.0 != 0.0, as a bitwise comparison wants."""
    torch = _torch()
    kinds = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return tensor.contiguous().view(kinds[tensor.element_size()])


def _bit_slices(a, b):
    """The two same-shaped tensors' bits, slice by slice of CHECK_CHUNK_BYTES (a whole-tensor ``==`` of a
    6.4 GB input would allocate 1.6 GB of booleans), each pair moved to the host when the two live on
    different devices (a copy the device could not hold, see :func:`_kept_copy`)."""
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    step = max(1, CHECK_CHUNK_BYTES // max(1, a.element_size()))
    for start in range(0, flat_a.numel(), step):
        part_a, part_b = flat_a[start:start + step], flat_b[start:start + step]
        if part_a.device != part_b.device:
            part_a, part_b = part_a.cpu(), part_b.cpu()
        yield tensor_bits(part_a), tensor_bits(part_b)


def _same_bits(a, b) -> bool:
    """Bit-for-bit equal (slice by slice: :func:`_bit_slices`)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    torch = _torch()
    return all(torch.equal(bits_a, bits_b) for bits_a, bits_b in _bit_slices(a, b))


def differing_elements(a, b) -> int:
    """How many elements of two same-shaped tensors differ bit for bit (slice by slice: :func:`_bit_slices`)."""
    torch = _torch()
    return sum(int(torch.ne(bits_a, bits_b).sum()) for bits_a, bits_b in _bit_slices(a, b))


def _device_has_room(device, nbytes: int, spare: int) -> bool:
    """Whether ``device``'s free memory (the caching allocator's unused blocks included) holds ``nbytes``
    with ``spare`` bytes left; the host always does (its cases are the CPU tier's small ones)."""
    torch = _torch()
    device = torch.device(device)
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return nbytes + spare <= free


def _kept_copy(tensor):
    """A copy of ``tensor`` kept to compare against later: on its device when the device's free memory
    holds it with CHECK_CHUNK_BYTES to spare, else in host memory, so a full GPU slows the check down
    instead of failing it."""
    if not _device_has_room(tensor.device, tensor.numel() * tensor.element_size(), CHECK_CHUNK_BYTES):
        return tensor.cpu()
    return tensor.clone()


def poison_value(dtype):
    """What an output is filled with before a call (NaN, or the largest integer): an element the rung
    never writes keeps it and shows up in the comparison."""
    torch = _torch()
    return float("nan") if dtype.is_floating_point else torch.iinfo(dtype).max


def synchronize_device(device: str) -> None:
    """Wait for the GPU's queued work on a "cuda..." device; nothing to wait for on the CPU."""
    if device.startswith("cuda"):
        _torch().cuda.synchronize()


def _call_poisoned(built: BuiltRung, inputs: tuple, expected, device: str):
    """Call the rung with a NaN-filled output; return (output, problem or None)."""
    torch = _torch()
    dtype = inputs[0].dtype
    if built.accepts_out:
        out = torch.full(tuple(expected.shape), poison_value(dtype), dtype=dtype, device=device)
        result = built(*inputs, out=out)
        synchronize_device(device)
        if result is None:
            result = out
        if not isinstance(result, torch.Tensor) or result.data_ptr() != out.data_ptr():
            return result, "was given out= but returned another tensor (its output must be the one passed)"
        return result, None
    if device.startswith("cuda"):
        # Freed NaN memory of the output's size: the rung's own torch.empty() most likely gets it back.
        torch.full((expected.numel() * dtype.itemsize // 4 + 1,), float("nan"), device=device)
    result = built(*inputs)
    synchronize_device(device)
    return result, None


def compare_outputs(output, expected, rtol: float, atol: float) -> tuple[float, float, str | None]:
    """(max abs error, max rel error, why it fails or None)."""
    torch = _torch()
    got = output.to(torch.float64)
    error = (got - expected).abs()
    bad = ~(error <= atol + rtol * expected.abs())       # NaN compares False: a NaN is bad
    # Where the reference itself is NaN (a spec's definition, e.g. softmax of a row of -inf), the
    # output must be NaN too; those elements carry no error to report.
    undefined = torch.isnan(expected)
    bad = torch.where(undefined, ~torch.isnan(got), bad)
    error = error.masked_fill(undefined, 0.0)
    max_abs = float(error.max()) if error.numel() else 0.0
    max_rel = float((error / expected.abs().clamp_min(torch.finfo(torch.float64).tiny)).nan_to_num(0.0).max()) \
        if error.numel() else 0.0
    count = int(bad.sum())
    if not count:
        return max_abs, max_rel, None
    worst_first = torch.where(undefined, math.inf, error.nan_to_num(nan=math.inf))   # a number where NaN was due
    flat_error = torch.where(bad, worst_first, torch.zeros_like(error)).flatten()
    index = int(flat_error.argmax())
    return max_abs, max_rel, (f"{count} of {error.numel()} elements outside rtol={rtol:.3g}, atol={atol:.3g}; "
                              f"worst at flat index {index}: got {float(got.flatten()[index])!r}, "
                              f"expected {float(expected.flatten()[index])!r}")


def error_over_allowed(output, expected, rtol: float, atol: float) -> float:
    """The worst element's |error| / (atol + rtol * |expected|): at most 1 where compare_outputs passes;
    inf where an exact answer (zero tolerance) is missed. Elements whose reference is NaN are left out."""
    torch = _torch()
    error = (output.to(torch.float64) - expected).abs()
    allowed = atol + rtol * expected.abs()
    with torch.no_grad():
        ratio = torch.where(error == 0, torch.zeros_like(error), error / allowed)     # 0/0 (exact, no slack): 0
    ratio = ratio.masked_fill(torch.isnan(expected), 0.0).nan_to_num(nan=math.inf)
    return float(ratio.max()) if ratio.numel() else 0.0


def _strided(tensor):
    """The same values in a view whose last dimension has stride 2 (``x[..., ::2]`` of a buffer twice as wide)."""
    torch = _torch()
    buffer = torch.empty((*tensor.shape[:-1], 2 * tensor.shape[-1]), dtype=tensor.dtype, device=tensor.device)
    view = buffer[..., ::2]
    view.copy_(tensor)
    return view


def is_tensor(value) -> bool:
    """A tensor input, as opposed to a plain option (a bool, an int, a float) passed alongside the tensors."""
    return isinstance(value, _torch().Tensor)


# The types of a plain option, exactly (a subclass, a NumPy scalar or a 0-d tensor is none).
OPTION_TYPES = (bool, int, float)


def is_option(value) -> bool:
    """A plain option: a Python bool, int or float, passed to the rung as it is (see the module's notes)."""
    return type(value) in OPTION_TYPES


def _layout_inputs(inputs: tuple, layout: str) -> tuple | None:
    """``inputs`` re-laid out as ``layout`` (same values; options as they are), or None when the layout
    does not apply to them."""
    tensors = [value for value in inputs if is_tensor(value)]
    if layout == STRIDED:        # a 1-element tensor is contiguous under any stride: nothing to check there
        if all(tensor.numel() <= 1 for tensor in tensors):
            return None
        return tuple(_strided(value) if is_tensor(value) and value.numel() > 1 else value for value in inputs)
    for index, tensor in enumerate(inputs):        # TRANSPOSED: the first 2-D input with more than one row and column
        if is_tensor(tensor) and tensor.dim() == 2 and min(tensor.shape) > 1:
            return (*inputs[:index], tensor.t().contiguous().t(), *inputs[index + 1:])
    return None


def _tolerance(spec, inputs, dtype: str) -> tuple[float, float]:
    override = tolerance_override(spec)
    if override is not None:
        return override(inputs, dtype)
    return spec.tolerance(inputs, dtype) if hasattr(spec, "tolerance") else spec.TOLERANCE[dtype]


def _reference(spec, inputs):
    """``(expected, chunked)`` for ``inputs``: the float64 reference on the inputs' device (a reference may
    compute elsewhere, and the comparisons mix it with the output), or, for a spec with large outputs
    (see the module's notes), its :class:`ReferenceChunks` and a placeholder on the meta device that only
    carries the shape."""
    torch = _torch()
    chunked = (spec.reference_chunks(*inputs, max_bytes=CHECK_CHUNK_BYTES // 8)
               if hasattr(spec, "reference_chunks") else None)
    if chunked is not None:
        return torch.empty(chunked.shape, dtype=torch.float64, device="meta"), chunked
    return spec.reference(*inputs).to(device=inputs[0].device, dtype=torch.float64), None


def _kept_chunks(chunked: ReferenceChunks) -> ReferenceChunks:
    """The same reference with its chunks computed now and kept: every rung's comparison reads them."""
    parts = list(chunked.chunks())
    return replace(chunked, chunks=lambda: iter(parts))


@dataclass
class PreparedCase:
    """One case's inputs, tolerance and reference, made once (see :class:`CaseCache`); ``run_case`` checks a
    rung against it. ``shared``: kept for further rungs, so its inputs are proven unchanged (and restored)
    after every rung."""

    shape: str
    dtype: str
    seed: int
    distribution: str
    device: str
    spec: Any
    inputs: tuple
    tolerance: tuple[float, float]
    shared: bool
    pristine: list | None            # a kept copy of each tensor input (None for an option)
    expected: Any = None             # the reference when kept (see _reference), else None: made on use
    chunked: ReferenceChunks | None = None

    def reference(self):
        """``(expected, chunked)``: the kept reference, or one computed now for this use."""
        if self.expected is not None:
            return self.expected, self.chunked
        return _reference(self.spec, self.inputs)

    def changed_inputs(self) -> list[int]:
        """The positions of the tensor inputs that differ, bit for bit, from the kept copy."""
        return [index for index, (old, new) in enumerate(zip(self.pristine, self.inputs))
                if is_tensor(new) and not _same_bits(old, new)]

    def restore(self) -> None:
        """Copy the kept inputs back (after a rung wrote into them), so the next rung sees the case's values."""
        for old, new in zip(self.pristine, self.inputs):
            if is_tensor(new):
                new.copy_(old)

    def result(self, reason: str | None = None, max_abs=None, max_rel=None, ratio=None) -> CaseResult:
        return CaseResult(self.shape, self.dtype, self.seed, self.distribution, reason is None, reason or "",
                          max_abs, max_rel, ratio)


def _footprint(inputs, expected) -> int:
    """The problem's own bytes: its tensor inputs and one output (the reference's shape, the input's dtype)."""
    output = math.prod(expected.shape) * inputs[0].element_size()
    return output + sum(value.numel() * value.element_size() for value in inputs if is_tensor(value))


class CaseCache:
    """The check cases of one run, each made once per (shape, dtype, seed, distribution, device) and, when
    ``shared``, kept for every rung checked against it (see the module's notes). ``shared=False``: each
    case is made for one use and not kept (a lone :func:`check_rung`).

    The spec's inputs and the probe are drawn on the rungs' device (:mod:`.probes` says why); a layout
    case re-lays out the kept "normal" case's inputs of its seed instead of drawing them again."""

    def __init__(self, spec, *, shared: bool = True):
        self.spec = spec
        self.shared = shared
        self._cases: dict[tuple, PreparedCase | None] = {}

    def case(self, shape, dtype: str, seed: int, distribution: str, device: str) -> PreparedCase | None:
        """The case, made now or kept from before; None where ``distribution`` (a probe, a layout) does not
        apply to this op or shape."""
        key = (shape_label(shape), dtype, seed, distribution, str(device))
        if key in self._cases:
            return self._cases[key]
        made = self._inputs(shape, dtype, seed, distribution, device)
        case = None if made is None else self._prepare(shape, dtype, seed, distribution, device, *made)
        if self.shared:
            self._cases[key] = case
        return case

    def _inputs(self, shape, dtype: str, seed: int, distribution: str, device: str):
        """(inputs, (rtol, atol) or None for the spec's own), or None where the case does not apply."""
        spec = self.spec
        if distribution == PROBE:
            return probe_inputs(spec, shape, dtype, seed=seed, device=device)
        if distribution in LAYOUTS:
            normal = self._cases.get((shape_label(shape), dtype, seed, "normal", str(device)))
            source = (normal.inputs if normal is not None
                      else spec.make_inputs(shape, dtype, seed=seed, distribution="normal", device=device))
            inputs = _layout_inputs(source, distribution)
            return None if inputs is None else (inputs, None)
        return spec.make_inputs(shape, dtype, seed=seed, distribution=distribution, device=device), None

    def _prepare(self, shape, dtype, seed, distribution, device, inputs, tolerance) -> PreparedCase:
        pristine = [_kept_copy(value) if is_tensor(value) else value for value in inputs]
        expected, chunked = _reference(self.spec, inputs)
        tolerance = tolerance if tolerance is not None else _tolerance(self.spec, inputs, dtype)
        case = PreparedCase(shape_label(shape), dtype, seed, distribution, str(device), self.spec, inputs, tolerance,
                            self.shared, pristine)
        # Kept only where the device still has the bound's room beside it; else each use recomputes it.
        if not self.shared:
            case.expected, case.chunked = expected, chunked
        elif chunked is None or _device_has_room(inputs[0].device, 8 * math.prod(chunked.shape),
                                                 memory_bound(_footprint(inputs, expected))):
            case.expected, case.chunked = expected, (_kept_chunks(chunked) if chunked is not None else None)
        return case


def run_case(built: BuiltRung, case: PreparedCase, deterministic: bool) -> CaseResult:
    """Check ``built`` on one prepared case; a shared case's inputs are then proven unchanged (a rung that
    wrote into them fails, even where it did so only on its bitwise repeat) and restored for the next rung."""
    result = _run_case(built, case, deterministic)
    if case.shared:
        changed = case.changed_inputs()
        if changed:
            case.restore()
            if result.passed:
                return case.result(f"wrote into its input(s) {changed} on its second call (the bitwise repeat): "
                                   f"inputs must be read-only")
    return result


def _run_case(built: BuiltRung, case: PreparedCase, deterministic: bool) -> CaseResult:
    torch = _torch()
    inputs, device, result = case.inputs, case.device, case.result
    expected, chunked = case.reference()
    rtol, atol = case.tolerance
    try:
        output, problem = _call_poisoned(built, inputs, expected, device)
    except LayoutError as error:
        if case.distribution not in LAYOUTS:
            return result(f"refused contiguous inputs: {error}")
        refused = result(None)
        refused.refused = str(error)     # a clear refusal before launch: what a rung that reads no strides must do
        return refused
    except Exception as error:  # noqa: BLE001 - a rung that raises fails this case, with what it raised
        return result(f"raised {type(error).__name__}: {error}")
    changed = case.changed_inputs()
    if not case.shared:
        case.pristine = None             # a lone case frees its copy before the comparisons (the memory bound)
    if changed:
        return result(f"wrote into its input(s) {changed}: inputs must be read-only")
    if problem:
        return result(problem)
    if not isinstance(output, torch.Tensor):
        return result(f"returned {type(output).__name__}, not a tensor")
    if tuple(output.shape) != tuple(expected.shape) or output.dtype != inputs[0].dtype:
        return result(f"output is {tuple(output.shape)} {output.dtype}; expected {tuple(expected.shape)} "
                      f"{inputs[0].dtype} (the reference's shape, the input's dtype)")
    ratio = None
    if chunked is not None:
        max_abs, max_rel, failure = _compare_chunks(output, chunked, rtol, atol, built.accepts_out)
        if failure:
            return result(failure, max_abs, max_rel)
    else:
        unwritten = int((torch.isnan(output) & ~torch.isnan(expected)).sum()) if output.dtype.is_floating_point else 0
        if unwritten:
            return result(f"{unwritten} of {output.numel()} output elements {_unwritten(built.accepts_out)}")
        max_abs, max_rel, failure = compare_outputs(output, expected, rtol, atol)
        ratio = error_over_allowed(output, expected, rtol, atol)
        if failure:
            return result(failure, max_abs, max_rel, ratio)
    problems = case.spec.invariants(inputs, output) if hasattr(case.spec, "invariants") else []
    if problems:
        return result("; ".join(problems), max_abs, max_rel, ratio)
    if deterministic:
        first = _kept_copy(output)
        again, _ = _call_poisoned(built, inputs, expected, device)
        if not _same_bits(first, again):
            differing = int((tensor_bits(first) != tensor_bits(again)).sum())
            return result(f"declared deterministic, but a second run on the same inputs differs in {differing} "
                          f"of {first.numel()} elements", max_abs, max_rel, ratio)
    done = result(None, max_abs, max_rel, ratio)
    done.note = chunked.note if chunked is not None else ""
    return done


def _unwritten(accepts_out: bool) -> str:
    return "never written (still NaN poison)" if accepts_out else "NaN (unwritten memory, or a wrong result)"


def _compare_chunks(output, reference: ReferenceChunks, rtol: float, atol: float,
                    accepts_out: bool) -> tuple[float, float, str | None]:
    """:func:`compare_outputs` over the reference's row chunks, each dropped before the next is made;
    (max abs error, max rel error, why the first failing chunk fails or None)."""
    torch = _torch()
    rtol *= reference.rtol_factor
    max_abs = max_rel = 0.0
    covered = 0
    for start, stop, expected in reference.chunks():
        if start != covered:
            raise ValueError(f"reference_chunks gave rows {start}:{stop} after {covered}: chunks must cover the rows in order")
        got = output[start:stop]
        expected = expected.to(device=got.device, dtype=torch.float64)
        if tuple(expected.shape) != tuple(got.shape):
            raise ValueError(f"reference_chunks gave a {tuple(expected.shape)} chunk for output rows {start}:{stop} "
                             f"of shape {tuple(got.shape)}")
        where = f"in output rows {start}:{stop} of {output.shape[0]}, "
        unwritten = int((torch.isnan(got) & ~torch.isnan(expected)).sum()) if got.dtype.is_floating_point else 0
        if unwritten:
            return max_abs, max_rel, f"{where}{unwritten} of {got.numel()} elements {_unwritten(accepts_out)}"
        chunk_abs, chunk_rel, failure = compare_outputs(got, expected, rtol, atol)
        max_abs, max_rel = max(max_abs, chunk_abs), max(max_rel, chunk_rel)
        if failure:
            return max_abs, max_rel, where + failure
        covered = stop
        del got, expected
    if covered != reference.shape[0]:
        raise ValueError(f"reference_chunks covered {covered} of {reference.shape[0]} output rows")
    return max_abs, max_rel, None


def expected_shape(spec, inputs) -> tuple:
    """The shape of the reference for ``inputs``, without a float64 copy of a large output (a spec with
    ``reference_chunks`` states it)."""
    return tuple(_reference(spec, inputs)[0].shape)


def output_failure(spec, inputs, output, dtype: str, accepts_out: bool = True) -> str | None:
    """Why ``output`` is not the spec's reference for ``inputs`` under the dtype's tolerance (its shape,
    elements left NaN, elements out of tolerance), or None. Row chunk by row chunk where the spec gives
    ``reference_chunks``, so the float64 work stays within CHECK_CHUNK_BYTES at a 6.4 GB benchmark shape."""
    torch = _torch()
    rtol, atol = _tolerance(spec, inputs, dtype)
    expected, chunked = _reference(spec, inputs)
    if tuple(output.shape) != tuple(expected.shape):
        return f"output {tuple(output.shape)}, expected {tuple(expected.shape)}"
    if chunked is not None:
        return _compare_chunks(output, chunked, rtol, atol, accepts_out)[2]
    unwritten = int((torch.isnan(output) & ~torch.isnan(expected)).sum()) if output.dtype.is_floating_point else 0
    if unwritten:
        return f"{unwritten} of {output.numel()} output elements {_unwritten(accepts_out)}"
    return compare_outputs(output, expected, rtol, atol)[2]


def _dtype_skip(rung: Rung, built: BuiltRung, dtype: str) -> str | None:
    if dtype not in rung.op.spec.DTYPES:
        return f"{rung.op.name} is not defined for {dtype} (DTYPES: {', '.join(rung.op.spec.DTYPES)})"
    if not rung.supports(dtype):
        return f"the rung's header lists dtypes {', '.join(rung.metadata.dtypes)}"
    if built.interpreted and dtype == "bfloat16":
        return INTERPRETER_BFLOAT16
    return None


# ---------------------------------------------------------------------------------------- entry point


def case_count(spec, shapes, dtypes, seed_count: int = SEED_COUNT, distributions=None, *, probes: bool = True,
               layouts: bool = True) -> int:
    """How many times check_rung calls ``progress`` for these arguments (one rung)."""
    distributions = distributions or getattr(spec, "DISTRIBUTIONS", DEFAULT_DISTRIBUTIONS)
    per_shape = [len(distributions) * seed_count + probes
                 + (len(LAYOUTS) if layouts and numel(shape) <= LAYOUT_MAX_ELEMENTS else 0) for shape in shapes]
    return len(list(dtypes)) * sum(per_shape)


def build_error(rung: Rung) -> tuple[BuiltRung | None, str | None]:
    """``(built, None)``, or ``(None, why)`` for a rung that does not build (a failed rung, reported)."""
    try:
        return rung.build(), None
    except Exception as error:  # noqa: BLE001 - the error is the report
        return None, f"does not build: {type(error).__name__}: {error}"


def check_rung(rung: Rung, op=None, shapes=None, dtypes=None, seeds=None,
               distributions=None, *, device: str | None = None,
               built: BuiltRung | None = None, probes: bool = True, layouts: bool = True,
               progress=None, cases: CaseCache | None = None) -> CheckReport:
    """Check ``rung`` on every (dtype, shape, distribution, seed); see the module docstring for how.

    Defaults: the spec's EDGE_SHAPES, DTYPES and DISTRIBUTIONS (else normal and large), three fresh seeds,
    and the rung's own device (the GPU; the CPU for the Triton interpreter). ``built``: the rung already
    built (a torch.compile or Triton JIT is not paid twice). ``probes`` and ``layouts``: the block probe
    and the non-contiguous cases (on by default; see the module docstring). ``progress``: called after
    each case (a progress bar's advance; :func:`case_count` says how many there will be). ``cases``: a
    :class:`CaseCache` shared with the other rungs of a ladder (by default each case is made for this
    rung alone).
    """
    op = op or rung.op
    spec = op.spec
    seeds = tuple(seeds) if seeds is not None else fresh_seeds()
    report = CheckReport(rung.id, seeds)
    report.skipped = rung.skip_reason()
    if report.skipped:
        return report
    if built is None:
        built, report.error = build_error(rung)
        if report.error:
            return report
    cases = cases if cases is not None else CaseCache(spec, shared=False)
    if cases.spec is not spec:
        raise ValueError(f"check_rung: the cases were made for {getattr(cases.spec, 'NAME', cases.spec)!r}, "
                         f"not for {op.name}")
    device = device or rung.device()
    distributions = distributions or getattr(spec, "DISTRIBUTIONS", DEFAULT_DISTRIBUTIONS)
    report.deterministic_checked = rung.deterministic or bool(getattr(spec, "DETERMINISTIC_REQUIRED", False))
    for dtype in dtypes or spec.DTYPES:
        skip = _dtype_skip(rung, built, dtype)
        if skip:
            report.cases.append(CaseResult("all", dtype, None, None, None, skip))
            if progress is not None:
                for _ in range(case_count(spec, shapes or spec.EDGE_SHAPES, [dtype], len(seeds), distributions,
                                          probes=probes, layouts=layouts)):
                    progress()
            continue
        for shape in shapes or spec.EDGE_SHAPES:
            # The spec's distributions on every seed; one block probe and the layouts on the first seed.
            planned = [(distribution, seed) for distribution in distributions for seed in seeds]
            planned += [(PROBE, seeds[0])] if probes else []
            planned += [(layout, seeds[0]) for layout in LAYOUTS if layouts and numel(shape) <= LAYOUT_MAX_ELEMENTS]
            for distribution, seed in planned:
                case = cases.case(shape, dtype, seed, distribution, device)
                if case is not None:
                    report.cases.append(run_case(built, case, report.deterministic_checked))
                del case        # a lone case is freed before the next is made: one case at a time (the memory bound)
                if progress is not None:
                    progress()
    return report
