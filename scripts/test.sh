#!/usr/bin/env bash
# The test command: set up (idempotent), then the CPU test tier. Extra arguments go to pytest.
# The GPU tier is `pytest -m gpu` on a machine with a GPU (scripts/gpu_session.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
