"""``exercise(op, kernel)``: a learner's kernel through the ladders' own checker, then timed against them.

Nothing here decides correctness a second way. The kernel is written as a rung of the operator's folder
(a temporary copy, as the agent's sandbox does: :func:`hello_gpu.agent.sandbox.materialize`), built by the
registry and checked by :func:`hello_gpu.ops.check_rung` (the spec's edge shapes, fresh seeds, poisoned
outputs, the float64 reference, every declared dtype). What is added are diagnostics that feed the hint
table (:mod:`.hints`), each run only where it can say something:

- guard bytes around the output (:func:`hello_gpu.agent.shared.allocate`, the agent's guarded buffers):
  a kernel writing past its output fails, even where the stray bytes hurt nobody this time;
- the same check at sizes that are multiples of every block size (4096), to tell a tail problem from
  a general one;
- on a GPU, eight runs on the same inputs, to see a race; then paired timings (:func:`hello_gpu.bench.compare`,
  same process, same inputs) against ``v00_torch`` and the ladder's rungs of the same route.

Without a GPU: HIP is compiled (NVRTC for sm_90, clang for gfx1201 where installed: the compile gate of
``hello-gpu compile-check``) and Triton runs in the interpreter on small shapes; the report lists what was
not checked and why.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from ..agent.sandbox import materialize
from ..agent.shared import allocate
from ..agent.task import Task
from ..bench import compare, measure
from ..ops import INTERPRETER_MAX_ELEMENTS, check_rung, list_ops, load_op, shape_label
from ..ops.checking import expected_shape, fresh_seeds, output_failure, poison_value, synchronize_device, tensor_bits
from ..ops.header import HeaderError, declared_target, rung_instantiations
from ..ops.ladder import select_rungs
from ..ops.registry import SpecError, ops_root
from ..ops.rung import INCLUDE_DIR, TORCH_BASELINE, RungError, triton_interpreter_on
from ..ops.shapes import numel
from ..runtime import compile_gate
from ..runtime.clang_hip import find_clang
from ..runtime.device import device_info, gpu_vendor
from . import detect
from .own_work import TorchOpsWatch, source_library_calls
from .report import Case, ExerciseReport, Finding, Timing

ROUTES = ("hip", "triton")
LABEL = "yours"
ALIGNED = 4096              # a multiple of every block and tile size the ladders use
RACE_RUNS = 8
# A correct kernel this much slower than the coalesced rung (the paired ratio's upper bound below it).
UNCOALESCED_RATIO = 0.6
# Per op: the ladder's coalesced rung and its uncoalesced counterpart (the timing evidence for the hint).
ACCESS_PAIRS = {"vector_add": ("v01_thread_per_element", "v02_strided_chunks"),
                "softmax": ("v02_block_per_row_shared", "v01_thread_per_row"),
                "rms_norm": ("v02_block_per_row", "v01_thread_per_row"),
                "matmul": ("v02_coalesced", "v01_naive")}
# The operators whose shapes are neither sizes nor (rows, columns): shapes like their edge shapes with
# every tiled size a multiple of every tile the ladder uses (matmul and linear: 256; attention: 128 keys
# and query rows, causal and not), small enough for the Triton interpreter to run in seconds.
ALIGNED_SHAPES = {"matmul": [(256, 256, 256)], "linear": [(256, 256, 256)],
                  "attention": [(1, 2, 1, 128, 128, 64), (1, 2, 1, 128, 128, 64, 1)]}


class ExerciseError(ValueError):
    """A call exercise() cannot start: an unknown operator, a missing file, a route that does not fit."""


# ------------------------------------------------------------------------------------------ the input


def _read_kernel(kernel, companion) -> tuple[str, str, str | None, str]:
    """(source, route, companion source or None, name for messages) of a path or of source text."""
    if isinstance(kernel, Path) or (isinstance(kernel, str) and "\n" not in kernel):
        path = Path(kernel).expanduser()
        if not path.is_file():
            raise ExerciseError(f"no file {str(path)!r} (exercise() takes a path to a .hip or Triton .py rung "
                                f"file, or the source text itself)")
        if path.suffix not in (".hip", ".py"):
            raise ExerciseError(f"{path}: a rung file is a .hip (HIP) or a .py (Triton) file, not {path.suffix!r}")
        route = "hip" if path.suffix == ".hip" else "triton"
        beside = path.with_suffix(".py")
        if companion is None and route == "hip" and beside.is_file():
            companion = beside
        return path.read_text(encoding="utf-8"), route, _text(companion), path.name
    if not isinstance(kernel, str):
        raise ExerciseError(f"kernel must be a path or source text, got {type(kernel).__name__}")
    route = "hip" if kernel.lstrip().startswith("/*") or "__global__" in kernel else "triton"
    return kernel, route, _text(companion), "kernel.hip" if route == "hip" else "kernel.py"


def _text(companion) -> str | None:
    if companion is None:
        return None
    if isinstance(companion, Path) or (isinstance(companion, str) and "\n" not in companion):
        path = Path(companion)
        if not path.is_file():
            raise ExerciseError(f"no companion file {str(path)!r}")
        return path.read_text(encoding="utf-8")
    return companion


def _resolve(op: str, kernel, route, companion, dtype):
    known = list_ops()
    if op not in known:
        raise ExerciseError(f"unknown operator {op!r}; operators: {', '.join(known)}")
    source, found, companion_source, name = _read_kernel(kernel, companion)
    if route is not None and route not in ROUTES:
        raise ExerciseError(f"route must be 'hip' or 'triton', got {route!r}")
    if route is not None and route != found:
        kind = "a HIP kernel (.hip)" if found == "hip" else "a Triton module (.py)"
        raise ExerciseError(f"route={route!r}, but {name} is {kind}: the route is the file's kind")
    spec_dtypes = load_op(op).spec.DTYPES
    if dtype is not None and dtype not in spec_dtypes:
        raise ExerciseError(f"{op} is defined for {', '.join(spec_dtypes)}, not {dtype!r}")
    return source, found, companion_source, name


# ------------------------------------------------------------------------------------------ helpers


def _rename(text: str, stem: str, name: str, folder: Path) -> str:
    """Say the learner's file name where the temporary rung's path would confuse."""
    text = text.replace(str(folder) + os.sep, "")
    for suffix in (".hip", ".py"):
        text = re.sub(rf"(?:[\w./-]*/)?{re.escape(stem)}{re.escape(suffix)}", name if suffix == Path(name).suffix
                      else Path(name).with_suffix(suffix).name, text)
    return text.replace(stem, Path(name).stem)


def _gpu() -> bool:
    try:
        return gpu_vendor() is not None
    except Exception:  # noqa: BLE001 - no torch, no driver: no GPU
        return False


def _prepare_interpreter(report: ExerciseReport) -> bool:
    """No GPU, a Triton kernel: the interpreter, chosen before triton is first imported. False when it is too late."""
    if triton_interpreter_on():
        return True
    if "triton" in sys.modules:
        report.not_checked.append(("correctness", "no GPU, and Triton was imported in compiled mode before "
                                   "exercise() could choose the interpreter: set TRITON_INTERPRET=1 before anything "
                                   "imports triton (in the shell, or first thing in a fresh notebook)"))
        return False
    os.environ["TRITON_INTERPRET"] = "1"
    report.notes.append("no GPU: TRITON_INTERPRET=1 was set for this process (Triton kernels run in the interpreter)")
    return True


# ------------------------------------------------------------------------------------------ compile


def _compile_hip(report: ExerciseReport, rung, stem: str, name: str, folder: Path) -> bool:
    """The compile gate of ``hello-gpu compile-check`` on the rung: sm_90 (NVRTC) and gfx1201 where clang is."""
    amd = find_clang() is not None
    gate = compile_gate.check([rung.path], arch="sm_90", amd_arch="gfx1201", amd=amd,
                              instantiations=rung_instantiations, targets=declared_target,
                              include_dirs=[INCLUDE_DIR])
    targets = ["sm_90 (NVRTC)"] + (["gfx1201 (clang)"] if amd else [])
    if not amd:
        report.not_checked.append(("AMD compile", "no clang with the HIP headers here (gfx1201 not compiled)"))
    errors = []
    for kernel in gate.kernels:
        for vendor, outcome in (("sm_90", kernel.nvidia), ("gfx1201", kernel.amd)):
            if outcome is not None and outcome.status == "fail":
                errors.append(f"[{vendor}] {kernel.kernel}: {_rename(outcome.error, stem, name, folder)}")
    report.stages.append(("compile", "FAIL" if errors else "pass", f"for {', '.join(targets)}"))
    if errors:
        report.compile_errors += errors
    return not errors


def _python_error(report: ExerciseReport, source: str, name: str) -> bool:
    """A Triton module that is not valid Python: the message at its line, before anything runs."""
    try:
        ast.parse(source, filename=name)
    except SyntaxError as error:
        report.compile_errors.append(f"{name}:{error.lineno}:{error.offset or 0}: SyntaxError: {error.msg}\n"
                                     f"  {(error.text or '').rstrip()}")
        report.stages.append(("import", "FAIL", "not valid Python"))
        return False
    return True


# ------------------------------------------------------------------------------------------ diagnostics


def _guard_probe(built, spec, shapes, dtype: str, device: str) -> dict:
    """Call the kernel with its output inside guard bytes at each shape: {shape label: what changed}."""
    changed = {}
    seed = fresh_seeds(1)[0]
    for shape in shapes:
        inputs = spec.make_inputs(shape, dtype, seed=seed, distribution="normal", device=device)
        expected = expected_shape(spec, inputs)
        buffer = allocate(expected, inputs[0].dtype, device)
        try:
            buffer.tensor.fill_(poison_value(inputs[0].dtype))
            built(*inputs, out=buffer.tensor)
            synchronize_device(device)
            problem = buffer.guards_intact()
            if problem:
                changed[shape_label(shape)] = problem
        except Exception:  # noqa: BLE001 - the checker reports what the call raises; the probe only looks at guards
            pass
        finally:
            buffer.close()
    return changed


def _aligned_shapes(op_name: str, spec) -> list:
    """Shapes like the spec's edge shapes whose every size is a multiple of every tile: ALIGNED_SHAPES, or
    for 1-D and (rows, columns) operators sizes that are multiples of ALIGNED."""
    if op_name in ALIGNED_SHAPES:
        return ALIGNED_SHAPES[op_name]
    two_d = any(isinstance(shape, tuple) for shape in spec.EDGE_SHAPES)
    if any(isinstance(shape, tuple) and len(shape) != 2 for shape in spec.EDGE_SHAPES):
        raise ExerciseError(f"{op_name}: no aligned shapes known for its {len(spec.EDGE_SHAPES[0])}-D shapes; "
                            f"add them to ALIGNED_SHAPES in hello_gpu/exercises/run.py")
    return [(4, ALIGNED)] if two_d else [ALIGNED, 4 * ALIGNED]


def _race_probe(built, spec, shape, dtype: str, device: str) -> dict | None:
    """RACE_RUNS calls on the same inputs: how many distinct outputs, how many wrong."""
    inputs = spec.make_inputs(shape, dtype, seed=fresh_seeds(1)[0], distribution="normal", device=device)
    outputs, wrong = [], []
    for _ in range(RACE_RUNS):
        output = built(*inputs)
        synchronize_device(device)
        outputs.append(tensor_bits(output).clone())
        problem = output_failure(spec, inputs, output, dtype)
        if problem:
            wrong.append(problem)
    distinct = len({bits.cpu().numpy().tobytes() for bits in outputs})
    return {"shape": shape_label(shape), "runs": RACE_RUNS, "distinct": distinct, "wrong": len(wrong),
            "example": wrong[0] if wrong else ""}


# ------------------------------------------------------------------------------------------ timing


def _time(report: ExerciseReport, op, rung, built, route: str, dtype: str, bench_shape, max_seconds: float) -> None:
    spec = op.spec
    inputs = spec.make_inputs(bench_shape, dtype, seed=fresh_seeds(1)[0], distribution="normal", device="cuda")
    sized = check_rung(rung, op, [bench_shape], [dtype], fresh_seeds(1), ("normal",), built=built)
    if not sized.passed:
        report.failures += [Case.of(case) for case in sized.failures[:3]]
        report.not_checked.append(("timing", f"incorrect at the benchmark shape {shape_label(bench_shape)}: "
                                             f"{sized.reason}"))
        return
    work = spec.work(bench_shape, dtype)
    yours = lambda: built(*inputs)      # noqa: E731
    measured = measure(yours, work=work, max_seconds=max_seconds)
    report.median_s = measured.summary.median
    report.gb_per_s = measured.rates.gb_per_s if measured.rates is not None else None
    report.bench_shape = shape_label(bench_shape)
    others = [r for r in select_rungs(op, route) if r.id == TORCH_BASELINE or not r.is_baseline]
    for other in others:
        if other.skip_reason() is not None or not other.supports(dtype):
            continue
        try:
            theirs = other.build()
        except Exception as error:  # noqa: BLE001 - a ladder rung that does not build here is left out, said why
            report.notes.append(f"{other.id} not timed: {type(error).__name__}: {error}")
            continue
        comparison = compare(lambda theirs=theirs: theirs(*inputs), yours, max_seconds=max_seconds)
        report.timings.append(Timing(other.id, comparison.speedup.value, tuple(comparison.speedup.ci95),
                                     comparison.verdict, comparison.baseline.median))


# ------------------------------------------------------------------------------------------ hints


def _hints(report: ExerciseReport, op_name: str, source: str, route: str, guard: dict, aligned_passed,
           race: dict | None) -> None:
    if report.compile_errors:
        report.findings.append(Finding("compile-error", "observed", report.compile_errors[0].splitlines()[0]))
    if guard:
        shape, what = next(iter(guard.items()))
        report.findings.append(Finding("bounds", "observed", f"at {shape}: {what} (guard bytes around the output; "
                                                             f"{len(guard)} shape(s) in all)"))
    edge_failures = [case for case in report.failures if case.distribution != "guard bytes"]
    unwritten = [case for case in edge_failures if "never written" in case.reason or "NaN" in case.reason]
    if unwritten:
        case = unwritten[0]
        report.findings.append(Finding("unwritten", "observed", f"{case.shape} {case.dtype}: {case.reason[:200]}"))
    if edge_failures and aligned_passed and not guard:
        shapes = sorted({case.shape for case in edge_failures})
        report.findings.append(Finding("bounds", "likely", f"fails at {', '.join(shapes)} (sizes that are no multiple "
                                                           f"of a block) and passes at {aligned_passed}"))
    if race and race["distinct"] > 1 and race["wrong"]:
        report.findings.append(Finding("race", "observed", f"{race['runs']} runs on the same inputs at {race['shape']}: "
                                                           f"{race['distinct']} different outputs, {race['wrong']} "
                                                           f"wrong ({race['example'][:160]})"))
    if route == "hip":
        strided = detect.strided_thread_index(source)
        timing = _access_timing(report, op_name)
        if strided or timing:
            evidence = [f"line {line}: `{text}`" for line, text in strided[:2]] + ([timing] if timing else [])
            confidence = "likely" if strided and timing else ("likely" if timing else "possible")
            if strided and not report.timings:
                evidence.append("not timed (no GPU), so the source pattern is the only evidence")
            report.findings.append(Finding("uncoalesced", confidence, "; ".join(evidence)))
        banks = detect.shared_bank_strides(source)
        if banks:
            report.findings.append(Finding("bank-conflict", "possible",
                                           "; ".join(f"line {line}: `{text}`" for line, text in banks[:2])))


def _access_timing(report: ExerciseReport, op_name: str) -> str | None:
    """Evidence that a correct kernel runs at the uncoalesced rung's speed, from the paired ratios."""
    pair = ACCESS_PAIRS.get(op_name)
    ratios = {timing.against: timing for timing in report.timings}
    if pair is None or pair[0] not in ratios:
        return None
    coalesced = ratios[pair[0]]
    if coalesced.ci95[1] >= UNCOALESCED_RATIO:
        return None
    text = f"paired: {coalesced.speedup:.2f}x {pair[0]} (the coalesced rung) [{coalesced.ci95[0]:.2f}, {coalesced.ci95[1]:.2f}]"
    if pair[1] in ratios:
        text += f", {ratios[pair[1]].speedup:.2f}x {pair[1]} (the uncoalesced one)"
    return text


# ------------------------------------------------------------------------------------------ the entry point


def exercise(op: str, kernel, *, route: str | None = None, shapes=None, dtype: str | None = None,
             companion=None, bench_shape=None, max_seconds: float = 1.0) -> ExerciseReport:
    """Check a learner's kernel for ``op`` and, on a GPU, time it against torch and the ladder.

    ``kernel``: a path to a ``.hip`` or Triton ``.py`` file written like the rung files under
    ``src/hello_gpu/ops/<op>/`` (header included), or that source text. ``route``: "hip" or "triton"
    (default: the file's kind; a mismatch is an error). ``shapes``: the check shapes (default the spec's
    EDGE_SHAPES; without a GPU, only those of at most 2^16 elements). ``dtype``: one dtype to check and
    time (default: every dtype the spec declares; timing in the first). ``companion``: a HIP rung's
    ``run(kernel, *inputs)`` launcher (default: the ``.py`` beside the ``.hip``). ``bench_shape``: the
    timed shape (default: the spec's largest BENCH_SHAPES). ``max_seconds``: per timing.
    """
    source, route, companion_source, name = _resolve(op, kernel, route, companion, dtype)
    gpu = _gpu()
    report = ExerciseReport(op=op, route=route, kernel=name, gpu=device_info().name if gpu else None)
    report.library_calls, scan_notes = source_library_calls(route, source, companion_source)
    report.notes += [f"source scan: {note}" for note in scan_notes]
    if not gpu:
        report.not_checked.append(("timing", "no GPU here: nothing is timed (run on a GPU for the ratios)"))
        report.not_checked.append(("races", "no GPU: a race shows only when threads really run at once"))
    if route == "triton" and not _python_error(report, source, name):
        _hints(report, op, source, route, {}, None, None)
        return report
    if route == "triton" and not gpu and not _prepare_interpreter(report):
        return report
    if route == "hip" and not gpu:
        report.not_checked.append(("correctness", "no GPU: a HIP kernel runs only on a GPU (compiled here, "
                                                   "not run)"))
    with tempfile.TemporaryDirectory(prefix="hello-gpu-exercise-") as folder:
        folder = Path(folder)
        task = Task(op=op, start=TORCH_BASELINE, route=route, extra={"ops_root": str(ops_root())})
        candidate = {"route": route, "source": source, "companion": companion_source}
        try:
            loaded, names = materialize(task, {LABEL: candidate}, folder)
        except (HeaderError, SpecError, RungError, SyntaxError, ImportError) as error:
            report.stages.append(("format", "FAIL", "the file is not a rung of this operator"))
            report.compile_errors.append(_rename(f"{type(error).__name__}: {error}", _stem(route), name, folder))
            _hints(report, op, source, route, {}, None, None)
            return report
        stem = names[LABEL]
        rung = loaded.rung(stem)
        if route == "hip" and not _compile_hip(report, rung, stem, name, folder):
            _hints(report, op, source, route, {}, None, None)
            return report
        if route == "hip" and not gpu:
            _hints(report, op, source, route, {}, None, None)
            return report
        _check(report, loaded, rung, stem, name, folder, source, route, shapes, dtype, gpu, bench_shape,
               max_seconds)
    return report


def _stem(route: str) -> str:
    return f"{'v' if route == 'hip' else 't'}90_agent_{LABEL}"


def _check(report, op, rung, stem, name, folder, source, route, shapes, dtype, gpu, bench_shape, max_seconds):
    spec = op.spec
    shapes = list(shapes or spec.EDGE_SHAPES)
    if not gpu:
        small = [s for s in shapes if numel(s) <= INTERPRETER_MAX_ELEMENTS]
        if len(small) < len(shapes):
            report.not_checked.append(("large shapes", f"{', '.join(shape_label(s) for s in shapes if s not in small)}"
                                                       f": the interpreter takes ~0.6 ms a program"))
        shapes = small
    dtypes = [dtype] if dtype else list(spec.DTYPES)
    try:
        built = rung.build()
    except Exception as error:  # noqa: BLE001 - the learner's module raised on import, or has no run()
        report.stages.append(("build", "FAIL", "the rung does not build"))
        report.compile_errors.append(_rename(f"{type(error).__name__}: {error}", stem, name, folder))
        _hints(report, op.name, source, route, {}, None, None)
        return
    report.device = rung.device()
    # Every call the checker makes is watched for torch doing the work (own_work); the timed calls are not.
    watch = TorchOpsWatch()
    timed, built = built, replace(built, function=watch.wrap(built.function))
    first = next((d for d in dtypes if rung.supports(d) and not (built.interpreted and d == "bfloat16")), None)
    # Guard bytes first: a kernel writing past its output would corrupt the checker's own tensors (on the
    # CPU, the interpreter writes into this process's heap), so it is stopped here with that evidence.
    guard = {}
    if built.accepts_out and first is not None:
        guard = _guard_probe(built, spec, shapes, first, report.device)
        report.checks.append("guard bytes around the output")
        for shape, what in guard.items():
            report.failures.append(Case(shape, first, None, "guard bytes", f"wrote outside its output: {what}"))
    elif first is not None:
        report.not_checked.append(("guard bytes", "run() takes no out= tensor, so the output cannot be placed "
                                                  "between guard bytes"))
    aligned_passed, error = None, None
    aligned = _aligned_shapes(op.name, spec)
    if guard:
        report.not_checked.append(("the checker's cases", "not run: the kernel writes past its output, which would "
                                                          "corrupt other memory of this process (fix that first)"))
        if not _guard_probe(built, spec, aligned, first, report.device):
            again = check_rung(rung, op, aligned, [first], fresh_seeds(1), ("normal",), built=built,
                               probes=False, layouts=False)
            report.seeds = again.seeds
            report.passed_cases += [Case.of(case) for case in again.ran if case.passed]
            aligned_passed = ", ".join(shape_label(s) for s in aligned) if again.passed else None
    else:
        checked = check_rung(rung, op, shapes, dtypes, built=built)
        report.seeds = checked.seeds
        error = checked.error
        for case in checked.cases:
            if case.skipped:
                report.not_checked.append((f"{case.dtype}", _rename(case.reason, stem, name, folder)))
            elif case.passed:
                report.passed_cases.append(Case.of(case))
            else:
                report.failures.append(Case.of(case, _rename(case.reason, stem, name, folder)))
        if error:
            report.compile_errors.append(_rename(error, stem, name, folder))
        report.checks = (list(checked.evidence()["checks"]) if checked.ran else []) + report.checks
        if report.failures and first is not None and not error:
            again = check_rung(rung, op, aligned, [first], fresh_seeds(1), ("normal",), built=built,
                               probes=False, layouts=False)
            if again.passed:
                aligned_passed = ", ".join(shape_label(s) for s in aligned)
    ran_dtypes = [first] if first is not None else []
    checked_error = error
    race = None
    if gpu and ran_dtypes and not checked_error and not guard:
        # The probe runs on a failing kernel too (a race is one cause of failures), so whatever the kernel's
        # launch raises there (a grid that is not whole, an illegal argument) is that kernel's result, not ours.
        largest = max(shapes, key=numel)
        try:
            race = _race_probe(built, spec, largest, ran_dtypes[0], report.device)
            report.checks.append(f"{RACE_RUNS} runs on the same inputs")
        except Exception as raised:  # noqa: BLE001 - reported in the report, as the checker reports a case
            report.not_checked.append(("races", _rename(f"not probed: the call at {shape_label(largest)} raised "
                                                        f"{type(raised).__name__}: {raised}", stem, name, folder)))
    report.stages.append(("check", "pass" if report.passed_cases and not report.failures else "FAIL",
                          f"{len(report.passed_cases) + len(report.failures)} cases"))
    report.library_calls += watch.reasons()
    if gpu and report.library_calls:
        report.not_checked.append(("timing", "not timed: the work is not your kernel's (own work)"))
    elif gpu and not report.failures and not report.compile_errors and report.passed_cases:
        _time(report, op, rung, timed, route, dtype or spec.DTYPES[0],
              bench_shape if bench_shape is not None else spec.BENCH_SHAPES[-1], max_seconds)
    elif gpu:
        report.not_checked.append(("timing", "not timed: a kernel that fails its check is not a data point"))
    _hints(report, op.name, source, route, guard, aligned_passed, race)
