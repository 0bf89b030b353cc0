"""The agent runtime's setting (executors/agent_runtime.py): found where the setting points, refused
with the fix named when missing or when it is the harness's own environment, and a plan that
needs it is refused at validation (not run on the harness's venv). Real virtualenvs, a real CLI."""

import os
import sqlite3
import sys
import venv
from pathlib import Path

import pytest

from autorl_tui.executors.agent_runtime import ENV_VAR, AgentRuntimeMissing, find, location, path_first, report
from tests.support.harness import TASKS, cli, write_plan


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> Path:
    """A virtualenv of this interpreter's installation: the shape of an agent runtime."""
    root = tmp_path_factory.mktemp("rt") / "agent-venv"
    venv.create(root, with_pip=False, symlinks=True)
    return root


def test_found_where_the_setting_points(stand_in, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(stand_in))
    assert location() == stand_in
    rt = find()
    assert rt.root == stand_in and rt.python == stand_in / "bin" / "python"
    assert Path(os.path.realpath(rt.python)).is_relative_to(rt.base)
    assert rt.root in rt.binds()
    for hidden in rt.hidden():
        assert hidden.name in ("site-packages", "dist-packages") and any(hidden.is_relative_to(b) for b in rt.binds())
    r = report()
    assert r["available"] and r["path"] == str(stand_in) and ENV_VAR in r["detail"]


def test_default_is_beside_the_harness_venv(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert location() == Path(sys.prefix).absolute().parent / ".venv-agent"


def test_missing_or_the_harness_own_env_is_refused_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "none"))
    with pytest.raises(AgentRuntimeMissing, match=r"no virtualenv at .*none; build it with `make setup`"):
        find()
    assert not report()["available"] and "make setup" in report()["detail"]
    if sys.prefix != sys.base_prefix:        # the harness runs in a venv: it is not an agent runtime
        with pytest.raises(AgentRuntimeMissing, match="harness's own environment"):
            find(Path(sys.prefix))


def test_path_first_puts_the_runtime_first_and_drops_the_harness(stand_in):
    rt = find(stand_in)
    env = {"PATH": f"{sys.prefix}/bin:/opt/npm/bin:/usr/bin:/bin", "HOME": "/h"}
    out = path_first(env, rt)
    assert out["PATH"].split(":") == [str(rt.bin_dir), "/opt/npm/bin", "/usr/bin", "/bin"]
    assert out["HOME"] == "/h" and env["PATH"].startswith(sys.prefix)   # the input is left as it was


@pytest.mark.subprocess
def test_a_plan_is_refused_at_validation_when_the_runtime_is_missing(tmp_path):
    home = tmp_path / "home"
    missing = tmp_path / "no-agent-venv"
    plan = write_plan(tmp_path / "plan.yaml", budget="60s")
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, env={ENV_VAR: str(missing)})
    message = proc.stdout + proc.stderr
    assert proc.returncode == 2, message
    assert "agent runtime is missing" in message and str(missing) in message and "make setup" in message
    assert "Traceback" not in message
    if (home / "store.db").exists():
        assert sqlite3.connect(home / "store.db").execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
