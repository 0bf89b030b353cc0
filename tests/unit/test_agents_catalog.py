"""Agent specs, command templates, the versioned prompt, readiness and `autorl-tui agents`."""

import importlib.util
import json
import shlex
import stat
import sys

import pytest

from autorl_tui.catalog.agent_command import placeholders_used, render_command
from autorl_tui.catalog.agents import builtin_agents_dir, list_agents, load_agent_spec
from autorl_tui.catalog.prompts import build_agent_prompt
from autorl_tui.catalog.readiness import agent_readiness
from autorl_tui.cli import main
from autorl_tui.exitcodes import UsageError

STACKS = {"claude-code": "claude_stream_json", "codex": "codex_json", "gemini-cli": "gemini_stream_json",
          "opencode": "opencode_json", "openhands": "openhands", "react": "react_json"}


def test_builtin_specs_load_with_their_formats():
    specs = {n: s for n, s in list_agents([builtin_agents_dir()]).items() if n in STACKS}
    assert {n: s.output_format for n, s in specs.items()} == STACKS
    for name, spec in specs.items():
        assert spec.network == "bridge", name
        assert spec.driver.get("required") is True, name
        assert {"driver", "prompt_file"} <= placeholders_used(spec.command), name
        if name != "react":
            assert spec.needs and (spec.install.get("npm") or spec.install.get("pip")), name
            assert spec.raw["requires_env"], name


def test_render_command_quotes_values_and_leaves_other_braces():
    cmd = "run {prompt_file} -m {driver} -c 'x={a=1}' {driver_url}"
    out = render_command(cmd, {"prompt_file": "my prompt.md", "driver": "m;rm -rf /", "driver_url": None})
    assert shlex.split(out) == ["run", "my prompt.md", "-m", "m;rm -rf /", "-c", "x={a=1}", ""]
    assert render_command(["a", "{driver}"], {"driver": "x y"}) == ["a", "x y"]
    with pytest.raises(UsageError, match="string or a list"):
        render_command({"a": 1}, {})


def test_prompt_is_versioned_and_carries_task_and_instructions():
    text, version = build_agent_prompt("Teach it to add.", "Use $GRADING_SERVER_URL.", 5400,
                                       task_name="arith", deadline=0)
    assert "Teach it to add." in text and "Use $GRADING_SERVER_URL." in text
    assert "1 h 30 min" in text and "# Task: arith" in text
    assert version.startswith("agent_prompt_v1@") and len(version) == len("agent_prompt_v1@") + 8
    assert build_agent_prompt("Teach it to add.", "x", 60)[1] == version      # stable per template
    with pytest.raises(ValueError, match="description is empty"):
        build_agent_prompt("  ", "x", 60)
    with pytest.raises(ValueError, match="known: agent_prompt_v1"):
        build_agent_prompt("d", "x", 60, template="nope")


def test_readiness_reports_missing_executables_and_env(tmp_path):
    spec = load_agent_spec(builtin_agents_dir() / "claude-code.yaml")
    r = agent_readiness(spec, environ={}, path=str(tmp_path))
    assert not r["ready"] and r["missing_executables"] == ["claude"]
    assert r["missing_env"] == ["ANTHROPIC_API_KEY|ANTHROPIC_AUTH_TOKEN"]
    assert "npm install -g @anthropic-ai/claude-code" in r["problems"][0]
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    r = agent_readiness(spec, environ={"ANTHROPIC_AUTH_TOKEN": "t"}, path=str(tmp_path))
    assert r["ready"] and r["found_executables"] == {"claude": str(fake)}
    assert r["unset_env"] == ["ANTHROPIC_BASE_URL"]


def test_agents_command_lists_and_flags_missing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["--home", str(tmp_path / "home"), "agents", "--json"]) == 0
    rows = {r["name"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert set(STACKS) <= set(rows)
    assert rows["react"]["ready"] and not rows["codex"]["ready"]
    assert rows["codex"]["missing_executables"] == ["codex"]
    assert main(["--home", str(tmp_path / "home"), "agents", "--ready", "codex"]) == 1
    out = capsys.readouterr().out
    assert "codex" in out and "npm install -g @openai/codex" in out
    assert main(["--home", str(tmp_path / "home"), "agents", "nope"]) == 2


def _react_module(name):
    path = builtin_agents_dir() / "react" / f"{name}.py"
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"react_{name}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.pop(0)


def test_react_context_trim_keeps_task_and_recent_and_shortens_old_outputs():
    ctx = _react_module("context")
    msgs = [{"role": "system", "content": "S" * 5000}, {"role": "user", "content": "T" * 5000}]
    for i in range(20):
        msgs.append({"role": "assistant", "content": f"plan {i}", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"out{i} " + "x" * 5000})
    ctx.trim(msgs, keep_recent=4, old_tool_chars=300, max_chars=200_000)
    assert len(msgs) == 42 and msgs[0]["content"] == "S" * 5000 and msgs[1]["content"] == "T" * 5000
    assert len(msgs[3]["content"]) < 400 and ctx.MARK in msgs[3]["content"]
    assert msgs[3]["content"].startswith("out0")                    # head kept
    assert len(msgs[-1]["content"]) > 5000                          # recent output intact
    ctx.trim(msgs, keep_recent=4, max_chars=20_000)                 # still too long: shorten harder
    assert sum(len(m.get("content") or "") for m in msgs) < 40_000
    assert all(m["tool_call_id"] for m in msgs if m["role"] == "tool")   # nothing dropped


def test_react_deadline_sources(tmp_path, monkeypatch):
    dl = _react_module("deadline")
    monkeypatch.delenv("RUN_DEADLINE", raising=False)
    assert dl.find_deadline(tmp_path) is None
    (tmp_path / "run_meta.json").write_text(json.dumps({"deadline": "2030-01-01T00:00:00Z"}))
    assert dl.find_deadline(tmp_path) == 1893456000.0
    monkeypatch.setenv("RUN_DEADLINE", "1800000000")
    assert dl.find_deadline(tmp_path) == 1800000000.0            # the earliest wins
    assert dl.find_deadline(tmp_path, max_seconds=5, started=100.0) == 105.0


@pytest.mark.subprocess
@pytest.mark.parametrize("driver_url", ["", "http://127.0.0.1:8000/v1"])
def test_every_builtin_command_renders_to_valid_shell(driver_url, tmp_path):
    import subprocess

    for name, spec in list_agents([builtin_agents_dir()]).items():
        if not isinstance(spec.command, str) or name not in STACKS:
            continue
        cmd = render_command(spec.command, {"python": sys.executable, "agent_dir": str(spec.agent_dir),
                                            "driver": "org/model name", "driver_url": driver_url,
                                            "workspace": str(tmp_path / "my ws"), "prompt_file": "prompt.md"})
        proc = subprocess.run(["bash", "-n", "-c", cmd], capture_output=True, text=True)
        assert proc.returncode == 0, f"{name}: {proc.stderr}\n{cmd}"
        assert "'org/model name'" in cmd, name


def test_text_format_yields_no_actions():
    from autorl_tui.instrument.parsers import get_parser

    p = get_parser("text")
    assert p.feed("hello") == [] and p.feed("{not json") == [] and p.finish() == []
