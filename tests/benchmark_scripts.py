"""The scripts under benchmarks/ (not a package) imported by file, for the tests of their pure parts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name: str):
    """benchmarks/NAME.py as a module, registered in sys.modules under NAME (a dataclass in it looks its module
    up there)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
