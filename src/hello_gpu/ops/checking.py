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

Besides the spec's distributions, every (dtype, shape) gets:

- a **probe** case (:mod:`.probes`): inputs whose answer a kernel that drops, repeats or misplaces one
  block of work cannot match (reduce_sum's is exact in float32, with zero tolerance);
- **layout** cases: the same values as non-contiguous tensors (every input a strided ``x[..., ::2]``
  view; the first 2-D input transposed). The rung must either give the right answer or refuse before
  launching with a :class:`~.rung.LayoutError` naming the tensor and its strides (what
  :class:`~.rung.BuiltRung` does for every rung that indexes raw pointers); a wrong answer fails.

The report's "error / allowed" is the worst element's error over the error its tolerance allows: a
pass is at most 1, whatever the magnitudes (a sum of 2^60-scaled values errs by 1e30 and passes).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
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


def _kept_copy(tensor):
    """A copy of ``tensor`` kept to compare against later: on its device when the device's free memory
    (the caching allocator's unused blocks included) holds it with CHECK_CHUNK_BYTES to spare, else
    in host memory, so a full GPU slows the check down instead of failing it."""
    torch = _torch()
    if tensor.device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(tensor.device)
        free += torch.cuda.memory_reserved(tensor.device) - torch.cuda.memory_allocated(tensor.device)
        if tensor.numel() * tensor.element_size() + CHECK_CHUNK_BYTES > free:
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


def _layout_inputs(inputs: tuple, layout: str) -> tuple | None:
    """``inputs`` re-laid out as ``layout`` (same values), or None when the layout does not apply to them."""
    if layout == STRIDED:        # a 1-element tensor is contiguous under any stride: nothing to check there
        if all(tensor.numel() <= 1 for tensor in inputs):
            return None
        return tuple(_strided(tensor) if tensor.numel() > 1 else tensor for tensor in inputs)
    for index, tensor in enumerate(inputs):        # TRANSPOSED: the first 2-D input with more than one row and column
        if tensor.dim() == 2 and min(tensor.shape) > 1:
            return (*inputs[:index], tensor.t().contiguous().t(), *inputs[index + 1:])
    return None


def _tolerance(spec, inputs, dtype: str) -> tuple[float, float]:
    override = tolerance_override(spec)
    if override is not None:
        return override(inputs, dtype)
    return spec.tolerance(inputs, dtype) if hasattr(spec, "tolerance") else spec.TOLERANCE[dtype]


def _case_inputs(spec, shape, dtype: str, seed: int, distribution: str, device: str):
    """(inputs, (rtol, atol) or None for the spec's own), or None where the case does not apply."""
    if distribution == PROBE:
        return probe_inputs(spec, shape, dtype, seed=seed, device=device)
    if distribution in LAYOUTS:
        inputs = _layout_inputs(spec.make_inputs(shape, dtype, seed=seed, distribution="normal", device=device),
                                distribution)
        return None if inputs is None else (inputs, None)
    return spec.make_inputs(shape, dtype, seed=seed, distribution=distribution, device=device), None


def _check_case(built: BuiltRung, spec, shape, dtype: str, seed: int, distribution: str, device: str,
                deterministic: bool) -> CaseResult | None:
    """One case; None where ``distribution`` (a probe, a layout) does not apply to this op or shape."""
    torch = _torch()
    label = shape_label(shape)

    def result(reason: str | None = None, max_abs=None, max_rel=None, ratio=None) -> CaseResult:
        return CaseResult(label, dtype, seed, distribution, reason is None, reason or "", max_abs, max_rel, ratio)

    made = _case_inputs(spec, shape, dtype, seed, distribution, device)
    if made is None:
        return None
    inputs, tolerance = made
    before = [_kept_copy(tensor) for tensor in inputs]
    # A spec with large outputs gives its reference in row chunks, computed after the call and compared
    # one at a time (see the module's notes); the placeholder on the meta device only carries the shape.
    chunked = (spec.reference_chunks(*inputs, max_bytes=CHECK_CHUNK_BYTES // 8)
               if hasattr(spec, "reference_chunks") else None)
    # On the inputs' device: a reference may compute elsewhere, and the comparisons below mix it with the output.
    expected = (torch.empty(chunked.shape, dtype=torch.float64, device="meta") if chunked is not None
                else spec.reference(*inputs).to(device=inputs[0].device, dtype=torch.float64))
    rtol, atol = tolerance if tolerance is not None else _tolerance(spec, inputs, dtype)
    try:
        output, problem = _call_poisoned(built, inputs, expected, device)
    except LayoutError as error:
        if distribution not in LAYOUTS:
            return result(f"refused contiguous inputs: {error}")
        case = result(None)
        case.refused = str(error)        # a clear refusal before launch: what a rung that reads no strides must do
        return case
    except Exception as error:  # noqa: BLE001 - a rung that raises fails this case, with what it raised
        return result(f"raised {type(error).__name__}: {error}")
    changed = [index for index, (old, new) in enumerate(zip(before, inputs)) if not _same_bits(old, new)]
    del before
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
    problems = spec.invariants(inputs, output) if hasattr(spec, "invariants") else []
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
    chunked = (spec.reference_chunks(*inputs, max_bytes=CHECK_CHUNK_BYTES // 8)
               if hasattr(spec, "reference_chunks") else None)
    if chunked is not None:
        return tuple(chunked.shape)
    return tuple(spec.reference(*inputs).shape)


def output_failure(spec, inputs, output, dtype: str, accepts_out: bool = True) -> str | None:
    """Why ``output`` is not the spec's reference for ``inputs`` under the dtype's tolerance (its shape,
    elements left NaN, elements out of tolerance), or None. Row chunk by row chunk where the spec gives
    ``reference_chunks``, so the float64 work stays within CHECK_CHUNK_BYTES at a 6.4 GB benchmark shape."""
    torch = _torch()
    rtol, atol = _tolerance(spec, inputs, dtype)
    chunked = (spec.reference_chunks(*inputs, max_bytes=CHECK_CHUNK_BYTES // 8)
               if hasattr(spec, "reference_chunks") else None)
    if chunked is not None:
        if tuple(output.shape) != tuple(chunked.shape):
            return f"output {tuple(output.shape)}, expected {tuple(chunked.shape)}"
        return _compare_chunks(output, chunked, rtol, atol, accepts_out)[2]
    expected = spec.reference(*inputs).to(device=inputs[0].device, dtype=torch.float64)
    if tuple(output.shape) != tuple(expected.shape):
        return f"output {tuple(output.shape)}, expected {tuple(expected.shape)}"
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


def check_rung(rung: Rung, op=None, shapes=None, dtypes=None, seeds=None,
               distributions=None, *, device: str | None = None,
               built: BuiltRung | None = None, probes: bool = True, layouts: bool = True,
               progress=None) -> CheckReport:
    """Check ``rung`` on every (dtype, shape, distribution, seed); see the module docstring for how.

    Defaults: the spec's EDGE_SHAPES, DTYPES and DISTRIBUTIONS (else normal and large), three fresh seeds,
    and the rung's own device (the GPU; the CPU for the Triton interpreter). ``built``: the rung already
    built (a torch.compile or Triton JIT is not paid twice). ``probes`` and ``layouts``: the block probe
    and the non-contiguous cases (on by default; see the module docstring). ``progress``: called after
    each case (a progress bar's advance; :func:`case_count` says how many there will be).
    """
    op = op or rung.op
    spec = op.spec
    seeds = tuple(seeds) if seeds is not None else fresh_seeds()
    report = CheckReport(rung.id, seeds)
    report.skipped = rung.skip_reason()
    if report.skipped:
        return report
    try:
        built = built or rung.build()
    except Exception as error:  # noqa: BLE001 - a rung that does not build is a failed rung, reported
        report.error = f"does not build: {type(error).__name__}: {error}"
        return report
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
            cases = [(distribution, seed) for distribution in distributions for seed in seeds]
            cases += [(PROBE, seeds[0])] if probes else []
            cases += [(layout, seeds[0]) for layout in LAYOUTS if layouts and numel(shape) <= LAYOUT_MAX_ELEMENTS]
            for distribution, seed in cases:
                case = _check_case(built, spec, shape, dtype, seed, distribution, device, report.deterministic_checked)
                if case is not None:
                    report.cases.append(case)
                if progress is not None:
                    progress()
    return report
