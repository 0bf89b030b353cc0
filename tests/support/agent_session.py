"""A scratch workspace following the workspace contract, the executor's filtered environment,
and the scripted session every agent test plays: look around, write a training script, run it,
submit. Used by the react agent and real-CLI tests."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from autorl_tui.catalog.agent_command import render_command
from autorl_tui.catalog.agents import AgentSpec
from autorl_tui.catalog.prompts import build_agent_prompt

TRAIN_SCRIPT = """\
import json, os, pathlib
out = pathlib.Path("output/v1"); out.mkdir(parents=True, exist_ok=True)
(out / "config.json").write_text(json.dumps({"trained_on": len(open("data/train.jsonl").readlines())}))
with open(os.environ["METRICS_FILE"], "a") as f:
    f.write(json.dumps({"step": 1, "phase": "train", "metrics": {"loss": 0.5}}) + "\\n")
print("trained and saved output/v1")
"""
LOOK = "ls; cat description.md"
WRITE = f"mkdir -p code && cat > code/train.py <<'PYEOF'\n{TRAIN_SCRIPT}PYEOF"
RUN = "python3 code/train.py"
SUBMIT = ('curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" '
          "-d '{\"model_path\": \"output/v1\"}'")


def make_workspace(root: Path, deadline: float) -> Path:
    ws = root / "ws"
    for d in ("code", "output", "logs", "data", ".home"):
        (ws / d).mkdir(parents=True)
    (ws / "data" / "train.jsonl").write_text('{"id": 1, "prompt": "1+1", "answer": "2"}\n' * 3)
    (ws / "description.md").write_text("# Arithmetic\nTeach the model to add.\n")
    (ws / "instructions.md").write_text("Submit with POST $GRADING_SERVER_URL/submit.\n")
    (ws / "run_meta.json").write_text(json.dumps({"start_time": time.time(), "deadline": deadline}))
    return ws


def executor_env(ws: Path, grading_url: str, deadline: float, path: str | None = None,
                 **spec_env: str) -> dict[str, str]:
    """What the executor passes: the workspace contract variables plus the spec's `env` names."""
    return {"PATH": path or os.environ["PATH"], "HOME": str(ws / ".home"), "LANG": "C.UTF-8",
            "WORKSPACE": str(ws), "TASK": "arith", "GRADING_SERVER_URL": grading_url,
            "METRICS_FILE": str(ws / "logs" / "metrics.jsonl"), "OUTPUT_DIR": str(ws / "output"),
            "DATA_PATH": str(ws / "data"), "RUN_DEADLINE": str(deadline), "HF_HUB_OFFLINE": "1",
            **spec_env}


def run_agent(spec: AgentSpec, ws: Path, env: dict[str, str], values: dict[str, str], timeout: float = 120):
    """Writes prompt.md from the versioned template, renders the spec's command, runs it in the
    workspace. Returns (CompletedProcess, seconds, prompt version)."""
    deadline = float(env["RUN_DEADLINE"])
    text, version = build_agent_prompt((ws / "description.md").read_text(), (ws / "instructions.md").read_text(),
                                       max(1.0, deadline - time.time()), task_name="arith", deadline=deadline)
    (ws / "prompt.md").write_text(text)
    cmd = render_command(spec.command, {"agent_dir": str(spec.agent_dir), "prompt_file": "prompt.md",
                                        "workspace": str(ws), **values})
    started = time.monotonic()
    proc = subprocess.run(["bash", "-c", cmd], cwd=ws, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    return proc, time.monotonic() - started, version


def record_in_store(db_path: Path, agent: str, output_format: str, stdout: str, driver: str):
    """Feed an agent's stdout through the ActionRecorder into a real store, as the run supervisor
    does. Returns (actions, store, run_id)."""
    from autorl_tui.instrument.action_log import ActionRecorder
    from autorl_tui.store.db import Store

    store = Store(db_path)
    run_id = f"r0001-arith-{agent}-s0"
    store.insert("runs", {"id": run_id, "task": "arith", "agent": agent, "model": "tiny", "driver": driver,
                          "budget_s": 120, "state": "running", "created_at": time.time(), "spec": {}})
    rec = ActionRecorder(store, run_id, 1, output_format)
    actions = [a for line in stdout.splitlines() for a in rec.feed(line)]
    actions += rec.finish()
    store.flush()
    return actions, store, run_id
