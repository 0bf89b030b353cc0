"""Run the log-flood test agent (tests/agents/log_flood.py) through the real engine and measure the
grading API meanwhile: shared by tests/functional/test_log_flood.py and benchmarks/bench_log_flood.py."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.support.harness import REPO, TASKS, TEST_AGENTS, write_plan


def db(home: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))


def run_flood(home: Path, tmp_path: Path, lines: int, log_cap: dict | None, executor: str = "local") -> dict:
    """Run the flood agent through the real engine; returns latencies (s) of GET /time during the run,
    the run row, event counts, the store's size and the engine's peak RSS while it ran."""
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-log-flood"], budget="300s", executor=executor,
                      **({"log_cap": log_cap} if log_cap else {}))
    env = dict(os.environ, PYTHONPATH=str(REPO), FLOOD_LINES=str(lines))
    cmd = [sys.executable, "-m", "autorl_tui", "--home", str(home), "--agents-dir", str(TEST_AGENTS),
           "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan)]
    console = open(tmp_path / "engine.out", "w+")
    engine = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=console, stderr=subprocess.STDOUT, text=True)
    latencies: list[float] = []
    max_rss = 0
    try:
        import psutil

        proc = psutil.Process(engine.pid)
        url = None
        deadline = time.time() + 400
        while url is None:               # the agent starts once the baselines are graded
            assert time.time() < deadline and engine.poll() is None, "the run never started its agent"
            try:
                row = db(home).execute("SELECT a.grading_url FROM attempts a JOIN runs r ON r.id=a.run_id "
                                        "WHERE r.state='running'").fetchone()
                url = row and row[0]
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        while True:                      # every request for as long as the run is running
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(f"{url}/time", timeout=30) as r:
                    json.loads(r.read())
            except OSError:
                break                    # the API closed: the agent ended and ingestion finished
            latencies.append(time.perf_counter() - t0)
            try:
                max_rss = max(max_rss, proc.memory_info().rss)
            except psutil.Error:
                pass
            assert time.time() < deadline + 300, "the run did not end"
        engine.wait(timeout=300)
        console.seek(0)
        assert engine.returncode == 0, console.read()[-5000:]
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()
    conn = db(home)
    run = dict(conn.execute("SELECT * FROM runs").fetchone())
    counts = {r[0]: r[1] for r in conn.execute("SELECT kind, COUNT(*) FROM events WHERE run_id=? GROUP BY kind",
                                             (run["id"],))}
    messages = [r[0] for r in conn.execute("SELECT message FROM events WHERE run_id=? AND kind='harness'", (run["id"],))]
    conn.close()
    store_bytes = sum(p.stat().st_size for p in home.glob("store.db*"))
    return {"latencies": latencies, "run": run, "counts": counts, "messages": messages, "store_bytes": store_bytes,
            "max_rss": max_rss}
