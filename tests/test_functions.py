"""hello_gpu.ops.softmax / rms_norm: the best rungs as functions and torch custom ops.

CPU tier: the argument checks, the custom-op registration, BEST against the committed records, and
(when the best rung is a Triton rung) a ``torch.compile(fullgraph=True)`` run in the interpreter.
GPU tier: results against the float64 references, fullgraph compile, the forward-only refusal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import hello_gpu.ops as ops
from hello_gpu.ops import load_op
from hello_gpu.runtime import compiled_replay
from hello_gpu.ops.functions import BEST
from hello_gpu.runtime.device import gpu_vendor

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "records" / "nvidia-h200"
# The record BEST is held to, per operator: at every shape in it, BEST is within noise of the fastest.
BEST_RECORD = {"softmax": "softmax.float32.json", "rms_norm": "rms_norm.bfloat16.json"}


def test_the_names_are_the_functions_even_after_the_op_folders_are_imported():
    from hello_gpu.ops.rms_norm.spec import EPS          # imports the folder hello_gpu.ops.rms_norm
    import hello_gpu.ops.softmax.spec  # noqa: F401
    assert EPS == 1e-6
    assert ops.softmax.__module__ == "hello_gpu.ops.functions" and callable(ops.rms_norm)
    assert hasattr(torch.ops.hello_gpu, "softmax") and hasattr(torch.ops.hello_gpu, "rms_norm")


@pytest.mark.parametrize("op_name", sorted(BEST))
def test_best_names_a_candidate_rung(op_name):
    rung = load_op(op_name).rung(BEST[op_name])
    assert not rung.is_baseline


@pytest.mark.parametrize("op_name", sorted(BEST))
def test_best_is_the_fastest_candidate_in_the_committed_record(op_name):
    path = RECORDS / BEST_RECORD[op_name]
    if not path.is_file():
        pytest.skip(f"{path.relative_to(REPO)} is not committed yet")
    entries = [e for e in json.loads(path.read_text())["entries"]
               if e["role"] == "candidate" and "v00_torch" in (e.get("speedups") or {})]
    for shape in sorted({e["shape"] for e in entries}):
        here = [e for e in entries if e["shape"] == shape]
        fastest = max(here, key=lambda e: e["speedups"]["v00_torch"]["value"])
        chosen = next(e for e in here if e["variant"] == BEST[op_name])
        # Within noise: BEST's interval reaches 98% of the fastest one's paired speedup over torch.
        assert chosen["speedups"]["v00_torch"]["ci95"][1] >= fastest["speedups"]["v00_torch"]["value"] * 0.98, (
            f"{op_name}: BEST is {BEST[op_name]}, but {fastest['variant']} is faster at {shape} in {path.name}")


def test_bad_arguments_are_refused_with_the_problem_named():
    x = torch.randn(4, 8)
    with pytest.raises(TypeError, match=r"softmax: x must be a torch.Tensor, got list"):
        ops.softmax([1.0, 2.0])
    with pytest.raises(TypeError, match=r"softmax: x is float64; supported: float32, bfloat16, float16"):
        ops.softmax(x.double())
    with pytest.raises(ValueError, match=r"last dimension of at least 1 element; got shape \(4, 0\)"):
        ops.softmax(torch.empty(4, 0))
    with pytest.raises(ValueError, match=r"weight must have shape \(8,\), one per column of x; got \(7,\)"):
        ops.rms_norm(x, torch.ones(7))
    with pytest.raises(ValueError, match=r"weight is torch.float16 on cpu; x is torch.float32 on cpu"):
        ops.rms_norm(x, torch.ones(8, dtype=torch.float16))
    if os.environ.get("TRITON_INTERPRET") != "1":
        with pytest.raises(ValueError, match=r"x is on cpu; the kernels run on a GPU"):
            ops.softmax(x)
    with pytest.raises(ValueError, match=r"eps must be a number >= 0, got -1.0"):
        ops.rms_norm(x, torch.ones(8), -1.0)
    # what the fast path's key would fail to hash (a list) or take for a float: the checked path's errors
    with pytest.raises(ValueError, match=r"eps must be a number >= 0, got \[1e-06\]"):
        ops.rms_norm(x, torch.ones(8), [1e-6])
    with pytest.raises(ValueError, match=r"eps must be a number >= 0, got tensor"):
        ops.rms_norm(x, torch.ones(8), torch.tensor(1e-6))


def test_autograd_is_refused_up_front():
    x = torch.randn(4, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"softmax is forward only .* torch.no_grad\(\)"):
        ops.softmax(x)
    with pytest.raises(RuntimeError, match=r"rms_norm is forward only"):
        ops.rms_norm(x, torch.ones(8))


_COMPILE_SCRIPT = """
import shutil
import torch, hello_gpu.ops as ops
from hello_gpu.ops import functions
from hello_gpu.runtime import compiled_replay

# The H200 run of 2f3f333 failed with the compiled replay built: Dynamo guarded its replay function (a C
# builtin) and torch 2.11 refused it as a constant. So the replay is built for real here (CPU stand-ins
# for the stream and device queries) and handed to the functions, as a finished build would be. Without a
# C++ compiler it is left out; the guard check at the end still holds the functions to reading none of it.
if shutil.which("c++") or shutil.which("g++"):
    module = compiled_replay.load_module(configure_with=((torch.Tensor, torch.nn.Parameter), lambda device: 0,
                                                         lambda: -1, ([], [])))
    functions._COMPILED[0] = module.replay
    print("the compiled replay is in place")


def reference(x, w):
    return torch.nn.functional.rms_norm(torch.softmax(x.double(), -1), (x.shape[-1],), w.double(), 1e-5)


graphs = []


def recording(graph_module, example_inputs):
    graphs.append(graph_module)
    return graph_module.forward


f = torch.compile(lambda x, w: ops.rms_norm(ops.softmax(x), w, 1e-5), fullgraph=True, backend=recording)
aot = torch.compile(lambda x, w: ops.rms_norm(ops.softmax(x), w, 1e-5), fullgraph=True, backend="aot_eager")
# A shape change recompiles (or takes a dynamic graph): never the previous shape's result.
for shape in ((3, 5, 33), (7, 33), (3, 5, 33), (2, 65), (1, 1000)):
    x = torch.randn(shape) * 4
    w = 1 + 0.1 * torch.randn(shape[-1])
    for compiled in (f, aot):
        got = compiled(x, w)
        assert got.shape == x.shape and torch.allclose(got.double(), reference(x, w), rtol=1e-4, atol=1e-5), shape
# Each graph is the two custom ops and nothing else (no graph break, no trace into Triton); a dynamic-shape
# graph also holds the checks' size comparisons, unused (Dynamo keeps them; a backend drops them).
for graph_module in graphs:
    graph_module.graph.eliminate_dead_code()
    calls = [node.target for node in graph_module.graph.nodes if node.op not in ("placeholder", "output")]
    assert calls == [torch.ops.hello_gpu.softmax.default, torch.ops.hello_gpu.rms_norm.default], graph_module.graph
# Dynamo reads no state of the eager fast path, so no guard depends on it.
guards = [guard.name for guard in torch._dynamo.explain(lambda x, w: ops.rms_norm(ops.softmax(x), w))(x, w).out_guards]
assert not [name for name in guards if "_COMPILED" in name or "_FAST_PLANS" in name], guards
print("ok")
"""


def test_fullgraph_compile_in_the_triton_interpreter():
    routes = {name: load_op(name).rung(rung).route for name, rung in BEST.items()}
    if set(routes.values()) != {"triton"}:
        pytest.skip(f"a best rung is not Triton ({routes}): the fullgraph check runs in the GPU tier")
    environment = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], env=environment, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


# ------------------------------------------------------------------------------------------ GPU tier

gpu = pytest.mark.skipif(gpu_vendor() is None, reason="needs a GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(1, 1), (31, 1023), (2, 3, 4097), (1823, 781), (64, 32768)])
def test_functions_match_the_references_on_the_gpu(shape, dtype):
    softmax_spec, rms_spec = load_op("softmax").spec, load_op("rms_norm").spec
    torch_dtype = getattr(torch, dtype)
    for _ in range(3):          # the first call of a shape records its launches, the later ones replay them
        x = (torch.randn(shape, device="cuda") * 3).to(torch_dtype)
        w = (1 + 0.1 * torch.randn(shape[-1], device="cuda")).to(torch_dtype)
        for got, want, (rtol, atol) in (
                (ops.softmax(x), softmax_spec.reference(x), softmax_spec.TOLERANCE[dtype]),
                (ops.rms_norm(x, w, 1e-5), torch.nn.functional.rms_norm(x.double(), (shape[-1],), w.double(), 1e-5),
                 rms_spec.TOLERANCE[dtype])):
            assert got.shape == x.shape and got.dtype == x.dtype
            assert torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol)


@pytest.mark.gpu
@gpu
def test_fullgraph_compile_and_no_grad_on_the_gpu(built_extension):
    # With the compiled replay built (conftest.py), as in the H200 run of 2f3f333 where Dynamo failed on
    # its function (by test order then: the earlier tests' plans had started the build).
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
    f = torch.compile(lambda x, w: ops.rms_norm(ops.softmax(x), w), fullgraph=True)
    want = torch.nn.functional.rms_norm(torch.softmax(x.float(), -1), (4096,), w.float(), 1e-6)
    assert torch.allclose(f(x, w).float(), want, rtol=2**-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="forward only"):
        ops.softmax(x.float().requires_grad_())
    with torch.no_grad():
        assert ops.softmax(x.float().requires_grad_()).shape == x.shape


@pytest.mark.gpu
@gpu
def test_compiled_functions_follow_a_shape_change_on_the_gpu():
    """torch.compile with a new shape recompiles (or takes a dynamic graph): never a stale result."""
    f = torch.compile(lambda x: ops.softmax(x), fullgraph=True)
    for rows, columns in ((16, 4096), (31, 1023), (16, 4096), (5, 70)):
        x = torch.randn(rows, columns, device="cuda")
        assert torch.allclose(f(x), torch.softmax(x.double(), -1).float(), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_public_functions_replay_in_a_cuda_graph(dtype, replay_path):
    """Captured once, replayed on fresh data copied into the captured inputs: right every replay."""
    torch_dtype = getattr(torch, dtype)
    x = torch.randn(16, 4096, device="cuda", dtype=torch_dtype)
    w = (1 + 0.1 * torch.randn(4096, device="cuda")).to(torch_dtype)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                      # warm-up off the capture: compiles, first launches
        ops.softmax(x), ops.rms_norm(x, w)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        probabilities, normalised = ops.softmax(x), ops.rms_norm(x, w)
    softmax_tolerance, rms_tolerance = load_op("softmax").spec.TOLERANCE[dtype], load_op("rms_norm").spec.TOLERANCE[dtype]
    for _ in range(3):
        x.copy_((3 * torch.randn(16, 4096, device="cuda")).to(torch_dtype))
        probabilities.fill_(float("nan"))
        normalised.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.allclose(probabilities.double(), torch.softmax(x.double(), -1), *softmax_tolerance)
        want = torch.nn.functional.rms_norm(x.double(), (4096,), w.double(), 1e-6)
        assert torch.allclose(normalised.double(), want, *rms_tolerance)


# The fast path: a signature that passed the checks once goes straight to its replay plan. Each test
# first makes a good call of a signature, then checks that the cached path gives torch's result on fresh
# inputs and that every check still refuses, with the checked path's own message, a call that differs
# from the cached one in one thing.

def _cached_plans(name: str) -> list:
    from hello_gpu.ops.functions import _FAST_PLANS
    return [plan for plan in _FAST_PLANS[name].values() if plan]


def _forget_plans() -> None:
    from hello_gpu.ops.functions import _COMPILED_KEYS, _FAST_PLANS
    for plans in (*_FAST_PLANS.values(), *_COMPILED_KEYS.values()):
        plans.clear()
    compiled_replay.clear()


@pytest.fixture(params=["python replay", "compiled replay"])
def replay_path(request):
    """Each fast-path test twice: plans replayed from Python, and from the compiled replay (its C++
    extension built here first: on the GPU machine it must build; status says why if not)."""
    from hello_gpu.ops import functions
    saved = functions._COMPILED[0]
    if request.param == "compiled replay":
        functions._COMPILED[0] = request.getfixturevalue("built_extension").replay
    else:
        functions._COMPILED[0] = None
    _forget_plans()
    yield request.param
    functions._COMPILED[0] = saved
    _forget_plans()


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("shape", [(16, 4096), (4, 4, 4096), (1, 1), (1823, 781)])
def test_the_compiled_replay_serves_a_cached_signature_from_cpp(shape, built_extension):
    """After one checked call, the next calls of the signature come from the C++ extension: it returns
    the result itself (not None), right on fresh inputs, also on a side stream."""
    from hello_gpu.ops import functions
    functions._COMPILED[0] = built_extension.replay
    _forget_plans()
    replay = compiled_replay.function()
    for dtype in ("float32", "bfloat16"):
        torch_dtype = getattr(torch, dtype)
        w = (1 + 0.1 * torch.randn(shape[-1], device="cuda")).to(torch_dtype)
        x = (3 * torch.randn(shape, device="cuda")).to(torch_dtype)
        ops.softmax(x), ops.rms_norm(x, w, 1e-5)                         # checked calls: the plans are made
        for name in ("softmax", "rms_norm"):
            if load_op(name).rung(BEST[name]).route != "triton":
                continue
            fresh = (3 * torch.randn(shape, device="cuda")).to(torch_dtype)
            args = (fresh,) if name == "softmax" else (fresh, w, 1e-5)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                got = replay(compiled_replay.table(name), *args)
            side.synchronize()
            assert isinstance(got, torch.Tensor), f"{name} {dtype}: no compiled plan ({compiled_replay.last_refusal()})"
            if name == "softmax":
                want, tolerance = torch.softmax(fresh.double(), -1), load_op(name).spec.TOLERANCE[dtype]
            else:
                want = torch.nn.functional.rms_norm(fresh.double(), (shape[-1],), w.double(), 1e-5)
                tolerance = load_op(name).spec.TOLERANCE[dtype]
            assert got.shape == fresh.shape and got.dtype == fresh.dtype
            assert torch.allclose(got.double(), want, *tolerance), f"{name} {dtype}"


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("shape", [(16, 4096), (4, 4, 4096), (2, 3, 5, 781)])
def test_the_fast_path_matches_torch_on_fresh_inputs(shape, replay_path):
    for dtype in ("float32", "bfloat16"):
        torch_dtype = getattr(torch, dtype)
        softmax_tolerance = load_op("softmax").spec.TOLERANCE[dtype]
        rms_tolerance = load_op("rms_norm").spec.TOLERANCE[dtype]
        w = (1 + 0.1 * torch.randn(shape[-1], device="cuda")).to(torch_dtype)
        for _ in range(4):                  # the first call records, the next ones take the fast path
            x = (3 * torch.randn(shape, device="cuda")).to(torch_dtype)
            got = ops.softmax(x)
            assert got.shape == x.shape and got.dtype == x.dtype and got.is_contiguous()
            assert torch.allclose(got.double(), torch.softmax(x.double(), -1), *softmax_tolerance)
            got = ops.rms_norm(x, w, 1e-5)
            want = torch.nn.functional.rms_norm(x.double(), (shape[-1],), w.double(), 1e-5)
            assert got.shape == x.shape and torch.allclose(got.double(), want, *rms_tolerance)
    # one plan per dtype and function, when the best rungs' launches are replayable (Triton rungs)
    for name in ("softmax", "rms_norm"):
        if load_op(name).rung(BEST[name]).route == "triton":
            assert len(_cached_plans(name)) == 2, name


def _message(call, error=Exception) -> str:
    with pytest.raises(error) as caught:
        call()
    return str(caught.value)


@pytest.mark.gpu
@gpu
def test_every_check_still_refuses_after_a_signature_was_cached(replay_path):
    x = torch.randn(16, 4096, device="cuda")
    w = torch.randn(4096, device="cuda")
    for _ in range(2):
        ops.softmax(x), ops.rms_norm(x, w)
    assert _message(lambda: ops.softmax(x.double()), TypeError).endswith("x is float64; supported: float32, bfloat16, "
                                                                          "float16")
    assert "x is on cpu; the kernels run on a GPU" in _message(lambda: ops.softmax(x.cpu()), ValueError)
    assert "x is on cpu; the kernels run on a GPU" in _message(lambda: ops.rms_norm(x.cpu(), w.cpu()), ValueError)
    assert "forward only" in _message(lambda: ops.softmax(x.clone().requires_grad_()), RuntimeError)
    assert "forward only" in _message(lambda: ops.rms_norm(x, w.clone().requires_grad_()), RuntimeError)
    assert "weight is torch.float16 on cuda:0" in _message(lambda: ops.rms_norm(x, w.half()), ValueError)
    assert "weight is torch.float32 on cpu" in _message(lambda: ops.rms_norm(x, w.cpu()), ValueError)
    assert "eps must be a number >= 0, got -1.0" in _message(lambda: ops.rms_norm(x, w, -1.0), ValueError)
    assert "eps must be a number >= 0, got [1e-06]" in _message(lambda: ops.rms_norm(x, w, [1e-6]), ValueError)
    # accepted calls that differ from the cached one: right results, not the cached plan's
    with torch.no_grad():
        assert torch.allclose(ops.softmax(x.clone().requires_grad_()), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    strided = torch.randn(4096, 16, device="cuda").t()                   # same shape, not contiguous
    assert torch.allclose(ops.softmax(strided), torch.softmax(strided, -1), rtol=1e-5, atol=1e-6)
    storage = torch.randn(16 * 4096 + 1, device="cuda")
    shifted = storage[1:].view(16, 4096)                                 # same shape, 4-byte aligned only
    for _ in range(2):
        assert torch.allclose(ops.softmax(shifted), torch.softmax(shifted, -1), rtol=1e-5, atol=1e-6)
    rtol, atol = load_op("rms_norm").spec.TOLERANCE["float32"]
    for eps in (1e-6, 1e-2, 0):
        want = torch.nn.functional.rms_norm(x.double(), (4096,), w.double(), eps)
        assert torch.allclose(ops.rms_norm(x, w, eps).double(), want, rtol=rtol, atol=atol), eps


@pytest.mark.gpu
@gpu
def test_a_triton_launch_hook_sees_the_launches_of_cached_calls(replay_path):
    """A profiler's launch hook must see every launch: a cached signature runs its launcher as written
    while a hook is set."""
    try:
        from triton import knobs
        chain = knobs.runtime.launch_enter_hook
    except (ImportError, AttributeError):
        chain = None
    if not (hasattr(chain, "add") and hasattr(chain, "remove")):
        pytest.skip("this Triton has no launch hook chain (knobs.runtime.launch_enter_hook.add, Triton >= 3.6)")
    if load_op("softmax").rung(BEST["softmax"]).route != "triton":
        pytest.skip("the best softmax rung is not a Triton rung")
    x = torch.randn(16, 4096, device="cuda")
    for _ in range(2):
        ops.softmax(x)
    seen = []
    hook = seen.append
    chain.add(hook)
    try:
        got = ops.softmax(x)
    finally:
        chain.remove(hook)
    assert seen, "the hook saw no launch of a cached call"
    assert torch.allclose(got, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@gpu
def test_compiled_calls_with_shape_changes_between_cached_eager_calls():
    """Eager calls cache their signatures; torch.compile of the same function with new shapes recompiles
    (or takes a dynamic graph) and never returns a result of a cached shape."""
    f = torch.compile(lambda x, w: ops.rms_norm(ops.softmax(x), w), fullgraph=True)
    for shape in ((16, 4096), (31, 1023), (16, 4096), (5, 70), (2, 8, 4096), (16, 4096)):
        x = torch.randn(shape, device="cuda")
        w = 1 + 0.1 * torch.randn(shape[-1], device="cuda")
        want = torch.nn.functional.rms_norm(torch.softmax(x.double(), -1), (shape[-1],), w.double(), 1e-6)
        for got in (ops.rms_norm(ops.softmax(x), w), f(x, w), ops.rms_norm(ops.softmax(x), w)):
            assert got.shape == x.shape and torch.allclose(got.double(), want, rtol=1e-4, atol=1e-6), shape


# ------------------------------------------------------------------------------- +inf, -inf and NaN

# One width per dispatch path of the best softmax rung (t10 -> t08's kernel up to 1024 columns, t07/t04's
# up to 2048, t03's up to 32768, t02's online tiles beyond), the 70000 among them.
DISPATCH_WIDTHS = (700, 1500, 20000, 70000)
# The t02 path used to drop a NaN that sat where its lane had seen only -inf (tl.maximum is maxnum): the
# row came out finite with one NaN, where torch.softmax gives NaN throughout (issue 19, fixed in t02).


def _special_rows(columns: int, dtype, device: str, special: float, where: int) -> torch.Tensor:
    """Row 0 holds ``special`` at column ``where``; row 1 is all -inf; row 2 has -inf entries; row 3 is plain."""
    x = torch.randn(4, columns, device=device) * 3
    x[0, where] = special
    x[1] = float("-inf")
    x[2, ::7] = float("-inf")
    return x.to(dtype)


def _assert_matches_torch(got: torch.Tensor, x: torch.Tensor, rtol: float, atol: float) -> None:
    want = torch.softmax(x.double(), -1)
    assert torch.equal(torch.isnan(got), torch.isnan(want)), (
        f"NaN in {int(torch.isnan(got).sum())} outputs where torch.softmax has {int(torch.isnan(want).sum())}")
    assert torch.allclose(got.double().nan_to_num(0.5), want.nan_to_num(0.5), rtol=rtol, atol=atol)


_SPECIAL_SCRIPT = """
import json, sys, torch
import hello_gpu.ops as ops
from tests.test_functions import _assert_matches_torch, _special_rows
spec = ops.load_op("softmax").spec
results = {}
for columns in json.loads(sys.argv[1]):
    for special in ("inf", "-inf", "nan"):
        problems = []
        for dtype in ("float32", "float16"):           # bfloat16 arithmetic is wrong in the interpreter
            for where in (0, columns // 2, columns - 1):
                x = _special_rows(columns, getattr(torch, dtype), "cpu", float(special), where)
                try:
                    _assert_matches_torch(ops.softmax(x), x, *spec.TOLERANCE[dtype])
                except AssertionError as error:
                    problems.append(f"{dtype}, {special} at column {where}: {error}")
        results[f"{columns}-{special}"] = problems
print(json.dumps(results))
"""
_special_results: dict[str, list[str]] = {}


def special_value_checks() -> dict[str, list[str]]:
    """Every (width, special value) case in one interpreter process: the problems found, by case id."""
    if not _special_results:
        environment = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"}
        done = subprocess.run([sys.executable, "-W", "ignore", "-c", _SPECIAL_SCRIPT, json.dumps(DISPATCH_WIDTHS)],
                              env=environment, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        _special_results.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return _special_results


def _special_cases():
    for columns in DISPATCH_WIDTHS:
        for special in ("inf", "-inf", "nan"):
            yield pytest.param(columns, special, id=f"{columns}-{special}")


@pytest.mark.skipif(gpu_vendor() is not None, reason="the interpreter tier; the GPU tier has its own test")
@pytest.mark.parametrize("columns, special", list(_special_cases()))
def test_softmax_matches_torch_on_inf_and_nan_on_every_dispatch_path_in_the_interpreter(columns, special):
    """+inf or NaN anywhere in a row makes torch.softmax NaN throughout; an all -inf row is NaN; -inf
    entries are 0. The public function must agree on every path, at the head, middle and tail."""
    problems = special_value_checks()[f"{columns}-{special}"]
    assert not problems, "\n".join(problems[:3])


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("columns, special", list(_special_cases()))
def test_softmax_matches_torch_on_inf_and_nan_on_the_gpu(columns, special, dtype):
    spec = load_op("softmax").spec
    for where in (0, columns // 2, columns - 1):
        x = _special_rows(columns, getattr(torch, dtype), "cuda", float(special), where)
        _assert_matches_torch(ops.softmax(x), x, *spec.TOLERANCE[dtype])
