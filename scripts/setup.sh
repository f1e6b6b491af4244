#!/usr/bin/env bash
# Idempotent set-up on a fresh machine: a virtual environment in .venv with hello-gpu (editable),
# its test extras, and the AMD compile tools (clang-19 + HIP headers) for the gfx1201 compile gate.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# The CPU build of torch is enough for everything but launches; pin it so pip does not pull a
# multi-gigabyte CUDA build on a machine without a GPU. Override with HG_TORCH_SPEC.
TORCH_SPEC=${HG_TORCH_SPEC:-torch==2.13.0}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/python -m pip install -q "$TORCH_SPEC"
fi
.venv/bin/python -m pip install -q -e ".[test]"
if [ "${HG_SKIP_AMD_TOOLS:-0}" != "1" ]; then
  bash scripts/install_amd_compile_tools.sh
fi
