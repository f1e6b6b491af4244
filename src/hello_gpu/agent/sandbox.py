"""One step of one candidate (compile, check, bench, compare, analyze) in a child process with a time limit.

The parent never imports a candidate. Two kinds of step:

- **check, bench, compare decide a verdict**, so they are decided here, in the parent
  (:mod:`hello_gpu.agent.session`): the candidate runs in a worker child (:mod:`hello_gpu.agent.worker`)
  that only writes outputs into buffers the parent owns and claims times the parent checks with its
  own clock; inputs, seeds, references, tolerances and the comparison never exist in the child.
- **compile and analyze only describe** (errors at the candidate's lines, registers, a roofline place):
  ``python -m hello_gpu.agent.sandbox RESULT.json`` runs them in a new process group, reads
  ``{"step", "payload"}`` as JSON on its stdin and writes the step's JSON to the result file (not
  stdout: a candidate may print).

Either way:

- a hung kernel or an endless loop is killed with its whole process group at ``timeout_s``:
  ``{"status": "timeout", ...}``;
- a segfault, ``os._exit``, an illegal memory access that kills the CUDA context, or an exception in
  the harness ends only the child: ``{"status": "crashed", "detail": ...}``;
- otherwise ``{"status": "ok", ...the step's fields}``.

In the child, the candidate's source is written into a temporary copy of its operator's folder (the
spec and the ladder's rungs, so its header's ``parent`` resolves) as ``v9K_agent_LABEL.hip`` (+ the
companion ``.py``) or ``t9K_agent_LABEL.py``, and the registry builds it like any rung.
Without a GPU the child runs Triton in the interpreter (``TRITON_INTERPRET=1``) on CPU tensors and
times with the wall clock; the results say so (``"clock": "wall"``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from ..bench import measure
from ..bench.ceilings import cached_ceilings
from ..ops import load_op
from ..ops.checking import DEFAULT_DISTRIBUTIONS, fresh_seeds
from ..ops.registry import ops_root
from ..ops.rung import MODULE_PREFIX, load_module
from ..ops.shapes import numel, shape_label
from ..profile.counters import counters_for_rungs
from ..profile.kernel_table import kernel_table
from ..profile.roofline import RooflinePoint, classify, roofs_from
from ..profile.rung_profile import own_kernel_names
from ..runtime import triton_jit
from ..runtime.kernel import empty_launches
from ..runtime.device import device_info, gpu_vendor
from ..runtime.errors import CompileError

STEPS = ("compile", "check", "bench", "compare", "analyze")
DEFAULT_TIMEOUT_S = 300.0
TAIL_CHARACTERS = 4000
NO_GPU_ARCH = "sm_90"        # what HIP candidates compile for where there is no GPU (NVRTC needs none)
INPUT_SETS = 3               # timed calls rotate over this many fresh input sets: no result can be reused


# ================================================================================== the parent side


def _package_path() -> str:
    """The folder holding the ``hello_gpu`` package, for the child's PYTHONPATH."""
    return str(Path(__file__).resolve().parents[2])


def gpu_present() -> bool:
    try:
        return gpu_vendor() is not None
    except Exception:  # noqa: BLE001 - no torch, no driver: no GPU
        return False


def child_environment(extra: dict | None = None) -> dict:
    """The parent's environment, the package importable, and the Triton interpreter where no GPU is."""
    environment = dict(os.environ)
    paths = [_package_path()] + [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    environment["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    if "TRITON_INTERPRET" not in environment and not gpu_present():
        environment["TRITON_INTERPRET"] = "1"
    environment.update(extra or {})
    return environment


def _tail(text: str) -> str:
    return text[-TAIL_CHARACTERS:] if text else ""


def describe_exit(returncode: int) -> str:
    """-11 -> "killed by signal SIGSEGV (11)"; 139 -> "exited with status 139 (128 + SIGSEGV)"."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {name} ({-returncode})"
    text = f"exited with status {returncode}"
    if returncode > 128:
        try:
            text += f" (128 + {signal.Signals(returncode - 128).name})"
        except ValueError:
            pass
    return text


def kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def run_candidate_step(step: str, payload: dict, timeout_s: float = DEFAULT_TIMEOUT_S, *,
                       environment: dict | None = None) -> dict:
    """Run ``step`` on ``payload`` in a child process; see the module docstring for the result."""
    if step not in STEPS:
        raise ValueError(f"unknown sandbox step {step!r}; steps: {', '.join(STEPS)}")
    started = time.perf_counter()
    if step in VERDICT_STEPS:
        return _verdict_step(step, payload, timeout_s, environment, started)
    with tempfile.TemporaryDirectory(prefix="hello-gpu-sandbox-") as folder:
        result_path = Path(folder) / "result.json"
        process = subprocess.Popen([sys.executable, "-m", "hello_gpu.agent.sandbox", str(result_path)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=child_environment(environment), cwd=folder, start_new_session=True,
                                   text=True)
        request = json.dumps({"step": step, "payload": payload})
        try:
            stdout, stderr = process.communicate(request, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(process)
            stdout, stderr = process.communicate()
            return {"status": "timeout", "step": step, "step_seconds": time.perf_counter() - started,
                    "detail": f"{step} did not finish within {timeout_s:g} s; the child process group was killed",
                    "stdout_tail": _tail(stdout), "stderr_tail": _tail(stderr)}
        finally:
            if process.poll() is None:
                kill_group(process)
        seconds = time.perf_counter() - started
        result = None
        if result_path.is_file():
            try:
                result = json.loads(result_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                result = {"status": "crashed", "detail": f"unreadable result file: {error}"}
        if result is None or process.returncode != 0:
            detail = f"the {step} child {describe_exit(process.returncode)} without a result"
            if result is not None:
                detail = f"the {step} child {describe_exit(process.returncode)} after writing its result"
            lines = [line for line in (stderr or "").strip().splitlines() if line.strip()]
            if lines:
                detail += f"; last stderr line: {lines[-1][:300]}"
            return {"status": "crashed", "step": step, "step_seconds": seconds, "returncode": process.returncode,
                    "detail": detail, "stdout_tail": _tail(stdout), "stderr_tail": _tail(stderr)}
        result.setdefault("status", "ok")
        result.update(step=step, step_seconds=seconds, stdout_tail=_tail(stdout), stderr_tail=_tail(stderr))
        return result


VERDICT_STEPS = ("check", "bench", "compare")


def _verdict_step(step: str, payload: dict, timeout_s: float, environment: dict | None, started: float) -> dict:
    """check, bench and compare: decided here, in the parent, with the candidate in a child process
    that only produces outputs and timing claims (:mod:`hello_gpu.agent.session`)."""
    from . import session
    runner = {"check": session.run_check, "bench": session.run_bench, "compare": session.run_compare}[step]
    try:
        result = runner(payload, timeout_s, environment)
    except session.WorkerEnded as ended:
        result = {"status": ended.status, "detail": ended.detail}
    except Exception as error:  # noqa: BLE001 - the harness failed on this candidate (a header the registry
        # refuses, a spec that cannot make inputs): that candidate ends, not the agent
        result = {"status": "crashed", "detail": f"{type(error).__name__}: {error}",
                  "traceback": traceback.format_exc()[-TAIL_CHARACTERS:]}
    result.setdefault("status", "ok")
    result.setdefault("stdout_tail", "")
    result.setdefault("stderr_tail", "")
    result.setdefault("patched", [])
    result.update(step=step, step_seconds=time.perf_counter() - started)
    return result


# ================================================================================== the child side


def _task(payload: dict):
    from .store import task_from_dict
    return task_from_dict(payload["task"])


def _slot_name(route: str, index: int, label: str) -> str:
    return f"{'v' if route == 'hip' else 't'}9{index}_agent_{label}"


def materialize(task, candidates: dict[str, dict], folder: Path):
    """Copy the task's operator folder into ``folder`` and write each candidate as a rung of it.

    Returns ``(op, {label: rung id})``. The operator's folder is ``task.extra["ops_root"]/task.op``
    (default: the package's ``ops/``).
    """
    source_folder = ops_root(task.extra.get("ops_root")) / task.op
    if not (source_folder / "spec.py").is_file():
        raise FileNotFoundError(f"no operator folder {source_folder} (no spec.py)")
    target = Path(folder) / task.op
    target.mkdir(parents=True, exist_ok=True)
    for path in source_folder.iterdir():
        if path.is_file() and path.suffix in (".py", ".hip", ".cu", ".h", ".json"):
            shutil.copy2(path, target / path.name)
    names = {}
    for index, (label, candidate) in enumerate(candidates.items()):
        stem = _slot_name(candidate["route"], index, label)
        if candidate["route"] == "hip":
            (target / f"{stem}.hip").write_text(candidate["source"], encoding="utf-8")
            if candidate.get("companion"):
                (target / f"{stem}.py").write_text(candidate["companion"], encoding="utf-8")
        else:
            (target / f"{stem}.py").write_text(candidate["source"], encoding="utf-8")
        names[label] = stem
    op = load_op(task.op, root=folder)
    if task.deterministic:
        op.spec.DETERMINISTIC_REQUIRED = True
    return op, names


def empty_launch_reason(before: dict[str, int]) -> str | None:
    """Launches of the candidate's kernels skipped for an empty grid since ``before`` (runtime.empty_launches):
    calls that returned without doing the work they were timed for. Counted in the process that ran them."""
    after = empty_launches()
    grown = {name: count - before.get(name, 0) for name, count in after.items() if count > before.get(name, 0)}
    if not grown:
        return None
    return ("launched with an empty grid (zero blocks, nothing run) during the timed calls: "
            + ", ".join(f"{name} x{count}" for name, count in sorted(grown.items())))


def _dtypes(task, op) -> list[str]:
    return list(task.dtypes or op.spec.DTYPES)


def _distributions(task, op) -> list[str]:
    """The task's input distributions, else the spec's (the ladder's own), padded to the two the agent
    always checks: a spec that lists one still gets "normal" and "large"."""
    chosen = list(task.distributions or getattr(op.spec, "DISTRIBUTIONS", ()) or ())
    return chosen + [d for d in DEFAULT_DISTRIBUTIONS if d not in chosen][:max(0, 2 - len(chosen))]


def _bench_shape(task, op):
    return task.bench_shape if task.bench_shape is not None else op.spec.BENCH_SHAPES[-1]


def _location_of(error: BaseException, file_name: str) -> int | None:
    """The line of ``file_name`` an exception was raised from (a SyntaxError's own line first). The
    innermost cause is asked first: Triton's interpreter re-raises a kernel's error from its launch
    line, and the kernel's own line is in the original's traceback."""
    chain, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        chain.append(error)
        error = error.__cause__ or error.__context__
    for cause in reversed(chain):
        if isinstance(cause, SyntaxError) and cause.filename and Path(cause.filename).name == file_name:
            return cause.lineno
        for frame in reversed(traceback.extract_tb(cause.__traceback__)):
            if Path(frame.filename).name == file_name:
                return frame.lineno
    return None


def _rename(text: str, names: dict[str, str]) -> str:
    """Say "candidate" where the child's temporary file names would confuse a reader."""
    for label, stem in names.items():
        text = text.replace(stem, f"candidate[{label}]")
    return text


def _step_compile(payload: dict, folder: Path) -> dict:
    task = _task(payload)
    candidate = payload["candidate"]
    try:
        op, names = materialize(task, {"candidate": candidate}, folder)
    except Exception as error:  # noqa: BLE001 - a header or file the registry refuses: a compile failure
        stem = _slot_name(candidate["route"], 0, "candidate")
        text = _rename(str(error).replace(f"{folder}/{task.op}/", ""), {"candidate": stem})
        line = _location_of(error, f"{stem}.py") or _location_of(error, f"{stem}.hip")
        if line is None:
            found = re.search(r"\bline (\d+)", text)
            line = int(found.group(1)) if found else None
        return {"ok": False, "errors": [{"line": line, "column": None, "message": text}],
                "message": f"the registry refused the candidate: {type(error).__name__}: {text}"}
    rung = op.rung(names["candidate"])
    if rung.route == "hip":
        arch = payload.get("arch") or (None if gpu_present() else NO_GPU_ARCH)
        kernels = {}
        dtypes = [d for d in _dtypes(task, op) if rung.supports(d)]
        try:
            for dtype in dtypes or [None]:
                kernel = rung.kernel(arch=arch, dtype=dtype)
                kernel.compile()
                resources = kernel.resources
                kernels[dtype or "any"] = {"entry": kernel.entry, "registers_per_thread": resources.registers_per_thread,
                                           "static_shared_bytes": resources.static_shared_bytes,
                                           "local_bytes": resources.local_bytes,
                                           "spill_store_bytes": resources.spill_store_bytes,
                                           "spill_load_bytes": resources.spill_load_bytes,
                                           "max_threads_per_block": resources.max_threads_per_block,
                                           "source": resources.source}
            if rung.companion is not None:
                load_module(rung.companion, f"agent_{rung.companion.stem}")
        except CompileError as error:
            return {"ok": False, "arch": arch or "device", "compiler": error.compiler,
                    "errors": [{"line": d.line, "column": d.column, "severity": d.severity, "message": d.message}
                               for d in error.diagnostics if "error" in d.severity],
                    "message": _rename(str(error), names)}
        except Exception as error:  # noqa: BLE001 - a signature or companion the runtime refuses
            line = _location_of(error, f"{rung.id}.py")
            return {"ok": False, "arch": arch or "device",
                    "errors": [{"line": line, "column": None, "message": f"{type(error).__name__}: {error}"}],
                    "message": _rename(f"{type(error).__name__}: {error}", names)}
        return {"ok": True, "route": "hip", "arch": arch or "device", "resources": kernels}
    try:
        built = rung.build()             # imports the module: syntax errors, a missing run()
    except Exception as error:  # noqa: BLE001
        line = _location_of(error, rung.path.name)
        return {"ok": False, "route": "triton",
                "errors": [{"line": line, "column": getattr(error, "offset", None),
                            "message": f"{type(error).__name__}: {error}"}],
                "message": _rename(f"{type(error).__name__}: {error}" + (f" (line {line})" if line else ""), names)}
    trial = _first_calls(task, op, rung, built, names)
    if trial.get("errors"):
        return {"ok": False, "route": "triton", **trial}
    return {"ok": True, "route": "triton", "interpreted": built.interpreted,
            "kernels": list(own_kernel_names(rung)[1]), **trial}


def _first_calls(task, op, rung, built, names) -> dict:
    """Triton compiles a kernel at its first call: call the candidate once per dtype at the smallest check
    shape, so a compile error (or a launch the GPU refuses, such as too much shared memory) is a compile
    failure at its own line, and the compiled kernels' registers and spills can be read (GPU). The
    results are not checked here; that is the check step's work, on fresh inputs in another process."""
    shapes = list(task.check_shapes or op.spec.EDGE_SHAPES)
    shape = min(shapes, key=numel)
    dtypes = [d for d in _dtypes(task, op) if rung.supports(d) and not (built.interpreted and d == "bfloat16")]
    seed = fresh_seeds(1)[0]
    for dtype in dtypes:
        try:
            built(*op.spec.make_inputs(shape, dtype, seed=seed, distribution="normal", device=rung.device()))
            if rung.device() != "cpu":
                import torch
                torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 - whatever the first call raises is the candidate's failure
            where = triton_jit.compile_error_location(error, triton_jit.modules_named(MODULE_PREFIX))
            if where is None:                              # a Python error: its traceback has the line
                line, column, elsewhere = _location_of(error, rung.path.name), None, ""
            elif where["file"] == rung.path.name:
                line, column, elsewhere = where["line"], where["column"], ""
            else:                                          # in a sibling rung the candidate loads kernels from
                line, column, elsewhere = None, None, f" (in {where['file']}, line {where['line']})"
            text = _rename(f"{type(error).__name__}: {error}", names) + elsewhere
            return {"errors": [{"line": line, "column": column, "dtype": dtype, "message": text}],
                    "message": f"the first call ({dtype}, shape {shape}) failed: {text}"}
    if built.interpreted:
        return {"resources": None, "note": "the Triton interpreter compiles nothing: no registers or spills here "
                                           "(they show in compile and analyze on a GPU)"}
    # every specialisation the calls compiled (one per dtype at least), with its registers and spills
    return {"resources": {"kernels": triton_jit.kernel_resources(triton_jit.modules_named(MODULE_PREFIX))}}


def _kernel_trace(built, rung, inputs) -> list[dict] | None:
    """The device kernels one call launches (GPU only): a library kernel where the candidate's own
    should be is a fallback, which the anti-cheat checks read from here."""
    if not gpu_present():
        return None
    ours, triton = own_kernel_names(rung)
    table = kernel_table(built, *inputs, warmup=1, repeats=2, ours=ours, triton=triton)
    return [row.to_dict() for row in table.rows]


def _inputs_sets(op, shape, dtype: str, device: str, count: int = INPUT_SETS) -> list[tuple]:
    return [tuple(op.spec.make_inputs(shape, dtype, seed=seed, distribution="normal", device=device))
            for seed in fresh_seeds(count)]


def _ceilings():
    if not gpu_present():
        return None
    return cached_ceilings(allow_partial=True)


def _timed_candidate(payload: dict, folder: Path):
    """The candidate built at the task's bench shape: (task, op, names, rung, built, dtype, shape, work, inputs)."""
    task = _task(payload)
    op, names = materialize(task, {"candidate": payload["candidate"]}, folder)
    rung = op.rung(names["candidate"])
    dtype = payload.get("dtype") or next(d for d in _dtypes(task, op) if rung.supports(d))
    shape = _bench_shape(task, op)
    built = rung.build()
    return task, op, names, rung, built, dtype, shape, op.spec.work(shape, dtype), \
        _inputs_sets(op, shape, dtype, rung.device())


def _launched_resources(rung, dtype: str, built, inputs: tuple) -> dict | None:
    """Registers, spills and shared memory of the candidate's kernels (GPU only): from the compiler's
    report for HIP (the entry kernel at ``dtype``), from Triton's JIT cache for Triton (every
    specialisation launched). ``registers_per_thread`` and ``spill_bytes`` are the largest of them.

    A Triton kernel compiles at its first call, and the analyze step given the bench's median launches
    nothing before this: the candidate is called once here on ``inputs`` (one set of arguments; the
    H200 run of 0640e65 found the Triton analyses of the agent's GPU test without resources)."""
    if rung.route == "hip":
        kernel = rung.kernel(dtype=dtype)
        kernel.compile()
        report = kernel.resources
        kernels = [{"name": kernel.entry, "registers_per_thread": report.registers_per_thread,
                    "spill_bytes": report.spill_store_bytes, "shared_bytes": report.static_shared_bytes}]
    else:
        import torch
        built(*inputs)
        torch.cuda.synchronize()                     # GPU only: _step_analyze calls this with a GPU present
        kernels = triton_jit.kernel_resources(triton_jit.modules_named(MODULE_PREFIX))
    if not kernels:
        return None
    known = [k for k in kernels if k["registers_per_thread"] is not None]
    return {"kernels": kernels,
            "registers_per_thread": max((k["registers_per_thread"] for k in known), default=None),
            "spill_bytes": max((k["spill_bytes"] or 0 for k in kernels), default=0)}


def _step_analyze(payload: dict, folder: Path) -> dict:
    _, op, names, rung, built, dtype, shape, work, inputs = _timed_candidate(payload, folder)
    seconds = payload.get("median_s")
    if not seconds:
        seconds = measure(built, work=work, cache="cold", inputs=inputs, max_seconds=1.0, device=rung.device()).median
    notes: list[str] = []
    result = {"shape": shape_label(shape), "dtype": dtype, "median_s": seconds, "work": work.to_dict(),
              "intensity": work.arithmetic_intensity, "top_kernel": None, "counters": None}
    if gpu_present():
        info = device_info()
        ceilings = _ceilings()
        roofs = roofs_from({"name": info.name, "arch": info.arch}, dtype,
                           [("this machine's cache", ceilings.to_dict())] if ceilings else [],
                           environment={"l2_bytes": info.l2_bytes})
        verdict = classify(RooflinePoint(rung.id, shape_label(shape), dtype, rung.route, "candidate", float(seconds),
                                         float(work.bytes), float(work.flops)), roofs)
        result.update(bound=verdict.bound, side=verdict.side, fraction_of_attainable=verdict.fraction,
                      reason=_rename(verdict.reason, names), roofs_sources=list(roofs.sources))
        try:
            result["resources"] = _launched_resources(rung, dtype, built, inputs[0])
        except Exception as error:  # noqa: BLE001 - resources are evidence for the policy, not a verdict
            notes.append(f"no resources: {type(error).__name__}: {error}")
        try:
            rows = _kernel_trace(built, rung, inputs[0]) or []
            if rows:
                result["top_kernel"] = rows[0]
        except Exception as error:  # noqa: BLE001
            notes.append(f"no kernel table: {type(error).__name__}: {error}")
        if payload.get("counters", True):
            try:
                counted = counters_for_rungs(op, [rung.id], shape, dtype, root=folder)[rung.id]
                result["counters"] = counted.summary() if counted.available else None
                if not counted.available:
                    notes.append(f"counters unavailable: {counted.note}")
            except Exception as error:  # noqa: BLE001 - counters are a bonus; their absence is a note
                notes.append(f"counters unavailable: {type(error).__name__}: {error}")
        else:
            notes.append("counters not asked for")
    else:
        result.update(bound="unknown", side=None, fraction_of_attainable=None,
                      reason="no GPU: no roofs to place the candidate under (wall-clock time in the CPU interpreter)")
        notes.append("counters unavailable: no GPU here (ncu / rocprofv3 need one)")
        notes.append("no kernel table: torch.profiler sees no device kernels without a GPU")
    result["notes"] = notes
    return result


STEP_FUNCTIONS = {"compile": _step_compile, "analyze": _step_analyze}


def _write(path: Path, data: dict) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, default=str, allow_nan=True), encoding="utf-8")
    os.replace(temporary, path)


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    result_path = Path(arguments[0])
    request = json.loads(sys.stdin.read())
    step, payload = request["step"], request["payload"]
    with tempfile.TemporaryDirectory(prefix="hello-gpu-candidate-") as folder:
        try:
            result = {"status": "ok", **STEP_FUNCTIONS[step](payload, Path(folder))}
        except Exception as error:  # noqa: BLE001 - the harness failed on this candidate: that candidate ends
            result = {"status": "crashed", "detail": f"{type(error).__name__}: {error}",
                      "traceback": traceback.format_exc()[-TAIL_CHARACTERS:]}
    _write(result_path, result)
    sys.stdout.flush()
    sys.stderr.flush()
    # Not a normal exit: a thread the candidate left running must not hold the child (and the step) open.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
