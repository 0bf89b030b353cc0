"""A folder shaped like AutoRL-Bench's gemini agent (tests/data/autorl_bench/agents/gemini_trusted:
`"$GEMINI" --yolo -p ...` in the workspace, its trace through `tee`) runs unchanged under the
engine with the real Gemini CLI (from npm) once the plan's `agent_overlays` supplies Gemini's
settings (API-key auth) and its trusted-folder list naming the home's workspaces, as its users
trust their folders; without trust, Gemini overrides `--yolo` and refuses headless tool calls. The
LLM is the tests' stand-in server speaking Gemini's API (a paid API replaced by a local server)."""

import json
import os

import pytest

from tests.support.agent_clis import install_agent_clis
from tests.support.agent_session import SUBMIT
from tests.support.batch_run import COPY_BASE_MODEL, folder_home, run_folder, the_done_run  # noqa: F401
from tests.support.harness import REPO
from tests.support.standin_llm import Step, StandinLLM

pytestmark = pytest.mark.slow
FOLDER = REPO / "tests" / "data" / "autorl_bench" / "agents" / "gemini_trusted"


def test_a_gemini_folder_runs_in_the_folder_the_operator_trusts(folder_home):
    cli_bin, home = install_agent_clis(), folder_home
    settings, trusted = home.parent / "gemini-settings.json", home.parent / "gemini-trusted.json"
    settings.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"},
                                                 "folderTrust": {"enabled": True}},
                                    "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}))
    trusted.write_text(json.dumps({str(home / "workspaces"): "TRUST_FOLDER"}))
    with StandinLLM([Step(shell=COPY_BASE_MODEL), Step(shell=SUBMIT)]) as llm:
        overlay = {"env": ["GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_NO_RELAUNCH"],
                   "home_files": {".gemini/settings.json": str(settings),
                                  ".gemini/trustedFolders.json": str(trusted)}}
        proc = run_folder(home, FOLDER, overlay, {"GEMINI_API_KEY": "standin-not-a-key", "GEMINI_CLI_NO_RELAUNCH": "true",
                                                  "GOOGLE_GEMINI_BASE_URL": llm.base_url,
                                                  "PATH": f"{cli_bin}:{os.environ['PATH']}"},
                          host_ports=[llm.port])      # the sandbox reaches the stand-in LLM, nothing else
        scripted = llm.scripted_requests("gemini")
    db, run, ws = the_done_run(home, proc)
    assert [s["status"] for s in db.execute("SELECT status FROM submissions")] == ["scored"]
    assert len(scripted) >= 2 and all("/models/gemini-2.5-pro:" in r["path"] for r in scripted)
    trace = (ws / "agent.jsonl").read_text()
    assert "not trusted" not in trace and '"type":"result"' in trace
    db.close()
