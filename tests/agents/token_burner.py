"""Test agent: replays a recorded Claude Code stream-json trace (each assistant line carries token
usage) line by line, then idles far past any token budget."""

import time
from pathlib import Path

trace = Path(__file__).resolve().parents[1] / "data" / "traces" / "claude_stream_json.jsonl"
for line in trace.read_text().splitlines():
    print(line, flush=True)
    time.sleep(0.05)
while True:
    time.sleep(1)
