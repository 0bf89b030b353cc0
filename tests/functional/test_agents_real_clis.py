"""The real Claude Code, Codex, Gemini CLI and opencode, installed from npm, run through their
built-in specs in a scratch workspace against a scripted stand-in for the paid LLM APIs
(tests/support/standin_llm.py: Anthropic Messages for Claude Code via ANTHROPIC_BASE_URL, the
OpenAI Responses API for Codex via a custom provider, the Gemini API for Gemini CLI via
GOOGLE_GEMINI_BASE_URL, OpenAI chat completions for opencode via a custom provider). The session:
look around, write a training script, run it, submit to the run's real grading API (over a desk
that answers a fixed score: tests/support/standin_grading.py). We assert the normalized actions parsed from their real output, recorded in a real store.

The CLIs are installed once into a cache folder ($AUTORL_AGENT_CLI_CACHE, default
~/.cache/autorl-tui/agent-clis): `npm install --prefix DIR @anthropic-ai/claude-code @openai/codex
@google/gemini-cli opencode-ai` (about 70 s cold, reused afterwards).
"""

import json
import os
import shlex
import shutil
import time
from pathlib import Path

import pytest

from autorl_tui.catalog.agents import builtin_agents_dir, load_agent_spec
from autorl_tui.catalog.readiness import agent_readiness
from autorl_tui.instrument.actions import UsageTotals
from tests.support.agent_session import (LOOK, RUN, SUBMIT, WRITE, executor_env, make_workspace,
                                         record_in_store, run_agent)
from tests.support.agent_clis import install_agent_clis
from tests.support.standin_grading import StandinGrading
from tests.support.standin_llm import Step, StandinLLM

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def cli_bin() -> Path:
    return install_agent_clis()


def session_steps() -> list[Step]:
    return [Step(shell=LOOK), Step(shell=WRITE), Step(shell=RUN), Step(shell=SUBMIT)]


def check_store(store, run_id, acts, totals):
    rows = store.query("SELECT kind, message, data FROM events WHERE run_id = ? ORDER BY id", [run_id])
    assert [json.loads(r["data"]) for r in rows] == [a.to_dict() for a in acts]
    assert all(r["kind"] == "action" for r in rows)
    run = store.get("runs", run_id)
    if not any(a.kind == "usage" for a in acts):            # the stack reported no usage: unknown, not 0
        totals = dict.fromkeys(totals)
    assert {k: run[k] for k in totals} == totals


def check_session(acts, ws: Path, grading: StandinGrading, wrap=lambda c: c, exit_codes=(0, 0, 0, 0)):
    assert not [a for a in acts if a.kind in ("malformed", "error")], [a.to_dict() for a in acts]
    shells = [a for a in acts if a.kind == "shell"]
    assert [s.exit_code for s in shells] == list(exit_codes)
    assert [wrap(s.command) for s in shells] == [LOOK, WRITE, RUN, SUBMIT]
    assert "Teach the model to add" in shells[0].output
    assert "trained and saved output/v1" in shells[2].output
    assert json.loads(shells[3].output)["score"] == 42.0
    assert [s["model_path"] for s in grading.submissions] == ["output/v1"]
    assert (ws / "code" / "train.py").is_file() and (ws / "output" / "v1" / "config.json").is_file()
    assert [a.text for a in acts if a.kind == "message"][-1] == "All done: ran the scripted steps."
    totals = UsageTotals()
    for a in acts:
        totals.add(a)
    return totals.run_fields()


def play(tmp_path: Path, agent: str, bin_dir: Path, key: dict[str, str], driver: str, api: str, url_suffix: str = "",
         budget_s: float = 120, **check):
    """The scripted session through one real CLI (its built-in spec, the executor's environment with
    `key`), its stdout recorded in a real store; checks what every CLI must show (check_session,
    check_store). Returns (actions, usage totals, the LLM requests in `api`'s wire format, workspace)."""
    spec = load_agent_spec(builtin_agents_dir() / f"{agent}.yaml")
    deadline = time.time() + budget_s
    ws = make_workspace(tmp_path, deadline)
    with StandinLLM(session_steps()) as llm, StandinGrading(ws) as grading:
        env = executor_env(ws, grading.url, deadline, path=f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", **key)
        proc, elapsed, _ = run_agent(spec, ws, env, {"driver": driver, "driver_url": llm.base_url + url_suffix},
                                     timeout=budget_s)
        assert proc.returncode == 0, proc.stderr[-3000:]
        acts, store, run_id = record_in_store(tmp_path / "store.sqlite", spec.name, spec.output_format,
                                              proc.stdout, driver)
        totals = check_session(acts, ws, grading, **check)
        check_store(store, run_id, acts, totals)
        scripted = llm.scripted_requests(api)
    assert [r["step"] for r in scripted] == [0, 1, 2, 3, 4]
    print(f"{agent}: {elapsed:.2f} s, {len(acts)} actions")
    return acts, totals, scripted, ws


def test_claude_code_real_cli(tmp_path, cli_bin):
    key = {"ANTHROPIC_API_KEY": "sk-ant-standin-not-a-key"}
    spec = load_agent_spec(builtin_agents_dir() / "claude-code.yaml")
    assert agent_readiness(spec, environ={"PATH": f"{cli_bin}:/usr/local/bin:/usr/bin:/bin", **key})["ready"]
    acts, totals, scripted, _ = play(tmp_path, "claude-code", cli_bin, key, "claude-sonnet-4-6", "anthropic")
    assert all(r["body"]["model"] == "claude-sonnet-4-6" for r in scripted)      # the driver parameter
    assert "Teach the model to add" in json.dumps(scripted[0]["body"]["messages"][0])   # our prompt
    assert totals["tokens_in"] == 500 and totals["tokens_out"] == 100 and totals["cost_usd"] > 0
    assert [a.name for a in acts if a.kind == "tool_call"] == ["Bash"] * 4


def test_codex_real_cli(tmp_path, cli_bin):
    def unwrap(cmd: str) -> str:       # Codex reports `/bin/bash -lc <quoted command>`
        parts = shlex.split(cmd)
        return parts[2] if parts[:2] in (["/bin/bash", "-lc"], ["bash", "-lc"]) else cmd

    _, totals, scripted, _ = play(tmp_path, "codex", cli_bin, {"OPENAI_API_KEY": "sk-standin-not-a-key"}, "gpt-5.5",
                                  "responses", url_suffix="/v1", wrap=unwrap)
    assert all(r["body"]["model"] == "gpt-5.5" for r in scripted)
    assert "Teach the model to add" in json.dumps(scripted[0]["body"]["input"])
    assert totals == {"tokens_in": 500, "tokens_out": 100, "cost_usd": None}


def test_gemini_cli_real_cli(tmp_path, cli_bin):
    # Gemini CLI does not report a command's exit code in its stream: unknown, not 0.
    acts, totals, scripted, _ = play(tmp_path, "gemini-cli", cli_bin, {"GEMINI_API_KEY": "standin-not-a-key"},
                                     "gemini-2.5-pro", "gemini", exit_codes=(None,) * 4)
    assert all("/models/gemini-2.5-pro:" in r["path"] for r in scripted)
    assert "Teach the model to add" in json.dumps(scripted[0]["body"]["contents"])
    assert totals == {"tokens_in": 500, "tokens_out": 100, "cost_usd": None}
    assert [a.name for a in acts if a.kind == "tool_call"] == ["run_shell_command"] * 4


def test_opencode_real_cli(tmp_path, cli_bin):
    _, totals, scripted, ws = play(tmp_path, "opencode", cli_bin, {"OPENAI_API_KEY": "sk-standin-not-a-key"},
                                   "standin-model", "chat", url_suffix="/v1")
    assert all(r["body"]["model"] == "standin-model" for r in scripted)
    assert "Teach the model to add" in json.dumps(scripted[0]["body"]["messages"])
    assert totals == {"tokens_in": 500, "tokens_out": 100, "cost_usd": 0.0}
    assert not (ws / ".home" / "opencode-autorl.json").read_text().count("sk-standin")   # key not written


def openhands_bin() -> Path | None:
    for candidate in (os.environ.get("AUTORL_OPENHANDS_BIN"),
                      Path.home() / ".cache" / "autorl-tui" / "openhands" / "bin" / "openhands",
                      shutil.which("openhands")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def test_openhands_real_cli(tmp_path):
    exe = openhands_bin()
    if exe is None:
        pytest.skip("!!! SKIPPED: the OpenHands CLI is not installed (it needs Python >= 3.12 and ~6 min of pip); "
                    "to run this test: python3.12 -m venv ~/.cache/autorl-tui/openhands && "
                    "~/.cache/autorl-tui/openhands/bin/pip install openhands (or set AUTORL_OPENHANDS_BIN) !!!")
    acts, _, scripted, _ = play(tmp_path, "openhands", exe.parent, {"LLM_API_KEY": "sk-standin-not-a-key"},
                                "openai/standin-model", "chat", url_suffix="/v1", budget_s=240)
    assert all(r["body"]["model"] == "standin-model" for r in scripted)
    assert [a.name for a in acts if a.kind == "tool_call"] == ["terminal"] * 4
    assert not [a for a in acts if a.kind == "usage"]     # its JSON events carry no token counts
