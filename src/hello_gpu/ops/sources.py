"""Everything a rung runs: the operator-code files reachable from its file, so a record can hash them all.

A rung rarely runs only its own file. ``softmax/t10_one_warp_per_row.py`` loads t08, which loads t07,
which loads t04 and t06, ...; a HIP rung's companion imports another rung's launcher; a kernel
``#include``\\s a header. A record that hashed only the rung's own file would call itself current after
an edit to any of those. :func:`collect_sources` follows, statically, every reference a file makes:

- Python ``import`` and ``from ... import`` (absolute ``hello_gpu.ops.<op>.<module>`` and relative);
- ``load_module(<folder> / "t04_rows_per_program.py", ...)``, and any ``<folder> / "x.py"`` or
  ``.with_name("x.py")`` naming a code file, resolved in the referring file's folder;
- C++ ``#include "x"``, resolved beside the including file first, then in ``ops/include/``.

A reference counts when it resolves to *operator code*: a file inside ``ops/`` that is not one of the
framework modules (:data:`FRAMEWORK`): the operator folders, ``ops/include/`` and shared helpers such as
``ops/rows.py``. Anything else (torch, ``hello_gpu.runtime``, ``hello_gpu.ops.rung``) is the framework
and the libraries, which a record describes through its environment, not its sources. A reference that
cannot be resolved statically is an error naming the file and line: a file silently missed would make
a record lie.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from ..bench.records import SourceRules, source_entries
from .header import claims, companion_of, measured_sha256

OPS_DIR = Path(__file__).resolve().parent
PACKAGE = "hello_gpu.ops"
INCLUDE_FOLDER = "include"     # under an ops folder: the shared device headers (rung.INCLUDE_DIR)

# The modules of ops/ that are the ladder machinery rather than code a rung runs. Another top-level
# module of ops/ is a shared helper (rows.py) and counts: a new file is a source until listed here,
# so a forgotten entry shows as a stale record, never as a record that misses an edit.
FRAMEWORK = frozenset({"__init__.py", "checking.py", "functions.py", "header.py", "ladder.py", "probes.py", "registry.py",
                       "rung.py", "rung_tables.py", "sources.py"})

CPP_SUFFIXES = (".hip", ".cu", ".h", ".hpp", ".cuh", ".inc")
CODE_SUFFIXES = (".py", *CPP_SUFFIXES)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<name>[^"]+)"', re.M)


class SourceError(ValueError):
    """A reference to code that cannot be resolved statically. The message names the file and line."""


def is_operator_code(path: Path, ops_dir: Path = OPS_DIR) -> bool:
    """Inside ``ops_dir`` and not a framework module (see :data:`FRAMEWORK`)."""
    try:
        parts = Path(path).resolve().relative_to(Path(ops_dir).resolve()).parts
    except ValueError:
        return False
    return "__pycache__" not in parts and not (len(parts) == 1 and parts[0] in FRAMEWORK)


def collect_sources(paths, ops_dir: Path = OPS_DIR) -> list[Path]:
    """The files ``paths`` run, themselves first (in the order given), then every operator-code file
    they reach, sorted. A HIP rung brings its companion launcher. Cycles are followed once."""
    ops_dir = Path(ops_dir).resolve()
    starts: list[Path] = []
    for path in (Path(p).resolve() for p in paths if p is not None):
        starts += [p for p in (path, companion_of(path)) if p is not None and p.resolve() not in starts]
    seen = set(starts)
    todo = list(starts)
    while todo:
        for reference in _references(todo.pop(), ops_dir):
            if reference not in seen and is_operator_code(reference, ops_dir):
                seen.add(reference)
                todo.append(reference)
    return starts + sorted(seen - set(starts))


def _references(path: Path, ops_dir: Path) -> tuple[Path, ...]:
    """The files one file refers to (operator code or not), resolved; cached by content."""
    if path.suffix in CPP_SUFFIXES:
        return _cpp_references(path, path.read_text(encoding="utf-8", errors="replace"), ops_dir)
    if path.suffix == ".py":
        return _python_references(path, path.read_text(encoding="utf-8"), ops_dir)
    return ()


@functools.lru_cache(maxsize=1024)
def _cpp_references(path: Path, text: str, ops_dir: Path) -> tuple[Path, ...]:
    found = []
    for match in _INCLUDE.finditer(text):
        name = match.group("name")
        for folder in (path.parent, ops_dir / INCLUDE_FOLDER):
            if (folder / name).is_file():
                found.append((folder / name).resolve())
                break
        else:
            line = text.count("\n", 0, match.start()) + 1
            raise SourceError(f"{path}:{line}: #include \"{name}\" is neither beside the file nor in "
                              f"{ops_dir / INCLUDE_FOLDER}")
    return tuple(found)


@functools.lru_cache(maxsize=1024)
def _python_references(path: Path, text: str, ops_dir: Path) -> tuple[Path, ...]:
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as error:
        raise SourceError(f"{path}:{error.lineno}: not valid Python ({error.msg}), so what it runs cannot be "
                          f"listed") from None
    found: list[Path] = []
    for node in ast.walk(tree):
        where = f"{path}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _module_files(alias.name, (), ops_dir, where)
        elif isinstance(node, ast.ImportFrom):
            names = tuple(alias.name for alias in node.names if alias.name != "*")
            if node.level:
                found += _relative_files(path, node.level, node.module, names, where)
            elif node.module:
                found += _module_files(node.module, names, ops_dir, where)
        elif isinstance(node, ast.Call):
            found += _path_call_files(node, path, where)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            name = _literal_path(node)
            if name is not None and name.endswith(CODE_SUFFIXES):
                found.append(_in_folder(path, name, where))
    return tuple(dict.fromkeys(found))


def _module_files(module: str, names: tuple[str, ...], ops_dir: Path, where: str) -> list[Path]:
    """Files of ``import module`` / ``from module import names`` when the module is in hello_gpu.ops."""
    if module != PACKAGE and not module.startswith(PACKAGE + "."):
        return []
    parts = module.split(".")[2:]
    if parts and f"{parts[0]}.py" in FRAMEWORK:
        return []                        # the machinery, not run as a source (and maybe not in a copied tree)
    return _package_files(ops_dir.joinpath(*parts), names, module, where)


def _relative_files(path: Path, level: int, module: str | None, names: tuple[str, ...], where: str) -> list[Path]:
    folder = path.parent
    for _ in range(level - 1):
        folder = folder.parent
    target = folder.joinpath(*(module or "").split(".")) if module else folder
    return _package_files(target, names, "." * level + (module or ""), where)


def _package_files(target: Path, names: tuple[str, ...], module: str, where: str) -> list[Path]:
    """``target`` as a module (``x.py``, a package's ``__init__.py``, or a namespace folder), and each
    of ``names`` that is a submodule of it."""
    files = []
    if target.with_suffix(".py").is_file():
        files.append(target.with_suffix(".py").resolve())
    elif target.is_dir():
        if (target / "__init__.py").is_file():
            files.append((target / "__init__.py").resolve())
        for name in names:
            for candidate in (target / f"{name}.py", target / name / "__init__.py"):
                if candidate.is_file():
                    files.append(candidate.resolve())
                    break
    else:
        raise SourceError(f"{where}: import of {module} resolves to no file ({target}.py or {target}/)")
    return files


def _literal_path(node: ast.AST) -> str | None:
    """``<folder> / "sub" / "x.py"`` -> ``"sub/x.py"``; ``<folder>.with_name("x.py")`` -> ``"x.py"``;
    None when the expression ends in no literal name."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "with_name":
        argument = node.args[0] if node.args else None
        return argument.value if isinstance(argument, ast.Constant) and isinstance(argument.value, str) else None
    parts = []
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) \
            and isinstance(node.right, ast.Constant) and isinstance(node.right.value, str):
        parts.insert(0, node.right.value)
        node = node.left
    return "/".join(parts) if parts else None


def _path_call_files(node: ast.Call, path: Path, where: str) -> list[Path]:
    function = node.func
    name = function.id if isinstance(function, ast.Name) else function.attr if isinstance(function, ast.Attribute) \
        else None
    if name == "with_name":
        literal = _literal_path(node)
        return [_in_folder(path, literal, where)] if literal and literal.endswith(CODE_SUFFIXES) else []
    if name != "load_module":
        return []
    argument = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "path"), None)
    literal = None if argument is None else _literal_path(argument)
    if literal is None:
        raise SourceError(f"{where}: load_module's path is not a literal file name (<folder> / \"name.py\" or "
                          f".with_name(\"name.py\")), so the files this code runs cannot be listed")
    return []            # the literal itself is found where the walk reaches the / or with_name expression


def _in_folder(path: Path, name: str, where: str) -> Path:
    file = path.parent / name
    if not file.is_file():
        raise SourceError(f"{where}: refers to {name}, which is not in {path.parent}")
    return file.resolve()


def record_rules(ops_dir: Path = OPS_DIR) -> SourceRules:
    """How records see this repository's files (bench takes them as a parameter): hashed by
    :func:`~hello_gpu.ops.header.measured_sha256`, each source with everything it runs (operator code
    under ``ops_dir``), claims as the rung-file format writes them."""
    ops_dir = Path(ops_dir).resolve()
    return SourceRules(hasher=measured_sha256, sources_of=functools.partial(_sources_of_one, ops_dir=ops_dir),
                       claims_in=claims)


def repository_rules(repo_root: Path) -> SourceRules:
    """:func:`record_rules` for the repository at ``repo_root``: its own ``src/hello_gpu/ops`` when it has
    one (a checkout being checked), else this package's."""
    ops_dir = Path(repo_root) / "src" / "hello_gpu" / "ops"
    return record_rules(ops_dir if ops_dir.is_dir() else OPS_DIR)


def _sources_of_one(path: Path, ops_dir: Path) -> list[Path]:
    return collect_sources([path], ops_dir)


def rung_source_fields(rung, repo_root: Path) -> dict:
    """A record entry's ``source`` (the rung's file) and ``sources`` (it, then every file it runs)."""
    sources = source_entries(rung.path, repo_root, record_rules(rung.op.path.parent))
    return {"source": sources[0], "sources": sources}
