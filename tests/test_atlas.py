"""The GPU atlas (docs/atlas/gpus.json): valid against its schema, and every number names a known source.

The atlas page (docs/atlas/index.md, component docs/.vitepress/theme/components/GpuAtlas.vue) renders this
file at build time; a number without a vendor document behind it must not get onto it.
"""
import json
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[1]
ATLAS = ROOT / "docs" / "atlas"


@pytest.fixture(scope="module")
def atlas():
    return json.loads((ATLAS / "gpus.json").read_text(encoding="utf-8"))


def test_atlas_matches_schema(atlas):
    schema = json.loads((ATLAS / "gpus.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(atlas)


def _numbers(node, path):
    """Yield (path, parent object) for every number in the tree."""
    if isinstance(node, bool):
        return
    if isinstance(node, (int, float)):
        yield path, None
    elif isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                yield f"{path}.{key}", node
            else:
                yield from _numbers(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _numbers(value, f"{path}[{i}]")


def test_every_number_has_a_known_source(atlas):
    known = set(atlas["sources"])
    numbers = list(_numbers(atlas, "$"))
    assert len(numbers) > 100, "the atlas should hold the figures of every architecture"
    for path, parent in numbers:
        assert parent is not None and path.endswith(".value"), f"{path}: a bare number; write {{value, unit, source}}"
        sources = parent.get("source")
        assert sources, f"{path}: no source"
        unknown = [s for s in sources if s not in known]
        assert not unknown, f"{path}: unknown source(s) {unknown}"
    used = {s for _, parent in numbers for s in parent["source"]}
    for fact in _text_facts(atlas):
        used.update(fact["source"])
        assert set(fact["source"]) <= known, f"unknown source in {fact}"
    assert not known - used, f"sources nothing cites: {sorted(known - used)}"


def _text_facts(atlas):
    for arch in atlas["architectures"]:
        yield arch["process"]
        yield arch["matrix"]
        for chip in arch["chips"]:
            if "memory_type" in chip:
                yield chip["memory_type"]


def test_atlas_covers_both_vendors_generations(atlas):
    ids = [a["id"] for a in atlas["architectures"]]
    assert len(ids) == len(set(ids)), "architecture ids must be unique"
    expected = {"pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell",
                "gcn", "rdna1", "rdna2", "rdna3", "rdna4", "cdna1", "cdna2", "cdna3"}
    assert expected <= set(ids)
    for arch in atlas["architectures"]:
        # The page's SM/CU view draws from these; a chip table row needs at least one figure.
        assert arch["unit_layout"]["partitions"]["value"] >= 1
        for chip in arch["chips"]:
            assert set(chip) - {"name", "die"}, f"{arch['id']} {chip['name']}: no figures"


def test_matrix_unit_totals_agree_with_the_unit_view(atlas):
    """A chip's matrix-unit total equals its SM/CU count times the units the SM/CU view draws."""
    checked = 0
    for arch in atlas["architectures"]:
        layout = arch["unit_layout"]
        if "matrix_per_partition" not in layout:
            continue
        per_unit = layout["partitions"]["value"] * layout["matrix_per_partition"]["value"]
        for chip in arch["chips"]:
            if "matrix_units" in chip and "units" in chip:
                assert chip["matrix_units"]["value"] == chip["units"]["value"] * per_unit, (arch["id"], chip["name"])
                checked += 1
    assert checked >= 8
