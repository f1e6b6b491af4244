#!/usr/bin/env bash
# Fetch, on this machine, the wheels the GPU machine lacks into .whl/ (ignored by git; the device tool's
# carry takes it there, where scripts/gpu_session.sh installs them into a private folder). The GPU machine
# can fetch nothing, and its image (Python 3.12, listed in the device library's KINDS.md) has torch, triton,
# numpy, rich, matplotlib, pyyaml, psutil and pytest but not these:
#   - jsonschema and what it imports: the record schema (hello_gpu.bench.records.schema), tests/test_atlas.py;
#   - platformdirs: the package's cache folder;
#   - liger-kernel: the peer baseline of the rms_norm and softmax ladders;
#   - jupytext, nbformat, nbclient, ipykernel and what they import: the `notebooks` stage and test_notebooks.
# Each is named with --no-deps, so nothing the image already holds travels (the carry holds 64 MiB in all);
# the binary ones (pyzmq, tornado, debugpy, rpds-py) are fetched for the machine's CPython 3.12.
# Usage: bash scripts/fetch_peers.sh [FOLDER]   (default .whl); run it once after a fresh checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
folder=${1:-.whl}
mkdir -p "$folder"
pure=(
  jsonschema jsonschema-specifications referencing platformdirs
  liger-kernel
  jupytext mdit-py-plugins nbformat fastjsonschema traitlets jupyter-core nbclient jupyter-client
  ipykernel comm ipython ipython-pygments-lexers decorator jedi parso matplotlib-inline pexpect ptyprocess
  prompt-toolkit wcwidth stack-data asttokens executing pure-eval nest-asyncio
)
binary=(pyzmq tornado debugpy rpds-py)
python=${PYTHON:-python3}
"$python" -m pip download -q --no-deps -d "$folder" "${pure[@]}"
"$python" -m pip download -q --no-deps -d "$folder" --only-binary=:all: --implementation cp --python-version 3.12 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 "${binary[@]}"
# Every wheel must install for that machine, from this folder alone, as gpu_session.sh installs them.
check=$(mktemp -d)
trap 'rm -rf "$check"' EXIT
"$python" -m pip install -q --no-deps --no-index --target "$check" --only-binary=:all: --implementation cp \
  --python-version 3.12 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 "$folder"/*.whl
echo "fetch_peers: $(ls "$folder"/*.whl | wc -l) wheels, $(du -sh "$folder" | cut -f1), in $folder"
