"""Agent stream parsing and the react agent's overhead.

- parse throughput per format: the documented traces replayed many times (lines/s);
- recorder throughput: claude stream-json lines into a real SQLite store (lines/s);
- react agent: wall time of a 5-tool-call scripted session against the local stand-in LLM
  (process start + HTTP + tools; the model itself costs nothing here).
"""

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autorl_tui.catalog.agents import builtin_agents_dir, load_agent_spec  # noqa: E402
from autorl_tui.instrument.action_log import ActionRecorder  # noqa: E402
from autorl_tui.instrument.parsers import get_parser  # noqa: E402
from autorl_tui.store.db import Store  # noqa: E402
from tests.support.agent_session import executor_env, make_workspace, run_agent  # noqa: E402
from tests.support.standin_grading import StandinGrading  # noqa: E402
from tests.support.standin_llm import Step, StandinLLM  # noqa: E402

TRACES = REPO / "tests" / "data" / "traces"
FORMATS = {"claude_stream_json": "claude_stream_json", "codex_json": "codex_json",
           "gemini_stream_json": "gemini_stream_json", "opencode_json": "opencode_json",
           "openhands_sdk": "openhands", "react_json": "react_json"}

for trace, fmt in FORMATS.items():
    lines = (TRACES / f"{trace}.jsonl").read_text().splitlines() * 500
    parser = get_parser(fmt)
    t0 = time.perf_counter()
    for line in lines:
        parser.feed(line)
    parser.finish()
    print(f"parse_{trace}: {len(lines) / (time.perf_counter() - t0):.0f} lines/s")

with tempfile.TemporaryDirectory() as tmp:
    store = Store(Path(tmp) / "s.sqlite")
    store.insert("runs", {"id": "r1", "task": "t", "agent": "a", "model": "m", "budget_s": 1, "state": "running",
                          "created_at": time.time(), "spec": {}})
    rec = ActionRecorder(store, "r1", 1, "claude_stream_json")
    lines = (TRACES / "claude_stream_json.jsonl").read_text().splitlines() * 300
    t0 = time.perf_counter()
    for line in lines:
        rec.feed(line)
    rec.finish()
    store.flush()
    print(f"record_claude_stream_json_to_store: {len(lines) / (time.perf_counter() - t0):.0f} lines/s")

    root = Path(tmp) / "react"
    deadline = time.time() + 60
    ws = make_workspace(root, deadline)
    steps = [Step(shell="ls"), Step(tool="write_file", args={"path": "code/a.py", "content": "print(1)\n"}),
             Step(shell="python3 code/a.py"), Step(tool="read_file", args={"path": "code/a.py"}),
             Step(shell="true")]
    with StandinLLM(steps) as llm, StandinGrading(ws) as grading:
        spec = load_agent_spec(builtin_agents_dir() / "react.yaml")
        proc, elapsed, _ = run_agent(spec, ws, executor_env(ws, grading.url, deadline),
                                     {"python": sys.executable, "driver": "m", "driver_url": llm.base_url + "/v1"})
        assert proc.returncode == 0, proc.stderr
    print(f"react_scripted_session_5_tools: {elapsed:.2f} s")
