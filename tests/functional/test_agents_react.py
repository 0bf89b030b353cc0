"""The built-in react agent, for real: its spec's command rendered and run as a subprocess in a
scratch workspace with the executor's filtered environment, against a scripted stand-in for a
paid OpenAI-compatible LLM API (tests/support/standin_llm.py) and the run's real grading API
over a fixed-score desk (tests/support/standin_grading.py: the submitted folder is not a model)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path


from autorl_tui.catalog.agents import builtin_agents_dir, load_agent_spec
from autorl_tui.instrument.actions import UsageTotals
from autorl_tui.instrument.parsers import get_parser
from tests.support.agent_session import TRAIN_SCRIPT, executor_env, make_workspace, run_agent
from tests.support.standin_grading import StandinGrading
from tests.support.standin_llm import Step, StandinLLM
from tests.support.waiting import holds_within

def launch(ws: Path, llm: StandinLLM, grading_url: str, deadline: float, extra_env=None):
    spec = load_agent_spec(builtin_agents_dir() / "react.yaml")
    env = executor_env(ws, grading_url, deadline, **(extra_env or {}))
    return run_agent(spec, ws, env, {"python": sys.executable, "driver": "standin-model",
                                     "driver_url": llm.base_url + "/v1"}, timeout=60)


def actions_of(stdout: str):
    return get_parser("react_json").feed_all(stdout.splitlines())


def test_react_completes_a_scripted_session(tmp_path):
    deadline = time.time() + 60
    ws = make_workspace(tmp_path, deadline)
    steps = [Step(shell="ls; cat description.md"),
             Step(tool="write_file", args={"path": "code/train.py", "content": TRAIN_SCRIPT}),
             Step(shell="python code/train.py"),
             Step(tool="submit", args={"model_path": "output/v1"}),
             Step(tool="read_file", args={"path": "logs/metrics.jsonl"})]
    with StandinLLM(steps, final_text="Submitted output/v1; done.") as llm, StandinGrading(ws) as grading:
        proc, elapsed, version = launch(ws, llm, grading.url, deadline, {"DRIVER_API_KEY": "sk-standin"})
        assert proc.returncode == 0, proc.stderr
        acts = actions_of(proc.stdout)
        assert not [a for a in acts if a.kind in ("malformed", "error")], proc.stdout
        shells = [a for a in acts if a.kind == "shell"]
        assert [(s.command, s.exit_code) for s in shells] == [("ls; cat description.md", 0),
                                                               ("python code/train.py", 0)]
        assert "Teach the model to add" in shells[0].output
        assert "trained and saved output/v1" in shells[1].output
        assert [(e.path, e.summary_text) for e in acts if e.kind == "file_edit"] == [
            ("code/train.py", f"wrote {len(TRAIN_SCRIPT)} chars (new file)")]
        submit = next(a for a in acts if a.kind == "tool_result" and a.name == "submit")
        assert submit.is_error is False and json.loads(submit.output)["score"] == 42.0
        assert grading.submissions == [{"submission_id": 1, "model_path": "output/v1", "score": 42.0,
                                        "baseline_score": 10.0, "improvement": 32.0}]
        assert [a.text for a in acts if a.kind == "message"][-1] == "Submitted output/v1; done."
        totals = UsageTotals()
        for a in acts:
            totals.add(a)
        assert totals.run_fields() == {"tokens_in": 600, "tokens_out": 120, "cost_usd": None}   # 6 calls
        first = llm.requests[0]["body"]
        assert llm.requests[0]["tools"] == ["shell", "write_file", "read_file", "submit"]
        assert "Teach the model to add" in first["messages"][1]["content"]
        last = llm.requests[-1]["body"]["messages"]
        assert '"loss": 0.5' in last[-1]["content"] and "time left" in last[-1]["content"]
        assert (ws / "output" / "v1" / "config.json").is_file()
        assert version.startswith("agent_prompt_v1@")


def test_react_stops_at_deadline_while_the_llm_stalls(tmp_path):
    deadline = time.time() + 4
    ws = make_workspace(tmp_path, deadline)
    steps = [Step(shell="echo first"), Step(shell="echo never")]
    with StandinLLM(steps, stall_at_step=1, stall_s=30) as llm, StandinGrading(ws) as grading:
        proc, elapsed, _ = launch(ws, llm, grading.url, deadline)
    acts = actions_of(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 8, f"ran {elapsed:.1f} s past a 4 s budget"
    assert time.time() >= deadline - 1.5
    assert [s.command for s in acts if s.kind == "shell"] == ["echo first"]
    assert acts[-1].kind == "error" and acts[-1].text == "deadline reached: stopping"


def test_react_kills_a_running_command_at_deadline(tmp_path):
    deadline = time.time() + 3
    ws = make_workspace(tmp_path, deadline)
    steps = [Step(shell="(sleep 60 & echo $! > bg.pid; wait) ; echo unreachable")]
    with StandinLLM(steps) as llm, StandinGrading(ws) as grading:
        proc, elapsed, _ = launch(ws, llm, grading.url, deadline)
    assert elapsed < 7, f"ran {elapsed:.1f} s past a 3 s budget"
    acts = actions_of(proc.stdout)
    assert acts[-1].kind == "error" and "deadline" in acts[-1].text
    shells = [a for a in acts if a.kind == "shell"]
    assert all(s.exit_code is None and "unreachable" not in (s.output or "") for s in shells)
    pid = int((ws / "bg.pid").read_text())
    assert holds_within(lambda: _dead(pid), 3.0, interval=0.05), f"background process {pid} outlived the deadline"   # the whole group is gone


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting for its new parent (here PID 1) to reap it: killed either way."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_react_reports_an_unreachable_driver(tmp_path):
    ws = make_workspace(tmp_path, time.time() + 30)
    (ws / "prompt.md").write_text("do it")
    env = {"PATH": os.environ["PATH"], "RUN_DEADLINE": str(time.time() + 30)}
    agent = builtin_agents_dir() / "react"
    proc = subprocess.run([sys.executable, str(agent), "--prompt-file", "prompt.md", "--driver-url",
                           "http://127.0.0.1:9/v1", "--model", "m", "--request-timeout", "1", "--retries", "1"],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=60)
    acts = actions_of(proc.stdout)
    assert proc.returncode == 1
    errors = [a for a in acts if a.kind == "error"]
    assert len(errors) == 2 and "cannot reach http://127.0.0.1:9/v1/chat/completions" in errors[0].text
