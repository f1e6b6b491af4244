#!/usr/bin/env bash
# One call on the GPU machine: install, doctor, GPU test tier, benchmarks. Writes records to $OUT.
# Usage (device tool): bash scripts/gpu_session.sh        (OUT defaults to ./out)
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HG_CACHE_DIR=${HG_CACHE_DIR:-/tmp/hg-cache}
cd "$(dirname "$0")/.."

python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 \
  || { echo "install failed"; cat "$OUT/install.log"; exit 1; }
# The GPU machine gets a copy of the tree without .git: the caller passes the commit it sent
# (HG_GIT_COMMIT=$(git rev-parse HEAD) bash scripts/gpu_session.sh), after committing everything.
commit=${HG_GIT_COMMIT:-$(git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)}
export HG_GIT_COMMIT=$commit
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv

echo "== doctor"; hello-gpu doctor --json >"$OUT/doctor.json"; doctor=$?
hello-gpu doctor | tail -n 30

echo "== GPU test tier"
python3 -m pytest -m gpu -q -p no:cacheprovider --junitxml="$OUT/gpu-tests.xml" tests 2>&1 | tail -n 25
gpu_tests=${PIPESTATUS[0]}
echo "== CPU tier on the GPU machine"
python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tail -n 8
cpu_tests=${PIPESTATUS[0]}

echo "== compile gate (NVIDIA half; no clang here)"
hello-gpu compile-check examples --no-amd | tail -n 12
echo "== runtime overhead benchmark"
python3 benchmarks/runtime_overhead.py --out "$OUT/runtime-overhead.json" --profile "$OUT/call-profile.txt" >"$OUT/runtime-overhead.log" 2>&1
bench=$?
python3 - "$OUT/runtime-overhead.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
c = r["compile"]
print("cold first compile (s):", round(c["cold_first_compile_in_process_s"]["median"], 4),
      "second:", round(c["cold_second_compile_in_process_s"]["median"], 4),
      "warm cached (ms):", round(c["warm_cached_compile_s"]["median"] * 1e3, 3))
for k, v in r["launch"].items():
    if isinstance(v, dict): print(k, v)
PY
python3 - "$OUT" "$commit" "$doctor" "$gpu_tests" "$cpu_tests" "$bench" <<'PY'
import json, sys
out, commit, *codes = sys.argv[1:]
names = ["doctor", "gpu_tests", "cpu_tests", "benchmark"]
from hello_gpu.runtime.manifest import environment_manifest
json.dump({"commit": commit, "exit_codes": dict(zip(names, map(int, codes))), "environment": environment_manifest()},
          open(f"{out}/session.json", "w"), indent=2)
PY
echo "exit codes: doctor=$doctor gpu_tests=$gpu_tests cpu_tests=$cpu_tests bench=$bench"
[ "$doctor$gpu_tests$cpu_tests$bench" = "0000" ]
