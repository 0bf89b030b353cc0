"""A folder shaped like AutoRL-Bench's claude agent (tests/data/autorl_bench/agents/claude_shaped:
`"$CLAUDE" --print ... --output-format stream-json "$PROMPT"` in the workspace, the prompt built
from the workspace's files and a data sample, AGENTS.md and timer.sh placed there, its trace
through `tee`) runs unchanged under the engine with the real Claude Code CLI (from npm), on the
GSM8K-format task arith-qa. The LLM is the tests' stand-in server speaking Anthropic's Messages
API (tests/support/standin_llm.py: a paid API replaced by a local server); its scripted model
copies the base model and submits it: graded. A PATH without `claude` is refused at validation,
naming it."""

import json
import os

import pytest

from tests.support.agent_clis import install_agent_clis
from tests.support.agent_session import LOOK, SUBMIT
from tests.support.batch_run import COPY_BASE_MODEL, folder_home, run_folder, the_done_run  # noqa: F401
from tests.support.harness import REPO
from tests.support.standin_llm import Step, StandinLLM

pytestmark = pytest.mark.slow
FOLDER = REPO / "tests" / "data" / "autorl_bench" / "agents" / "claude_shaped"
# What an operator exports for the folder beyond its stack's key and base URL (which pass by the
# stack's name): Claude Code's switches for a root sandbox and for no traffic but the model API.
OPERATOR_ENV = {"IS_SANDBOX": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_MODEL": "claude-standin-1"}


def test_a_claude_folder_runs_unchanged_against_an_anthropic_standin(folder_home):
    cli_bin, home = install_agent_clis(), folder_home
    with StandinLLM([Step(shell=LOOK), Step(shell=COPY_BASE_MODEL), Step(shell=SUBMIT)]) as llm:
        overlay = {"env": sorted(OPERATOR_ENV)}
        env = {**OPERATOR_ENV, "ANTHROPIC_API_KEY": "sk-ant-standin-not-a-key", "ANTHROPIC_BASE_URL": llm.base_url}
        refused = run_folder(home, FOLDER, overlay, dict(env, PATH="/usr/local/bin:/usr/bin:/bin"), task="arith-qa")
        assert refused.returncode == 2 and "calls `claude`, which is not on PATH" in refused.stderr, refused.stderr
        proc = run_folder(home, FOLDER, overlay, dict(env, PATH=f"{cli_bin}:{os.environ['PATH']}"), task="arith-qa",
                          host_ports=[llm.port])      # the sandbox reaches the stand-in LLM, nothing else
        scripted = llm.scripted_requests("anthropic")
    db, run, ws = the_done_run(home, proc)
    assert [s["status"] for s in db.execute("SELECT status FROM submissions")] == ["scored"]
    assert [r["step"] for r in scripted][:3] == [0, 1, 2]
    assert all(r["body"]["model"] == "claude-standin-1" for r in scripted)
    # the prompt the folder built reached the model: the task's description and a GSM8K-shaped data row
    first = json.dumps(scripted[0]["body"]["messages"])
    assert "#### N" in first and '\\"question\\": ' in first, first[:2000]
    assert (ws / "AGENTS.md").is_file() and (ws / "timer.sh").is_file() and (ws / "agent.jsonl").is_file()
    assert "--- DIAGNOSTICS ---" in (ws / "agent.log").read_text()
    # its stream-json, merged with the folder's own echo lines, is parsed into actions and usage
    actions = [json.loads(e["data"]) for e in db.execute("SELECT data FROM events WHERE kind='action'")]
    shells = [a for a in actions if a.get("kind") == "shell"]
    assert any("cp -r" in s["command"] for s in shells) and any("/submit" in s["command"] for s in shells)
    assert run["tokens_in"] and run["tokens_in"] > 0
    db.close()
