"""The generated regions of the course's Part 4 (hello_gpu.course.model_tables), on the CPU.

- the bound, launch and convolution tables computed from the committed ceilings record agree with the
  model's own counts (decode_bound, step_work) and the formulas they state;
- a model record that does not exist yet renders as a warning box whose command is one the command line
  accepts and that writes exactly that record; a path of no known convention is refused;
- once the record exists (written here by the real code: model run, model profile and the agent's report
  on the tiny model on the CPU), the same region becomes its table, and ``records tables --check`` sees
  the page as stale until it is regenerated.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from hello_gpu.bench.records import RecordError, update_tables
from hello_gpu.cli import build_parser, table_renderers
from hello_gpu.course.model_tables import (DECODE_NEW, DECODE_PROMPT, RENDERERS, TARGETS, bound_rows, conv_rows,
                                           eager_calls, launch_rows, producing_command, render_conv_roofline,
                                           render_decode_bound, render_decode_launches, render_model_agent,
                                           render_model_profile, render_model_run)
from hello_gpu.models.llama import CONFIGS, build_model, config_named
from hello_gpu.models.run import decode_bound
from hello_gpu.models.work import step_work

REPO = Path(__file__).resolve().parents[1]
CEILINGS = "records/nvidia-h200/ceilings.json"
TINY = CONFIGS["tiny"]


@pytest.fixture(scope="module")
def ceilings() -> dict:
    return json.loads((REPO / CEILINGS).read_text(encoding="utf-8"))


def cells(table: str, first: str) -> list[str]:
    """The cells of the Markdown table row that starts with ``| first |``."""
    row = next(line for line in table.splitlines() if line.startswith(f"| {first} |"))
    return [cell.strip() for cell in row.strip("|").split("|")]


# ------------------------------------------------------------------------------------------ from the ceilings


def test_the_bound_is_the_models_byte_count_at_the_recorded_copy_bandwidth(ceilings):
    copy = ceilings["ceilings"]["copy_bytes_per_s"]
    rows = bound_rows(ceilings, [config_named("1b"), config_named("8b")], [1, 16])
    assert [(row["config"], row["batch"]) for row in rows] == [("1b", 1), ("1b", 16), ("8b", 1), ("8b", 16)]
    for row in rows:
        bound = decode_bound(config_named(row["config"]), torch.bfloat16, batch=row["batch"], prompt=DECODE_PROMPT,
                             new=DECODE_NEW, copy_bytes_per_s=copy)
        assert row["tokens_per_s"] == pytest.approx(bound.tokens_per_s)
        assert row["step_seconds"] == pytest.approx(bound.bytes_per_step / copy)
        assert (row["target"] is not None) == (row["batch"] == 1)
    one, sixteen = rows[2], rows[3]
    assert one["weight_bytes"] == sixteen["weight_bytes"] - 15 * config_named("8b").hidden_size * 2   # 15 more embedding rows
    assert sixteen["kv_bytes"] == 16 * one["kv_bytes"] and sixteen["tokens_per_s"] > 10 * one["tokens_per_s"]
    table = render_decode_bound([CEILINGS, "batches=1,16"], REPO, "page.md:1")
    eight = cells(table, "8b")
    assert eight[7] == f"{one['tokens_per_s']:,.0f}" and eight[8].startswith(f"≥ {TARGETS['8b']:.0%}")
    assert f"copy bandwidth {copy / 1e9:,.0f} GB/s" in table and ceilings["extra"]["measured_at"] in table


def test_eager_calls_count_each_launching_call_of_a_step_and_no_view():
    calls = eager_calls(TINY, prompt=16)
    work = step_work(TINY, torch.bfloat16, batch=1, tokens=1, cache_length=17)
    assert calls["aten.mm"] == work["linear"].calls                     # every projection and the head
    assert calls["aten.index_copy_"] == 2 * TINY.num_layers             # keys and values of each layer
    assert calls["aten.embedding"] == 1 and calls["aten.silu"] == TINY.num_layers
    assert not {"aten.view", "aten.transpose", "aten.expand", "aten._unsafe_view", "aten.split"} & set(calls)
    deeper = eager_calls(replace(TINY, name="tiny5", num_layers=5), prompt=16)
    per_layer = (sum(deeper.values()) - sum(calls.values())) / 3
    assert per_layer == int(per_layer) and sum(calls.values()) - 2 * per_layer > 0   # a fixed part and a part per layer


def test_the_launch_predictions_follow_the_recorded_overheads(ceilings):
    measured = ceilings["ceilings"]
    (row,) = launch_rows(ceilings, [config_named("1b")])
    assert row["eager_calls"] == sum(eager_calls(config_named("1b")).values())
    assert row["launch_s"] == pytest.approx(row["eager_calls"] * measured["launch_overhead_s"])
    assert row["graph_tokens_per_s"] == pytest.approx(1 / (row["floor_s"] + row["eager_calls"] * measured["graph_call_s"]))
    assert row["eager_tokens_per_s"] <= row["bound_tokens_per_s"] and row["graph_tokens_per_s"] < row["bound_tokens_per_s"]
    assert row["launch_bound"] == (row["launch_s"] > row["floor_s"])
    table = render_decode_launches([CEILINGS, "configs=1b"], REPO, "page.md:1")
    assert cells(table, "1b")[2] == f"{row['eager_calls']:,}" and "predictions, not measurements" in table


def test_the_convolution_rows_count_an_implicit_gemm(ceilings):
    rows = {row["layer"]: row for row in conv_rows(ceilings, batch=8)}
    three = rows["layer2 3x3"]
    assert three["flops"] == 2 * 8 * 28 * 28 * 128 * 128 * 9
    assert three["bytes"] == 2 * (8 * 128 * 28 * 28 + 128 * 128 * 9 + 8 * 128 * 28 * 28)
    ridge = ceilings["ceilings"]["matmul_flops_per_s"]["bfloat16"] / ceilings["ceilings"]["copy_bytes_per_s"]
    assert three["bound"] == ("compute" if three["intensity"] > ridge else "memory")
    assert rows["BatchNorm after layer1 3x3"]["intensity"] == 0.5 and rows["BatchNorm after layer1 3x3"]["bound"] == "memory"
    assert "| layer2 3x3 |" in render_conv_roofline([CEILINGS, "batch=8"], REPO, "page.md:1")


def test_bad_markers_are_refused_by_name(tmp_path):
    with pytest.raises(RecordError, match="unknown option 'batch=2'"):
        render_decode_bound([CEILINGS, "batch=2"], REPO, "page.md:3")
    with pytest.raises(RecordError, match="which does not exist"):
        render_decode_bound(["records/nowhere/ceilings.json"], REPO, "page.md:3")
    with pytest.raises(RecordError, match="names its record first"):
        render_model_run([], REPO, "page.md:3")
    with pytest.raises(RecordError, match="no model configuration '70b'"):
        render_decode_launches([CEILINGS, "configs=70b"], REPO, "page.md:3")
    with pytest.raises(RecordError, match="not a ceilings record"):
        render_decode_bound(["records/nvidia-h200/copy-floor.json"], REPO, "page.md:3")


# ------------------------------------------------------------------------------------------ not yet measured


MISSING = {
    "records/nvidia-h200/models/run.8b.b1.p512.n256/model-run.json": ("model", "run"),
    "records/nvidia-h200/models/profile.1b.decode.b1.p512/model-profile.json": ("model", "profile"),
    "records/nvidia-h200/models/profile.vision.b8.s224/model-profile.json": ("model", "profile"),
    "records/nvidia-h200/agent/model.1b.decode.b1.p512.n256/report.json": ("agent", None),
}


@pytest.mark.parametrize("record", sorted(MISSING))
def test_a_missing_record_renders_a_box_whose_command_writes_that_record(record, tmp_path):
    renderer = {"run": render_model_run, "profile": render_model_profile, "agent": render_model_agent}[
        "agent" if "/agent/" in record else ("run" if "/run." in record else "profile")]
    box = renderer([record], tmp_path, "page.md:1")
    lines = box.splitlines()
    assert lines[0] == "> [!WARNING]" and all(line.startswith(">") for line in lines)
    assert "还没有在 nvidia-h200 上测量" in box and f"`{record}`" in box and "hello-gpu records tables" in box
    assert "|" not in box                                              # no table, no number from anywhere
    command, stage = producing_command(record)
    assert f"`{command}`" in box and (stage is None or f"bash scripts/gpu_session.sh {stage}" in box)
    if stage is not None:                                                # a stage the session script knows
        assert f"\n    {stage.split(':')[0]}:*)" in (REPO / "scripts/gpu_session.sh").read_text(encoding="utf-8")
    args = build_parser().parse_args(shlex.split(command)[1:])           # a command the CLI accepts ...
    folder = str(Path(record).parent)
    assert (getattr(args, "out", None) or str(getattr(args, "run_dir", ""))) == folder   # ... writing that folder
    assert args.command == MISSING[record][0] and getattr(args, "model_command", None) == MISSING[record][1]
    assert args.dtype == "bfloat16"
    # the GPU's name comes from its folder's ceilings record where there is one
    assert "还没有在 NVIDIA H200 上测量" in renderer([record], REPO, "page.md:1") or (REPO / record).is_file()


def test_a_missing_record_of_an_unknown_path_is_an_error_not_a_box(tmp_path):
    for record in ("records/nvidia-h200/models/8b-run.json", "records/nvidia-h200/models/run.8b.b1/model-run.json",
                   "models/run.8b.b1.p512.n256/model-run.json"):
        with pytest.raises(RecordError, match="not a model record path"):
            render_model_run([record], tmp_path, "page.md:9")


# ------------------------------------------------------------------------------------------ once measured


@pytest.fixture(scope="module")
def tiny_records(tmp_path_factory) -> Path:
    """A repository root holding real model records of the tiny model, made on the CPU by the real code."""
    from hello_gpu.agent.model import ModelAgentResult, choose_target, rank_operations
    from hello_gpu.models.profile import profile_llama
    from hello_gpu.models.run import run_model

    root = tmp_path_factory.mktemp("root")
    model = build_model(TINY, dtype=torch.float32, seed=0)
    run = run_model(model, ["eager", "hello-gpu"], batch=1, prompt_length=5, new=3)
    run.write(root / "records/cpu/models/run.tiny.b1.p5.n3")
    profile = profile_llama(model, prompt=8, steps=2)
    folder = root / "records/cpu/models/profile.tiny.decode.b1.p8"
    folder.mkdir(parents=True)
    (folder / "model-profile.json").write_text(json.dumps(profile.to_dict()), encoding="utf-8")
    ranking = rank_operations(profile, model, batch=1, tokens=1, cache_length=9)
    result = ModelAgentResult(root / "records/cpu/agent/model.tiny.decode.b1.p8.n3", model.config.to_dict(), "cpu",
                              "float32", 1, 8, 3, "decode", False, profile, ranking,
                              target=choose_target(ranking, model, 1), model_run=run)
    result.write()
    return root


def test_a_model_run_record_renders_a_row_per_backend_and_every_decision(tiny_records):
    record = "records/cpu/models/run.tiny.b1.p5.n3/model-run.json"
    data = json.loads((tiny_records / record).read_text(encoding="utf-8"))
    table = render_model_run([record], tiny_records, "page.md:1")
    for run in data["runs"]:
        row = cells(table, run["backend"])
        assert row[1] == f"{run['prefill_tokens_per_s']:,.1f}" and row[2] == f"{run['decode_tokens_per_s']:,.1f}"
        assert row[3] == "—" and row[4] == "—"                        # no bound, no GPU memory on the CPU
    assert cells(table, "hello-gpu")[5] == "none" and cells(table, "hello-gpu")[6] == "same"
    # every replacement and why, and the logit verdict
    assert table.count("hello-gpu, ") == len(data["runs"][1]["choices"]) + 1
    assert f"hello-gpu, logits: {data['runs'][1]['logits']['summary']}" in table
    (ratio,) = data["step_ratios"]                                  # the decode step against eager, with its interval
    assert f"Decode step: hello-gpu {ratio['speedup']:.3f}x eager [{ratio['ci95'][0]:.3f}, " in table
    (prefill,) = data["prefill_ratios"]                              # the prefill against eager, from its repeats
    assert f"Prefill: hello-gpu {prefill['speedup']:.3f}x eager [{prefill['ci95'][0]:.3f}, " in table
    assert "not available" in table and "do not edit by hand" in table


def test_a_model_profile_record_renders_its_categories_kernels_and_roofline(tiny_records):
    record = "records/cpu/models/profile.tiny.decode.b1.p8/model-profile.json"
    data = json.loads((tiny_records / record).read_text(encoding="utf-8"))
    table = render_model_profile([record, "top=3"], tiny_records, "page.md:1")
    for category in data["categories"]:
        row = cells(table, category["category"])
        assert row[1] == f"{category['share']:.1%}" and row[3] == f"{category['amdahl_bound']:.2f}×"
    assert sum(line.startswith("| `") for line in table.splitlines()) == 3
    assert "| operation | µs a step |" in table                          # the roofline part, labelled operations
    only = render_model_profile([record, "tables=categories"], tiny_records, "page.md:1")
    assert "| `" not in only and "| operation | µs a step |" not in only
    with pytest.raises(RecordError, match="tables=gpu"):
        render_model_profile([record, "tables=gpu"], tiny_records, "page.md:1")


def test_an_agent_report_renders_its_ranking_and_says_when_it_is_not_a_gpu_measurement(tiny_records):
    record = "records/cpu/agent/model.tiny.decode.b1.p8.n3/report.json"
    data = json.loads((tiny_records / record).read_text(encoding="utf-8"))
    table = render_model_agent([record], tiny_records, "page.md:1")
    for row in data["ranking"]:
        assert cells(table, row["name"])[1] == f"{row['share']:.1%}"
    assert "optimised: " in table and "NOT GPU measurements" in table


def test_a_record_of_another_kind_is_refused(tiny_records, tmp_path):
    for record, renderer, message in (
            ("records/cpu/agent/model.tiny.decode.b1.p8.n3/report.json", render_model_agent, "agent --model"),
            ("records/cpu/models/run.tiny.b1.p5.n3/model-run.json", render_model_run, "not a model-run record"),
            ("records/cpu/models/profile.tiny.decode.b1.p8/model-profile.json", render_model_profile,
             "not a model-profile record")):
        (tmp_path / record).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / record).write_text(json.dumps({"kind": "something else"}), encoding="utf-8")
        with pytest.raises(RecordError, match=message):
            renderer([record], tmp_path, "page.md:1")


def test_a_page_region_turns_from_the_box_into_the_table_when_the_record_arrives(tiny_records, tmp_path):
    record = "records/cpu/models/run.tiny.b1.p5.n3/model-run.json"
    page = tmp_path / "page.md"
    page.write_text(f"# page\n\n<!-- hello-gpu:model-run {record} backends=eager,hello-gpu -->\n"
                    f"<!-- /hello-gpu:model-run -->\n", encoding="utf-8")
    renderers = table_renderers()
    assert set(RENDERERS) <= set(renderers)
    root = tmp_path / "root"
    root.mkdir()
    update_tables([page], root, renderers=renderers)
    assert "还没有在 cpu 上测量" in page.read_text(encoding="utf-8")
    assert "model-run:tiny:1:5:3:eager,hello-gpu" in page.read_text(encoding="utf-8")
    (root / record).parent.mkdir(parents=True)
    (root / record).write_text((tiny_records / record).read_text(encoding="utf-8"), encoding="utf-8")
    assert update_tables([page], root, check=True, renderers=renderers) == [page]     # stale: the record arrived
    update_tables([page], root, renderers=renderers)
    text = page.read_text(encoding="utf-8")
    assert "还没有" not in text and "| eager |" in text
    assert update_tables([page], root, check=True, renderers=renderers) == []


def test_the_decode_floor_table_shows_each_floor_against_the_bound_of_its_own_run(tmp_path):
    from hello_gpu.course.model_tables import render_decode_floor
    record = "records/nvidia-h100-80gb-hbm3/decode-floor.json"
    data = json.loads((REPO / record).read_text(encoding="utf-8"))
    table = render_decode_floor([record], REPO, "page.md:1")
    for entry in data["floors"]:
        row = cells(table, entry["config"])
        assert row[1] == f"{entry['bound_tokens_per_s']:,.1f} tokens/s"
        for cell, key in zip(row[2:], ("one read", "the step's reads", "the step's launches")):
            floor = entry["floors"][key]
            assert cell.startswith(f"{floor['tokens_per_s']:,.1f} tokens/s, {floor['of_bound']:.3f} of the bound")
            assert floor["of_bound"] == pytest.approx(floor["tokens_per_s"] / entry["bound_tokens_per_s"])
        if "folded_empty_launches" not in entry:                # a record from before the norm folds
            assert row[5] == "not in this record"
        step = entry["hello_gpu"]                               # the hello-gpu step, timed in the same run
        low, high = step["of_floor_ci95"]
        against = "folded" if step.get("structure") == "folded" else "unfolded"
        assert row[6].startswith(f"{step['tokens_per_s']:,.1f} tokens/s, {step['of_bound']:.3f} of the bound, "
                                 f"{step['of_floor']:.3f} of the {against} floor [{low:.3f}, {high:.3f}]")
    assert data["device"] in table and record in table
    first = data["floors"][0]
    folded_floor = {**first["floors"]["the step's launches"], "tokens_per_s": 1100.0, "of_bound": 0.9,
                    "tokens_per_s_ci95": [1099.0, 1101.0]}
    timed = {**data, "floors": [{**first, "folded_empty_launches": 21,
                                 "floors": {**first["floors"], "the folded step's launches": folded_floor},
                                 "hello_gpu": {"tokens_per_s": 900.0, "of_bound": 0.75, "of_floor": 0.88,
                                               "of_floor_ci95": [0.87, 0.89], "structure": "folded"}}]}
    (tmp_path / "decode-floor.json").write_text(json.dumps(timed), encoding="utf-8")
    row = cells(render_decode_floor(["decode-floor.json"], tmp_path, "page.md:4"), "1b")
    assert row[5] == f"1,100.0 tokens/s, 0.900 of the bound [1,099.0, 1,101.0]; {first['read_launches'] + 21} launches"
    assert row[6] == "900.0 tokens/s, 0.750 of the bound, 0.880 of the folded floor [0.870, 0.890]"
    partly = {**timed, "floors": [{**timed["floors"][0], "hello_gpu": {**timed["floors"][0]["hello_gpu"],
                                                                        "structure": "partly folded"}}]}
    (tmp_path / "decode-floor.json").write_text(json.dumps(partly), encoding="utf-8")
    row = cells(render_decode_floor(["decode-floor.json"], tmp_path, "page.md:4"), "1b")
    assert row[6] == ("900.0 tokens/s, 0.750 of the bound, 0.880 of the unfolded floor [0.870, 0.890] "
                      "(its step: partly folded)")
    untimed = {**data, "floors": [{key: value for key, value in data["floors"][0].items() if key != "hello_gpu"}]}
    (tmp_path / "decode-floor.json").write_text(json.dumps(untimed), encoding="utf-8")      # a record before session 25
    row = cells(render_decode_floor(["decode-floor.json"], tmp_path, "page.md:4"), "1b")
    assert row[6] == "not timed in this run"
    with pytest.raises(RecordError, match="does not exist"):
        render_decode_floor(["records/nvidia-h200/decode-floor.json"], tmp_path, "page.md:2")
    with pytest.raises(RecordError, match="unknown option"):
        render_decode_floor([record, "configs=1b"], REPO, "page.md:3")
    (tmp_path / "other.json").write_text(json.dumps({"device": "x", "floors": [{"config": "1b"}]}), encoding="utf-8")
    with pytest.raises(RecordError, match="not a decode-floor record"):
        render_decode_floor(["other.json"], tmp_path, "page.md:5")
