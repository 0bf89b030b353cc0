"""Running one AutoRL-Bench folder `--batch` and reading back its run (tests of agent folders)."""

import sqlite3
from pathlib import Path

import pytest


def the_done_run(home: Path, proc):
    """(read-only store connection, the run row, its workspace): asserts the batch exited 0 and
    the run ended `done`, showing the tail of the folder's agent.log when not."""
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    ws = Path(run["workspace"])
    log = (ws / "agent.log").read_text() if (ws / "agent.log").exists() else "(no agent.log)"
    assert proc.returncode == 0 and run["state"] == "done", (run["end_reason"], log[-3000:], proc.stderr[-2000:])
    return db, run, ws


def run_folder(home: Path, folder: Path, overlay: dict, env: dict, budget: str = "240s", name: str = "folder",
               host_ports: list[int] | None = None, task: str = "arith-small"):
    """Write a plan running one AutoRL-Bench folder on `task` (a tests/data/tasks card) with the tiny
    model and the operator overlay `overlay`, run it `--batch` with `env`; returns the CompletedProcess.
    `host_ports`: the host's loopback ports the sandboxed agent may reach (a stand-in LLM's)."""
    import json

    from tests.support.harness import TASKS, cli

    plan = home.parent / f"{name}.yaml"
    raw = {"name": name, "tasks": [task], "agents": [str(folder)], "models": ["tiny"], "seeds": [0],
           "budget": budget, "executor": "local"}
    if overlay:
        raw["agent_overlays"] = {folder.name: overlay}
    if host_ports:
        raw["host_ports"] = list(host_ports)
    plan.write_text(json.dumps(raw))
    return cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, timeout=600, env=env)


COPY_BASE_MODEL = 'mkdir -p output && cp -r "$MODEL_PATH" output/v1 && echo copied'   # a scripted LLM's "training"


@pytest.fixture
def folder_home(tiny_model_dir):
    """A reachable home with the tiny model installed, removed afterwards."""
    from tests.support.harness import home_with_tiny

    yield from home_with_tiny(tiny_model_dir)
