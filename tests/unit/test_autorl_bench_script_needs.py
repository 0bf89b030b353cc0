"""What an AutoRL-Bench agent folder's start script really needs, read from the script
(catalog/script_scan.py): the agent CLI it calls, the variables it reads, the external checkout it
`cd`s into; `autorl-tui agents` reports them and a plan naming a folder that lacks one is refused
at validation, naming the missing piece, before anything is prepared. The folders are the tests'
own (tests/data/autorl_bench/agents/), shaped like AutoRL-Bench's codex and opencode/openhands."""

import json
import os
import subprocess
import sys

import pytest

from autorl_tui.catalog.autorl_bench_agents import load_agent_folder
from autorl_tui.catalog.readiness import agent_readiness
from autorl_tui.catalog.script_scan import scan_script
from tests.support.harness import REPO, TASKS, write_plan

AGENTS = REPO / "tests" / "data" / "autorl_bench" / "agents"
CODEX, PIPELINE = AGENTS / "codex_provider", AGENTS / "pipeline_checkout"
OPENCODE = AGENTS / "opencode_shaped"


def test_the_script_says_which_cli_variables_and_checkout_it_needs():
    codex = scan_script((CODEX / "start.sh").read_text())
    assert codex.clis == ["codex"] and codex.checkouts == []
    assert codex.optional == ["CODEX_PROVIDER", "CODEX_MODEL", "CODEX_TIMEOUT"] and codex.reads == []
    pipeline = scan_script((PIPELINE / "start.sh").read_text())
    assert pipeline.clis == [] and pipeline.checkouts == ["${PIPELINE_RL_ROOT:-$HOME/pipeline-rl}"]
    assert pipeline.reads == ["LLM_API_KEY", "OPENAI_API_BASE"]      # the contract's own names are not listed
    # the gemini shape: the CLI through a variable (GEMINI="${GEMINI_BIN:-gemini}"), on a `\`-continued line
    gemini = scan_script((AGENTS / "gemini_trusted" / "start.sh").read_text())
    assert gemini.clis == ["gemini"] and gemini.optional == ["GEMINI_BIN", "GEMINI_MODEL", "GEMINI_TIMEOUT"]
    # the probe (curl, jq, its own lower-case variables) needs nothing beyond the contract
    probe = scan_script((AGENTS / "probe" / "start.sh").read_text())
    assert probe.clis == probe.reads == probe.checkouts == []
    # heredoc bodies are data: a command word there is not a call, an expansion is a read
    text = 'cat > c.json <<EOF\ncodex is named here\n{"base": "${API_BASE}"}\nEOF\nexec gemini -p "$P"\n'
    got = scan_script(text)
    assert got.clis == ["gemini"] and got.reads == ["API_BASE", "P"]


def test_readiness_names_the_missing_cli_and_checkout(tmp_path):
    spec = load_agent_folder(CODEX)
    assert spec.needs == ["bash", "codex"] and spec.to_dict()["script"]["clis"] == ["codex"]
    bare = agent_readiness(spec, {"PATH": "/usr/bin:/bin"})
    assert not bare["ready"]
    assert bare["missing_executables"] == ["codex"] and "codex" in bare["problems"][0]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "codex").write_text("#!/bin/sh\nexit 0\n")
    (bindir / "codex").chmod(0o755)
    assert agent_readiness(spec, {"PATH": f"{bindir}:/usr/bin:/bin"})["ready"]

    pipe = load_agent_folder(PIPELINE)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "nohome")}
    r = agent_readiness(pipe, env)
    assert not r["ready"] and "PIPELINE_RL_ROOT" in r["problems"][0] and "pipeline-rl" in r["problems"][0]
    assert r["script"]["unset"] == ["LLM_API_KEY", "OPENAI_API_BASE"]
    checkout = tmp_path / "pipeline-rl"
    checkout.mkdir()
    assert agent_readiness(pipe, dict(env, PIPELINE_RL_ROOT=str(checkout)))["ready"]


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "autorl_tui", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})))


@pytest.mark.subprocess
def test_agents_command_lists_what_the_folder_lacks(tmp_path):
    proc = _cli("agents", str(CODEX), str(PIPELINE), str(OPENCODE), "--json",
                env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    rows = {json.loads(l)["name"]: json.loads(l) for l in proc.stdout.splitlines()}
    assert not rows["codex_provider"]["ready"] and rows["codex_provider"]["missing_executables"] == ["codex"]
    # its pipeline drives `opencode`, which its start script never names
    assert rows["opencode_shaped"]["missing_executables"] == ["opencode"]
    assert not rows["pipeline_checkout"]["ready"] and "cd ${PIPELINE_RL_ROOT" in rows["pipeline_checkout"]["problems"][0]


@pytest.mark.subprocess
def test_a_plan_naming_a_folder_without_its_checkout_is_refused_before_anything_is_prepared(tmp_path):
    home = tmp_path / "home"
    plan = write_plan(tmp_path / "plan.yaml", agents=[str(PIPELINE)], budget="60s")
    proc = _cli("--home", str(home), "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan),
                env={"HOME": str(tmp_path)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pipeline_checkout" in proc.stderr and "PIPELINE_RL_ROOT" in proc.stderr and "Traceback" not in proc.stderr
    assert not (home / "workspaces").exists() or not any((home / "workspaces").iterdir())


def test_overlays_in_a_plan_are_checked_whole_with_one_line_errors(tmp_path):
    import pytest

    from autorl_tui.catalog.overlays import overlay_env, parse_overlays, place_home_files
    from autorl_tui.catalog.plans import parse_plan
    from autorl_tui.exitcodes import UsageError

    cfg = tmp_path / "config.toml"
    cfg.write_text('model_provider = "local"\n')
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    plan = parse_plan(json.dumps({"tasks": ["arith-small"], "agents": [str(CODEX), "baseline-copy"], "budget": "1m",
                                  "agent_overlays": {"codex_provider": {
                                      "env": ["CODEX_PROVIDER"], "home_files": {".codex/config.toml": "config.toml"},
                                      "binds": ["checkout"]}}}), str(tmp_path / "plan.yaml"))
    overlay = {r.agent: r.options.get("overlay") for r in plan.runs}
    assert overlay[str(CODEX)] == {"env": ["CODEX_PROVIDER"], "home_files": {".codex/config.toml": str(cfg)},
                                   "binds": [str(checkout)], "env_file": None, "copies": {}}
    assert overlay["baseline-copy"] is None            # only the agent it names
    bad = [({"x": {"env": ["A"]}}, "not an agent of this plan"),
           ({"codex_provider": {"env": ["TASK"]}}, "the harness's own"),
           ({"codex_provider": {"env": ["no-name"]}}, "not a variable name"),
           ({"codex_provider": {"home_files": {"../x": "config.toml"}}}, "inside the agent's home"),
           ({"codex_provider": {"home_files": {".x": "missing.toml"}}}, "is not a file"),
           ({"codex_provider": {"binds": ["/"]}}, "whole filesystem"),
           ({"codex_provider": {"binds": ["nowhere"]}}, "is not a folder"),
           ({"codex_provider": {"mounts": []}}, "must be a mapping with keys")]
    for overlays, message in bad:
        with pytest.raises(UsageError, match=message):
            parse_plan(json.dumps({"tasks": ["arith-small"], "agents": [str(CODEX)], "budget": "1m",
                                   "agent_overlays": overlays}), str(tmp_path / "plan.yaml"))
    ov = parse_overlays({"a": {"env": ["ONLY_THIS"], "home_files": {".codex/config.toml": str(cfg)}}}, "p", tmp_path)["a"]
    assert overlay_env(ov, {"ONLY_THIS": "1", "OTHER": "2"}) == {"ONLY_THIS": "1"}      # never the whole environment
    with pytest.raises(UsageError, match="ONLY_THIS, unset"):
        overlay_env(ov, {})
    agent_home = tmp_path / "home"
    (agent_home / ".codex").mkdir(parents=True)
    (agent_home / ".codex" / "config.toml").symlink_to(tmp_path / "victim")     # planted by the agent
    assert place_home_files(ov, agent_home) == [".codex/config.toml"]
    assert (agent_home / ".codex" / "config.toml").read_text() == cfg.read_text() and not (tmp_path / "victim").exists()
