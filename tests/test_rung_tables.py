"""Rung tables generated from the rung headers (``<!-- hello-gpu:rungs OP [route=...] -->``), CPU tier."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from hello_gpu.ops import list_ops, load_op
from hello_gpu.ops.rung_tables import OPS_FOLDER, RungTableError, render_rungs

REPO = Path(__file__).resolve().parents[1]
BEGIN = re.compile(r"^<!--\s*hello-gpu:rungs\s+(.*?)\s*-->\s*$")
END = re.compile(r"^<!--\s*/hello-gpu:rungs\s*-->\s*$")


def regenerate_rungs(text: str, root: Path, name: str) -> str:
    """Every rungs region of ``text`` replaced by its table, framed as ``hello-gpu records tables`` frames a
    record table (a blank line either side). Stands in for that command until it dispatches rungs markers."""
    lines = text.split("\n")
    regions, begin = [], None
    for index, line in enumerate(lines):
        if BEGIN.match(line):
            begin = index
        elif END.match(line):
            assert begin is not None, f"{name}:{index + 1}: end marker without a beginning"
            regions.append((begin, index))
            begin = None
    assert begin is None, f"{name}:{begin + 1}: rungs marker without its end"
    for begin, end in reversed(regions):
        table = render_rungs(BEGIN.match(lines[begin]).group(1).split(), root, f"{name}:{begin + 1}")
        lines[begin + 1:end] = [""] + table.split("\n") + [""]
    return "\n".join(lines)


def _rows(table: str) -> dict[str, list[str]]:
    """Rung id -> its cells, from a rendered table."""
    rows = {}
    for line in table.splitlines():
        match = re.match(r"^\| `([a-z0-9_]+)` \|", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
    return rows


@pytest.mark.parametrize("name", list_ops())
def test_every_rung_appears_with_its_parent_and_outcome(name):
    op = load_op(name)
    rows = _rows(render_rungs([name], REPO, "test"))
    assert list(rows) == [rung.id for rung in op.rungs]            # every rung, in ladder order
    for rung in op.rungs:
        _, parent, change, outcome = rows[rung.id]
        assert parent == (f"`{rung.metadata.parent_id}`" if rung.metadata.parent_id else "—")
        assert change == _as_cell(rung.metadata.change)
        if rung.metadata.outcome:
            assert outcome == _as_cell(rung.metadata.outcome)
        else:
            assert outcome == "—"
        assert "<" not in change + outcome and "{{" not in change + outcome, "the site compiles a cell as Vue"


def _as_cell(text: str) -> str:
    return (" ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("{{", "&#123;&#123;"))


def test_angle_brackets_and_mustaches_in_a_header_are_written_as_entities(tmp_path):
    """attend_tile<false> in attention v04's header broke the VitePress build: Vue read it as an open element."""
    from hello_gpu.ops.rung_tables import _cell
    assert _cell("runs attend_tile<false> then {{ x }} | y") == "runs attend_tile&lt;false&gt; then &#123;&#123; x }} \\| y"


def test_a_route_keeps_only_its_rungs():
    op = load_op("softmax")
    for route in ("hip", "triton"):
        rows = _rows(render_rungs(["softmax", f"route={route}"], REPO, "test"))
        assert list(rows) == [rung.id for rung in op.rungs if rung.route == route]
    assert "peer_liger" in _rows(render_rungs(["softmax", "route=all"], REPO, "test"))


def test_bad_markers_say_where_and_what(tmp_path):
    with pytest.raises(RungTableError, match=r"docs/x.md:3: a rungs marker names its operator first"):
        render_rungs([], REPO, "docs/x.md:3")
    with pytest.raises(RungTableError, match=r"x:1: unknown rungs option 'shapes=1'"):
        render_rungs(["softmax", "shapes=1"], REPO, "x:1")
    with pytest.raises(RungTableError, match=r"x:1: route='sycl' is not one of hip, cuda, triton, all"):
        render_rungs(["softmax", "route=sycl"], REPO, "x:1")
    with pytest.raises(RungTableError, match=r"x:1: no operator 'conv2d'"):
        render_rungs(["conv2d"], REPO, "x:1")
    with pytest.raises(RungTableError, match=r"x:1: no operators under"):
        render_rungs(["softmax"], tmp_path, "x:1")


def test_a_marker_region_is_regenerated_from_the_headers(tmp_path):
    """In a copy of the repository's operators, a changed outcome reaches the table, and a second pass
    changes nothing."""
    shutil.copytree(REPO / OPS_FOLDER / "vector_add", tmp_path / OPS_FOLDER / "vector_add")
    rung = tmp_path / OPS_FOLDER / "vector_add" / "v06_tile_per_block.hip"
    text = rung.read_text()
    # The field and its indented continuation lines, as hello_gpu.ops.header reads them.
    rung.write_text(re.sub(r"^outcome:.*\n(?:[ \t]+\S.*\n)*", "outcome: 0.5x torch.add (a test)\n", text, count=1,
                           flags=re.M))
    document = "# vector_add\n\n<!-- hello-gpu:rungs vector_add route=hip -->\nhand-typed\n<!-- /hello-gpu:rungs -->\n"
    once = regenerate_rungs(document, tmp_path, "doc.md")
    assert "hand-typed" not in once
    rows = _rows(once)
    assert rows["v06_tile_per_block"][1:] == ["`v05_loads_in_flight`", rows["v06_tile_per_block"][2],
                                              "0.5x torch.add (a test)"]
    assert "t01_tile_1024" not in rows and "v01_thread_per_element" in rows
    assert regenerate_rungs(once, tmp_path, "doc.md") == once


def test_the_rung_tables_in_the_docs_are_up_to_date():
    """Each docs/*.md rungs region is what the headers give today: edit a header, regenerate the docs."""
    documents = [REPO / name for name in ("README.md", "README.zh-CN.md")] + sorted((REPO / "docs").glob("*.md"))
    regions = 0
    for path in documents:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        regions += sum(bool(BEGIN.match(line)) for line in text.split("\n"))
        assert regenerate_rungs(text, REPO, path.name) == text, f"{path.name}: a rung table is out of date"
    assert regions >= len(list_ops()), "every operator's rungs have a generated table in the docs"
