"""What an operator supplies to a pipeline folder (AutoRL-Bench's opencode/openhands) beyond named
variables: `env_file` (its `.env`), `copies` (a private writable copy of a checkout), and the refusal
of a bind or copy that would show the agent the store or held-out data."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autorl_tui.catalog.env_file import read_env_file
from autorl_tui.catalog.overlays import exposure, overlay_env, parse_overlays, place_copies
from autorl_tui.exitcodes import UsageError
from tests.support.harness import REPO, TASKS

PIPELINE = REPO / "tests" / "data" / "autorl_bench" / "agents" / "pipeline_checkout"


def test_an_env_file_reads_as_its_folders_load_it_and_refuses_what_it_cannot(tmp_path):
    env = tmp_path / ".env"
    env.write_text("# RD-Agent's .env\nOPENAI_API_KEY=sk-1\nexport OPENAI_API_BASE='http://h:1/v1'\n\n"
                   'CHAT_MODEL="gpt-5"\nEMPTY=\n')
    assert read_env_file(env) == {"OPENAI_API_KEY": "sk-1", "OPENAI_API_BASE": "http://h:1/v1", "CHAT_MODEL": "gpt-5",
                                  "EMPTY": ""}
    env.write_text("A=1\nthis is not a pair\n")
    with pytest.raises(UsageError, match=r"\.env:2: expected NAME=value"):
        read_env_file(env)
    env.write_text("A=1\nCUDA_VISIBLE_DEVICES=0,1\n")
    with pytest.raises(UsageError, match=r"\.env:2: CUDA_VISIBLE_DEVICES is the harness's own"):
        parse_overlays({"a": {"env_file": str(env)}}, "p", tmp_path)


def test_env_file_and_named_variables_join_nothing_else(tmp_path):
    env = tmp_path / "rd.env"
    env.write_text("OPENAI_API_KEY=from-file\nTRAINING_PYTHON=/opt/py/bin/python\n")
    ov = parse_overlays({"a": {"env_file": "rd.env", "env": ["OPENAI_API_KEY"]}}, "p", tmp_path)["a"]
    assert ov["env_file"] == str(env)
    got = overlay_env(ov, {"OPENAI_API_KEY": "from-shell", "HARNESS_SECRET": "x"})
    assert got == {"OPENAI_API_KEY": "from-shell", "TRAINING_PYTHON": "/opt/py/bin/python"}
    with pytest.raises(UsageError, match="is not a file"):
        parse_overlays({"a": {"env_file": "missing.env"}}, "p", tmp_path)


def test_copies_are_private_fresh_and_named_by_their_variable(tmp_path):
    checkout = tmp_path / "opencode-rl"
    (checkout / "pipeline").mkdir(parents=True)
    (checkout / "main.py").write_text("print('hi')\n")
    (checkout / "pipeline" / "link").symlink_to("../main.py")
    ov = parse_overlays({"a": {"copies": {"OPENCODE_RL_ROOT": "opencode-rl"}}}, "p", tmp_path)["a"]
    home = tmp_path / "agent-home"
    home.mkdir()
    (home / "opencode-rl").symlink_to(tmp_path / "victim")         # planted by an earlier attempt's agent
    (tmp_path / "victim").mkdir()
    assert place_copies(ov, home) == {"OPENCODE_RL_ROOT": str(home / "opencode-rl")}
    assert (home / "opencode-rl" / "main.py").read_text() == "print('hi')\n"
    assert os.readlink(home / "opencode-rl" / "pipeline" / "link") == "../main.py"      # a link stays a link
    (home / "opencode-rl" / "main.py").write_text("edited")        # the agent writes its copy ...
    place_copies(ov, home)                                           # ... the next attempt gets a fresh one
    assert (home / "opencode-rl" / "main.py").read_text() == "print('hi')\n" == (checkout / "main.py").read_text()
    assert list((tmp_path / "victim").iterdir()) == []
    for copies, message in [({"TASK": "opencode-rl"}, "the harness does not set"),
                            ({"X": "nowhere"}, "is not a folder"), ({"X": "/"}, "whole filesystem")]:
        with pytest.raises(UsageError, match=message):
            parse_overlays({"a": {"copies": copies}}, "p", tmp_path)


def test_a_bind_or_copy_holding_or_inside_a_protected_folder_is_refused(tmp_path):
    home, tasks, other = tmp_path / "engine-home", tmp_path / "tasks", tmp_path / "checkout"
    for d in (home / "cache", tasks / "t1", other):
        d.mkdir(parents=True)
    protected = [("the engine's home", home), ("a task folder", tasks)]
    assert exposure({"binds": [str(other)]}, protected) is None
    assert "the engine's home" in exposure({"binds": [str(tmp_path)]}, protected)           # holds it
    assert "the engine's home" in exposure({"binds": [str(home / "cache")]}, protected)      # inside it
    assert "copies.X" in exposure({"copies": {"X": str(tasks / "t1")}}, protected)
    (tmp_path / "alias").symlink_to(home)                                                  # through a link too
    assert exposure({"binds": [str(tmp_path / "alias")]}, protected)


@pytest.mark.subprocess
def test_a_plan_binding_the_engines_home_is_refused_at_validation(tmp_path):
    home = tmp_path / "home"
    checkout = tmp_path / "pipeline-rl"
    checkout.mkdir()
    plan = tmp_path / "plan.json"
    for binds, shown in ([str(tmp_path)], "the engine's home"), ([str(TASKS)], "a task folder"):
        plan.write_text(json.dumps({"tasks": ["arith-small"], "agents": [str(PIPELINE)], "budget": "60s",
                                    "models": ["tiny"], "agent_overlays": {"pipeline_checkout": {
                                        "env": ["PIPELINE_RL_ROOT", "LLM_API_KEY"], "binds": binds}}}))
        proc = subprocess.run([sys.executable, "-m", "autorl_tui", "--home", str(home), "--tasks-dir", str(TASKS),
                               "--plain", "--batch", str(plan)], capture_output=True, text=True, timeout=300, cwd=REPO,
                              env=dict(os.environ, PYTHONPATH=str(REPO), HOME=str(tmp_path),
                                       PIPELINE_RL_ROOT=str(checkout), LLM_API_KEY="k"))
        assert proc.returncode == 2 and shown in proc.stderr and "binds" in proc.stderr, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        assert not (home / "workspaces").exists() or not any((home / "workspaces").iterdir())
