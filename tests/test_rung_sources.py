"""What a record hashes (CPU tier): the rung-file format's measured bytes, the files a rung runs
(its sources), staleness through them, instantiations from the header, and generated regions."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hello_gpu.bench.records import (RecordError, check_records, new_record, source_entries, timing_from_summary,
                                     update_tables, validate_record, write_record)
from hello_gpu.bench.stats import summarize
from hello_gpu.ops import load_op
from hello_gpu.ops.header import HeaderError, measured_sha256, rung_instantiations
from hello_gpu.ops.sources import OPS_DIR, SourceError, collect_sources, record_rules, repository_rules

RUNG = """/*
A rung: the first line of prose.
parent: none
change: one thread per element
hypothesis: bandwidth-bound
prediction: 1.0x
outcome: {outcome}
deterministic: yes
entry: k<{{T}}>
dtypes: float32
block: {block}
*/
// hello-gpu: record demo.float32
template <typename T>
__global__ void k(T* out) {{ out[0] = T(1); }}
"""


def _rung(tmp_path: Path, **fields) -> Path:
    values = {"outcome": "not measured yet", "block": "256", **fields}
    path = tmp_path / "v01_demo.hip"
    path.write_text(RUNG.format(**values))
    return path


# ------------------------------------------------------------------------------------ measured bytes


def test_header_prose_and_directives_are_not_hashed_but_code_fields_are(tmp_path):
    path = _rung(tmp_path)
    before = measured_sha256(path)
    for old, new in (("first line of prose", "first sentence, reworded"), ("one thread per element", "one thread"),
                     ("bandwidth-bound", "compute-bound,\n  on second thought"), ("prediction: 1.0x", "prediction: 2x"),
                     ("not measured yet", "1.01x [0.99, 1.02]\n  within noise"),
                     ("// hello-gpu: record demo.float32\n", "// hello-gpu: record demo.float32\n// hello-gpu: record x\n")):
        path.write_text(RUNG.format(outcome="not measured yet", block="256").replace(old, new))
        assert measured_sha256(path) == before, f"editing {old!r} changed the hash"
    for old, new in (("block: 256", "block: 128"), ("dtypes: float32", "dtypes: float32 bfloat16"),
                     ("parent: none", "parent: v00_torch"), ("T(1)", "T(2)")):
        path.write_text(RUNG.format(outcome="not measured yet", block="256").replace(old, new))
        assert measured_sha256(path) != before, f"editing {old!r} left the hash alone"


def test_a_python_rung_hashes_code_outside_its_docstring(tmp_path):
    script = tmp_path / "t01_demo.py"
    script.write_text('"""Doc.\n\nparent: none\noutcome: a\n"""\n\n# hello-gpu: record demo\noutcome: int = 3\n')
    first = measured_sha256(script)
    script.write_text(script.read_text().replace("outcome: a", "outcome: b").replace("# hello-gpu: record demo\n", ""))
    assert measured_sha256(script) == first
    script.write_text(script.read_text().replace("= 3", "= 4"))
    second = measured_sha256(script)
    assert second != first                                        # outcome: outside the header is code
    script.write_text(script.read_text().replace("parent: none", "parent: t00"))
    assert measured_sha256(script) != second                      # parent is a code-bearing field
    helper = tmp_path / "helper.py"                                # not a rung: its docstring is hashed
    helper.write_text('"""Doc."""\n')
    hashed = measured_sha256(helper)
    helper.write_text('"""Doc, reworded."""\n')
    assert measured_sha256(helper) != hashed


# ------------------------------------------------------------------------------------------- sources


def test_t10_runs_t02_to_t08_and_a_hip_rung_its_companion():
    softmax = load_op("softmax")
    names = [path.name for path in softmax.rung("t10_one_warp_per_row").sources]
    assert names[0] == "t10_one_warp_per_row.py"
    assert sorted(names[1:]) == [f"t0{i}_{n}.py" for i, n in ((2, "online_tiles"), (3, "sixteen_warps"),
                                 (4, "rows_per_program"), (5, "dispatch_by_width"), (6, "registers_to_32768"),
                                 (7, "short_rows_tuned"), (8, "static_width"))]
    v10 = [path.name for path in softmax.rung("v10_exp2").sources]
    assert v10[:2] == ["v10_exp2.hip", "v10_exp2.py"] and "v08_packed_registers.py" in v10
    assert "rung.py" not in v10 and "rows.py" in [p.name for p in load_op("rms_norm").rung("t01_row_per_program").sources]


def test_references_that_cannot_be_resolved_are_errors_naming_the_line(tmp_path):
    ops = tmp_path / "ops"
    (ops / "demo").mkdir(parents=True)
    cases = {"t01_dynamic.py": ("from hello_gpu.ops.rung import load_module\nname = 't00.py'\n"
                                "other = load_module(name, 'x')\n", r"t01_dynamic.py:3: load_module's path is not a literal"),
             "t02_gone.py": ("from pathlib import Path\nx = Path(__file__).parent / 't99_gone.py'\n",
                             r"t02_gone.py:2: refers to t99_gone.py"),
             "t03_import.py": ("import hello_gpu.ops.demo.nothing\n", r"t03_import.py:1: import of hello_gpu.ops.demo.nothing"),
             "v01_include.hip": ('#include "missing.h"\n', r'v01_include.hip:1: #include "missing.h" is neither')}
    for name, (text, message) in cases.items():
        (ops / "demo" / name).write_text(text)
        with pytest.raises(SourceError, match=message):
            collect_sources([ops / "demo" / name], ops)


def test_cycles_and_includes_beside_then_in_ops_include(tmp_path):
    ops = tmp_path / "ops"
    (ops / "demo").mkdir(parents=True)
    (ops / "include").mkdir()
    (ops / "demo" / "t01_a.py").write_text("from hello_gpu.ops.demo import t02_b\n")
    (ops / "demo" / "t02_b.py").write_text("from . import t01_a\n")
    assert [p.name for p in collect_sources([ops / "demo" / "t01_a.py"], ops)] == ["t01_a.py", "t02_b.py"]
    (ops / "include" / "pack.h").write_text('#include "reduce.h"\n')
    (ops / "include" / "reduce.h").write_text("// warp sums\n")
    (ops / "demo" / "reduce.h").write_text("// the demo's own, found first\n")
    (ops / "demo" / "v01_k.hip").write_text('#include "pack.h"\n#include <hip/hip_runtime.h>\n')
    found = collect_sources([ops / "demo" / "v01_k.hip"], ops)
    assert [p.relative_to(ops).as_posix() for p in found] == ["demo/v01_k.hip", "include/pack.h", "include/reduce.h"]


def _entry(rung_id: str, sources: list[dict]) -> dict:
    timing = timing_from_summary(summarize([1e-5, 1.1e-5, 1.2e-5]), cache="cold", graph=False, clock="device-events")
    return {"variant": rung_id, "role": "candidate", "source": sources[0], "sources": sources, "shape": "4096x1024",
            "dtype": "float32", "correctness": {"passed": True}, "timing": timing}


def _stale_variants(repo: Path) -> set[str]:
    report = check_records(repo, repository_rules(repo))
    assert not report.errors, report.errors
    return {line.split(": ")[1].split()[1] for line in report.stale}


def test_editing_a_parent_rung_makes_its_children_stale(tmp_path):
    """softmax copied into a temporary repository: t08-t10 run t07, so an edit to t07 reaches them, an
    edit to its outcome or to an unrelated rung does not; a .hip rung's header goes stale the same way."""
    repo = tmp_path / "repo"
    ops = repo / "src" / "hello_gpu" / "ops"
    shutil.copytree(OPS_DIR / "softmax", ops / "softmax", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(OPS_DIR / "rows.py", ops / "rows.py")
    (ops / "include").mkdir()
    (ops / "include" / "demo_pack.h").write_text("template <typename T> struct Pack { T v[4]; };\n")
    hip = ops / "softmax" / "v01_thread_per_row.hip"
    hip.write_text(hip.read_text().replace("*/\n", '*/\n#include "demo_pack.h"\n', 1))
    (repo / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    softmax = load_op("softmax", ops)
    rules = record_rules(ops)
    children = ("t08_static_width", "t09_evict_first", "t10_one_warp_per_row", "v01_thread_per_row")
    entries = [_entry(rung, source_entries(softmax.rung(rung).path, repo, rules)) for rung in children]
    record = new_record("softmax.float32", "ladder", device={"slug": "nvidia-h200", "name": "NVIDIA H200", "arch": "sm_90"},
                        environment={"git": {"commit": "0" * 40}}, entries=entries)
    assert validate_record(record) == []
    write_record(record, repo_root=repo, rules=rules)
    assert _stale_variants(repo) == set()

    t07 = ops / "softmax" / "t07_short_rows_tuned.py"
    original = t07.read_text()
    t07.write_text(original.replace("outcome:", "outcome: (reworded)", 1))
    t01 = ops / "softmax" / "t01_row_per_program.py"
    t01.write_text(t01.read_text() + "\nUNRELATED = 1\n")
    assert _stale_variants(repo) == set()                        # prose and an unrelated rung: still current

    t07.write_text(original + "\nEDITED = 1\n")
    assert _stale_variants(repo) == {"t08_static_width", "t09_evict_first", "t10_one_warp_per_row"}
    stale = check_records(repo, repository_rules(repo)).stale
    assert all("src/hello_gpu/ops/softmax/t07_short_rows_tuned.py changed since it was measured" in line
               for line in stale)

    t07.write_text(original)
    (ops / "include" / "demo_pack.h").write_text("template <typename T> struct Pack { T v[8]; };\n")
    assert _stale_variants(repo) == {"v01_thread_per_row"}


# ------------------------------------------------------------------------------------ instantiations


def test_instantiations_come_from_entry_and_dtypes(tmp_path):
    assert rung_instantiations(OPS_DIR / "softmax" / "v10_exp2.hip") == [
        "softmax_exp2<float>", "softmax_exp2<hip_bfloat16>", "softmax_exp2<__half>"]
    assert rung_instantiations(OPS_DIR / "reduce_sum" / "v05_warp_shuffle.hip") == []    # not a template
    assert rung_instantiations(OPS_DIR.parents[2] / "examples" / "scale_template.hip") is None
    rung = _rung(tmp_path)
    assert rung_instantiations(rung) == ["k<float>"]
    rung.write_text(rung.read_text() + "// hello-gpu: instantiate k<double>\n")
    with pytest.raises(HeaderError, match=r"v01_demo.hip:16: a rung's instantiations come from its header"):
        rung_instantiations(rung)


def test_the_compile_gate_takes_instantiations_as_a_parameter(tmp_path):
    from hello_gpu.runtime import compile_gate
    rung = _rung(tmp_path)
    comments_only = compile_gate.check([rung], amd=False)
    assert [k.nvidia.status for k in comments_only.kernels] == ["skip"]
    from_header = compile_gate.check([rung], amd=False, instantiations=rung_instantiations)
    assert [(k.kernel, k.nvidia.status) for k in from_header.kernels] == [("k<float>", "ok")]


# --------------------------------------------------------------------------------- generated regions


def test_regions_take_renderers_by_kind(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- hello-gpu:demo a b -->\nold\n<!-- /hello-gpu:demo -->\n")
    calls = []

    def render(arguments, root, where):
        calls.append((arguments, root, where))
        return "| made |"

    assert update_tables([page], tmp_path, renderers={"demo": render}) == [page]
    assert page.read_text() == "<!-- hello-gpu:demo a b -->\n\n| made |\n\n<!-- /hello-gpu:demo -->\n"
    assert calls == [(["a", "b"], tmp_path.resolve(), "page.md:1")]
    with pytest.raises(RecordError, match=r"page.md:1: unknown marker kind 'demo'; known: table"):
        update_tables([page], tmp_path, check=True)
    page.write_text("<!-- hello-gpu:demo -->\n<!-- /hello-gpu:table -->\n")
    with pytest.raises(RecordError, match=r"page.md:2: <!-- /hello-gpu:table --> without a beginning marker"):
        update_tables([page], tmp_path, renderers={"demo": render})
