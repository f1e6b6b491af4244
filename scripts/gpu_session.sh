#!/usr/bin/env bash
# One call on the GPU machine: install, then the stages asked for (default: all), each under the time
# left before a deadline, so the records are always packed before the device tool's limit.
# Everything measured lands in $OUT/records/<device>/ and is packed into $OUT/records.tgz (the device
# tool brings back few files); unpack it into the repository root and commit.
#
#   device tool: HG_GIT_COMMIT=<commit sent> HG_GIT_DIRTY=0 bash scripts/gpu_session.sh [STAGE ...]
#   stages: doctor ceilings gpu-tests gpu-tests-k:FILE:EXPRESSION ('+' for a space: gpu-tests-k:F.py:not+slow) kernelbench cpu-tests compile-gate overhead call-overhead reference flush profile
#           softmax-sweep reduce-sweep rms-sweep dirty-l2 window-drain eviction-sweep persistent-sweep gemv-sweep gemv-sweep:16 gemv-sweep:loads gemv-sweep:16-loads gemv-sweep:warps copy-floor decode-merge decode-floor decode-attention-floor grid-check profile-records gpu-tests:FILE (one test file's GPU tier)
#           ladder:OP[:DTYPE[:SHAPE,SHAPE...[:ROUTE]]] (e.g. ladder:softmax:bfloat16:8192x8192, ladder:matmul:bfloat16:4096x4096x4096:cuda);
#           ladder-add:OP:DTYPE:SHAPE,SHAPE...[:ROUTE] (the same, merged into the committed record: its other shapes are
#           kept while their files are unchanged; a ladder split over calls, e.g. ladder-add:attention:bfloat16:1x32x8x1x32768x128);
#           a ladder prints one line a rung and shape as it finishes into errors.log, and writes its record after each shape;
#           agent:OP:ROUTE:START[:SHAPE[:DTYPE]] (a scripted agent run of 16 rounds at most, HG_AGENT_SECONDS
#           of search, e.g. agent:softmax:hip:v01_thread_per_row:8192x8192);
#           agent-rerun:OP.ROUTE (the committed run's own command again, from its record's extra.rerun);
#           agent-resume:OP.ROUTE:SECONDS[:no-counters] (continue the committed run
#           records/<device>/agent/OP.ROUTE until SECONDS of its whole time; no-counters: analyses without ncu);
#           profile:OP:RUNG:SHAPE[:DTYPE] (one rung's kernel table and counters into OP.DTYPE.profile.json);
#           ladder-profile:OP:ROUTE:SHAPE[:DTYPE] (`ladder --profile` at one shape; its tables kept in
#           ladder-profile.OP.ROUTE.DTYPE.txt);
#           model-run:CONFIG:BATCH:PROMPT:NEW:BACKENDS (e.g. model-run:8b:1:512:256:eager,compile-reduce-overhead,hello-gpu);
#           model-profile:CONFIG:PHASE[:BATCH[:PROMPT[:BACKEND]]] (e.g. model-profile:8b:decode, model-profile:1b:decode:1:512:hello-gpu);
#           model-vision:BATCH:SIZE (the vision model's profile, e.g. model-vision:8:224);
#           model-agent:CONFIG:PHASE:BATCH:PROMPT:NEW (`hello-gpu agent --model`, e.g. model-agent:1b:decode:1:512:256);
#           notebooks[:NAME,NAME...] (every course notebook executed, or the named ones, e.g. notebooks:ch02,ch18;
#           the executed .ipynb files packed in $OUT/notebooks.tgz, to commit over notebooks/; needs jupytext,
#           nbformat, nbclient and ipykernel: wheels in .whl/ where the machine lacks them);
#           "all" = every stage but cpu-tests
#   Peer wheels (Liger-Kernel, jsonschema, the notebook kernel: fetched by scripts/fetch_peers.sh on the machine
#   that sends the call) travel in .whl/ (the device tool's carry) and are installed into a private folder on PYTHONPATH.
#   HG_SESSION_SECONDS: the budget for the stages (default 540 s, under the tool's 600 s per call)
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HG_CACHE_DIR=${HG_CACHE_DIR:-/tmp/hg-cache}
cd "$(dirname "$0")/.."
deadline=$((SECONDS + ${HG_SESSION_SECONDS:-540}))

python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 \
  || { echo "install failed"; cat "$OUT/install.log"; exit 1; }
rm -f "$OUT/install.log"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-deps --no-index --target /tmp/hg-peers .whl/*.whl \
    || { echo "peer wheels failed to install"; exit 1; }
  export PYTHONPATH=/tmp/hg-peers${PYTHONPATH:+:$PYTHONPATH}
fi
# The GPU machine gets a copy of the tree without .git: the caller passes the commit it sent,
# after committing everything.
commit=${HG_GIT_COMMIT:-$(git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)}
export HG_GIT_COMMIT=$commit
slug=$(python3 -c "import torch; from hello_gpu.bench.records import device_slug; print(device_slug(torch.cuda.get_device_name()))")
RECORDS="$OUT/records"
DEVICE_RECORDS="$RECORDS/$slug"
mkdir -p "$DEVICE_RECORDS"
ERRORS="$OUT/errors.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv

all="doctor ceilings gpu-tests compile-gate overhead reference flush ladder:vector_add:float32 ladder:reduce_sum:float32 ladder:vector_add:bfloat16"
stages=${*:-all}
[ "$stages" = all ] && stages=$all
declare -A codes=()
order=()

# run_stage NAME COMMAND...: run under the time left; exit 124 when the deadline cut it short.
run_stage() {
  local name=$1; shift
  local left=$((deadline - SECONDS))
  order+=("$name")
  if [ "$left" -lt 15 ]; then
    echo "== $name: skipped, ${left}s left before the deadline"; codes[$name]=skipped; return
  fi
  echo "== $name (${left}s left)"
  local started=$SECONDS
  # bash -c, so the stage may be one of the functions below (exported with export -f).
  timeout --signal=INT --kill-after=10 "$left" bash -c '"$@"' stage "$@"
  codes[$name]=$?
  echo "== $name: exit ${codes[$name]} after $((SECONDS - started))s"
}

gpu_tests() {   # gpu_tests [FILE[::TEST]...]: the GPU tier (default: all of tests/), its junit record kept
  # gpu-tests.xml for the whole tier, gpu-tests.STEM.xml for one file (STEM: the file's name) and
  # gpu-tests.STEM.TEST.xml for one test of it, so two stages of one file keep both records
  local junit=(--junitxml="$DEVICE_RECORDS/gpu-tests.xml")
  if [ $# -eq 1 ]; then
    local stem test=""
    stem=$(basename "${1%%::*}" .py)
    [[ $1 == *::* ]] && test=".${1#*::}" && test=${test//[^A-Za-z0-9_.]/_}
    junit=(--junitxml="$DEVICE_RECORDS/gpu-tests.$stem$test.xml")
  fi
  # The whole output is kept beside the junit record (tracebacks of a failure); the call prints its tail.
  local log=${junit[0]#--junitxml=}
  python3 -m pytest -m gpu -q -p no:cacheprovider "${junit[@]}" "${@:-tests}" 2>&1 | tee "${log%.xml}.log" | tail -n 30
  return "${PIPESTATUS[0]}"
}
gpu_tests_k() {   # gpu_tests_k FILE EXPRESSION: the GPU tier of one file, only the tests `-k EXPRESSION` selects
  local stem name
  stem=$(basename "$1" .py)
  # A long expression made a file name over the 255-byte limit, and pytest lost the results at exit:
  # keep its first 60 characters and a hash of the whole.
  name=${2//[^A-Za-z0-9_]/_}
  name="${name:0:60}.$(printf %s "$2" | sha1sum | cut -c1-8)"
  python3 -m pytest -m gpu -q -p no:cacheprovider --junitxml="$DEVICE_RECORDS/gpu-tests.$stem.$name.xml" \
    "$1" -k "$2" 2>&1 | tee "$DEVICE_RECORDS/gpu-tests.$stem.$name.log" | tail -n 30
  return "${PIPESTATUS[0]}"
}
kernelbench() {   # the KernelBench-sized problems end to end, each run's report kept under kernelbench/
  mkdir -p "$DEVICE_RECORDS/kernelbench"
  HG_KERNELBENCH_REPORTS="$DEVICE_RECORDS/kernelbench" gpu_tests tests/gpu/test_kernelbench_gpu.py
}
notebooks_run() {   # notebooks_run [NAME...]: every notebook (tests/test_notebooks.py, GPU tier) or the named ones
  # (`hello-gpu course notebooks --execute --only`, its ok/FAIL lines and the kernels' stderr kept in
  # notebooks.log); the executed copies go to $OUT/notebooks/, packed into $OUT/notebooks.tgz at the end (the device
  # tool brings back few files: session 21 lost two notebooks of twelve to its file count).
  python3 -c "import jupytext, nbformat, nbclient, ipykernel" 2>/dev/null || {
    echo "notebooks: jupytext, nbformat, nbclient and ipykernel are missing: carry their wheels in .whl/"; return 3; }
  mkdir -p "$OUT/notebooks"
  if [ $# -eq 0 ]; then
    HG_NOTEBOOKS_OUT="$OUT/notebooks" gpu_tests tests/test_notebooks.py
  else
    hello-gpu course notebooks --execute --out "$OUT/notebooks" --only "$@" >"$DEVICE_RECORDS/notebooks.log" 2>&1
    local code=$?
    grep -E "^(ok|FAIL) " "$DEVICE_RECORDS/notebooks.log"
    return $code
  fi
}
cpu_tests() { python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tail -n 8; return "${PIPESTATUS[0]}"; }
doctor() { hello-gpu doctor --json >"$DEVICE_RECORDS/doctor.json"; }
call_overhead() {   # host time per call of every public entry point and call times (benchmarks/call_overhead.py)
  python3 benchmarks/call_overhead.py --out "$DEVICE_RECORDS/call-overhead.json" 2>>"$ERRORS"
}
overhead() {
  python3 benchmarks/runtime_overhead.py --out "$DEVICE_RECORDS/runtime-overhead.json" \
    --profile "$DEVICE_RECORDS/call-profile.txt" >/dev/null 2>>"$ERRORS"
}
flush() {
  python3 benchmarks/flush_experiment.py >"$DEVICE_RECORDS/flush-experiment.json" 2>>"$ERRORS" \
    && cat "$DEVICE_RECORDS/flush-experiment.json"
}
profile_capture() {   # real torch.profiler traces and ncu CSVs: the parsers' fixtures and the profile records
  local raw="$DEVICE_RECORDS/profile-raw"
  mkdir -p "$raw"
  python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_profile_gpu.py 2>&1 | tail -n 15
  for rung in v01_thread_per_element v02_strided_chunks v04_vector_128bit; do
    COLUMNS=200 hello-gpu profile vector_add "$rung" --shape 16777216 --save-raw "$raw" --record "$RECORDS" 2>>"$ERRORS"
  done
  COLUMNS=200 hello-gpu profile vector_add v00_torch --shape 16777216 --save-raw "$raw" --no-counters 2>>"$ERRORS"
  COLUMNS=200 hello-gpu profile reduce_sum v00_torch_compile --shape 1048576 --save-raw "$raw" 2>>"$ERRORS"
}
softmax_sweep() {   # launch-parameter sweeps and counters behind the softmax gaps (benchmarks/softmax_sweep.py)
  python3 benchmarks/softmax_sweep.py >"$DEVICE_RECORDS/softmax-sweep.json" 2>>"$ERRORS" \
    && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(r) for k in d if k!='device' for r in d[k]]" \
       "$DEVICE_RECORDS/softmax-sweep.json"
  for rung in v05_vector_128bit t03_sixteen_warps; do
    COLUMNS=200 hello-gpu profile softmax "$rung" --shape 8192x8192 --dtype bfloat16 --record "$RECORDS" 2>>"$ERRORS"
  done
  for rung in v00_torch_compile peer_liger t04_rows_per_program v06_rows_per_block; do
    COLUMNS=200 hello-gpu profile softmax "$rung" --shape 4096x1024 --dtype float32 --record "$RECORDS" 2>>"$ERRORS"
  done
}
ladder() {   # ladder OP DTYPE ROUTE [SHAPE...]: check the rungs (of ROUTE, or all), time them, write the record and its plot
  local op=$1 dtype=$2 route=$3; shift 3
  COLUMNS=220 hello-gpu ladder "$op" --dtype "$dtype" ${route:+--route "$route"} ${1:+--shapes "$@"} \
    --record "$RECORDS" 2>>"$ERRORS"
}
ladder_add() {   # ladder_add OP DTYPE ROUTE SHAPE...: the ladder at these shapes, merged into the committed record
  # $OUT starts empty: seed it with the committed record (unless a stage of this call wrote it already), so the
  # run keeps the shapes it does not measure (hello_gpu.ops.ladder.merge_ladder_records).
  local name="$1${3:+.$3}.$2.json"
  [ -f "$DEVICE_RECORDS/$name" ] || [ ! -f "records/$slug/$name" ] || cp "records/$slug/$name" "$DEVICE_RECORDS/"
  ladder "$@"
}

profile_records() {   # the profile records of reduce_sum and rms_norm (issue 6), then ladder --profile once
  COLUMNS=200 hello-gpu profile reduce_sum t05_wide_tiles --shape 16777216 --record "$RECORDS" 2>>"$ERRORS"
  COLUMNS=200 hello-gpu profile rms_norm t02_warps_by_width --shape 8192x4096 --dtype bfloat16 --record "$RECORDS" 2>>"$ERRORS"
  COLUMNS=200 hello-gpu ladder vector_add --route triton --shapes 16777216 --profile 2>>"$ERRORS"
}
grid_check() {   # vector_add v06 in bfloat16 with its grid and with one block per tile (benchmarks/vector_add_grid.py)
  python3 benchmarks/vector_add_grid.py >"$DEVICE_RECORDS/vector_add-grid.json" 2>>"$ERRORS" \
    && cat "$DEVICE_RECORDS/vector_add-grid.json"
}
rms_sweep() {   # the one-row Triton kernel's warps and eviction hints against torch.compile (benchmarks/rms_norm_sweep.py)
  # Written aside and moved when complete: a sweep that fails leaves no empty record behind.
  python3 benchmarks/rms_norm_sweep.py >"$DEVICE_RECORDS/rms_norm-sweep.json.partial" 2>>"$ERRORS" \
    && mv "$DEVICE_RECORDS/rms_norm-sweep.json.partial" "$DEVICE_RECORDS/rms_norm-sweep.json" \
    && python3 -c "import json,sys; [print(g['shape'], g['dtype'], r) for g in json.load(open(sys.argv[1]))['gaps'] for r in g['configurations'] + g.get('inductor_launches', [])]" \
       "$DEVICE_RECORDS/rms_norm-sweep.json"
}
dirty_l2() {   # short-row softmax under the zeroing flush and a clean one (benchmarks/softmax_dirty_l2.py)
  python3 benchmarks/softmax_dirty_l2.py >"$DEVICE_RECORDS/softmax-dirty-l2.json.partial" 2>>"$ERRORS" \
    && mv "$DEVICE_RECORDS/softmax-dirty-l2.json.partial" "$DEVICE_RECORDS/softmax-dirty-l2.json" \
    && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(k, r) for k in d['flushes'] for r in d['flushes'][k]]; print(d['dirty_over_clean'], d['errors'], d['inductor']['launches'])" \
       "$DEVICE_RECORDS/softmax-dirty-l2.json"
}
eviction_sweep() {   # L2 hints and launches at softmax 4096x1024 and rms_norm 8192x4096 (benchmarks/eviction_sweep.py)
  python3 benchmarks/eviction_sweep.py >"$DEVICE_RECORDS/eviction-sweep.json.partial" 2>>"$ERRORS" \
    && mv "$DEVICE_RECORDS/eviction-sweep.json.partial" "$DEVICE_RECORDS/eviction-sweep.json" \
    && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(k, r) for k in ('softmax', 'rms_norm') for r in d[k]['configurations']]" \
       "$DEVICE_RECORDS/eviction-sweep.json"
}
persistent_sweep() {   # persistent programs at softmax 4096x1024 and rms_norm 8192x4096 (benchmarks/persistent_sweep.py)
  python3 benchmarks/persistent_sweep.py >"$DEVICE_RECORDS/persistent-sweep.json.partial" 2>>"$ERRORS" \
    && mv "$DEVICE_RECORDS/persistent-sweep.json.partial" "$DEVICE_RECORDS/persistent-sweep.json" \
    && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(k, r) for k in ('softmax', 'rms_norm') for r in d[k]['configurations']]" \
       "$DEVICE_RECORDS/persistent-sweep.json"
}
gemv_sweep() {   # gemv_sweep [ROWS|loads|16-loads|warps]: decode GEMV tiles (and split-K at one row) against a pure read
  # of the weight and F.linear (benchmarks/gemv_sweep.py); 16 rows: tl.dot tiles, into gemv-sweep.m16.json; loads: one
  # row's stages and eviction policies and Inductor's kernel, into gemv-sweep.loads.json; 16-loads: the same for the
  # 16-row tl.dot tiles (with split-K where row blocks are few), into gemv-sweep.m16.loads.json; warps: one row's
  # one-stage evict-first tiles with 4, 8 and 16 warps, into gemv-sweep.warps.json
  local rows=${1:-1} name=gemv-sweep arguments
  arguments=(--rows "$rows")
  [ "$rows" = 1 ] || name=gemv-sweep.m$rows
  [ "$rows" = loads ] && name=gemv-sweep.loads && arguments=(--loads)
  [ "$rows" = 16-loads ] && name=gemv-sweep.m16.loads && arguments=(--rows 16 --loads)
  [ "$rows" = warps ] && name=gemv-sweep.warps && arguments=(--warps)
  python3 benchmarks/gemv_sweep.py "${arguments[@]}" >"$DEVICE_RECORDS/$name.json.partial" 2>>"$ERRORS" \
    && mv "$DEVICE_RECORDS/$name.json.partial" "$DEVICE_RECORDS/$name.json" \
    && python3 -c "import json,sys; [print(s['shape'], 'read floor', round(s['read_floor']['gb_per_s']), 'F.linear', round(s['f_linear']['gb_per_s']), 'best', s['best']) for s in json.load(open(sys.argv[1]))['shapes']]" \
       "$DEVICE_RECORDS/$name.json"
}
window_drain() {   # the drain's readings of an honest add with and without the call window (benchmarks/window_drain.py)
  python3 benchmarks/window_drain.py >"$DEVICE_RECORDS/window-drain.json.partial" 2>>"$ERRORS" \
    && mv "$DEVICE_RECORDS/window-drain.json.partial" "$DEVICE_RECORDS/window-drain.json" \
    && python3 -c "import json,sys; [print(r) for r in json.load(open(sys.argv[1]))['results']]" \
       "$DEVICE_RECORDS/window-drain.json"
}
copy_floor() {   # copies of each missed target's tensor, paired with its peer (benchmarks/copy_floor.py)
  python3 benchmarks/copy_floor.py >"$DEVICE_RECORDS/copy-floor.json.partial" 2>>"$ERRORS" \
    && mv "$DEVICE_RECORDS/copy-floor.json.partial" "$DEVICE_RECORDS/copy-floor.json" \
    && python3 -c "import json,sys; [print(f['op'], f['shape'], f['dtype'], f['vs'], r) for f in json.load(open(sys.argv[1]))['floors'] for r in f['results']]" \
       "$DEVICE_RECORDS/copy-floor.json"
}
decode_attention_floor() {   # issue 22's decode shapes: the KV bytes read alone against the best SDPA backend
  # (benchmarks/decode_attention_floor.py)
  python3 benchmarks/decode_attention_floor.py >"$DEVICE_RECORDS/decode-attention-floor.json.partial" 2>>"$ERRORS" \
    && mv "$DEVICE_RECORDS/decode-attention-floor.json.partial" "$DEVICE_RECORDS/decode-attention-floor.json" \
    && python3 -c "import json,sys; [print(f['shape'], 'best', f['best_backend'], round(f['best_of_copy'], 3), name, round(r['speedup'], 3), r['ci95'], round(r['of_copy'], 3)) for f in json.load(open(sys.argv[1]))['floors'] for name, r in f['results'].items()]" \
       "$DEVICE_RECORDS/decode-attention-floor.json"
}
decode_merge() {   # the model's decode attention, merge fused or not, a step's calls in a CUDA graph (benchmarks/decode_merge.py)
  python3 benchmarks/decode_merge.py >"$DEVICE_RECORDS/decode-merge.json.partial" 2>>"$ERRORS" \
    && mv "$DEVICE_RECORDS/decode-merge.json.partial" "$DEVICE_RECORDS/decode-merge.json" \
    && python3 -c "import json,sys; [print(r['case'], 'pdl' if r['pdl'] else '', round(r['two_launches_us_a_call'], 2), round(r['fused_us_a_call'], 2), round(r['speedup'], 3), r['ci95']) for r in json.load(open(sys.argv[1]))['results']]" \
       "$DEVICE_RECORDS/decode-merge.json"
}
decode_floor() {   # a batch-1 decode step's reads alone, in one kernel and in the step's launches (benchmarks/decode_floor.py)
  python3 benchmarks/decode_floor.py >"$DEVICE_RECORDS/decode-floor.json.partial" 2>>"$ERRORS" \
    && mv "$DEVICE_RECORDS/decode-floor.json.partial" "$DEVICE_RECORDS/decode-floor.json" \
    && python3 -c "import json,sys; [print(f['config'], 'bound', round(f['bound_tokens_per_s'], 1), name, round(r['tokens_per_s'], 1), round(r['of_bound'], 4)) for f in json.load(open(sys.argv[1]))['floors'] for name, r in [*f['floors'].items(), ('hello-gpu', f['hello_gpu'])] if name != 'copy']" \
       "$DEVICE_RECORDS/decode-floor.json"
}
reduce_sweep() {   # Triton stage-1 designs against torch.sum at 2^28 (benchmarks/reduce_sum_sweep.py)
  python3 benchmarks/reduce_sum_sweep.py >"$DEVICE_RECORDS/reduce_sum-sweep.json" 2>>"$ERRORS" \
    && python3 -c "import json,sys; [print(r) for r in json.load(open(sys.argv[1]))['configurations']]" \
       "$DEVICE_RECORDS/reduce_sum-sweep.json"
}
agent_resume() {   # agent_resume OP.ROUTE SECONDS [no-counters]: continue a committed run (records/<device>/agent/OP.ROUTE)
  local run_dir="$DEVICE_RECORDS/agent/$1"
  rm -rf "$run_dir" && mkdir -p "$DEVICE_RECORDS/agent" && cp -r "records/$(basename "$DEVICE_RECORDS")/agent/$1" "$run_dir"
  COLUMNS=200 hello-gpu agent resume "$run_dir" --time-budget "$2" ${3:+--$3} 2>>"$ERRORS"
}
profile_one() {   # profile_one OP RUNG SHAPE [DTYPE]: kernel table + counters, added to the operator's profile record
  # $OUT starts empty: seed it with the committed record, so the profile is added to its entries
  # rather than replacing them (the record merges entries by rung and shape).
  local name="$1.${4:-float32}.profile.json"
  [ -f "$DEVICE_RECORDS/$name" ] || [ ! -f "records/$slug/$name" ] || cp "records/$slug/$name" "$DEVICE_RECORDS/"
  COLUMNS=200 hello-gpu profile "$1" "$2" --shape "$3" --dtype "${4:-float32}" --record "$RECORDS" 2>>"$ERRORS"
}
ladder_profile() {   # ladder_profile OP ROUTE SHAPE [DTYPE]: the ladder with its counter columns, printed and kept
  local dtype=${4:-float32}
  COLUMNS=220 hello-gpu ladder "$1" --route "$2" --shapes "$3" --dtype "$dtype" --profile 2>>"$ERRORS" \
    | tee "$DEVICE_RECORDS/ladder-profile.$1.$2.$dtype.txt"
  return "${PIPESTATUS[0]}"
}
agent_rerun() {   # agent_rerun OP.ROUTE: the committed run's own command again (its record's extra.rerun), under today's checks
  local record run_dir="$DEVICE_RECORDS/agent/$1" command
  # The device's own committed record, else the H200's (the command is the same; the lender may give an H100)
  record=$(ls "records/$slug"/agent."$1".*.json records/nvidia-h200/agent."$1".*.json 2>/dev/null | head -n 1)
  [ -n "$record" ] || { echo "no committed agent record for $1 under records/$slug or records/nvidia-h200"; return 1; }
  command=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['extra']['rerun'])" "$record") || return 1
  [[ $command == "hello-gpu agent "* ]] || { echo "unexpected rerun command in $record: $command"; return 1; }
  rm -rf "$run_dir"
  echo "$command"
  COLUMNS=200 $command --run-dir "$run_dir" --record "$RECORDS" 2>>"$ERRORS"
}
model_run() {   # model_run CONFIG BATCH PROMPT NEW BACKENDS: `hello-gpu model run`, its JSON kept as records/<device>/models/
  # It writes into run.*.cut-short/ and moves there only once every backend has run: a run the deadline stops
  # (it writes what it has after each backend) stays apart instead of replacing a complete record when unpacked.
  local folder="$DEVICE_RECORDS/models/run.$1.b$2.p$3.n$4"
  local partial="$folder.cut-short"
  rm -rf "$partial" && mkdir -p "$partial"
  COLUMNS=200 hello-gpu model run --config "$1" --batch "$2" --prompt "$3" --new "$4" --backend "$5" \
    --dtype bfloat16 --out "$partial" 2>>"$ERRORS" || return
  rm -rf "$folder" && mv "$partial" "$folder"
}
model_profile() {   # model_profile CONFIG PHASE [BATCH] [PROMPT] [BACKEND]: `hello-gpu model profile` (default eager)
  local folder="$DEVICE_RECORDS/models/profile.$1.$2.b${3:-1}.p${4:-512}${5:+.$5}"
  mkdir -p "$folder"
  COLUMNS=200 hello-gpu model profile --config "$1" --phase "$2" --batch "${3:-1}" --prompt "${4:-512}" \
    ${5:+--backend "$5"} --dtype bfloat16 --out "$folder" 2>>"$ERRORS"
  # the trace (10-20 MB) travels back beside the records, not in them
  [ ! -f "$folder/trace.json" ] || { mkdir -p "$OUT/traces"; mv "$folder/trace.json" "$OUT/traces/$(basename "$folder").trace.json"; }
}
model_vision() {   # model_vision BATCH SIZE: `hello-gpu model profile --vision` (the convolutional network)
  local folder="$DEVICE_RECORDS/models/profile.vision.b$1.s$2"
  mkdir -p "$folder"
  COLUMNS=200 hello-gpu model profile --vision --batch "$1" --image-size "$2" --dtype bfloat16 --out "$folder" 2>>"$ERRORS"
}
model_agent() {   # model_agent CONFIG PHASE BATCH PROMPT NEW: `hello-gpu agent --model`, its run folder kept
  local folder="$DEVICE_RECORDS/agent/model.$1.$2.b$3.p$4.n$5"
  rm -rf "$folder"
  COLUMNS=200 hello-gpu agent --model "$1" --phase "$2" --batch "$3" --prompt "$4" --new "$5" --dtype bfloat16 \
    --run-dir "$folder" 2>>"$ERRORS"
}
agent_run() {   # agent_run OP ROUTE START [SHAPE] [DTYPE]: the scripted agent from START, its report and record
  local op=$1 route=$2 start=$3 shape=${4:-} dtype=${5:-}
  local run_dir="$DEVICE_RECORDS/agent/$op.$route"
  rm -rf "$run_dir"
  COLUMNS=200 hello-gpu agent "$op" --from "$start" --route "$route" --rounds 16 --patience 8 \
    --time-budget "${HG_AGENT_SECONDS:-120}" ${shape:+--shape "$shape"} ${dtype:+--dtype "$dtype"} \
    --run-dir "$run_dir" --record "$RECORDS" 2>>"$ERRORS"
}

export -f gemv_sweep model_run model_profile model_vision model_agent notebooks_run gpu_tests gpu_tests_k kernelbench cpu_tests doctor overhead call_overhead flush window_drain ladder ladder_add profile_capture softmax_sweep agent_run agent_rerun agent_resume profile_records \
  reduce_sweep rms_sweep dirty_l2 eviction_sweep persistent_sweep copy_floor decode_merge decode_floor decode_attention_floor grid_check profile_one ladder_profile
export DEVICE_RECORDS ERRORS RECORDS slug OUT

for stage in $stages; do
  case $stage in
    doctor) run_stage doctor doctor ;;
    ceilings) run_stage ceilings hello-gpu ceilings --refresh --record "$RECORDS" ;;
    gpu-tests) run_stage gpu-tests gpu_tests ;;
    gpu-tests-k:*)
      IFS=: read -r _ file expression <<<"$stage"
      run_stage "$stage" gpu_tests_k "$file" "${expression//+/ }" ;;
    kernelbench) run_stage kernelbench kernelbench ;;
    gpu-tests:*) run_stage "$stage" gpu_tests ${stage#gpu-tests:} ;;
    cpu-tests) run_stage cpu-tests cpu_tests ;;
    notebooks) run_stage notebooks notebooks_run ;;
    notebooks:*) names=${stage#notebooks:}; run_stage "$stage" notebooks_run ${names//,/ } ;;
    compile-gate) run_stage compile-gate sh -c "hello-gpu compile-check examples src --no-amd | tail -n 3" ;;
    overhead) run_stage overhead overhead ;;
    call-overhead) run_stage call-overhead call_overhead ;;
    reference) run_stage reference sh -c "python3 benchmarks/reference_check.py --records '$RECORDS' 2>>'$ERRORS'" ;;
    flush) run_stage flush flush ;;
    window-drain) run_stage window-drain window_drain ;;
    profile) run_stage profile profile_capture ;;
    softmax-sweep) run_stage softmax-sweep softmax_sweep ;;
    reduce-sweep) run_stage reduce-sweep reduce_sweep ;;
    rms-sweep) run_stage rms-sweep rms_sweep ;;
    dirty-l2) run_stage dirty-l2 dirty_l2 ;;
    eviction-sweep) run_stage eviction-sweep eviction_sweep ;;
    persistent-sweep) run_stage persistent-sweep persistent_sweep ;;
    gemv-sweep) run_stage gemv-sweep gemv_sweep ;;
    gemv-sweep:*) run_stage "$stage" gemv_sweep "${stage#gemv-sweep:}" ;;
    copy-floor) run_stage copy-floor copy_floor ;;
    decode-merge) run_stage decode-merge decode_merge ;;
    decode-floor) run_stage decode-floor decode_floor ;;
    decode-attention-floor) run_stage decode-attention-floor decode_attention_floor ;;
    grid-check) run_stage grid-check grid_check ;;
    profile-records) run_stage profile-records profile_records ;;
    agent:*)
      IFS=: read -r _ op route start shape dtype <<<"$stage"
      run_stage "$stage" agent_run "$op" "$route" "$start" "$shape" "$dtype" ;;
    agent-rerun:*) run_stage "$stage" agent_rerun "${stage#agent-rerun:}" ;;
    model-run:*)
      IFS=: read -r _ config batch prompt new backends <<<"$stage"
      run_stage "$stage" model_run "$config" "$batch" "$prompt" "$new" "$backends" ;;
    model-profile:*)
      IFS=: read -r _ config phase batch prompt backend <<<"$stage"
      run_stage "$stage" model_profile "$config" "$phase" "$batch" "$prompt" "$backend" ;;
    model-vision:*)
      IFS=: read -r _ batch size <<<"$stage"
      run_stage "$stage" model_vision "${batch:-8}" "${size:-224}" ;;
    model-agent:*)
      IFS=: read -r _ config phase batch prompt new <<<"$stage"
      run_stage "$stage" model_agent "$config" "$phase" "${batch:-1}" "${prompt:-512}" "${new:-256}" ;;
    agent-resume:*)
      IFS=: read -r _ run seconds counters <<<"$stage"
      run_stage "$stage" agent_resume "$run" "$seconds" $counters ;;
    profile:*)
      IFS=: read -r _ op rung shape dtype <<<"$stage"
      run_stage "$stage" profile_one "$op" "$rung" "$shape" $dtype ;;
    ladder-profile:*)
      IFS=: read -r _ op route shape dtype <<<"$stage"
      run_stage "$stage" ladder_profile "$op" "$route" "$shape" $dtype ;;
    ladder:*)
      IFS=: read -r _ op dtype shapes route <<<"$stage"
      run_stage "$stage" ladder "$op" "${dtype:-float32}" "$route" ${shapes//,/ } ;;
    ladder-add:*)
      IFS=: read -r _ op dtype shapes route <<<"$stage"
      run_stage "$stage" ladder_add "$op" "${dtype:-float32}" "$route" ${shapes//,/ } ;;
    *) echo "unknown stage $stage"; codes[$stage]=2; order+=("$stage") ;;
  esac
done
[ -d "$OUT/notebooks" ] && tar czf "$OUT/notebooks.tgz" -C "$OUT" notebooks && rm -rf "$OUT/notebooks"

summary=""
for name in "${order[@]}"; do summary+="$name=${codes[$name]} "; done
python3 - "$DEVICE_RECORDS" "$commit" $summary <<'PY'
import json, sys
out, commit, *pairs = sys.argv[1:]
from hello_gpu.runtime.manifest import environment_manifest
codes = dict(pair.split("=", 1) for pair in pairs)
codes = {name: int(code) if code.lstrip("-").isdigit() else code for name, code in codes.items()}
json.dump({"commit": commit, "exit_codes": codes, "environment": environment_manifest()},
          open(f"{out}/session.json", "w"), indent=2)
PY
tar czf "$OUT/records.tgz" -C "$OUT" records && rm -rf "$RECORDS"
[ -s "$ERRORS" ] && { echo "== errors.log (tail)"; tail -n 40 "$ERRORS"; }
echo "exit codes: $summary"
for name in "${order[@]}"; do [ "${codes[$name]}" = 0 ] || exit 1; done
