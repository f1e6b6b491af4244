"""The course notebooks (notebooks/): each .ipynb is generated from its percent script and agrees with it, every
script parses, and the notebooks whose whole CPU path is quick run to the end without a GPU (CPU tier); the GPU
tier executes every notebook (scripts/gpu_session.sh, stage notebooks, keeps the executed copies)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("jupytext")
pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
from IPython.core.inputtransformer2 import TransformerManager  # noqa: E402

from hello_gpu.cli import main  # noqa: E402
from hello_gpu.course import chapter_heading, load_outline  # noqa: E402
from hello_gpu.course.notebooks import NOTEBOOKS, build, cells, execute, scripts, sync  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# Each of these runs to its last cell on a CPU in a few seconds; the others (the Triton interpreter on the
# softmax, reduce_sum and rms_norm checkers) are executed by the GPU tier only, to keep this tier short.
CPU_EXECUTED = ("ch02", "ch03", "ch04", "ch05", "ch08", "ch18", "ch19")
CHAPTERS_WITH_NOTEBOOKS = (2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 18, 19)
# Part 4 (whole models): the exercises compute a bound, a share, an Amdahl limit and check the number
# (nbsetup.check_answer) or fold a BatchNorm; none writes an operator kernel, so none calls hg.exercise.
NUMBER_EXERCISES = ("ch18_llm_decode", "ch19_vision")


def test_every_notebook_matches_its_script():
    changed, problems = sync(REPO, check=True)
    assert not changed and not problems, "\n".join(map(str, problems))


def test_the_chapters_have_their_notebooks_and_headings():
    by_number = {int(script.name[2:4]): script for script in scripts(REPO)}
    assert set(CHAPTERS_WITH_NOTEBOOKS) <= set(by_number)
    outline = load_outline(REPO)
    for part in outline["parts"]:
        for chapter in part["chapters"]:
            if chapter["number"] in by_number:
                first = cells(build(by_number[chapter["number"]]))[0]
                assert first[0] == "markdown" and first[1].splitlines()[0] == f"# {chapter_heading(chapter)}"


@pytest.mark.parametrize("script", scripts(REPO), ids=lambda path: path.stem)
def test_every_script_parses_and_stays_focused(script):
    notebook_cells = cells(build(script))
    assert 10 <= len(notebook_cells) <= 25, f"{script.name}: {len(notebook_cells)} cells"
    code = [source for kind, source in notebook_cells if kind == "code"]
    assert code[0].startswith("from nbsetup import *")         # GPU guard and TRITON_INTERPRET before triton
    assert code[-1].strip() == "skipped()"                       # ends by saying what it skipped
    assert any(kind == "markdown" and "## 练习" in source for kind, source in notebook_cells)
    if script.stem in NUMBER_EXERCISES:                          # exercises that compute a number, checked
        assert any("check_answer(" in source for source in code)
    elif script.stem not in ("ch05_timing",):                    # a chapter whose exercises write a kernel
        assert any("hg.exercise(" in source for source in code)
    for index, source in enumerate(code):                        # IPython syntax (%%hip) turned into Python
        compile(TransformerManager().transform_cell(source), f"{script.name} code cell {index}", "exec")


def test_sync_writes_a_stale_notebook_and_keeps_outputs_of_a_fresh_one(tmp_path):
    shutil.copytree(REPO / NOTEBOOKS, tmp_path / NOTEBOOKS, ignore=shutil.ignore_patterns("__pycache__"))
    stale, fresh = sorted((tmp_path / NOTEBOOKS).glob("ch*.ipynb"))[:2]
    data = json.loads(fresh.read_text())
    data["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "kept\n"}]
    fresh.write_text(json.dumps(data))
    script = stale.with_suffix(".py")
    script.write_text(script.read_text() + "\n# %%\nprint('new cell')\n")
    (tmp_path / NOTEBOOKS / "ch99_orphan.ipynb").write_text("{}")
    _, problems = sync(tmp_path, check=True)
    assert [p.message.split(":")[0] for p in problems] == [f"notebooks/{stale.name}", "notebooks/ch99_orphan.ipynb"]
    changed, _ = sync(tmp_path)
    assert changed == [Path("notebooks") / stale.name]
    assert "kept" in fresh.read_text()
    assert "new cell" in stale.read_text()


def test_cli_check_and_execute_refuses_the_tracked_folder(capsys):
    assert main(["course", "notebooks", "--check", "--root", str(REPO)]) == 0
    assert "every notebook matches its script" in capsys.readouterr().out
    assert main(["course", "notebooks", "--execute", "--root", str(REPO)]) == 2
    assert main(["course", "notebooks", "--execute", "--out", str(REPO / NOTEBOOKS), "--root", str(REPO)]) == 2


def _without_gpu() -> dict:
    return dict(os.environ, CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="",
                PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])))


def _outputs(path: Path) -> str:
    notebook = json.loads(path.read_text())
    return "".join("".join(output.get("text", "")) for cell in notebook["cells"] if cell["cell_type"] == "code"
                   for output in cell["outputs"])


def test_the_quick_notebooks_run_to_the_end_without_a_gpu(tmp_path):
    results = execute(REPO, tmp_path, names=list(CPU_EXECUTED), timeout=300, env=_without_gpu())
    assert [result.name[:4] for result in results] == list(CPU_EXECUTED)
    for result in results:
        assert result.ok, f"{result.name}: {result.error}"
        text = _outputs(result.path)
        assert "运行在：CPU（没有 GPU）" in text and re.search(r"跳过了 \d+ 个需要 GPU 的 cell", text), result.name


@pytest.mark.gpu
def test_every_notebook_runs_on_the_gpu(tmp_path):
    """Every notebook on the GPU; with HG_NOTEBOOKS_OUT set (the session's notebooks stage) the executed copies
    are kept there, to be committed with their outputs."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    out = Path(os.environ.get("HG_NOTEBOOKS_OUT") or tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])))
    results = execute(REPO, out, timeout=600, env=env)
    assert len(results) == len(scripts(REPO))
    failed = [f"{result.name}: {result.error}" for result in results if not result.ok]
    assert not failed, "\n".join(failed)
    for result in results:
        assert "没有跳过任何 cell" in _outputs(result.path), result.name
