"""Records (CPU tier): the hello-gpu/record/1 schema, atomic writes, staleness, claims, generated tables, CLI."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from hello_gpu.bench import records
from hello_gpu.bench.records import (
    RecordError,
    check_records,
    device_slug,
    render_table,
    source_entry,
    update_tables,
    validate_record,
    write_record,
)
from hello_gpu.bench.records import SourceRules
from hello_gpu.bench.stats import Ratio, summarize
from hello_gpu.bench.work import Work, rates
from hello_gpu.cli import main, table_renderers
from hello_gpu.ops.header import claims
from hello_gpu.ops.sources import repository_rules

REPO = Path(__file__).resolve().parents[1]

KERNEL = """__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""


def _timing(seconds: float) -> dict:
    summary = summarize([seconds * (1 + 0.01 * k) for k in range(-5, 6)])
    return records.timing_from_summary(summary, cache="cold", graph=False, clock="device-events")


def _entry(variant: str, role: str, source: dict | None, seconds: float, *, speedups: dict | None = None,
           ceiling: float | None = None) -> dict:
    n = 1 << 24
    work = Work(bytes=12.0 * n, dtype="float32")
    entry = {"variant": variant, "role": role, "source": source, "shape": f"({n},)", "dtype": "float32",
             **({"sources": [source]} if source else {}),
             "correctness": {"passed": True, "max_abs_error": 0.0, "seeds": [0, 1]} if role == "candidate" else None,
             "timing": _timing(seconds), "work": work.to_dict(),
             "derived": rates(work, seconds, bandwidth_ceiling=ceiling).to_dict()}
    if speedups is not None:
        entry["speedups"] = speedups
    return entry


def _record(repo: Path, name: str = "vector_add", source_file: str = "examples/vector_add.hip",
            candidate_seconds: float = 70e-6) -> dict:
    source = source_entry(Path(source_file), repo)
    speedup = {"torch.add": {**Ratio(1.2, (1.15, 1.25), 30).to_dict(), "verdict": "faster"}}
    return records.new_record(
        name, "benchmark",
        device={"slug": device_slug("NVIDIA H200"), "name": "NVIDIA H200", "arch": "sm_90"},
        environment={"python": "3.12", "git": {"commit": "0123456789abcdef", "dirty": False}},
        ceilings={"copy_bytes_per_s": 4.0e12, "matmul_flops_per_s": {"bfloat16": 7.0e14}},
        entries=[_entry("torch.add", "baseline", None, 84e-6, ceiling=4.0e12),
                 _entry("vector_add", "candidate", source, candidate_seconds, speedups=speedup, ceiling=4.0e12)],
        created="2025-06-01T12:00:00Z")


@pytest.fixture
def repo(tmp_path) -> Path:
    """A tiny repository: one kernel source, a records/ directory with an old unmanaged file."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "vector_add.hip").write_text(KERNEL)
    (tmp_path / "records" / "nvidia-h200").mkdir(parents=True)
    (tmp_path / "records" / "nvidia-h200" / "doctor.json").write_text('{"gates": []}\n')
    return tmp_path


# ------------------------------------------------------------------------------------------ names


def test_device_slug():
    assert device_slug("NVIDIA H200") == "nvidia-h200"
    assert device_slug("AMD Radeon RX 9070 XT") == "amd-radeon-rx-9070-xt"
    assert device_slug("  NVIDIA  H100 80GB HBM3 ") == "nvidia-h100-80gb-hbm3"


def test_source_entry_is_repo_relative_posix_with_sha256(repo):
    import hashlib
    entry = source_entry(repo / "examples" / "vector_add.hip", repo)
    assert entry == {"path": "examples/vector_add.hip", "sha256": hashlib.sha256(KERNEL.encode()).hexdigest()}
    assert source_entry(Path("examples/vector_add.hip"), repo) == entry
    with pytest.raises(RecordError, match="outside the repository"):
        source_entry(repo.parent / "elsewhere.hip", repo)


# --------------------------------------------------------------------------------------- writing


def test_valid_record_round_trips_atomically(repo):
    record = _record(repo)
    assert validate_record(record) == []
    directory = repo / "fresh" / "records"            # does not exist yet
    path = write_record(record, directory, repo_root=repo)
    assert path == directory / "nvidia-h200" / "vector_add.json"
    text = path.read_text()
    assert text.endswith("}\n") and text == json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert json.loads(text) == record
    assert sorted(p.name for p in path.parent.iterdir()) == ["vector_add.json"]   # no temporary files left


def test_write_record_relative_directory_is_taken_from_repo_root(repo):
    path = write_record(_record(repo), Path("records"), repo_root=repo)
    assert path == repo / "records" / "nvidia-h200" / "vector_add.json"


def test_invalid_record_is_not_written(repo):
    record = _record(repo)
    record["entries"][1]["timing"]["median"] = -1
    with pytest.raises(RecordError, match=r"entries\[1\]\.timing\.median: must be a positive number"):
        write_record(record, repo / "records")
    assert not (repo / "records" / "nvidia-h200" / "vector_add.json").exists()


def test_write_record_refuses_a_record_stale_at_birth(repo):
    record = _record(repo)
    (repo / "examples" / "vector_add.hip").write_text(KERNEL + "// edited\n")
    with pytest.raises(RecordError, match=r"entries\[1\]\.source\.sha256: does not match examples/vector_add.hip"):
        write_record(record, repo_root=repo)


# ------------------------------------------------------------------------------------ validation


def _problems_after(repo, change) -> list[str]:
    record = copy.deepcopy(_record(repo))
    change(record)
    return validate_record(record)


def _one_problem_starting(problems: list[str], prefix: str) -> str:
    matching = [p for p in problems if p.startswith(prefix)]
    assert matching, f"no problem starts with {prefix!r}: {problems}"
    return matching[0]


def test_negative_median_names_the_field(repo):
    problems = _problems_after(repo, lambda r: r["entries"][1]["timing"].update(median=-1))
    assert _one_problem_starting(problems, "entries[1].timing.median:") == \
        "entries[1].timing.median: must be a positive number of seconds, got -1"


def test_interval_must_contain_the_median(repo):
    problems = _problems_after(repo, lambda r: r["entries"][0]["timing"].update(ci95=[1e-3, 2e-3]))
    assert "does not contain the median" in _one_problem_starting(problems, "entries[0].timing.ci95:")


def test_unknown_role(repo):
    problems = _problems_after(repo, lambda r: r["entries"][1].update(role="contender"))
    assert "'contender'" in _one_problem_starting(problems, "entries[1].role:")


def test_environment_needs_the_git_commit(repo):
    problems = _problems_after(repo, lambda r: r["environment"]["git"].pop("commit"))
    _one_problem_starting(problems, "environment.git.commit:")


def test_raw_samples_do_not_belong_in_a_record(repo):
    problems = _problems_after(repo, lambda r: r["entries"][1]["timing"].update(samples=[7e-5, 7.1e-5]))
    assert "Measurement" in _one_problem_starting(problems, "entries[1].timing.samples:")
    assert _problems_after(repo, lambda r: r["entries"][1]["timing"].update(samples=[])) == []


def test_wrong_schema(repo):
    problems = _problems_after(repo, lambda r: r.update(schema="hello-gpu/record/0"))
    assert problems == ["schema: must be 'hello-gpu/record/1', got 'hello-gpu/record/0'"]


def test_where_prefixes_every_message(repo):
    problems = validate_record({**_record(repo), "kind": ""}, where="records/x/y.json")
    assert problems and all(p.startswith("records/x/y.json: kind:") for p in problems)


def test_other_mistakes_are_named(repo):
    def break_several(record):
        record["created"] = "2025-06-01T14:00:00+02:00"
        record["entries"][1]["speedups"]["torch.add"]["ci95"] = [0.95, 1.25]     # "faster" yet includes 1
        record["entries"][1]["speedups"]["torch.mul"] = record["entries"][1]["speedups"]["torch.add"]
        record["entries"][1]["timing"]["medain"] = 1.0
        record["entries"][0]["derived"]["gb_per_s"] = float("nan")
        record["entries"].append(copy.deepcopy(record["entries"][0]))
    problems = _problems_after(repo, break_several)
    for prefix in ("created:", "entries[1].speedups['torch.add'].verdict:", "entries[1].speedups['torch.mul']:",
                   "entries[1].timing.medain: unknown field", "entries[0].derived.gb_per_s:", "entries[2]: same variant"):
        _one_problem_starting(problems, prefix)


# --------------------------------------------------------------------------------------- checking


def test_corrupt_json_is_reported_by_name(repo):
    (repo / "records" / "nvidia-h200" / "broken.json").write_text('{"schema": "hello-gpu/record/1",\n  "name": }\n')
    report = check_records(repo)
    assert not report.ok
    assert report.errors == ["records/nvidia-h200/broken.json: not valid JSON: Expecting value at line 2 column 11"]


def test_unmanaged_json_is_listed_not_an_error(repo):
    report = check_records(repo)
    assert report.ok and report.unmanaged == ["records/nvidia-h200/doctor.json"] and report.ok_count == 0


def test_staleness(repo):
    write_record(_record(repo), repo_root=repo)
    report = check_records(repo)
    assert report.ok and report.ok_count == 1, report

    (repo / "examples" / "vector_add.hip").write_text(KERNEL.replace("a[i] + b[i]", "b[i] + a[i]"))
    report = check_records(repo)
    assert not report.ok and not report.errors
    [stale] = report.stale
    assert stale.startswith("records/nvidia-h200/vector_add.json: entries[1] vector_add: "
                            "examples/vector_add.hip changed since it was measured (recorded sha ")


def test_deleted_source_is_an_error(repo):
    write_record(_record(repo), repo_root=repo)
    (repo / "examples" / "vector_add.hip").unlink()
    report = check_records(repo)
    assert report.errors == [("records/nvidia-h200/vector_add.json: entries[1] vector_add: "
                              "source examples/vector_add.hip no longer exists")]


def test_invalid_managed_record_is_an_error(repo):
    record = _record(repo)
    record["entries"][1]["timing"]["median"] = 0
    (repo / "records" / "nvidia-h200" / "vector_add.json").write_text(json.dumps(record))
    errors = check_records(repo).errors
    assert errors[0] == ("records/nvidia-h200/vector_add.json: entries[1].timing.median: "
                         "must be a positive number of seconds, got 0")


def test_misplaced_record_is_an_error(repo):
    path = write_record(_record(repo), repo_root=repo)
    path.rename(path.with_name("other.json"))
    [error] = check_records(repo).errors
    assert "belongs at records/nvidia-h200/vector_add.json" in error


def test_claims(repo):
    kernel = repo / "examples" / "vector_add.hip"
    kernel.write_text("// hello-gpu: record vector_add\n" + KERNEL)
    (repo / "src").mkdir()
    (repo / "src" / "mention.py").write_text('"""Claims look like  # hello-gpu: record nothing  in prose."""\n')
    rules = SourceRules(claims_in=claims)
    assert check_records(repo).missing == []                  # bench alone knows no claim syntax
    [missing] = check_records(repo, rules).missing
    assert missing.startswith("examples/vector_add.hip:1: claims record 'vector_add'") and "missing record" in missing

    write_record(_record(repo), repo_root=repo)
    report = check_records(repo, rules)
    assert report.ok and report.ok_count == 1, report


def test_claim_needs_an_entry_for_that_very_file(repo):
    (repo / "examples" / "saxpy.cu").write_text("# hello-gpu: record vector_add\n")
    write_record(_record(repo), repo_root=repo)
    [missing] = check_records(repo, SourceRules(claims_in=claims)).missing
    assert "has no entry whose source is examples/saxpy.cu" in missing


def test_a_claim_is_met_by_one_routes_ladder_record(repo):
    kernel = repo / "examples" / "vector_add.hip"
    kernel.write_text("// hello-gpu: record vector_add.float32\n" + KERNEL)
    rules = SourceRules(claims_in=claims)
    [missing] = check_records(repo, rules).missing
    assert "claims record 'vector_add.float32'" in missing
    route_record = _record(repo, name="vector_add.hip.float32")                    # the hip route alone
    write_record(route_record, repo_root=repo)
    assert check_records(repo, rules).missing, "a record that does not say it is one route's stands in for nothing"
    route_record["extra"] = {"route": "hip"}
    write_record(route_record, repo_root=repo)
    report = check_records(repo, rules)
    assert report.ok and report.missing == [], report
    # another operator's route record, or another dtype's, does not meet it
    path = repo / "records" / "nvidia-h200" / "vector_add.hip.float32.json"
    path.rename(path.with_name("vector_add.hip.bfloat16.json"))
    assert check_records(repo, rules).missing


@pytest.mark.parametrize("reason, acknowledged", [
    ("skipped: requires amd gfx1201; this GPU is nvidia sm_90", True),
    ("skipped: the rung's header lists dtypes float32", False),      # a dtype, not the GPU: still missing
    ("incorrect at this size: 3 wrong elements", False),
])
def test_a_claim_for_another_gpu_is_acknowledged_only_through_the_records_skip(repo, reason, acknowledged):
    (repo / "examples" / "wmma.hip").write_text("// hello-gpu: record vector_add\n" + KERNEL)
    record = _record(repo)
    record.setdefault("extra", {})["not_timed"] = [{"variant": "wmma", "shape": "all", "reason": reason}]
    write_record(record, repo_root=repo)
    report = check_records(repo, SourceRules(claims_in=claims))
    if acknowledged:
        assert report.ok and report.missing == [], report
        [line] = report.elsewhere
        assert "examples/wmma.hip" in line and "requires amd gfx1201" in line
    else:
        assert not report.ok and report.elsewhere == []
        [missing] = report.missing
        assert "has no entry whose source is examples/wmma.hip" in missing


def test_the_real_repository_passes():
    report = check_records(REPO, repository_rules(REPO))
    assert report.ok, report


# ------------------------------------------------------------------------------------------ tables

README = """# Demo

Before.

<!-- hello-gpu:table records/nvidia-h200/vector_add.json -->
typed by hand: 9000 GB/s
<!-- /hello-gpu:table -->

```markdown
<!-- hello-gpu:table records/nvidia-h200/an-example-only.json -->
<!-- /hello-gpu:table -->
```

After.
"""


def test_render_table(repo):
    table = render_table(_record(repo))
    header = table.splitlines()[0]
    assert header == ("| variant | shape | dtype | correct | median µs (95% CI) | GB/s | % of ceiling "
                      "| speedup vs torch.add (95% CI) |")
    assert "TFLOP/s" not in header                 # no entry does FLOPs: the empty default column is dropped
    row = next(line for line in table.splitlines() if line.startswith("| vector_add"))
    assert "| pass |" in row and "70.0 (" in row and "1.20× (1.15–1.25) faster" in row and "% of copy" in row
    assert "commit `0123456789ab`" in table


def test_render_table_named_columns(repo):
    table = render_table(_record(repo), ["variant", "median_us", "tflop_per_s"])
    assert table.splitlines()[0] == "| variant | median µs (95% CI) | TFLOP/s |"
    with pytest.raises(RecordError, match="unknown table column 'speed'"):
        render_table(_record(repo), ["speed"])


def test_render_table_keeps_shapes_and_shows_the_parent_speedup(repo):
    record = _record(repo)
    shape = record["entries"][1]["shape"]
    record["entries"][1]["extra"] = {"speedup_vs_parent": {"parent": "torch.add", "value": 1.1, "ci95": [1.05, 1.15],
                                                           "verdict": "faster"}}
    table = render_table(record, ["variant", "vs_parent"], shapes=[shape])
    assert "| 1.10× (1.05–1.15) vs torch.add, faster |" in table
    with pytest.raises(RecordError, match="no entries of shape 7"):
        render_table(record, shapes=["7"])
    readme = repo / "README.md"
    write_record(record, repo_root=repo)
    readme.write_text("<!-- hello-gpu:table records/nvidia-h200/vector_add.json colour=red -->\n"
                      "<!-- /hello-gpu:table -->\n")
    with pytest.raises(RecordError, match="unknown table option 'colour'"):
        update_tables([readme], repo)


def test_suspect_entry_renders_as_suspect_never_as_a_win(repo):
    record = _record(repo, candidate_seconds=40e-6)          # 5 TB/s against a 4 TB/s copy ceiling
    assert record["entries"][1]["derived"]["suspect"]
    table = render_table(record)
    row = next(line for line in table.splitlines() if line.startswith("| vector_add"))
    assert "SUSPECT" in row and "faster" not in row and "×" not in row
    assert "SUSPECT: vector_add" in table


def test_incorrect_entry_is_no_win(repo):
    record = _record(repo)
    record["entries"][1]["correctness"]["passed"] = False
    row = next(line for line in render_table(record).splitlines() if line.startswith("| vector_add"))
    assert "| FAIL |" in row and "INCORRECT" in row and "faster" not in row


def test_update_tables_from_a_record(repo):
    write_record(_record(repo), repo_root=repo)
    readme = repo / "README.md"
    readme.write_text(README)
    assert update_tables([readme], repo, check=True) == [readme]
    assert readme.read_text() == README                       # check changes nothing

    assert update_tables([readme], repo, check=False) == [readme]
    text = readme.read_text()
    assert "9000" not in text and "| vector_add |" in text
    assert text.startswith("# Demo\n\nBefore.\n\n<!-- hello-gpu:table records/nvidia-h200/vector_add.json -->\n\n| ")
    assert text.endswith("<!-- /hello-gpu:table -->\n\n```markdown\n<!-- hello-gpu:table "
                         "records/nvidia-h200/an-example-only.json -->\n<!-- /hello-gpu:table -->\n```\n\nAfter.\n")
    assert update_tables([readme], repo, check=True) == []     # idempotent


def test_update_tables_names_a_missing_record(repo):
    readme = repo / "README.md"
    readme.write_text(README.replace("vector_add.json", "nothing.json"))
    with pytest.raises(RecordError, match=r"README.md:5: table from records/nvidia-h200/nothing.json, which does not exist"):
        update_tables([readme], repo, check=True)


def test_a_pending_ladder_table_shows_a_box_until_its_record_exists_then_the_table(repo):
    """pending=ladder: a page written before its operator was measured says so, with the command that writes
    the record, and carries no figure; once the record exists the same marker renders the table."""
    readme = repo / "README.md"
    marker = ("<!-- hello-gpu:table records/nvidia-h200/vector_add.float32.json columns=variant,median_us "
              "pending=ladder -->")
    readme.write_text(f"# Demo\n\n{marker}\n<!-- /hello-gpu:table -->\n")
    assert update_tables([readme], repo) == [readme]
    box = readme.read_text()
    assert "还没有在 nvidia-h200 上测量（not yet measured）" in box and "`records/nvidia-h200/vector_add.float32.json`" in box
    assert "`hello-gpu ladder vector_add --dtype float32 --record`" in box
    assert not re.search(r"\| \d", box) and "µs" not in box           # no table, no figure
    assert update_tables([readme], repo, check=True) == []           # stable while the record is missing
    write_record(_record(repo, name="vector_add.float32"), repo_root=repo)
    assert update_tables([readme], repo) == [readme]
    table = readme.read_text()
    assert "| variant | median µs (95% CI) |" in table and "not yet measured" not in table


def test_the_pending_box_names_the_ladder_command_of_the_record(repo):
    from hello_gpu.bench.records.tables import render_missing_record
    box = render_missing_record("records/nvidia-h200/matmul.bfloat16.json", ["4096x4096x4096", "8192x8192x8192"], "x")
    assert "`hello-gpu ladder matmul --dtype bfloat16 --shapes 4096x4096x4096 8192x8192x8192 --record`" in box
    routed = render_missing_record("records/nvidia-h200/attention.triton.float16.json", None, "x")
    assert "`hello-gpu ladder attention --route triton --dtype float16 --record`" in routed
    readme = repo / "README.md"
    for bad, message in (("pending=sweep", "pending=sweep is not one of ladder"),
                         ("pending=ladder,ladder", "is not one of ladder")):
        readme.write_text(f"<!-- hello-gpu:table records/nvidia-h200/x.float32.json {bad} -->\n"
                          "<!-- /hello-gpu:table -->\n")
        with pytest.raises(RecordError, match=message):
            update_tables([readme], repo)
    readme.write_text("<!-- hello-gpu:table records/nvidia-h200/ceilings-of-sorts.json pending=ladder -->\n"
                      "<!-- /hello-gpu:table -->\n")
    with pytest.raises(RecordError, match=r"pending=ladder needs a ladder record's path"):
        update_tables([readme], repo)


def test_unterminated_marker(repo):
    readme = repo / "README.md"
    readme.write_text("<!-- hello-gpu:table records/nvidia-h200/vector_add.json -->\n")
    with pytest.raises(RecordError, match="without <!-- /hello-gpu:table -->"):
        update_tables([readme], repo, check=True)


def test_the_real_repository_tables_are_current():
    assert update_tables(records.default_table_files(REPO), REPO, check=True, renderers=table_renderers()) == []


# --------------------------------------------------------------------------------------------- CLI


def test_cli_records_check_exit_codes(repo, capsys):
    write_record(_record(repo), repo_root=repo)
    assert main(["records", "check", "--root", str(repo)]) == 0
    assert "records check: OK: 1 record(s) ok, 1 unmanaged" in capsys.readouterr().out

    (repo / "examples" / "vector_add.hip").write_text(KERNEL + "// faster now?\n")
    assert main(["records", "check", "--root", str(repo)]) == 1
    out = capsys.readouterr().out
    assert "STALE records/nvidia-h200/vector_add.json: entries[1] vector_add" in out and "FAIL" in out


def test_cli_records_tables_check_then_update(repo, capsys):
    write_record(_record(repo), repo_root=repo)
    readme = repo / "README.md"
    readme.write_text(README)
    assert main(["records", "tables", "--check", "--root", str(repo)]) == 1
    assert f"out of date: {readme}" in capsys.readouterr().out
    assert main(["records", "tables", "--root", str(repo)]) == 0
    assert main(["records", "tables", "--check", "--root", str(repo), str(readme)]) == 0
    assert "up to date" in capsys.readouterr().out
