"""Test agent: replays a recorded Claude Code stream-json trace (each assistant line carries token
usage) line by line, then idles far past any token budget."""

import time
from pathlib import Path

# In the agent's own folder: a sandboxed agent sees that folder and nothing else of the repository.
trace = Path(__file__).resolve().parent / "traces" / "claude_stream_json.jsonl"
for line in trace.read_text().splitlines():
    print(line, flush=True)
    time.sleep(0.05)
while True:
    time.sleep(1)
