#!/usr/bin/env bash
# The GPU check (issue 35), one command on a machine with an NVIDIA GPU and no package registry,
# from the repo root, after scripts/gpu-wheels.sh ran on a machine with one (it fills .whl/ and
# .gpu-cache/, which travel with the tree):
#
#     bash scripts/gpu-check.sh            # logs and a summary into $OUT (default ./.gpu-check-out)
#
# Stages, each with its own time limit, each run whatever the previous ones did:
#   setup  the wheels into /tmp/site (PYTHONPATH), bubblewrap unpacked into /tmp/bwrap
#          (AUTORL_BWRAP), an agent runtime at /tmp/agent-rt (a hard-linked copy of python3's own
#          venv plus the agent's packages: AUTORL_AGENT_RUNTIME), imports and the sandbox probe
#   tests  pytest tests/gpu (inference on cuda, placement against real NVML, the vLLM fallback on
#          the GPU, a sandboxed warm grading on the GPU, the reference SFT step on cuda in bf16)
#          and the placement unit tests
#   bench  benchmarks/bench_gpu_grading.py: grading wall per submission vs raw batched inference
#          on the same GPU (transformers), a table
#   demo   data/plans/gpu-demo.yaml end to end (budget shortened to GPU_DEMO_BUDGET, 90s), then
#          scripts/gpu_demo_assert.py: training and every grading on cuda, from the store's events
#          (sandboxed: bubblewrap is found once setup unpacked it; GPU_DEMO_SANDBOXED=1 then makes
#          the assertions also require that the agent ran in the sandbox, its GPU's nodes bound)
# Every stage after setup runs with AUTORL_BWRAP set when setup unpacked bubblewrap (looked up
# before each stage, so the first run's setup counts too).
# Total wall at most ~8 minutes (the stages' limits: 75 + 135 + 75 + 190 s).
# GPU_CHECK_QUICK=1: a second run, fitting ~290 s (limits 55 + 60 + 60 + 115 s; the bench's
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
SUMMARY=()
T0=$(date +%s)

stage() {   # stage NAME LIMIT_S FUNCTION: its output into $OUT/NAME.log; rc and time into the summary
  local name=$1 limit=$2 fn=$3 start rc
  # bubblewrap as setup unpacked it (a machine without it installed): evaluated per stage, after setup ran
  [ -z "${AUTORL_BWRAP:-}" ] && [ -x /tmp/bwrap/usr/bin/bwrap ] && export AUTORL_BWRAP=/tmp/bwrap/usr/bin/bwrap
  start=$(date +%s)
  echo "    AUTORL_BWRAP=${AUTORL_BWRAP:-(unset: bwrap from PATH)}" >"$OUT/$name.log"
  echo "=== $name (limit ${limit}s) $(date -u +%H:%M:%S)"
  timeout -k 10 "$limit" bash -c "$(declare -f wheels "$fn"); $fn" >>"$OUT/$name.log" 2>&1
  rc=$?
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
  $PY -c 'from autorl_tui.isolation.sandbox_bwrap import probe; print("sandbox:", probe())'
  $PY -m autorl_tui.cli doctor --home $HOME_DIR 2>&1 | head -40
  echo "setup done"
}

tests() {
  if [ "$QUICK" = 1 ]; then
    $PY -m pytest -q -p no:cacheprovider -n 0 -rs -s tests/gpu -k "sandbox or nvml or placement or gpus" \
      tests/functional/test_sandbox_identity.py tests/unit/test_gpus.py tests/unit/test_grading_placement.py
  else
    $PY -m pytest -q -p no:cacheprovider -n 0 -rs -s tests/gpu tests/functional/test_sandbox_identity.py \
      tests/unit/test_gpus.py tests/unit/test_grading_placement.py
  fi
}

bench() {
  # Gradings stop starting after BENCH_BUDGET_S, so the table comes within the stage's limit.
  if [ "$QUICK" = 1 ]; then runs=2 budget=30; else runs=3 budget=50; fi
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

STAGES=" ${GPU_CHECK_STAGES:-setup tests bench demo} "   # e.g. GPU_CHECK_STAGES="setup demo" to rerun some
if [ "$QUICK" = 1 ]; then LIMITS=(55 60 60 115); else LIMITS=(75 135 75 190); fi
[[ $STAGES == *" setup "* ]] && stage setup "${LIMITS[0]}" setup
[[ $STAGES == *" tests "* ]] && stage tests "${LIMITS[1]}" tests
[[ $STAGES == *" bench "* ]] && stage bench "${LIMITS[2]}" bench
[[ $STAGES == *" demo "* ]] && stage demo "${LIMITS[3]}" demo
{
  echo "gpu-check summary ($(( $(date +%s) - T0 ))s; logs in $OUT):"
  for line in "${SUMMARY[@]}"; do echo "  $line"; done
} | tee "$OUT/summary.txt"
