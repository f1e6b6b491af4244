"""Layers point down only, and a package uses another's public names only (docs/architecture.md).

The order, bottom to top: runtime -> bench -> ops -> profile -> models -> agent -> exercises -> course -> the faces (cli.py, magic.py,
the package's own __init__.py and __main__.py). Every module under src/hello_gpu is parsed with ast, and
every import counts: at the top of a file, inside a function, under ``if``/``try``, and
``importlib.import_module("hello_gpu....")`` with a literal name. Rung files and specs under ops/<op>/
are ops: they may import ops helpers. Nothing here imports the modules, so the test needs no GPU and
no PyTorch.
"""

from __future__ import annotations

import ast
import shutil
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "hello_gpu"
LAYERS = ("runtime", "bench", "ops", "profile", "models", "agent", "exercises", "course", "faces")


def layer_of(module: str) -> str | None:
    """"hello_gpu.ops.softmax.t08_static_width" -> "ops"; a module outside hello_gpu -> None."""
    parts = module.split(".")
    if parts[0] != "hello_gpu":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "faces"


def module_name(path: Path, package: Path) -> tuple[str, bool]:
    """(dotted name, is a package __init__) of a file under ``package``."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def imports_of(path: Path, package: Path):
    """(line, imported module, imported names) for every import in the file, wherever it sits."""
    module, is_package = module_name(path, package)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target, tuple(alias.name for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno, node.args[0].value, ()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def layer_violations(package: Path) -> list[str]:
    """One line per import of a higher layer or of another layer's private name: "file:line: why"."""
    found = []
    for path in sorted(package.rglob("*.py")):
        here = layer_of(module_name(path, package)[0])
        where = path.relative_to(package.parent)
        for line, target, names in sorted(imports_of(path, package)):
            there = layer_of(target)
            if there is None or there == here:
                continue
            if LAYERS.index(there) > LAYERS.index(here):
                found.append(f"{where}:{line}: {here} imports {target}, from the higher layer {there}")
            private = [part for part in target.split(".") if _private(part)] + [n for n in names if _private(n)]
            if private:
                found.append(f"{where}:{line}: {here} imports the private {', '.join(private)} of {target} "
                             f"({there}): give it a public name in its home")
    return found


def test_layers_point_down_and_use_public_names_only():
    assert PACKAGE.is_dir(), PACKAGE
    problems = layer_violations(PACKAGE)
    assert not problems, "\n".join(["imports against the layer order (docs/architecture.md):", *problems])


def test_every_module_belongs_to_a_known_layer():
    """A new top-level folder must take its place in LAYERS (and in docs/architecture.md) first."""
    folders = {path.name for path in PACKAGE.iterdir() if path.is_dir() and (path / "__init__.py").is_file()}
    assert folders <= set(LAYERS), f"packages without a layer: {sorted(folders - set(LAYERS))}"


@pytest.fixture
def planted(tmp_path):
    """A copy of the package's folders and top-level modules, to plant bad imports in."""
    copy = tmp_path / "hello_gpu"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.hip", "*.cu", "*.h"))
    return copy


def _append(path: Path, code: str) -> int:
    """Append ``code`` to ``path``; the line number of its first line."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "\n" + textwrap.dedent(code).lstrip("\n"), encoding="utf-8")
    return text.count("\n") + 2


def test_an_upward_import_inside_a_function_is_found(planted):
    assert layer_violations(planted) == []
    line = _append(planted / "bench" / "records" / "store.py", """
        def sneaky():
            from ...ops.ladder import run_ladder
            return run_ladder
        """)
    assert layer_violations(planted) == [
        f"hello_gpu/bench/records/store.py:{line + 1}: bench imports hello_gpu.ops.ladder, from the higher layer ops"]


def test_upward_imports_of_every_form_are_found(planted):
    rung = planted / "ops" / "vector_add" / "spec.py"
    first = _append(rung, """
        import hello_gpu.agent.loop
        from hello_gpu.profile import kernel_table
        import importlib
        importlib.import_module("hello_gpu.cli")
        from ... import magic
        """)
    problems = layer_violations(planted)
    assert [problem.split(": ", 1)[0] for problem in problems] == [
        f"hello_gpu/ops/vector_add/spec.py:{first + offset}" for offset in (0, 1, 3, 4)]
    assert "from the higher layer agent" in problems[0] and "from the higher layer faces" in problems[-1]


def test_a_private_name_across_layers_is_found_and_within_a_layer_is_not(planted):
    line = _append(planted / "agent" / "report.py", "from ..ops.checking import _same_bits\n")
    _append(planted / "ops" / "ladder.py", "from .checking import _same_bits\n")
    _append(planted / "profile" / "ncu.py", "from ._target import NVTX_RANGE\n")
    assert layer_violations(planted) == [
        f"hello_gpu/agent/report.py:{line}: agent imports the private _same_bits of hello_gpu.ops.checking (ops): "
        f"give it a public name in its home"]


def test_a_private_module_across_layers_is_found(planted):
    line = _append(planted / "agent" / "loop.py", "from ..profile._target import NVTX_RANGE\n")
    assert layer_violations(planted) == [
        f"hello_gpu/agent/loop.py:{line}: agent imports the private _target of hello_gpu.profile._target "
        f"(profile): give it a public name in its home"]
