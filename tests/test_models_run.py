"""hello-gpu model run / model profile on the CPU with the tiny config, the bandwidth bound's arithmetic, the
trace categorisation on a real H200 trace, and the GPU tier.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
import torch

from hello_gpu.cli import main
from hello_gpu.models.llama import CONFIGS, build_model
from hello_gpu.models.profile import HOST, LAUNCH_GAPS, category_of_name, categorize_trace, profile_llama
from hello_gpu.models.run import decode_bound, run_model
from hello_gpu.runtime.device import gpu_vendor

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "profile"


def test_the_bound_counts_every_weight_once_and_the_filled_cache():
    bound = decode_bound(CONFIGS["8b"], torch.bfloat16, batch=1, prompt=512, new=256, copy_bytes_per_s=4.245e12)
    # 8.030e9 parameters, less the 128256 x 4096 embedding table (a lookup reads one row), plus that row.
    assert bound.weight_bytes == (8_030_261_248 - 128256 * 4096 + 4096) * 2
    assert bound.kv_bytes == 2 * 32 * (8 * 128) * (512 + 128) * 2       # K and V, 32 layers, 640 positions
    assert bound.tokens_per_s == pytest.approx(4.245e12 / (15_009_857_536 + 83_886_080))
    assert 280 < bound.tokens_per_s < 282
    tied = decode_bound(CONFIGS["1b"], torch.bfloat16, batch=16, prompt=512, new=256)
    assert tied.weight_bytes == (1_235_814_400 + 16 * 2048) * 2          # a tied head reads the whole table
    assert tied.tokens_per_s is None


def test_run_on_the_cpu_times_each_backend_and_says_what_it_cannot_measure():
    model = build_model("tiny", dtype=torch.float32, seed=1)
    result = run_model(model, ["eager", "hello-gpu"], batch=2, prompt_length=9, new=6, seed=3)
    assert [run.backend for run in result.runs] == ["eager", "hello-gpu"]
    for run in result.runs:
        assert run.prefill_tokens_per_s > 0 and run.decode_tokens_per_s > 0
        assert run.peak_memory_bytes is None and "not measured on the cpu" in run.memory_note
        assert run.of_bound is None and len(run.tokens) == 2 and len(run.tokens[0]) == 6
    assert result.runs[1].agreement == "same" and result.runs[1].used == []
    # the logits of every backend but eager against eager's recorded decode, teacher-forced
    assert result.runs[0].logits is None
    logits = result.runs[1].logits
    assert logits["ok"] and logits["near_ties"] and len(logits["gaps"]) == 6 and max(logits["gaps"]) == 0.0
    assert logits["worst_ratio"] <= 1.0 and logits["errors"] == logits["reference_errors"]    # eager's own error
    # each decode step timed (new - 1 of them), and the step-time ratio against eager with its interval
    for run in result.runs:
        assert len(run.step_seconds) == 5 and all(seconds > 0 for seconds in run.step_seconds), run.step_seconds
    (ratio,) = result.to_dict()["step_ratios"]
    assert (ratio["candidate"], ratio["baseline"], ratio["steps"]) == ("hello-gpu", "eager", 5)
    assert ratio["ci95"][0] <= ratio["speedup"] <= ratio["ci95"][1], ratio
    # the prefill timed once in the generation and prefill_repeats(that one) times after it; its ratio with an interval
    from hello_gpu.models.run import prefill_repeats
    for run in result.runs:
        assert len(run.prefill_each_s) == 1 + prefill_repeats(run.prefill_each_s[0])
        assert all(s > 0 for s in run.prefill_each_s)
        assert run.prefill_seconds == pytest.approx(statistics.median(run.prefill_each_s))
        assert run.prefill_tokens_per_s == pytest.approx(2 * 9 / run.prefill_seconds)
    (prefill,) = result.to_dict()["prefill_ratios"]
    assert (prefill["candidate"], prefill["baseline"]) == ("hello-gpu", "eager")
    assert prefill["prefills"] == min(len(run.prefill_each_s) for run in result.runs)
    assert prefill["ci95"][0] <= prefill["speedup"] <= prefill["ci95"][1], prefill
    assert result.bound.tokens_per_s is None and "unavailable on the cpu" in result.bound.note
    assert result.device == "cpu"
    with pytest.raises(ValueError, match="--new must be at least 2"):
        run_model(model, ["eager"], batch=1, prompt_length=4, new=1)


def test_a_run_stopped_after_its_first_backend_has_written_that_backend(tmp_path, monkeypatch):
    # The GPU session stops a stage with SIGINT at its deadline: what was measured must be on disk.
    from hello_gpu.models import run as run_module
    real, calls = run_module.run_backend, []

    def stop_at_second(model, backend, *args, **kwargs):
        calls.append(backend)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(model, backend, *args, **kwargs)

    monkeypatch.setattr(run_module, "run_backend", stop_at_second)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        main(["model", "run", "--config", "tiny", "--batch", "1", "--prompt", "5", "--new", "3",
              "--backend", "eager,hello-gpu", "--device", "cpu", "--out", str(out)])
    written = json.loads((out / "model-run.json").read_text())
    assert [run["backend"] for run in written["runs"]] == ["eager"] and calls == ["eager", "hello-gpu"]


def test_a_wrong_kernel_fails_the_logit_check_in_the_table_and_the_json(monkeypatch, capsys, tmp_path):
    """A forced RMSNorm without its gain (let through its own check) moves every logit: FAIL, with the gap."""
    from dataclasses import replace
    from hello_gpu.models.backends import REPLACEMENTS
    from hello_gpu.models.llama import rms_norm

    def without_gain(x, weight, eps):
        return rms_norm(x, torch.ones_like(weight), eps)
    monkeypatch.setitem(REPLACEMENTS, "rms_norm", replace(REPLACEMENTS["rms_norm"], load=lambda: without_gain,
                                                          tolerance={torch.float32: (1.0, 1.0)}))
    out = tmp_path / "run"
    assert main(["model", "run", "--config", "tiny", "--prompt", "6", "--new", "5", "--backend", "eager,hello-gpu",
                 "--device", "cpu", "--force", "rms_norm", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    saved = json.loads((out / "model-run.json").read_text())["runs"][1]["logits"]
    assert not saved["ok"] and saved["worst_ratio"] > 1 and saved["reference"] == "eager", saved["summary"]
    assert "FAIL: error" in text and "hello-gpu logits: hello-gpu vs eager: error against float64" in text
    assert main(["model", "run", "--config", "tiny", "--prompt", "6", "--new", "5", "--backend", "eager,hello-gpu",
                 "--device", "cpu", "--no-check-logits", "--out", str(out)]) == 0
    assert "not compared" in capsys.readouterr().out
    assert json.loads((out / "model-run.json").read_text())["runs"][1]["logits"] is None


def test_the_model_run_command_writes_its_json_where_it_is_told(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["model", "run", "--config", "tiny", "--batch", "1", "--prompt", "7", "--new", "5",
                 "--backend", "eager,hello-gpu", "--device", "cpu", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "bandwidth bound unavailable on the cpu" in text and "rms_norm: not used: not measured" in text
    saved = json.loads((out / "model-run.json").read_text())
    assert saved["kind"] == "model-run" and saved["config"]["name"] == "tiny"
    assert [run["backend"] for run in saved["runs"]] == ["eager", "hello-gpu"]
    assert main(["model", "run", "--config", "tiny", "--backend", "tensorrt", "--out", str(out)]) == 2
    assert "known backends are eager, compile" in capsys.readouterr().out
    assert main(["model", "run", "--config", "70b", "--out", str(out)]) == 2
    assert "no model configuration '70b'" in capsys.readouterr().out
    assert main(["model", "run", "--config", "tiny", "--text", "hello", "--out", str(out)]) == 2
    assert "--text needs --checkpoint" in capsys.readouterr().out


def test_model_run_reads_a_checkpoint_folder(tmp_path, capsys):
    from test_models_llama import random_hf_weights, write_checkpoint
    write_checkpoint(tmp_path / "ckpt", CONFIGS["tiny"], random_hf_weights(CONFIGS["tiny"], seed=2))
    assert main(["model", "run", "--checkpoint", str(tmp_path / "ckpt"), "--prompt", "6", "--new", "3",
                 "--out", str(tmp_path / "out")]) == 0
    assert "weights from" in capsys.readouterr().out
    assert main(["model", "run", "--checkpoint", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "no config.json" in capsys.readouterr().out


def test_a_cpu_profile_puts_every_operation_in_its_category():
    model = build_model("tiny", dtype=torch.float32, seed=1)
    profile = profile_llama(model, batch=1, prompt=12, phase="decode", steps=3)
    assert profile.device == "cpu" and profile.steps == 3
    assert {"GEMM/GEMV", "attention", "norm", "elementwise", "sampling", HOST} - {"sampling"} <= set(profile.categories)
    assert sum(profile.share(c) for c in profile.categories) == pytest.approx(1.0)
    calls = {row.name: row.calls for row in profile.rows}
    layers = model.config.num_layers
    # a decode step: per layer qkv, o, gate_up and down projections, plus the head; one attention per layer
    assert calls["linear"] == 3 * (4 * layers + 1) and calls["attention"] == 3 * layers
    assert calls["add_rms_norm"] == 3 * 2 * layers and calls["rms_norm"] == 3
    for category in profile.categories:
        assert profile.amdahl(category) == pytest.approx(1 / (1 - profile.share(category)))
    prefill = profile_llama(model, batch=2, prompt=12, phase="prefill", steps=2)
    # a prompt's attention is its own operation (its own kernel in the hello-gpu backend)
    assert {row.name: row.calls for row in prefill.rows}["prefill_attention"] == 2 * layers


def test_the_model_profile_command_and_the_vision_model(tmp_path, capsys):
    assert main(["model", "profile", "--config", "tiny", "--prompt", "10", "--steps", "2",
                 "--out", str(tmp_path / "llm")]) == 0
    assert "bound if free" in capsys.readouterr().out
    saved = json.loads((tmp_path / "llm" / "model-profile.json").read_text())
    assert saved["kind"] == "model-profile" and (tmp_path / "llm" / "trace.json").is_file()
    assert main(["model", "profile", "--vision", "--batch", "1", "--image-size", "32", "--steps", "1",
                 "--out", str(tmp_path / "vision")]) == 0
    text = capsys.readouterr().out
    assert "no: there is no convolution ladder" in text
    vision = json.loads((tmp_path / "vision" / "model-profile.json").read_text())
    categories = {entry["category"] for entry in vision["categories"]}
    assert {"convolution", "norm", "pooling", "GEMM/GEMV"} <= categories


def test_a_step_that_is_one_category_has_an_unbounded_bound(tmp_path, capsys):
    """A compiled step profiled on the CPU is one unlabelled host range: its category is the whole step, and making
    it free has no finite bound. The command crashed there (division by zero, session 17); now the table says
    "unbounded" and the record keeps null (JSON has no infinity)."""
    from hello_gpu.models.profile import amdahl, bound_text
    assert amdahl(1.0) == math.inf and amdahl(1.0, 2.0) == pytest.approx(2.0) and amdahl(0.5) == pytest.approx(2.0)
    assert bound_text(math.inf) == "unbounded" and bound_text(None) == "unbounded" and bound_text(1.3) == "1.30x"
    assert main(["model", "profile", "--config", "tiny", "--prompt", "10", "--steps", "2",
                 "--backend", "compile-reduce-overhead", "--out", str(tmp_path)]) == 0
    assert "unbounded" in capsys.readouterr().out
    saved = json.loads((tmp_path / "model-profile.json").read_text())
    whole = [row for row in saved["categories"] if row["share"] >= 1.0]
    assert whole and all(row["amdahl_bound"] is None for row in whole), saved["categories"]


def test_kernels_of_a_real_h200_trace_are_classified_and_the_gaps_counted():
    """torch.compile's reduce_sum on the H200 (a fixture of the kernel-table tests): two Inductor kernels per call."""
    trace = json.loads((FIXTURES / "torch_trace_cuda_reduce_sum_v00_compile.json").read_text())
    profile = categorize_trace(trace)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert profile.device == "gpu" and profile.steps == 10
    assert profile.categories["reduction"] == pytest.approx(sum(e["dur"] for e in kernels) * 1e-6)
    assert profile.categories[LAUNCH_GAPS] == pytest.approx(profile.wall_seconds - profile.categories["reduction"])
    assert {row.name for row in profile.rows} == {"triton_red_fused_sum_0", "triton_per_fused_sum_1"}


def test_a_kernel_takes_the_category_of_the_range_it_was_launched_in():
    def event(name, cat, ts, dur, **args):
        return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "args": args}
    trace = {"traceEvents": [
        event("hello_gpu.call#0", "user_annotation", 0, 100),
        event("hello_gpu.model/norm/rms_norm", "user_annotation", 10, 10),
        event("hello_gpu.model/GEMM/GEMV/linear", "user_annotation", 30, 20),
        event("cudaLaunchKernel", "cuda_runtime", 12, 1, correlation=1),
        event("cuLaunchKernel", "cuda_driver", 35, 1, correlation=2),
        event("cudaLaunchKernel", "cuda_runtime", 60, 1, correlation=3),
        event("void t07_kernel<float>(float*)", "kernel", 14, 5, correlation=1),   # our RMSNorm: a name of nothing
        event("nvjet_hsh_64x8_splitK", "kernel", 40, 15, correlation=2),
        event("triton_poi_fused_add_0", "kernel", 62, 10, correlation=3),          # outside any range: by name
    ]}
    profile = categorize_trace(trace)
    assert profile.categories == pytest.approx({"norm": 5e-6, "GEMM/GEMV": 15e-6, "elementwise": 10e-6,
                                                LAUNCH_GAPS: 70e-6})
    assert profile.amdahl(LAUNCH_GAPS) == pytest.approx(1 / 0.3)


def test_a_captured_graphs_own_kernels_time_their_operations_by_name():
    """No launch is inside a range (a graph replays): our attention's two kernels and the fused qkv kernel time
    their operations; a linear GEMV does not (its calls may also run a library's kernel), nor a library kernel."""
    def event(name, ts, dur):
        return {"ph": "X", "name": name, "cat": "kernel" if ts else "user_annotation", "ts": ts, "dur": dur, "args": {}}
    trace = {"traceEvents": [
        {"ph": "X", "name": "hello_gpu.call#0", "cat": "user_annotation", "ts": 0, "dur": 100, "args": {}},
        event("qkv_rope_write_kernel", 1, 10), event("split_kernel", 12, 4), event("merge_kernel", 17, 2),
        event("early_weight_gemv_kernel", 20, 9), event("nvjet_hsh_64x8_splitK", 30, 20),
    ]}
    profile = categorize_trace(trace)
    assert profile.operations == pytest.approx({"qkv_rope_cache_write": 10e-6, "attention": 6e-6})
    assert profile.categories["attention"] == pytest.approx(6e-6)
    assert profile.categories["GEMM/GEMV"] == pytest.approx(39e-6)
    assert any("attention, qkv_rope_cache_write" in note and "linear" in note for note in profile.notes)


@pytest.mark.parametrize("name, category", [
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>", "GEMM/GEMV"),
    ("void gemv2T_kernel_val<int, int, __nv_bfloat16, float, float, 128, 16, 4, 4, false, false>", "GEMM/GEMV"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>", "attention"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "elementwise"),
    ("void cudnn::cnn::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true>", "convolution"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float>", "pooling"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>", "sampling"),
])
def test_kernel_names_give_their_category(name, category):
    assert category_of_name(name) == category


def test_every_kernel_the_model_package_launches_has_its_operation():
    """A captured graph's kernels are categorised by name alone: each Triton kernel a module of hello_gpu.models
    launches (``kernel[(grid...)](...)``) must be in MODEL_KERNELS, and every entry must still be such a kernel."""
    import importlib
    import re
    from pathlib import Path

    import triton

    import hello_gpu.models as package
    from hello_gpu.models.llama import OP_CATEGORIES
    from hello_gpu.models.profile import MODEL_KERNELS
    launched = set()
    for path in sorted(Path(package.__file__).parent.glob("*_kernel.py")):
        module = importlib.import_module(f"hello_gpu.models.{path.stem}")
        for name in re.findall(r"\b(\w+)\[\(", path.read_text(encoding="utf-8")):       # kernel[(grid...)](...)
            if isinstance(getattr(module, name, None), triton.runtime.KernelInterface):    # jit or interpreted
                launched.add(name)
    assert launched and launched == set(MODEL_KERNELS), (launched ^ set(MODEL_KERNELS))
    assert set(MODEL_KERNELS.values()) <= set(OP_CATEGORIES)
    # as a CUPTI trace spells them, and as the H100's graph profile had them
    assert category_of_name("split_kernel") == category_of_name("merge_kernel") == "attention"
    assert category_of_name("_rope_and_write") == "elementwise" and category_of_name("qkv_rope_write_kernel") == "GEMM/GEMV"


# ------------------------------------------------------------------------------------------ GPU tier

gpu = pytest.mark.skipif(gpu_vendor() is None, reason="needs a GPU")


@pytest.mark.gpu
@gpu
def test_model_run_on_the_gpu_reports_the_bound_and_peak_memory_per_backend(tmp_path):
    model = build_model("1b", device="cuda", dtype=torch.bfloat16, seed=0)
    result = run_model(model, ["eager", "compile-reduce-overhead", "hello-gpu"], batch=1, prompt_length=128, new=32)
    assert result.bound.tokens_per_s and result.bound.copy_bytes_per_s > 1e12
    for run in result.runs:
        assert run.peak_memory_bytes > 2.4e9 and 0 < run.of_bound < 1.0, run
    assert "decode step captured in a CUDA graph" in result.runs[2].notes
    for run in result.runs[1:]:                 # teacher-forced logits: within 2x eager's own error against float64
        assert run.logits["ok"] and run.logits["worst_ratio"] <= run.logits["factor"] and len(run.logits["gaps"]) == 32, \
            run.logits["summary"]


@pytest.mark.gpu
@gpu
def test_a_gpu_profile_assigns_kernels_to_categories_and_counts_launch_gaps():
    model = build_model("1b", device="cuda", dtype=torch.bfloat16, seed=0)
    profile = profile_llama(model, batch=1, prompt=128, phase="decode", steps=3)
    assert profile.device == "gpu"
    assert {"GEMM/GEMV", "attention", "norm", LAUNCH_GAPS} <= set(profile.categories)
    assert profile.share("GEMM/GEMV") > 0.2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: the label names the card")
def test_a_gpu_run_names_its_card():
    from hello_gpu.models.run import device_label
    assert device_label(torch.device("cuda:0")) == f"{torch.cuda.get_device_name(0)} (cuda:0)"


def test_hello_gpu_pdl_runs_beside_hello_gpu_and_is_compared_with_it_in_the_same_run():
    """The dependent launches are a backend of their own so that one run times both decode steps: the record has
    hello-gpu-pdl over hello-gpu (and over eager); on the CPU the backend says why the launches are off."""
    model = build_model("tiny", dtype=torch.float32, seed=1)
    result = run_model(model, ["eager", "hello-gpu", "hello-gpu-pdl"], batch=1, prompt_length=6, new=4, seed=2)
    pdl = result.runs[2]
    assert pdl.backend == "hello-gpu-pdl" and pdl.agreement == "same" and pdl.logits["ok"]
    assert any("no programmatic dependent launch on the cpu" in note for note in pdl.notes), pdl.notes
    pairs = {(ratio["candidate"], ratio["baseline"]) for ratio in result.to_dict()["step_ratios"]}
    assert {("hello-gpu-pdl", "hello-gpu"), ("hello-gpu-pdl", "eager"), ("hello-gpu", "eager")} <= pairs, pairs
    prefill_pairs = {(ratio["candidate"], ratio["baseline"]) for ratio in result.to_dict()["prefill_ratios"]}
    assert ("hello-gpu-pdl", "hello-gpu") in prefill_pairs


def test_the_second_hello_gpu_backend_of_a_run_takes_the_first_ones_kernel_choices(monkeypatch):
    """Decided once a run: hello-gpu-pdl swaps in what hello-gpu chose (forced rms_norm here, checked in the
    interpreter), so its ratio to hello-gpu compares the launches only, and says so in its notes."""
    from hello_gpu.models import backends
    decisions = []
    original = backends.choose_replacements

    def counted(*arguments, **keywords):
        decisions.append(keywords.get("batch"))
        return original(*arguments, **keywords)
    monkeypatch.setattr(backends, "choose_replacements", counted)
    model = build_model("tiny", dtype=torch.float32, seed=1)
    result = run_model(model, ["hello-gpu", "eager", "hello-gpu-pdl"], batch=1, prompt_length=6, new=3, seed=2,
                       force=("rms_norm",))
    first, pdl = result.runs[0], result.runs[2]
    assert decisions == [1]
    assert pdl.choices == first.choices and pdl.used == first.used == ["rms_norm"]
    assert "kernel choices taken from an earlier backend of this run" in pdl.notes
    assert not any("earlier backend" in note for note in first.notes)
    with pytest.raises(ValueError, match="choices are the hello-gpu backends' decisions"):
        backends.make_runner(model, "eager", batch=1, max_seq=8, choices=[])


def test_prefill_repeats_fill_their_seconds_within_the_bounds():
    from hello_gpu.models.run import MAX_PREFILL_REPEATS, MIN_PREFILL_REPEATS, PREFILL_SECONDS, prefill_repeats
    assert prefill_repeats(0.052) == math.ceil(PREFILL_SECONDS / 0.052)        # the 8B's 2048-token prefill: 39
    assert prefill_repeats(1.0) == MIN_PREFILL_REPEATS                          # a slow prefill: still an interval
    assert prefill_repeats(0.0001) == prefill_repeats(0.0) == MAX_PREFILL_REPEATS
