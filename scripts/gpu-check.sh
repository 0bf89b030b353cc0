#!/usr/bin/env bash
# The GPU check (issue 35), one command on a machine with an NVIDIA GPU and no package registry,
# from the repo root, after scripts/gpu-wheels.sh ran on a machine with one (it fills .whl/ and
# .gpu-cache/, which travel with the tree):
#
#     bash scripts/gpu-check.sh            # logs and a summary into $OUT (default ./.gpu-check-out)
#
# Stages, each with its own time limit, each run whatever the previous ones did, in this order:
#   setup  the wheels into /tmp/site (PYTHONPATH), bubblewrap unpacked into /tmp/bwrap
#          (AUTORL_BWRAP), an agent runtime at /tmp/agent-rt (a hard-linked copy of python3's own
#          venv plus the agent's packages: AUTORL_AGENT_RUNTIME), imports and the sandbox probe
#   demo   data/plans/gpu-demo.yaml end to end (budget shortened to GPU_DEMO_BUDGET, 90s), then
#          scripts/gpu_demo_assert.py: training and every grading on cuda, from the store's events
#          (sandboxed: bubblewrap is found once setup unpacked it; GPU_DEMO_SANDBOXED=1 then makes
#          the assertions also require that the agent ran in the sandbox, its GPU's nodes bound)
#   bench  benchmarks/bench_gpu_grading.py: grading wall per submission vs raw batched inference
#          on the same GPU (transformers), a table
#   tests  pytest tests/gpu (inference on cuda, placement against real NVML, the vLLM fallback on
#          the GPU, the reference SFT step on cuda in bf16, a prompt's context budget on cuda) and
#          the sandbox identity, device-id and placement tests; then, alone, the sandboxed warm
#          grading on the GPU (run 2 of the check stalled there)
# Every stage after setup runs with AUTORL_BWRAP set when setup unpacked bubblewrap (looked up
# before each stage, so the first run's setup counts too). A stage still running 20 s before its
# limit gets a stall dump, $OUT/NAME.stall.txt: the process tree with wait channels, the GPU's
# processes, every Python process's stack (py-spy, Python and native frames) and the tails of the
# grading logs written in the last 5 minutes.
# Total wall at most ~8 minutes (the stages' limits: 75 + 160 + 90 + 150 s; GPU_LIMIT_<stage>=S changes one;
# BENCH_RUNS and BENCH_BUDGET_S the bench's runs and budget).
# GPU_CHECK_QUICK=1: a second run, fitting ~290 s (limits 55 + 115 + 60 + 60 s; the bench's
# gradings stop starting after BENCH_BUDGET_S): `tests` runs only the sandbox, NVML and placement
# tests on the GPU, the sandbox identity test and the device-id and placement unit tests (one
# pytest, -k "sandbox or nvml or placement or gpus", which keeps all of the latter); bench with BENCH_RUNS=2.
set -u
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-$REPO/.gpu-check-out}
mkdir -p "$OUT"
PY=${PY:-python3}
SITE=/tmp/site
HOME_DIR=/tmp/gpu-demo-home
MODELS=$REPO/.gpu-cache/autorl-models
# GPU_CHECK_DRY=1: a dry run on a machine that has the project's venv (PY=.venv/bin/python) and no
# GPU: the wheels are installed with python 3.12 semantics into a scratch folder that is not used,
# the agent runtime is $AUTORL_AGENT_RUNTIME as set, the CUDA tests skip, the demo runs on the CPU
# (its assertions then fail, as they should).
DRY=${GPU_CHECK_DRY:-0}
if [ "$DRY" = 1 ]; then RT=${AUTORL_AGENT_RUNTIME:?GPU_CHECK_DRY=1 needs AUTORL_AGENT_RUNTIME}; SITE=$(mktemp -d)
else RT=/tmp/agent-rt; export PYTHONPATH=$SITE:$REPO; fi
export PYTHONPATH=${PYTHONPATH:-$REPO}
export AUTORL_TEST_CACHE=$MODELS AUTORL_AGENT_RUNTIME=$RT
export REPO OUT PY SITE RT HOME_DIR MODELS DRY
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
QUICK=${GPU_CHECK_QUICK:-0}
export QUICK
# py-spy for the stall dumps (scripts/gpu-wheels.sh put its wheel in .whl/tools/)
PYSPY=/tmp/pyspy/py_spy-0.4.3.data/scripts/py-spy
if [ ! -x $PYSPY ] && ls $REPO/.whl/tools/py_spy-*.whl >/dev/null 2>&1; then
  $PY -m zipfile -e $REPO/.whl/tools/py_spy-*.whl /tmp/pyspy && chmod +x $PYSPY
fi
export PYSPY PYTHONFAULTHANDLER=1
SUMMARY=()
T0=$(date +%s)

stall_dump() {   # stall_dump NAME: where a stage's processes are, before its limit kills them
  local name=$1 f=$OUT/$1.stall.txt p
  {
    echo "=== $name: still running $(date -u +%H:%M:%S), near its limit: where it is"
    ps -eo pid,ppid,pgid,stat,wchan:28,etimes,rss,args --forest | awk '$1 != 2 && $2 != 2' | cut -c1-260
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1
    for p in $(pgrep -f 'python|pytest' | sort -n); do      # in parallel: the limit is 20 s away
      [ "$p" = "$$" ] && continue
      {
        echo "--- pid $p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-200)"
        echo "    wchan $(cat /proc/$p/wchan 2>/dev/null); $(grep -E '^(State|Threads)' /proc/$p/status 2>/dev/null | tr '\n' ' ')"
        if [ -x "$PYSPY" ]; then
          timeout 6 "$PYSPY" dump --pid "$p" 2>&1 | head -60
          timeout 6 "$PYSPY" dump --native --pid "$p" 2>&1 | grep -v '^ *$' | head -40
        fi
      } >"$f.$p" 2>&1 &
    done
    wait
    cat "$f".* 2>/dev/null; rm -f "$f".*
    echo "--- grading logs written in the last 5 minutes"
    for log in $(find /tmp -name worker.log -mmin -5 2>/dev/null | head -8) $(find /tmp -name '.grader-server.log' -mmin -5 2>/dev/null | head -4); do
      echo "    $log:"; tail -n 15 "$log" | sed 's/^/      /'
    done
  } >"$f" 2>&1
  echo "    (stall dump: $f)"
}

stage() {   # stage NAME LIMIT_S FUNCTION: its output into $OUT/NAME.log; rc and time into the summary
  local name=$1 limit=$2 fn=$3 start rc pid waited=0
  # bubblewrap as setup unpacked it (a machine without it installed): evaluated per stage, after setup ran
  [ -z "${AUTORL_BWRAP:-}" ] && [ -x /tmp/bwrap/usr/bin/bwrap ] && export AUTORL_BWRAP=/tmp/bwrap/usr/bin/bwrap
  start=$(date +%s)
  echo "    AUTORL_BWRAP=${AUTORL_BWRAP:-(unset: bwrap from PATH)}" >"$OUT/$name.log"
  echo "=== $name (limit ${limit}s) $(date -u +%H:%M:%S)"
  timeout -k 10 "$limit" bash -c "$(declare -f wheels "$fn"); $fn" >>"$OUT/$name.log" 2>&1 &
  pid=$!
  # The watchdog: 20 s before the limit, a stage still running gets its stacks dumped (py-spy).
  local dumped=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ $dumped = 0 ] && [ "$waited" -ge $(( limit > 40 ? limit - 20 : limit )) ]; then stall_dump "$name"; dumped=1; fi
    sleep 1; waited=$(( $(date +%s) - start ))
  done
  wait "$pid"; rc=$?
  local took=$(( $(date +%s) - start ))
  local verdict=ok
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && verdict="TIMED OUT"
  [ $rc -ne 0 ] && [ "$verdict" = ok ] && verdict="FAILED (rc $rc)"
  SUMMARY+=("$(printf '%-6s %-16s %4ss  %s' "$name" "$verdict" "$took" "$(tail -n 1 "$OUT/$name.log" | cut -c1-150)")")
  tail -n 25 "$OUT/$name.log"
}

wheels() {   # wheels TARGET WHEEL...: pip --target without a registry; without pip, the wheels unzipped
  local target=$1; shift
  if $PY -m pip --version >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$target" "$@"
  else
    echo "no pip in $PY: unzipping the wheels into $target (what they replace removed first: never
    written through, since the agent runtime's files may be hard links to python3's own)"
    for w in "$@"; do
      $PY -c 'import sys, zipfile; print("\n".join(sorted({n.split("/")[0] for n in zipfile.ZipFile(sys.argv[1]).namelist()})))' \
        "$w" | while read -r top; do [ -n "$top" ] && rm -rf "${target:?}/$top"; done
      $PY -m zipfile -e "$w" "$target" || return 1
    done
  fi
}

setup() {
  set -x
  nvidia-smi -L; nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv
  $PY -c 'import sys, torch, transformers; print(sys.version.split()[0], sys.prefix, "torch", torch.__version__,
"cuda", torch.cuda.is_available(), "transformers", transformers.__version__)'
  mkdir -p $SITE
  if [ "$DRY" = 1 ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --target $SITE $REPO/.whl/*.whl || exit 1
    ls $SITE; echo "dry run: the agent runtime is $RT"
  else
    wheels $SITE $REPO/.whl/*.whl || exit 1
  fi
  if ls $REPO/.whl/bubblewrap_*.deb >/dev/null 2>&1 && [ ! -x /tmp/bwrap/usr/bin/bwrap ]; then
    dpkg -x $REPO/.whl/bubblewrap_*.deb /tmp/bwrap
  fi
  # The agent runtime: python3's venv (torch with CUDA, transformers, accelerate, peft) hard-linked
  # into a venv of its own (the engine refuses the harness's own), plus trl and datasets.
  prefix=$($PY -c 'import sys; print(sys.prefix)')
  if [ "$DRY" != 1 ] && [ ! -e $RT/pyvenv.cfg ]; then
    rm -rf $RT; mkdir -p $RT
    if [ "$(stat -c %d "$prefix")" = "$(stat -c %d /tmp)" ]; then
      rmdir $RT; cp -al "$prefix" $RT                       # same filesystem: hard links, instant
    else                                                     # else an overlay (writes go to /tmp)
      mkdir -p /tmp/agent-rt.upper /tmp/agent-rt.work
      mount -t overlay overlay -o lowerdir="$prefix",upperdir=/tmp/agent-rt.upper,workdir=/tmp/agent-rt.work $RT \
        || { rmdir $RT; cp -a "$prefix" $RT; }               # or a copy (slow: GBs of CUDA libraries)
    fi
  fi
  purelib=$($RT/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  [ "$DRY" = 1 ] || wheels "$purelib" \
    $REPO/.whl/trl-*.whl $REPO/.whl/datasets-*.whl $REPO/.whl/dill-*.whl $REPO/.whl/multiprocess-*.whl \
    $REPO/.whl/fsspec-*.whl $REPO/.whl/huggingface_hub-*.whl || exit 1
  env -u PYTHONPATH $RT/bin/python -c 'import torch, trl, datasets, peft, transformers, huggingface_hub as h
from trl import SFTTrainer, GRPOTrainer
print("agent runtime:", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__,
"trl", trl.__version__, "datasets", datasets.__version__, "huggingface_hub", h.__version__)' || exit 1
  $PY -c 'import duckdb, sqlite_utils, textual, trl, datasets, pytest_asyncio, autorl_tui.cli; print("harness imports ok")' || exit 1
  mkdir -p $MODELS
  # The tiny model's cache key includes torch's version: the build carried from the CPU machine
  # serves under this machine's key too (the tests and the bench would spend ~40 s each building it).
  key=$($PY -c 'from autorl_tui.tasks.arith.tiny_model import source_key; print(source_key())')
  carried=$(ls -d $MODELS/tiny-* 2>/dev/null | head -1)
  if [ ! -d "$MODELS/tiny-$key" ] && [ -n "$carried" ]; then
    cp -a "$carried" "$MODELS/tiny-$key" && echo "tiny model: the carried $(basename "$carried") serves as tiny-$key here"
  fi
  $PY -c 'from autorl_tui.isolation.sandbox_bwrap import probe; print("sandbox:", probe())'
  $PY -m autorl_tui.cli doctor --home $HOME_DIR 2>&1 | head -40
  echo "setup done"
}

tests() {
  if [ -n "${GPU_TESTS_K:-}" ]; then      # one selection of tests/gpu only, e.g. GPU_TESTS_K=sandboxed_warm
    $PY -m pytest -q -p no:cacheprovider -n 0 -rs -s tests/gpu -k "$GPU_TESTS_K"
    return
  fi
  # The sandboxed warm grading last, alone: if it stalls (as in run 2) the others have been measured.
  if [ "$QUICK" = 1 ]; then
    $PY -m pytest -q -p no:cacheprovider -n 0 -rs -s tests/gpu -k "(sandbox or nvml or placement or gpus) and not sandboxed_warm" \
      tests/functional/test_sandbox_identity.py tests/unit/test_gpus.py tests/unit/test_grading_placement.py
  else
    $PY -m pytest -q -p no:cacheprovider -n 0 -rs -s tests/gpu -k "not sandboxed_warm" tests/functional/test_sandbox_identity.py \
      tests/unit/test_gpus.py tests/unit/test_grading_placement.py
  fi
  first=$?
  $PY -m pytest -q -p no:cacheprovider -n 0 -rs -s tests/gpu -k sandboxed_warm
  second=$?
  echo "pytest exit codes: $first (all but the sandboxed warm grading), $second (the sandboxed warm grading)"
  [ $first = 0 ] && [ $second = 0 ]
}

bench() {
  # Gradings stop starting after BENCH_BUDGET_S, so the table comes within the stage's limit.
  if [ "$QUICK" = 1 ]; then runs=2 budget=30; else runs=3 budget=50; fi
  runs=${BENCH_RUNS:-$runs} budget=${BENCH_BUDGET_S:-$budget}
  BENCH_GPU_REQUIRED=1 BENCH_RUNS=$runs BENCH_BUDGET_S=$budget BENCH_SETTLE_S=0.5 BENCH_JSON=$OUT/bench.json \
    $PY benchmarks/bench_gpu_grading.py
}

demo() {
  rm -rf $HOME_DIR; mkdir -p $HOME_DIR/models
  tiny=$(ls -d $MODELS/tiny-* 2>/dev/null | head -1)
  [ -n "$tiny" ] && cp -a "$tiny" $HOME_DIR/models/tiny
  sed "s/^budget: .*/budget: ${GPU_DEMO_BUDGET:-90s}/" data/plans/gpu-demo.yaml > /tmp/gpu-demo.yaml
  if ! $PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "no CUDA here: the demo runs on the CPU (gpus_per_run: 0); its assertions must fail"
    sed -i "s/^gpus_per_run: .*/gpus_per_run: 0/" /tmp/gpu-demo.yaml
  fi
  if $PY -c 'from autorl_tui.isolation.sandbox_bwrap import probe; import sys; print("sandbox:", probe()); sys.exit(0 if probe()[0] else 1)'; then
    export GPU_DEMO_SANDBOXED=1     # the assertions then require the agent's isolation to be bwrap
  else
    echo "no sandbox here: the demo's agent runs unisolated (isolation: none)"
    echo "isolation: none" >> /tmp/gpu-demo.yaml
  fi
  cat /tmp/gpu-demo.yaml
  $PY -m autorl_tui.cli --plain --batch /tmp/gpu-demo.yaml --home $HOME_DIR
  echo "batch exit code $?"
  $PY scripts/gpu_demo_assert.py $HOME_DIR
}

# The demo before the bench and the tests: a stall in a grading started by a process that holds a
# CUDA context (the bench's, pytest's) then cannot keep the end-to-end run from being measured.
STAGES=" ${GPU_CHECK_STAGES:-setup demo bench tests} "   # e.g. GPU_CHECK_STAGES="setup demo" to rerun some
if [ "$QUICK" = 1 ]; then declare -A LIMIT=([setup]=55 [demo]=115 [bench]=60 [tests]=60)
else declare -A LIMIT=([setup]=75 [demo]=160 [bench]=90 [tests]=150); fi
for name in $STAGES; do
  [[ " setup demo bench tests " == *" $name "* ]] || { echo "gpu-check: no stage '$name' (setup demo bench tests)"; exit 2; }
  override=GPU_LIMIT_$name      # e.g. GPU_LIMIT_bench=110 with BENCH_BUDGET_S=80
  stage "$name" "${!override:-${LIMIT[$name]}}" "$name"
done
{
  echo "gpu-check summary ($(( $(date +%s) - T0 ))s; logs in $OUT):"
  for line in "${SUMMARY[@]}"; do echo "  $line"; done
} | tee "$OUT/summary.txt"
