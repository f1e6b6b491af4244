"""Operators and their rungs, found by file name alone: a new rung is one new file, never a list to edit.

An operator is a folder holding ``spec.py``. In it:

- ``v00_torch.py``: the PyTorch baseline (``run(*inputs)``). The registry derives ``v00_torch_compile``
  from it (``torch.compile(run)``): the second row of every table, no file of its own.
- ``vNN_name.hip``: a HIP-dialect C++ rung; ``vNN_name.py`` beside it is its launcher (optional).
- ``vNN_name.cu``: a CUDA-dialect C++ rung, NVIDIA only (skipped elsewhere, with the reason); its header
  may declare its arch (``arch: sm_90a``). A launcher beside it as for ``.hip``.
- ``tNN_name.py``: a Triton rung.
- ``peer_name.py``: a peer, the library a user would pick instead (``peer_liger.py``: Liger-Kernel). Its
  ``run(*inputs)`` calls the library; its header's ``package:`` names the Python package it needs, and
  without that package the peer is skipped with the reason shown. Peers are baselines, like torch.

Anything else (``spec.py``, ``__init__.py``, notes) is not a rung. A ``vNN_name.py`` without its
``.hip`` or ``.cu`` is an error: it is neither a companion nor a Triton rung, and silence would hide a
typo. So is a ``vNN_name.hip`` beside a ``vNN_name.cu``: two rungs, one id.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .header import (COMPANION, CUDA_RUNG, HIP_RUNG, PEER, TRITON_RUNG, Header, HeaderError, companion_of,
                     parse_header)
from .rung import TORCH_BASELINE, TORCH_COMPILE, Rung, load_module
SPEC_NAMES = ("NAME", "DTYPES", "reference", "make_inputs", "EDGE_SHAPES", "BENCH_SHAPES", "TOLERANCE", "work")


class SpecError(ValueError):
    """An operator folder whose spec or rung files break the convention. The message names the file."""


@dataclass(eq=False)
class Op:
    """An operator: its folder, its imported ``spec`` module and its rungs in ladder order."""

    name: str
    path: Path
    spec: ModuleType
    rungs: list[Rung]

    def rung(self, rung_id: str) -> Rung:
        for rung in self.rungs:
            if rung.id == rung_id:
                return rung
        raise KeyError(f"{self.name} has no rung {rung_id!r}; its rungs: {', '.join(r.id for r in self.rungs)}")

    @property
    def baseline(self) -> Rung | None:
        """``v00_torch``: what every speedup in a table is measured against."""
        return next((rung for rung in self.rungs if rung.id == TORCH_BASELINE), None)

    def roots(self) -> list[Rung]:
        """Rungs with ``parent: none``: the tops of the tree."""
        return [rung for rung in self.rungs if rung.metadata.parent_id is None]


def ops_root(root: str | Path | None = None) -> Path:
    """Where operators live: ``root`` when given, else this package's ``ops/`` folder."""
    return Path(root) if root is not None else Path(__file__).resolve().parent


def list_ops(root: str | Path | None = None) -> list[str]:
    """Names of the operator folders (those holding a spec.py), sorted."""
    base = ops_root(root)
    return sorted(path.parent.name for path in base.glob("*/spec.py") if not path.parent.name.startswith((".", "_")))


def _ladder_order(rung_id: str) -> tuple:
    """The torch baselines first, then the peers, then C++ rungs (HIP, CUDA) by number, then Triton rungs by number."""
    if PEER.match(f"{rung_id}.py"):
        return (0, 1, rung_id)
    return (int(rung_id[1:3]) > 0, rung_id[0] != "v", int(rung_id[1:3]), rung_id)


def _check_spec(spec: ModuleType, name: str, path: Path) -> None:
    missing = [attribute for attribute in SPEC_NAMES if not hasattr(spec, attribute)]
    if missing:
        raise SpecError(f"{path}: the spec does not define {', '.join(missing)} (see hello_gpu.ops for the convention)")
    if spec.NAME != name:
        raise SpecError(f"{path}: NAME is {spec.NAME!r} but the folder is {name!r}; they must agree")
    untolerated = [dtype for dtype in spec.DTYPES if dtype not in spec.TOLERANCE]
    if untolerated:
        raise SpecError(f"{path}: TOLERANCE has no entry for {', '.join(untolerated)}")


def _compile_header(baseline: Header) -> Header:
    """The derived torch.compile rung: same file, a header of its own."""
    return Header(path=baseline.path, parent=TORCH_BASELINE,
                  change="torch.compile(run, dynamic=False) of the baseline: one specialised graph per shape",
                  hypothesis="Inductor fuses and generates a Triton kernel; for one elementwise or reduction op "
                             "expect the same bandwidth as eager (~1.0x), plus compile time outside the timing",
                  prediction="1.0x v00_torch", outcome=None,      # no header to write it in: see the records
                  deterministic_text=baseline.deterministic_text, dtypes=baseline.dtypes,
                  description="derived by the registry from v00_torch.py")


def _discover(op: Op) -> list[Rung]:
    rungs: list[Rung] = []
    files = sorted(p for p in op.path.iterdir() if p.is_file())
    cpp_stems = {p.stem for p in files if HIP_RUNG.match(p.name) or CUDA_RUNG.match(p.name)}
    for path in files:
        if path.name == f"{TORCH_BASELINE}.py":
            baseline = Rung(op, TORCH_BASELINE, "torch", path, parse_header(path))
            rungs += [baseline, Rung(op, TORCH_COMPILE, "torch", path, _compile_header(baseline.metadata))]
        elif HIP_RUNG.match(path.name):
            rungs.append(Rung(op, path.stem, "hip", path, parse_header(path), companion_of(path)))
        elif CUDA_RUNG.match(path.name):
            rungs.append(Rung(op, path.stem, "cuda", path, parse_header(path), companion_of(path)))
        elif TRITON_RUNG.match(path.name):
            rungs.append(Rung(op, path.stem, "triton", path, parse_header(path)))
        elif PEER.match(path.name):
            rungs.append(Rung(op, path.stem, "peer", path, parse_header(path)))
        elif COMPANION.match(path.name) and path.stem not in cpp_stems:
            raise SpecError(f"{path}: a vNN_name.py must sit beside its vNN_name.hip or .cu (a companion launcher); "
                            f"Triton rungs are named tNN_name.py and the baseline v00_torch.py")
    return sorted(rungs, key=lambda rung: _ladder_order(rung.id))


def _check_tree(op: Op) -> None:
    """Every parent names a rung of this op, and ids are unique (two files, one id: one would be lost)."""
    ids = [rung.id for rung in op.rungs]
    for rung in op.rungs:
        if ids.count(rung.id) > 1:
            others = [str(other.path.name) for other in op.rungs if other.id == rung.id and other is not rung]
            raise SpecError(f"{rung.path}: rung id {rung.id!r} appears twice in {op.name} (also {', '.join(others)})")
        parent = rung.metadata.parent_id
        if parent is not None and parent not in ids:
            raise HeaderError(f"{rung.path}: parent {parent!r} is not a rung of {op.name} "
                              f"(its rungs: {', '.join(ids)}; or write 'parent: none')")


def load_op(name: str, root: str | Path | None = None) -> Op:
    """Import ``<root>/<name>/spec.py`` and discover the rungs beside it."""
    path = ops_root(root) / name
    spec_path = path / "spec.py"
    if not spec_path.is_file():
        known = ", ".join(list_ops(root)) or "none"
        raise SpecError(f"no operator {name!r} under {ops_root(root)} (no {name}/spec.py); operators: {known}")
    spec = load_module(spec_path, f"{name}_spec")
    _check_spec(spec, name, spec_path)
    op = Op(name, path, spec, [])
    op.rungs = _discover(op)
    _check_tree(op)
    return op
