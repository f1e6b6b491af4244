"""The course outline (docs/course/outline.json) and what `hello-gpu course sync` makes of it: the READMEs'
tables of contents and the check of the written chapters' pages. CPU only; no PyTorch."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hello_gpu.cli import main
from hello_gpu.course import BEGIN, END, OUTLINE, check_pages, chapter_heading, first_heading, load_outline, sync, validate

REPO = Path(__file__).resolve().parents[1]

SMALL = {"parts": [
    {"id": "part0", "title": "第 0 篇：入门", "chapters": [
        {"number": 0, "title": "写给读者的话", "summary": "定位", "file": "course/part0/ch00.md", "status": "written"},
        {"number": 1, "title": "环境准备", "summary": "三道门", "file": "course/part0/ch01.md", "status": "planned",
         "issue": 7},
    ]},
    {"id": "appendix", "title": "附录", "chapters": [
        {"number": "A", "title": "对照", "summary": "三种写法", "file": "course/appendix/a.md", "status": "written"},
    ]},
]}


def make_repo(tmp_path: Path, outline: dict = SMALL, pages: bool = True) -> Path:
    (tmp_path / OUTLINE).parent.mkdir(parents=True)
    (tmp_path / OUTLINE).write_text(json.dumps(outline, ensure_ascii=False), encoding="utf-8")
    for name in ("README.md", "README.zh-CN.md"):
        (tmp_path / name).write_text(f"# x\n\nbefore\n\n{BEGIN}\nstale\n{END}\n\nafter\n", encoding="utf-8")
    if pages:
        for part in outline["parts"]:
            for chapter in part["chapters"]:
                if chapter["status"] == "written":
                    page = tmp_path / "docs" / chapter["file"]
                    page.parent.mkdir(parents=True, exist_ok=True)
                    page.write_text(f"---\ntitle: x\n---\n\n```md\n# not this\n```\n\n# {chapter_heading(chapter)}\n\n"
                                    f"## 解释\n", encoding="utf-8")
    return tmp_path


def test_headings_of_chapters_and_appendices():
    assert chapter_heading({"number": 8, "title": "Element-Wise：向量加法"}) == "第 8 章 Element-Wise：向量加法"
    assert chapter_heading({"number": "A", "title": "HIP、CUDA 与 Triton 对照"}) == "附录 A HIP、CUDA 与 Triton 对照"


def test_a_valid_outline_syncs_then_checks_clean(tmp_path, capsys):
    root = make_repo(tmp_path)
    assert main(["course", "sync", "--check", "--root", str(root)]) == 1      # the stale tables are drift
    assert "README.md: the course table is out of date" in capsys.readouterr().out
    changed, problems = sync(root)
    assert problems == [] and sorted(p.name for p in changed) == ["README.md", "README.zh-CN.md"]
    zh = (root / "README.zh-CN.md").read_text(encoding="utf-8")
    assert "| [第 0 章 写给读者的话](docs/course/part0/ch00.md) | 定位 | 已完成 |" in zh
    assert "| 第 1 章 环境准备 | 三道门 | 计划中（#7） |" in zh
    assert zh.startswith("# x\n\nbefore\n\n") and zh.endswith(f"{END}\n\nafter\n") and "stale" not in zh
    en = (root / "README.md").read_text(encoding="utf-8")
    assert "| 0 | 1 | 环境准备 | planned (#7) |" in en and "| appendix | A | [对照](docs/course/appendix/a.md) | written |" in en
    assert main(["course", "sync", "--check", "--root", str(root)]) == 0
    assert "agree" in capsys.readouterr().out
    assert sync(root) == ([], [])                                            # a second sync changes nothing


def test_drift_in_a_readme_is_named_and_check_changes_nothing(tmp_path, capsys):
    root = make_repo(tmp_path)
    sync(root)
    outline = copy.deepcopy(SMALL)
    outline["parts"][0]["chapters"][1]["title"] = "环境准备（新）"
    (root / OUTLINE).write_text(json.dumps(outline, ensure_ascii=False), encoding="utf-8")
    before = {name: (root / name).read_text(encoding="utf-8") for name in ("README.md", "README.zh-CN.md")}
    assert main(["course", "sync", "--check", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "README.md: the course table is out of date" in out and "README.zh-CN.md: the course table" in out
    assert before == {name: (root / name).read_text(encoding="utf-8") for name in before}


def test_missing_markers_are_named(tmp_path):
    root = make_repo(tmp_path)
    sync(root)
    (root / "README.md").write_text("# no markers\n", encoding="utf-8")
    _, problems = sync(root, check=True)
    assert [p.kind for p in problems] == ["readme"] and "README.md: needs exactly one" in problems[0].message


def test_a_missing_page_is_named(tmp_path):
    root = make_repo(tmp_path)
    (root / "docs/course/appendix/a.md").unlink()
    sync(root)
    _, problems = sync(root, check=True)
    assert [(p.kind, p.message.split(":")[0]) for p in problems] == [("missing", "docs/course/appendix/a.md")]


def test_a_heading_that_differs_from_the_outline_is_named(tmp_path, capsys):
    root = make_repo(tmp_path)
    sync(root)
    (root / "docs/course/part0/ch00.md").write_text("# 第 0 章 写给读者\n", encoding="utf-8")
    assert main(["course", "sync", "--check", "--root", str(root)]) == 1
    assert ("docs/course/part0/ch00.md: the first H1 is '第 0 章 写给读者', the outline says '第 0 章 写给读者的话'"
            in capsys.readouterr().out)


def test_first_heading_skips_front_matter_and_code_fences():
    assert first_heading("---\ntitle: a\n---\n```\n# code\n```\n## two\n# 第 1 章 x\n# later\n") == "第 1 章 x"
    assert first_heading("no heading\n") is None


@pytest.mark.parametrize("change, message", [
    (lambda o: o["parts"][1]["chapters"][0].update(number=0), "number used twice"),
    (lambda o: o["parts"][0]["chapters"][0].update(file="part0/ch00.md"), "under docs/course/"),
    (lambda o: o["parts"][0]["chapters"][0].update(file="course/../README.md"), "under docs/course/"),
    (lambda o: o["parts"][0]["chapters"][0].update(status="draft"), "status 'draft'"),
    (lambda o: o["parts"][0]["chapters"][1].pop("issue"), "names the issue"),
])
def test_an_invalid_outline_is_refused_and_nothing_is_written(tmp_path, change, message):
    outline = copy.deepcopy(SMALL)
    change(outline)
    assert any(message in p.message for p in validate(outline))
    root = make_repo(tmp_path, outline)
    changed, problems = sync(root)
    assert changed == [] and any(message in p.message for p in problems)
    assert "stale" in (root / "README.md").read_text(encoding="utf-8")


def test_the_repository_outline_is_valid_and_both_readmes_are_in_sync():
    """The committed outline, READMEs and chapter pages agree. A written chapter whose page is not in this tree
    yet (the chapter branches are merged after the site's) is a visible skip naming it, never a pass."""
    outline = load_outline(REPO)
    assert validate(outline) == []
    _, problems = sync(REPO, check=True)
    missing = [p.message.split(":")[0] for p in problems if p.kind == "missing"]
    others = [str(p) for p in problems if p.kind != "missing"]
    assert others == [], "\n".join(["run `hello-gpu course sync`:", *others])
    assert check_pages(outline, REPO) == [p for p in problems if p.kind in ("missing", "heading")]
    if missing:
        pytest.skip(f"written in the outline, page not in this tree yet: {', '.join(missing)}")


# ----------------------------------------------------------------------------------- the site (Node)

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed (the site's checks need Node.js)")


@needs_node
def test_a_code_include_of_a_missing_file_or_region_fails_the_site_check(tmp_path):
    """`npm run docs:build` runs docs/.vitepress/check-includes.mjs first: VitePress alone shows a whole file
    for a missing #region, and stops on a missing file only through a stat that happens to throw."""
    page = tmp_path / "page.md"
    page.write_text("# t\n\n<<< @/../examples/course_kernels.hip{cpp}\n\n```md\n<<< @/../not/here.py\n```\n",
                    encoding="utf-8")
    script = REPO / "docs/.vitepress/check-includes.mjs"
    good = subprocess.run([NODE, str(script), str(page)], capture_output=True, text=True, cwd=REPO)
    assert good.returncode == 0, good.stderr
    page.write_text("# t\n\n<<< @/../examples/nope.hip{cpp}\n<<< @/../examples/course_kernels.hip#nosuch\n",
                    encoding="utf-8")
    bad = subprocess.run([NODE, str(script), str(page)], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 1
    assert "page.md:3: no such file examples/nope.hip" in bad.stderr
    assert 'page.md:4: no region "nosuch" in examples/course_kernels.hip' in bad.stderr


@needs_node
def test_a_region_counts_only_in_the_syntax_vitepress_reads(tmp_path):
    """VitePress 1.6 reads `# region NAME` ... `# endregion NAME` in Python (and `// #region` in C++); a
    `# #region` line it ignores, showing the whole file, so the check refuses it too, as it does a region
    that is never closed."""
    (tmp_path / "snippet.py").write_text("x = 0\n    # region good\ny = 1\n    # endregion good\n# #region bad\nz = 2\n"
                                         "# #endregion bad\n# region open\n", encoding="utf-8")
    (tmp_path / "snippet.cu").write_text("// #region kernel\nint x;\n// #endregion kernel\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("# t\n\n<<< ./snippet.py#good{python}\n<<< ./snippet.cu#kernel{cpp}\n<<< ./snippet.py#bad{python}\n"
                    "<<< ./snippet.py#open{python}\n", encoding="utf-8")
    script = REPO / "docs/.vitepress/check-includes.mjs"
    run = subprocess.run([NODE, str(script), str(page)], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 1
    problems = [line for line in run.stderr.splitlines() if line.startswith("include:")]
    assert [p.split(": ", 2)[1].split(":")[1] for p in problems] == ["5", "6"], run.stderr
    assert 'no region "bad"' in problems[0] and 'no region "open"' in problems[1]


@needs_node
def test_the_site_search_splits_chinese_so_a_word_finds_a_sentence():
    """The local search's tokenizer (in docs/.vitepress/config.mjs) runs in the browser from its source text."""
    if not (REPO / "node_modules/vitepress").is_dir():
        pytest.skip("node_modules/ missing: run `npm ci` to test the site's config")
    script = ("const {default: c} = await import('./docs/.vitepress/config.mjs');"
              "const t = new Function('return ' + c.themeConfig.search.options.miniSearch.options.tokenize.toString())();"
              "console.log(JSON.stringify([t('树状归约 warp shuffle'), t('归约')]))")
    run = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    sentence, word = json.loads(run.stdout.strip().splitlines()[-1])
    assert {"warp", "shuffle", "归约"} <= set(sentence) and set(word) <= set(sentence)


def test_records_tables_regenerates_the_outline_regions_like_sync(tmp_path):
    from hello_gpu.bench.records import update_tables
    from hello_gpu.cli import table_renderers

    root = make_repo(tmp_path)
    readmes = [root / "README.md", root / "README.zh-CN.md"]
    assert update_tables(readmes, root, renderers=table_renderers()) == readmes
    assert sync(root, check=True) == ([], [])
