"""A folder shaped like AutoRL-Bench's codex agent (tests/data/autorl_bench/agents/codex_provider:
`codex exec -c model_provider="litellm"`, its JSON trace through `tee`) runs unchanged under the
engine with the real Codex CLI (from npm) once the plan's `agent_overlays` supplies the
provider file (`~/.codex/config.toml`) and the key variable, as its users declare them; the LLM is
the tests' stand-in server speaking the Responses API (tests/support/standin_llm.py: a paid API
replaced by a local server). The scripted model copies the base model and submits it: graded. A
PATH without `codex` is refused at validation, naming it."""

import json
import os
import shutil

import pytest

from tests.support.agent_clis import install_agent_clis
from tests.support.agent_session import LOOK, SUBMIT
from tests.support.batch_run import the_done_run
from tests.support.harness import REPO, TASKS, cli, install_model, make_reachable_home
from tests.support.standin_llm import Step, StandinLLM

pytestmark = pytest.mark.slow
FOLDER = REPO / "tests" / "data" / "autorl_bench" / "agents" / "codex_provider"
COPY = 'mkdir -p output && cp -r "$MODEL_PATH" output/v1 && echo copied'
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


def test_a_codex_folder_runs_with_its_provider_file_from_the_operator(tiny_model_dir):
    cli_bin = install_agent_clis()
    home = make_reachable_home("autorl-codex-folder-")
    home.mkdir(parents=True)
    try:
        install_model(tiny_model_dir, home)
        with StandinLLM([Step(shell=LOOK), Step(shell=COPY), Step(shell=SUBMIT)]) as llm:
            config = home.parent / "codex-config.toml"
            config.write_text(CONFIG.format(url=llm.base_url))
            plan = home.parent / "plan.yaml"
            plan.write_text(json.dumps({
                "name": "codex-folder", "tasks": ["arith-small"], "agents": [str(FOLDER)], "models": ["tiny"],
                "seeds": [0], "budget": "240s", "executor": "local",
                "agent_overlays": {"codex_provider": {"env": ["LITELLM_API_KEY", "CODEX_MODEL"],
                                                      "home_files": {".codex/config.toml": str(config)}}}}))
            env = {"LITELLM_API_KEY": "sk-standin-not-a-key", "CODEX_MODEL": "gpt-5.5"}
            refused = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, timeout=300,
                          env=dict(env, PATH="/usr/local/bin:/usr/bin:/bin"))
            assert refused.returncode == 2 and "calls `codex`, which is not on PATH" in refused.stderr, refused.stderr
            proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, timeout=600,
                       env=dict(env, PATH=f"{cli_bin}:{os.environ['PATH']}"))
            scripted = llm.scripted_requests("responses")
        db, run, ws = the_done_run(home, proc)
        assert [s["status"] for s in db.execute("SELECT status FROM submissions")] == ["scored"]
        assert [r["step"] for r in scripted][:3] == [0, 1, 2] and all(r["body"]["model"] == "gpt-5.5" for r in scripted)
        assert (ws / "agent.jsonl").is_file()            # its trace through `tee`, as the folder writes it
        shells = [json.loads(e["data"]) for e in db.execute("SELECT data FROM events WHERE kind='action'")
                  if json.loads(e["data"]).get("kind") == "shell"]
        assert any("cp -r" in s["command"] for s in shells) and any("/submit" in s["command"] for s in shells)
        db.close()
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)
