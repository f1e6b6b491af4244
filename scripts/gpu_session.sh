#!/usr/bin/env bash
# One call on the GPU machine: install, doctor, both test tiers, ceilings, benchmarks.
# Everything measured lands in $OUT/records/<device>/ and is packed into $OUT/records.tgz (the
# device tool brings back at most 8 files); unpack it into the repository root and commit.
#   device tool: HG_GIT_COMMIT=<commit sent> HG_GIT_DIRTY=0 bash scripts/gpu_session.sh
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HG_CACHE_DIR=${HG_CACHE_DIR:-/tmp/hg-cache}
cd "$(dirname "$0")/.."

python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 \
  || { echo "install failed"; cat "$OUT/install.log"; exit 1; }
rm -f "$OUT/install.log"
# The GPU machine gets a copy of the tree without .git: the caller passes the commit it sent,
# after committing everything.
commit=${HG_GIT_COMMIT:-$(git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)}
export HG_GIT_COMMIT=$commit
slug=$(python3 -c "import torch; from hello_gpu.bench.records import device_slug; print(device_slug(torch.cuda.get_device_name()))")
RECORDS="$OUT/records"
DEVICE_RECORDS="$RECORDS/$slug"
mkdir -p "$DEVICE_RECORDS"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv

echo "== doctor"; hello-gpu doctor --json >"$DEVICE_RECORDS/doctor.json"; doctor=$?
echo "doctor exit $doctor"

echo "== ceilings"
hello-gpu ceilings --refresh --record "$RECORDS"; ceilings=$?

echo "== GPU test tier"
python3 -m pytest -m gpu -q -p no:cacheprovider --junitxml="$DEVICE_RECORDS/gpu-tests.xml" tests 2>&1 | tail -n 25
gpu_tests=${PIPESTATUS[0]}
echo "== CPU tier on the GPU machine"
python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tail -n 8
cpu_tests=${PIPESTATUS[0]}

echo "== compile gate (NVIDIA half; no clang here)"
hello-gpu compile-check examples --no-amd | tail -n 3

echo "== runtime overhead benchmark"
python3 benchmarks/runtime_overhead.py --out "$DEVICE_RECORDS/runtime-overhead.json" \
  --profile "$DEVICE_RECORDS/call-profile.txt" >/dev/null 2>"$OUT/benchmark-errors.log"
bench=$?
echo "== reference check against triton.testing.do_bench"
python3 benchmarks/reference_check.py --records "$RECORDS" 2>>"$OUT/benchmark-errors.log"
reference=$?
echo "== flush experiment (why a 7.7 us add reads below do_bench)"
python3 benchmarks/flush_experiment.py >"$DEVICE_RECORDS/flush-experiment.json" 2>>"$OUT/benchmark-errors.log" \
  && cat "$DEVICE_RECORDS/flush-experiment.json"

python3 - "$DEVICE_RECORDS" "$commit" "$doctor" "$ceilings" "$gpu_tests" "$cpu_tests" "$bench" "$reference" <<'PY'
import json, sys
out, commit, *codes = sys.argv[1:]
names = ["doctor", "ceilings", "gpu_tests", "cpu_tests", "runtime_benchmark", "reference_check"]
from hello_gpu.runtime.manifest import environment_manifest
json.dump({"commit": commit, "exit_codes": dict(zip(names, map(int, codes))), "environment": environment_manifest()},
          open(f"{out}/session.json", "w"), indent=2)
PY
tar czf "$OUT/records.tgz" -C "$OUT" records && rm -rf "$RECORDS"
[ -s "$OUT/benchmark-errors.log" ] && tail -n 30 "$OUT/benchmark-errors.log"
echo "exit codes: doctor=$doctor ceilings=$ceilings gpu_tests=$gpu_tests cpu_tests=$cpu_tests bench=$bench reference=$reference"
[ "$doctor$ceilings$gpu_tests$cpu_tests$bench$reference" = "000000" ]
