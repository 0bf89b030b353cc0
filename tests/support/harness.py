"""Helpers for functional tests: a home the agent user can reach, the tiny model built once per
session, and the real CLI run as a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEST_AGENTS = REPO / "tests" / "agents"
TASKS = REPO / "tests" / "data" / "tasks"


def make_reachable_home(prefix: str = "autorl-test-") -> Path:
    """A home under a 0711 folder so that an agent running as an unprivileged user can reach its
    workspace (pytest's tmp folders are 0700)."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(base, 0o711)
    return base / "home"


def cli(*args: str, home: Path | None = None, timeout: float = 600, env: dict | None = None,
        check: bool = False) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "autorl_tui"]
    if home is not None:
        cmd += ["--home", str(home)]
    cmd += list(args)
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(REPO)
    full_env.update(env or {})
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=REPO)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def install_model(model_dir: Path, home: Path, name: str = "tiny") -> None:
    """Copy a model built once per session (the `tiny_model_dir` fixture) into a fresh home."""
    dst = home / "models" / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not dst.exists():
        shutil.copytree(model_dir, dst)


def card_without_code(card: dict) -> dict:
    """A shipped card (parsed) ready to be copied alone, without its folder's code: what it names
    folder-relative (`provider:materialize`, `normalize:normalize`) is named by the name its folder
    registers (`provides:`) instead, and the copy declares nothing itself."""
    registered = {ref: name for declared in (card.pop("provides", None) or {}).values()
                  for name, ref in declared.items()}

    def named(node):
        if isinstance(node, dict):
            return {key: named(value) for key, value in node.items()}
        if isinstance(node, list):
            return [named(value) for value in node]
        return registered.get(node, node) if isinstance(node, str) else node
    return named(card)


def write_plan(path: Path, **fields) -> Path:
    import yaml

    plan = {"name": "test", "tasks": ["arith-small"], "agents": ["baseline-copy"], "models": ["tiny"], "seeds": [0],
            "budget": "60s", "executor": "local"}
    plan.update(fields)
    path.write_text(yaml.safe_dump(plan))
    return path


def load_json(path: Path):
    return json.loads(Path(path).read_text())


def home_with_tiny(model_dir: Path):
    """For a fixture: `yield from home_with_tiny(tiny_model_dir)` gives a reachable home with the
    session's tiny model installed, removed afterwards (kept when KEEP_HOME is set, to look at)."""
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(model_dir, home)
    yield home
    if os.environ.get("KEEP_HOME"):
        print("home kept:", home)
    else:
        shutil.rmtree(home.parent, ignore_errors=True)


def sandbox_leftovers(attempt_dir: Path, zombies: bool = False) -> list:
    """Processes still alive as the sandbox uid of a finished local attempt (`runs/<id>/attempt-N`)
    that were started while its shim held that uid's lease (until it wrote exit.json and exited).
    Once the shim is gone the uid is free and may already run another sandbox (a concurrent test's
    run or grader), so later processes are not its; the 2 s margin covers psutil's start times,
    which rest on a whole-second boot time."""
    import psutil

    uid = load_json(attempt_dir / "shim.json")["uid"]
    assert uid is not None and uid != os.getuid(), uid
    lease_end = load_json(attempt_dir / "exit.json")["ended_at"]
    left = []
    for p in psutil.process_iter(["uids", "status", "create_time"]):
        if p.info["uids"] and p.info["uids"].real == uid and p.info["create_time"] < lease_end - 2 and (
                zombies or p.info["status"] != psutil.STATUS_ZOMBIE):
            left.append(p)
    return left
