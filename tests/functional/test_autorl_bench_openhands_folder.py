"""A folder shaped like AutoRL-Bench's openhands agent (tests/data/autorl_bench/agents/openhands_shaped:
loads a `.env`, maps OPENAI_API_KEY onto LLM_API_KEY, takes LLM_MODEL from CHAT_MODEL and
LLM_BASE_URL from OPENAI_API_BASE, `cd`s into the checkout OPENHANDS_RL_ROOT names and runs its
main.py) runs unchanged under the engine once the plan's `agent_overlays` gives it RD-Agent's `.env`
(`env_file`, which also names the checkout) and binds the checkout read-only. The checkout is a
stand-in pipeline written here (OpenHands itself needs Python >= 3.12 and minutes of pip, too much
for a test run; docs/agents.md covers the real CLI): an agent loop over the OpenAI chat-completions
API with an `execute_bash` tool, as OpenHands' LiteLLM client speaks it, against the tests' stand-in
LLM server (a paid API replaced by a local server); the scripted model copies the base model and
submits it: graded. Without the bind the plan is refused at validation, naming `binds`."""

import json
import os

import pytest

from autorl_tui.executors.agent_runtime import find as find_agent_runtime
from tests.support.agent_session import SUBMIT
from tests.support.batch_run import COPY_BASE_MODEL, folder_home, run_folder, the_done_run  # noqa: F401
from tests.support.harness import REPO
from tests.support.standin_llm import Step, StandinLLM

pytestmark = pytest.mark.slow
FOLDER = REPO / "tests" / "data" / "autorl_bench" / "agents" / "openhands_shaped"

# The stand-in for the operator's openhands-rl checkout: its entry point, as the folder calls it.
MAIN = r'''
import argparse, json, os, subprocess, urllib.request
ap = argparse.ArgumentParser()
for a in ("--benchmark", "--base-model", "--workspace", "--max-iterations", "--training-timeout", "--max-agent-steps"):
    ap.add_argument(a)
args = ap.parse_args()
tool = {"type": "function", "function": {"name": "execute_bash", "description": "run a bash command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"},
                                                        "security_risk": {"type": "string"}}}}}
messages = [{"role": "user", "content": f"Train {args.base_model} on {args.benchmark} in {args.workspace}; submit it."}]
ran = []
for _ in range(int(args.max_agent_steps)):
    req = urllib.request.Request(os.environ["LLM_BASE_URL"] + "/chat/completions", method="POST",
                                 data=json.dumps({"model": os.environ["LLM_MODEL"], "messages": messages,
                                                  "tools": [tool]}).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer " + os.environ["LLM_API_KEY"]})
    msg = json.loads(urllib.request.urlopen(req, timeout=60).read())["choices"][0]["message"]
    messages.append(msg)
    if not msg.get("tool_calls"):
        break
    for call in msg["tool_calls"]:
        command = json.loads(call["function"]["arguments"])["command"]
        out = subprocess.run(["bash", "-c", command], cwd=args.workspace, capture_output=True, text=True)
        print(f"pipeline: ran {command!r}: exit {out.returncode}", flush=True)
        ran.append(command)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": out.stdout + out.stderr})
try:
    open("written-by-agent", "w")
    writable = True
except OSError:
    writable = False
seen = {"cwd": os.getcwd(), "args": vars(args), "ran": ran, "writable": writable,
        "llm_key": os.environ.get("LLM_API_KEY"), "llm_model": os.environ.get("LLM_MODEL"),
        "llm_base": os.environ.get("LLM_BASE_URL"), "training_python": os.environ.get("TRAINING_PYTHON"),
        "secret": os.environ.get("HARNESS_SECRET")}
json.dump(seen, open(os.path.join(args.workspace, "pipeline.json"), "w"))
'''


def test_an_openhands_folder_runs_with_its_env_file_and_a_bound_checkout(folder_home):
    home = folder_home
    checkout = home.parent / "openhands-rl"
    checkout.mkdir()
    (checkout / "main.py").write_text(MAIN)
    os.chmod(checkout, 0o755)
    os.chmod(checkout / "main.py", 0o644)
    training_python = str(find_agent_runtime().python)
    with StandinLLM([Step(shell=COPY_BASE_MODEL), Step(shell=SUBMIT)]) as llm:
        dotenv = home.parent / "rd-agent.env"        # what its users keep in RD-Agent's root .env
        dotenv.write_text(f"OPENAI_API_KEY=sk-standin-not-a-key\nOPENAI_API_BASE={llm.base_url}/v1\n"
                          f"CHAT_MODEL=gpt-standin\nTRAINING_PYTHON={training_python}\nOPENHANDS_RL_ROOT={checkout}\n")
        env = {"HARNESS_SECRET": "must-not-leak"}
        refused = run_folder(home, FOLDER, {"env_file": str(dotenv)}, env, task="arith-qa")
        assert refused.returncode == 2 and "agent_overlays.<agent>.binds" in refused.stderr, refused.stderr[-2000:]
        proc = run_folder(home, FOLDER, {"env_file": str(dotenv), "binds": [str(checkout)]}, env, task="arith-qa",
                          host_ports=[llm.port])
        scripted = llm.scripted_requests("chat")
    db, run, ws = the_done_run(home, proc)
    assert [s["status"] for s in db.execute("SELECT status FROM submissions")] == ["scored"]
    assert [r["step"] for r in scripted] == [0, 1, 2] and all(r["body"]["model"] == "gpt-standin" for r in scripted)
    seen = json.loads((ws / "pipeline.json").read_text())
    assert seen["cwd"] == str(checkout) and seen["writable"] is False and not (checkout / "written-by-agent").exists()
    assert seen["llm_key"] == "sk-standin-not-a-key" and seen["llm_model"] == "gpt-standin"     # mapped by its script
    assert seen["llm_base"] == f"{llm.base_url}/v1" and seen["training_python"] == training_python
    assert seen["secret"] is None and seen["args"]["workspace"] == str(ws) and len(seen["ran"]) == 2
    event = db.execute("SELECT message FROM events WHERE message LIKE 'operator overlay:%'").fetchone()[0]
    assert "OPENHANDS_RL_ROOT" in event and "sk-standin" not in event and f"read-only folders {checkout}" in event
    db.close()
