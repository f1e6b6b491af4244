"""What a measurement ran on: GPU, driver, clocks, versions and the git commit. No host or user names.

Every record carries one, so a figure can be traced to the code and the machine state behind it.
Clocks are only read (``nvidia-smi --query-gpu`` / ``rocm-smi``), never set.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path


def _run(command: list[str], cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=20, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(directory: Path | None = None) -> dict:
    """Commit of the source tree and whether it had uncommitted changes.

    ``HG_GIT_COMMIT`` (and ``HG_GIT_DIRTY``), when set, win: they are set by whoever sent a copy of
    the tree to another machine, and that copy may carry a ``.git`` of some other commit (the GPU
    machine's copy read as the session's first commit, dirty, in records of commit a3e1cf2).
    Otherwise git is asked.
    """
    if os.environ.get("HG_GIT_COMMIT"):
        dirty = os.environ.get("HG_GIT_DIRTY")
        return {"commit": os.environ["HG_GIT_COMMIT"], "dirty": None if dirty is None else dirty == "1",
                "source": "environment"}
    directory = directory or Path(__file__).resolve().parent
    commit = _run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=directory)
    if commit:
        status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=directory)
        return {"commit": commit, "dirty": bool(status) if status is not None else None, "source": "git"}
    return {"commit": None, "dirty": None, "source": "environment"}


def package_source_sha256() -> str:
    """sha256 over the package's own source files (path and content), to tie a record to the code."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".hip", ".cu", ".h") and p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def read_clocks() -> dict | None:
    """SM and memory clocks now, read-only. None where no query tool answers."""
    if shutil.which("nvidia-smi"):
        text = _run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw",
                     "--format=csv,noheader,nounits", "-i", "0"])
        if text:
            values = [v.strip() for v in text.splitlines()[0].split(",")]
            keys = ["sm_mhz", "memory_mhz", "max_sm_mhz", "temperature_c", "power_w"]
            return {k: _number(v) for k, v in zip(keys, values)}
    if shutil.which("rocm-smi"):
        text = _run(["rocm-smi", "--showclocks", "--json"])
        if text:
            return {"rocm_smi": text[:2000]}
    return None


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return None


def environment_manifest() -> dict:
    """GPU, arch, driver, runtime, library versions, clocks and git state, as plain JSON."""
    manifest: dict = {"python": platform.python_version(), "platform": sys.platform}
    try:
        import torch
        manifest["torch"] = torch.__version__
        manifest["cuda_runtime"] = torch.version.cuda
        manifest["hip_runtime"] = getattr(torch.version, "hip", None)
        # What a float32 torch.mm ran as: TF32 tensor cores round the inputs to 10 mantissa bits (the
        # matmul ladder's float32 baseline is cuBLAS with TF32 off, PyTorch's default).
        manifest["float32_matmul"] = {"allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                                      "precision": torch.get_float32_matmul_precision()}
        if torch.cuda.is_available():
            from .device import device_info
            info = device_info()
            manifest.update(gpu=info.name, arch=info.arch, multiprocessors=info.multiprocessors,
                            l2_bytes=info.l2_bytes, memory_bytes=info.memory_bytes)
    except ImportError:
        manifest["torch"] = None
    try:
        import triton
        manifest["triton"] = triton.__version__
    except ImportError:
        manifest["triton"] = None
    try:
        from .compiler import nvrtc_version
        manifest["nvrtc"] = nvrtc_version()
    except Exception:  # noqa: BLE001 - no NVRTC is a fact to record, not an error
        manifest["nvrtc"] = None
    driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) if shutil.which("nvidia-smi") else None
    manifest["driver"] = driver.splitlines()[0] if driver else None
    manifest["clocks"] = read_clocks()
    manifest["git"] = git_state()
    manifest["package_source_sha256"] = package_source_sha256()
    return manifest
