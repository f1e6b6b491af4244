#!/usr/bin/env bash
# The main job: set up (idempotent), check this machine (`hello-gpu doctor`), then compile-check
# every kernel in examples/ for NVIDIA sm_90 and AMD gfx1201. On a machine without a GPU the doctor
# reports what still works and does not fail for the missing GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/hello-gpu doctor --cpu-ok
.venv/bin/hello-gpu compile-check examples
