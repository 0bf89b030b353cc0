"""An AutoRL-Bench folder that needs what only the operator has runs unchanged under the engine
(`--batch`, local executor, bwrap sandbox) once the plan's `agent_overlays` supplies it: the tests'
pipeline-shaped folder (tests/data/autorl_bench/agents/pipeline_checkout, shaped like its
opencode/openhands folders) `cd`s into an external checkout named by a variable, reads its LLM
variables, and its pipeline reads a file from the agent's home; it trains nothing, submits an empty
folder (answered and counted as AutoRL-Bench does: a 0.0 entry) and a copy of the base model, graded. The overlay is recorded in the run spec and in the run's events;
the harness's other variables do not reach the agent."""

import json
import os
import shutil

import pytest

from tests.support.batch_run import the_done_run
from tests.support.harness import REPO, TASKS, cli, install_model, make_reachable_home

pytestmark = pytest.mark.slow
FOLDER = REPO / "tests" / "data" / "autorl_bench" / "agents" / "pipeline_checkout"

# The external pipeline's entry point, as the operator's checkout would hold it.
MAIN = r'''
import json, os, shutil, sys, urllib.request
ws = os.environ["WORKSPACE"]
seen = {"cwd": os.getcwd(), "argv": sys.argv[1:], "llm_key": os.environ.get("LLM_API_KEY"),
        "llm_base": os.environ.get("LLM_BASE_URL"), "secret": os.environ.get("HARNESS_SECRET"),
        "home_file": open(os.path.expanduser("~/.pipeline/config.toml")).read()}
try:
    open(os.path.join(os.getcwd(), "written-by-agent"), "w")
    seen["checkout_writable"] = True
except OSError:
    seen["checkout_writable"] = False
def submit(path):
    req = urllib.request.Request(os.environ["GRADING_SERVER_URL"] + "/submit", method="POST",
                                 data=json.dumps({"model_path": path}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.status, json.loads(r.read())
os.makedirs(os.path.join(os.environ["OUTPUT_DIR"], "empty"))      # an unusable folder first
seen["empty"] = submit(os.environ["OUTPUT_DIR"] + "/empty")
shutil.copytree(os.environ["MODEL_PATH"], os.path.join(os.environ["OUTPUT_DIR"], "v1"))
seen["answer"] = submit(os.environ["OUTPUT_DIR"] + "/v1")[1]
json.dump(seen, open(os.path.join(ws, "pipeline.json"), "w"))
print("pipeline done", flush=True)
'''


def test_a_pipeline_folder_runs_with_its_checkout_variables_and_home_file(tiny_model_dir):
    home = make_reachable_home("autorl-overlay-")
    home.mkdir(parents=True)
    try:
        install_model(tiny_model_dir, home)
        checkout = home.parent / "pipeline-rl"
        checkout.mkdir()
        (checkout / "main.py").write_text(MAIN)
        os.chmod(checkout, 0o755)
        os.chmod(checkout / "main.py", 0o644)
        config = home.parent / "pipeline-config.toml"
        config.write_text('endpoint = "http://127.0.0.1:9/v1"\n')
        plan = home.parent / "plan.yaml"
        plan.write_text(json.dumps({
            "name": "overlay", "tasks": ["arith-small"], "agents": [str(FOLDER)], "models": ["tiny"], "seeds": [0],
            "budget": "120s", "executor": "local",
            "agent_overlays": {"pipeline_checkout": {
                "env": ["PIPELINE_RL_ROOT", "LLM_API_KEY", "OPENAI_API_BASE"],
                "home_files": {".pipeline/config.toml": str(config)},
                "binds": [str(checkout)]}}}))
        env = {"PIPELINE_RL_ROOT": str(checkout), "LLM_API_KEY": "sk-test", "OPENAI_API_BASE": "http://127.0.0.1:9/v1",
               "HARNESS_SECRET": "must-not-leak"}
        # without the bind, the plan is refused before anything is prepared, naming the fix
        unbound = home.parent / "unbound.yaml"
        raw = json.loads(plan.read_text())
        raw["agent_overlays"]["pipeline_checkout"]["binds"] = []
        unbound.write_text(json.dumps(raw))
        refused = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(unbound), home=home, env=env, timeout=300)
        assert refused.returncode == 2 and "agent_overlays.<agent>.binds" in refused.stderr, refused.stderr[-2000:]

        proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, env=env, timeout=600)
        db, run, ws = the_done_run(home, proc)
        seen = json.loads((ws / "pipeline.json").read_text())
        assert seen["cwd"] == str(checkout) and seen["argv"][:2] == ["--benchmark", "arith-small"]
        assert seen["llm_key"] == "sk-test" and seen["llm_base"] == "http://127.0.0.1:9/v1"
        assert seen["home_file"] == config.read_text() and seen["secret"] is None
        assert seen["checkout_writable"] is False and not (checkout / "written-by-agent").exists()
        # an unusable folder is answered and counted as AutoRL-Bench does: 200, a 0.0 entry with its error
        status, empty = seen["empty"]
        assert status == 200 and empty["score"] == 0.0 and "is empty" in empty["error"] and empty["submission_id"] == 1
        assert seen["answer"]["submission_id"] == 2 and seen["answer"]["total_submissions"] == 2
        assert [s["status"] for s in db.execute("SELECT status FROM submissions ORDER BY seq")] == ["error", "scored"]
        assert [e["score"] for e in json.loads((ws / "scores.json").read_text())] == [0.0, seen["answer"]["score"]]
        spec = json.loads(run["spec"])
        assert spec["options"]["overlay"]["binds"] == [str(checkout)]
        event = db.execute("SELECT message FROM events WHERE message LIKE 'operator overlay:%'").fetchone()
        assert event and "PIPELINE_RL_ROOT" in event[0] and ".pipeline/config.toml" in event[0], event
        report = home.parent / "report.json"       # and the run report shows it
        cli("report", run["id"], "--json", str(report), home=home, check=True)
        shown = [e.get("message") for sec in json.loads(report.read_text())["events"]["sections"] for e in sec["entries"]]
        assert event[0] in shown
        db.close()
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)
