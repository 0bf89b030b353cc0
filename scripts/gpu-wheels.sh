#!/usr/bin/env bash
# Brings what a bare GPU machine without a package registry lacks for scripts/gpu-check.sh into
# .whl/ (ignored by git): the wheels of the harness's and the agent's
# packages that such a machine (python 3.12, torch + transformers + accelerate + peft preinstalled)
# does not have, at the versions this project pins or runs with, and bubblewrap's Debian package
# (unpacked there into /tmp, for the agent's and the grader's sandbox). Run HERE, from the repo root:
#     bash scripts/gpu-wheels.sh            # then: ls .whl
# It downloads with pip (no dependencies: the list below is the closure, checked by gpu-check.sh's
# import stage) and apt-get download; nothing is installed on this machine. It also puts the built
# tiny model into .gpu-cache/. The device run then carries both: carry [".whl", ".gpu-cache"].
set -euo pipefail
cd "$(dirname "$0")/.."
PIP=${PIP:-/work/main/.venv/bin/pip}
PYTHON=${PYTHON:-/work/main/.venv/bin/python}
DEST=.whl
mkdir -p "$DEST"
# The harness (pyproject dependencies), the tests (dev extra), the agent's training stack
# (requirements/agent.txt) beyond what the GPU machine has: versions as in the project's venv.
PACKAGES=(
  duckdb==1.5.5 duckdb-extension-sqlite-scanner==1.5.5
  sqlite-utils==4.2.1 sqlite-fts4==1.0.3 click==8.5.1 click-default-group==1.2.4 tabulate==0.10.0
  textual==8.2.8 mdit-py-plugins==0.7.0 linkify-it-py==2.2.0 uc-micro-py==1.0.3 platformdirs==4.14.8
  pytest-asyncio==1.5.0
  trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 fsspec==2026.9.0
  # datasets 5.2 needs huggingface-hub >= 1.31; the GPU machine's transformers 5.17 needs < 2 (ours,
  # 5.24, runs with 2.x): the last 1.x satisfies both (trl 1.16 imports and trains with 5.17 + 1.33)
  huggingface-hub==1.33.0
)
"$PIP" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d "$DEST" "${PACKAGES[@]}"
# py-spy (a static binary in its wheel): gpu-check.sh's watchdog dumps the stacks of a stage's Python
# processes with it before the stage's limit kills them (a stall then says where it was). Kept in
# .whl/tools/ (not a package the stages install).
mkdir -p "$DEST/tools"
"$PIP" download -q --no-deps --only-binary=:all: --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
  -d "$DEST/tools" py-spy==0.4.3
# bubblewrap (Debian 12's 0.8.0: links only libc, libcap2 and libselinux1, which Ubuntu 24.04 has)
if command -v apt-get >/dev/null; then
  (cd "$DEST" && rm -f bubblewrap_*.deb && apt-get download -q bubblewrap >/dev/null 2>&1) \
    || echo "gpu-wheels: apt-get download bubblewrap failed; gpu-check.sh will run without a sandbox" >&2
fi
# The tiny model, built once here (the GPU machine would spend a minute building it again):
# the tests' cache layout (AUTORL_TEST_CACHE), copied from an existing build when there is one.
KEY=$(PYTHONPATH=$PWD "$PYTHON" -c 'from autorl_tui.tasks.arith.tiny_model import source_key; print(source_key())')
MODELS=.gpu-cache/autorl-models
mkdir -p "$MODELS"
find "$MODELS" -maxdepth 1 -name 'tiny-*' ! -name "tiny-$KEY" -exec rm -rf {} +   # stale builds: carry only this one
if [ ! -d "$MODELS/tiny-$KEY" ]; then
  SRC=${AUTORL_TEST_CACHE:-.pytest_cache/autorl-models}/tiny-$KEY
  if [ -d "$SRC" ]; then cp -a "$SRC" "$MODELS/"
  else PYTHONPATH=$PWD "$PYTHON" -c "from pathlib import Path; from autorl_tui.tasks.arith.tiny_model import \
build_tiny_model; build_tiny_model(Path('$MODELS/tiny-$KEY'), seed=0)"; fi
fi
ls -1 "$DEST" "$MODELS"
du -sh "$DEST" .gpu-cache
