"""The course's notebooks: ``notebooks/chNN_<slug>.py`` (jupytext percent format: the source, reviewed as text)
and the paired ``notebooks/chNN_<slug>.ipynb`` generated from it.

``hello-gpu course notebooks`` regenerates every ``.ipynb`` whose cells differ from its script (a notebook whose
cells agree keeps its outputs, so executed notebooks committed from the GPU machine survive a sync);
``--check`` changes nothing and names every stale, missing or orphaned notebook (outputs are ignored);
``--execute --out DIR`` runs the notebooks built from the scripts (nbclient, a fresh kernel each, the working
folder ``notebooks/`` as in Jupyter) and writes the executed copies into DIR, never over tracked files.

jupytext, nbformat, nbclient and ipykernel are the ``test`` extras; they are imported only here, inside the
functions, so ``hello-gpu course sync`` and ``import hello_gpu.course`` work without them. Nothing here imports
PyTorch (the notebooks do, in their own kernel).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .outline import Problem

NOTEBOOKS = Path("notebooks")
PATTERN = "ch[0-9][0-9]_*.py"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
# Pairing for jupytext's Jupyter extension (an edit in either file updates the other), without a header in
# the script: the kernelspec lives in the .ipynb only.
JUPYTEXT = {"formats": "ipynb,py:percent", "notebook_metadata_filter": "-all", "cell_metadata_filter": "-all"}
TOOLS = "jupytext, nbformat, nbclient and ipykernel (pip install -e '.[test]')"


class NotebookToolsMissing(RuntimeError):
    """jupytext / nbformat / nbclient / ipykernel are not installed."""


@dataclass(frozen=True)
class Execution:
    """One executed notebook: where its copy was written, whether every cell ran, how long it took."""
    name: str
    path: Path
    ok: bool
    seconds: float
    error: str = ""


def _tools():
    try:
        import jupytext
        import nbformat
    except ImportError as error:
        raise NotebookToolsMissing(f"needs {TOOLS}: {error}") from error
    return jupytext, nbformat


def scripts(root: Path) -> list[Path]:
    """Every notebook's script, in chapter order."""
    return sorted((Path(root) / NOTEBOOKS).glob(PATTERN))


def build(script: Path):
    """The notebook a script stands for: its cells, stable cell ids, the python3 kernel, no outputs."""
    jupytext, nbformat = _tools()
    notebook = jupytext.reads(Path(script).read_text(encoding="utf-8"), fmt="py:percent")
    notebook.metadata = nbformat.from_dict({"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"},
                                            "jupytext": dict(JUPYTEXT)})
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index:02d}"   # stable: a regenerated notebook differs only where its script does
        cell.metadata = nbformat.from_dict({})
    nbformat.validate(notebook)
    return notebook


def cells(notebook) -> list[tuple[str, str]]:
    """What --check compares: each cell's kind and source (outputs, counts and metadata ignored)."""
    return [(cell["cell_type"], "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"])
            for cell in notebook["cells"]]


def _text(notebook) -> str:
    _, nbformat = _tools()
    return nbformat.writes(notebook) + "\n"


def sync(root: Path, *, check: bool = False) -> tuple[list[Path], list[Problem]]:
    """Write each script's .ipynb where its cells differ (or it is missing); with ``check``, write nothing.
    Returns (notebooks written, problems); problems are drifts under ``check`` and orphans always."""
    root = Path(root)
    changed: list[Path] = []
    problems: list[Problem] = []
    sources = scripts(root)
    for script in sources:
        target = script.with_suffix(".ipynb")
        relative = target.relative_to(root)
        built = build(script)
        if target.is_file():
            try:
                committed = json.loads(target.read_text(encoding="utf-8"))
            except json.JSONDecodeError as error:
                committed, reason = None, f"not valid JSON ({error})"
            if committed is not None and cells(committed) == cells(built):
                continue
            if committed is not None:
                reason = "its cells differ from its script"
        else:
            reason = "missing"
        if check:
            problems.append(Problem("notebook", f"{relative}: {reason}; run hello-gpu course notebooks"))
        else:
            target.write_text(_text(built), encoding="utf-8")
            changed.append(relative)
    paired = {script.with_suffix(".ipynb") for script in sources}
    for orphan in sorted((root / NOTEBOOKS).glob("*.ipynb")):
        if orphan not in paired:
            problems.append(Problem("notebook", f"{orphan.relative_to(root)}: no script {orphan.stem}.py beside it "
                                                f"(the script is the source)"))
    return changed, problems


def _last_started(notebook) -> str:
    """Where a notebook stopped without a cell error (its kernel died or was lost): the last code cell that
    started, by its index and first line."""
    started = [(index, cell) for index, cell in enumerate(notebook.cells)
               if cell.cell_type == "code" and cell.get("execution_count") is not None]
    if not started:
        return "before its first code cell"
    index, cell = started[-1]
    first = next((line for line in cell.source.splitlines() if line.strip()), "")
    return f"in cell {index}: {first[:80]}"


def execute(root: Path, out: Path, *, names: list[str] | None = None, timeout: int = 600,
            env: dict | None = None) -> list[Execution]:
    """Run the notebooks built from the scripts (``names``: stems or chapter prefixes like ``ch04``; default all),
    each in a fresh python3 kernel working in ``notebooks/`` (``env``: the kernel's environment), and write
    each executed notebook, finished or stopped at its first error, to ``out``/NAME.ipynb."""
    _, nbformat = _tools()
    try:
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError as error:
        raise NotebookToolsMissing(f"needs {TOOLS}: {error}") from error
    root, out = Path(root).resolve(), Path(out)
    chosen = [script for script in scripts(root)
              if not names or any(script.stem == name or script.stem.startswith(f"{name}_") for name in names)]
    if names and not chosen:
        raise ValueError(f"no notebook matches {', '.join(names)} under {NOTEBOOKS}/")
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for script in chosen:
        notebook = build(script)
        client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(script.parent)}})
        started, error = time.perf_counter(), ""
        # A kernel that dies (a crash in native code) leaves no output: faulthandler makes it print the Python
        # stack of every thread to its stderr first, which the caller's log keeps.
        kernel_env = dict(env if env is not None else os.environ)
        kernel_env.setdefault("PYTHONFAULTHANDLER", "1")
        try:
            client.execute(env=kernel_env)
        except CellExecutionError as failure:
            error = str(failure).strip().splitlines()[-1] if str(failure).strip() else type(failure).__name__
        except Exception as failure:  # noqa: BLE001 - a dead kernel or a timeout: reported, the next one runs
            error = f"{type(failure).__name__}: {failure} ({_last_started(notebook)})"
        target = out / f"{script.stem}.ipynb"
        target.write_text(_text(notebook), encoding="utf-8")
        results.append(Execution(script.stem, target, not error, time.perf_counter() - started, error))
    return results
