"""A folder shaped like AutoRL-Bench's opencode agent (tests/data/autorl_bench/agents/opencode_shaped:
loads a `.env`, `cd`s into the pipeline checkout OPENCODE_RL_ROOT names, writes its opencode config
INTO that checkout, puts TRAINING_PYTHON's bin/ on PATH, exec's the checkout's main.py) runs
unchanged under the engine once the plan's `agent_overlays` supplies what AutoRL-Bench users keep
in RD-Agent's `.env` (`env_file`) and a private writable copy of the checkout (`copies`: the
operator's own folder is never written). The checkout is a stand-in pipeline written here: like
opencode-rl it reads the config the script wrote and drives the real opencode CLI (from npm),
which talks to the tests' stand-in LLM server speaking OpenAI's Responses API (a paid API replaced
by a local server); the scripted model copies the base model and submits it: graded. Without the
CLI and the checkout the plan is refused at validation, naming both."""

import json
import os

import pytest

from autorl_tui.executors.agent_runtime import find as find_agent_runtime
from tests.support.agent_clis import install_agent_clis
from tests.support.agent_session import SUBMIT
from tests.support.batch_run import COPY_BASE_MODEL, folder_home, run_folder, the_done_run  # noqa: F401
from tests.support.harness import REPO
from tests.support.standin_llm import Step, StandinLLM

pytestmark = pytest.mark.slow
FOLDER = REPO / "tests" / "data" / "autorl_bench" / "agents" / "opencode_shaped"

# The stand-in for the operator's opencode-rl checkout: its entry point, as the folder calls it.
MAIN = r'''
import argparse, json, os, subprocess
ap = argparse.ArgumentParser()
for a in ("--benchmark", "--base-model", "--run-dir", "--max-iterations"):
    ap.add_argument(a)
args = ap.parse_args()
config = os.path.join(os.environ["XDG_CONFIG_HOME"], "opencode", "opencode.json")
provider = json.load(open(config))["provider"]["openai"]
print("pipeline: code generation through opencode", flush=True)
done = subprocess.run(["opencode", "run", "--format", "json", "-m", "openai/" + os.environ["OPENCODE_MODEL"],
                       f"Train {args.base_model} on {args.benchmark}, save it under output/v1 and submit it."],
                      cwd=args.run_dir, env=dict(os.environ, PWD=args.run_dir))   # opencode takes its folder from PWD
seen = {"cwd": os.getcwd(), "args": vars(args), "config": config, "base_url": provider["options"]["baseURL"],
        "model": os.environ["OPENCODE_MODEL"], "path0": os.environ["PATH"].split(":")[0],
        "training_python": os.environ.get("TRAINING_PYTHON"), "secret": os.environ.get("HARNESS_SECRET"),
        "opencode_exit": done.returncode}
json.dump(seen, open(os.path.join(args.run_dir, "pipeline.json"), "w"))
raise SystemExit(done.returncode)
'''


def test_an_opencode_folder_runs_with_its_env_file_and_a_private_copy_of_its_checkout(folder_home):
    cli_bin, home = install_agent_clis(), folder_home
    checkout = home.parent / "opencode-rl"
    checkout.mkdir()
    (checkout / "main.py").write_text(MAIN)
    os.chmod(checkout, 0o755)
    training_python = str(find_agent_runtime().python)
    with StandinLLM([Step(shell=COPY_BASE_MODEL), Step(shell=SUBMIT)]) as llm:
        dotenv = home.parent / "rd-agent.env"        # what its users keep in RD-Agent's root .env
        dotenv.write_text(f"# LLM API\nOPENAI_API_KEY=sk-standin-not-a-key\nOPENAI_API_BASE={llm.base_url}/v1\n"
                          f"CHAT_MODEL=gpt-standin\nTRAINING_PYTHON={training_python}\n"
                          "OPENCODE_DISABLE_MODELS_FETCH=true\nOPENCODE_DISABLE_AUTOUPDATE=true\n"
                          "OPENCODE_DISABLE_LSP_DOWNLOAD=true\nOPENCODE_DISABLE_DEFAULT_PLUGINS=true\n")
        overlay = {"env_file": str(dotenv), "copies": {"OPENCODE_RL_ROOT": str(checkout)}}
        env = {"HARNESS_SECRET": "must-not-leak", "PATH": f"{cli_bin}:{os.environ['PATH']}"}
        refused = run_folder(home, FOLDER, {"env_file": str(dotenv)}, dict(env, PATH="/usr/local/bin:/usr/bin:/bin"),
                             task="arith-qa")
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert "calls `opencode`, which is not on PATH" in refused.stderr and "set OPENCODE_RL_ROOT" in refused.stderr
        proc = run_folder(home, FOLDER, overlay, env, task="arith-qa", host_ports=[llm.port])
        scripted = llm.scripted_requests("responses")
    db, run, ws = the_done_run(home, proc)
    assert [s["status"] for s in db.execute("SELECT status FROM submissions")] == ["scored"]
    assert scripted and all(r["body"]["model"] == "gpt-standin" for r in scripted)
    seen = json.loads((ws / "pipeline.json").read_text())
    copy = ws / ".home" / "opencode-rl"
    assert seen["cwd"] == str(copy) and seen["config"] == str(copy / ".opencode-config" / "opencode" / "opencode.json")
    assert not (checkout / ".opencode-config").exists()           # the operator's checkout was not written
    assert seen["args"]["benchmark"] == "arith-qa" and seen["args"]["run_dir"] == str(ws)
    assert seen["base_url"] == f"{llm.base_url}/v1" and seen["model"] == "gpt-standin"
    assert seen["path0"] == os.path.dirname(training_python) and seen["secret"] is None and seen["opencode_exit"] == 0
    event = db.execute("SELECT message FROM events WHERE message LIKE 'operator overlay:%'").fetchone()[0]
    assert f"variables from {dotenv}: CHAT_MODEL, OPENAI_API_BASE, OPENAI_API_KEY" in event
    assert "sk-standin" not in event and f"OPENCODE_RL_ROOT={copy} (of {checkout})" in event
    spec = json.loads(run["spec"])
    assert spec["options"]["overlay"]["copies"] == {"OPENCODE_RL_ROOT": str(checkout)}
    shells = [json.loads(e["data"]) for e in db.execute("SELECT data FROM events WHERE kind='action'")
              if json.loads(e["data"]).get("kind") == "shell"]
    assert any("cp -r" in s["command"] for s in shells) and any("/submit" in s["command"] for s in shells)
    db.close()
