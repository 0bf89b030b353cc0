# autorl-tui — set-up, demo, tests, benchmarks. Every target installs what it needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.autorl-setup-stamp
TORCH_STAMP := $(VENV)/.autorl-torch-stamp
# The agents' own Python (executors/agent_runtime.py): the training stack, nothing of the harness;
# beside $(VENV), where the engine looks for it unless AUTORL_AGENT_RUNTIME says otherwise.
AGENT_VENV ?= $(dir $(VENV)).venv-agent
AGENT_STAMP := $(AGENT_VENV)/.autorl-agent-stamp
TORCH_VERSION ?= 2.13.0
DEMO_HOME ?= $(CURDIR)/.autorl-home
PLAN ?= data/plans/demo.yaml
PYTEST_ARGS ?=
# Test files run in parallel worker processes (pytest-xdist), a whole file per worker so that its
# module fixtures (one engine batch shared by its tests) run once. TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

.PHONY: setup demo lint test test-long test-fast test-unit bench clean-home system-deps

# The two environments build side by side (make -j$(SETUP_JOBS)): pip waits on downloads and the disk
# as much as on a CPU. torch goes into .venv first, so that .venv-agent takes the same wheel from
# pip's cache instead of downloading it a second time at once. SETUP_JOBS=1: one after the other.
SETUP_JOBS ?= 2
setup:
	@$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(STAMP) $(AGENT_STAMP)

# pip says what it collects and installs (set-up takes minutes; quiet, it looked hung). PIP_Q=-q quiets it.
PIP_Q ?=
# CPU torch from local disk unless an NVIDIA GPU is present (an unpinned torch pulls a CUDA build).
define install_torch
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	  echo "NVIDIA GPU found: default torch build"; $(1) -m pip install $(PIP_Q) torch; \
	else \
	  echo "no NVIDIA GPU: CPU torch $(TORCH_VERSION)"; $(1) -m pip install $(PIP_Q) torch==$(TORCH_VERSION); \
	fi
endef

$(TORCH_STAMP): Makefile
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(call install_torch,$(PY))
	@touch $(TORCH_STAMP)

$(STAMP): $(TORCH_STAMP) pyproject.toml Makefile
	$(PIP) install $(PIP_Q) -e ".[train,tasks,docker,ray,dev]"
	@touch $(STAMP)

# The agent runtime: its own venv beside $(VENV), from requirements/agent.txt (docs/security.md).
$(AGENT_STAMP): $(TORCH_STAMP) requirements/agent.txt Makefile
	@test -x $(AGENT_VENV)/bin/python || python3 -m venv $(AGENT_VENV)
	$(call install_torch,$(AGENT_VENV)/bin/python)
	$(AGENT_VENV)/bin/python -m pip install $(PIP_Q) -r requirements/agent.txt
	@touch $(AGENT_STAMP)

# Debian packages the tests use for real parts (Docker Engine, headless Chromium, tmux). Needs root.
system-deps:
	@bash scripts/system-deps.sh

demo: setup
	$(PY) -m autorl_tui --home $(DEMO_HOME) demo --plan $(PLAN)

# ruff (ruff.toml) and mypy (mypy.ini) over autorl_tui/: they need .venv only. `make test` (what CI
# runs) runs it before the tests, while .venv-agent may still be installing (mypy without its cache
# takes about a minute of one CPU: it reads torch's, transformers' and ray's typed sources).
lint: $(STAMP)
	$(VENV)/bin/ruff check autorl_tui
	$(VENV)/bin/mypy

# --durations=25: the 25 slowest tests, after the summary (where the suite's time goes).
test:
	@$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(STAMP) $(AGENT_STAMP) lint
	$(PY) -m pytest -q -rs $(XDIST) -m "not long" --durations=25 $(PYTEST_ARGS)

# The reference agent trained under the engine on WebShop and DeepSearchQA (15-30 minutes on 2 cores).
test-long: setup
	$(PY) -m pytest -q -rs $(XDIST) -m long $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -q -rs $(XDIST) -m "not slow and not docker" $(PYTEST_ARGS)

# The unit tests that start no program and load no model (tests/unit/test_unit_is_fast.py keeps it so).
test-unit: setup
	$(PY) -m pytest -q -rs $(XDIST) tests/unit -m "not slow and not subprocess and not long" $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/run_all.py

clean-home:
	rm -rf $(DEMO_HOME)
