"""A folder shaped like AutoRL-Bench's codex agent (tests/data/autorl_bench/agents/codex_provider:
`codex exec -c model_provider="litellm"`, its JSON trace through `tee`) runs unchanged under the
engine with the real Codex CLI (from npm) once the plan's `agent_overlays` supplies the
provider file (`~/.codex/config.toml`) and the key variable, as its users declare them; the LLM is
the tests' stand-in server speaking the Responses API (tests/support/standin_llm.py: a paid API
replaced by a local server). The scripted model copies the base model and submits it: graded. A
PATH without `codex` is refused at validation, naming it."""

import json
import os

import pytest

from tests.support.agent_clis import install_agent_clis
from tests.support.agent_session import LOOK, SUBMIT
from tests.support.batch_run import COPY_BASE_MODEL, folder_home, run_folder, the_done_run  # noqa: F401
from tests.support.harness import REPO
from tests.support.standin_llm import Step, StandinLLM

pytestmark = pytest.mark.slow
FOLDER = REPO / "tests" / "data" / "autorl_bench" / "agents" / "codex_provider"
CONFIG = """\
check_for_update_on_startup = false
[analytics]
enabled = false
[features]
plugins = false
remote_plugin = false
apps = false
[model_providers.litellm]
name = "litellm"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "LITELLM_API_KEY"
"""


def test_a_codex_folder_runs_with_its_provider_file_from_the_operator(folder_home):
    cli_bin, home = install_agent_clis(), folder_home
    with StandinLLM([Step(shell=LOOK), Step(shell=COPY_BASE_MODEL), Step(shell=SUBMIT)]) as llm:
        config = home.parent / "codex-config.toml"
        config.write_text(CONFIG.format(url=llm.base_url))
        overlay = {"env": ["LITELLM_API_KEY", "CODEX_MODEL"], "home_files": {".codex/config.toml": str(config)}}
        env = {"LITELLM_API_KEY": "sk-standin-not-a-key", "CODEX_MODEL": "gpt-5.5"}
        refused = run_folder(home, FOLDER, overlay, dict(env, PATH="/usr/local/bin:/usr/bin:/bin"))
        assert refused.returncode == 2 and "calls `codex`, which is not on PATH" in refused.stderr, refused.stderr
        proc = run_folder(home, FOLDER, overlay, dict(env, PATH=f"{cli_bin}:{os.environ['PATH']}"),
                          host_ports=[llm.port])      # the sandbox reaches the stand-in LLM, nothing else
        scripted = llm.scripted_requests("responses")
    db, run, ws = the_done_run(home, proc)
    assert [s["status"] for s in db.execute("SELECT status FROM submissions")] == ["scored"]
    assert [r["step"] for r in scripted][:3] == [0, 1, 2] and all(r["body"]["model"] == "gpt-5.5" for r in scripted)
    assert (ws / "agent.jsonl").is_file()            # its trace through `tee`, as the folder writes it
    shells = [json.loads(e["data"]) for e in db.execute("SELECT data FROM events WHERE kind='action'")
              if json.loads(e["data"]).get("kind") == "shell"]
    assert any("cp -r" in s["command"] for s in shells) and any("/submit" in s["command"] for s in shells)
    db.close()
