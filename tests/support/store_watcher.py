"""Watch a live store from a test: when each run's training metrics first became visible."""

import sqlite3
import threading
import time


class StoreWatcher(threading.Thread):
    """Polls the live store (read-only) and notes when each run's first training metric, and each
    (run, name) pair, became visible: the time a point *reached the store* (committed).
    `point_seen[(run, name, n)]`: when the n-th stored point of that name (in row order) did."""

    def __init__(self, db_path):
        super().__init__(daemon=True)
        self.db_path, self.first_seen, self.stop = db_path, {}, threading.Event()
        self.point_seen: dict[tuple, float] = {}
        self._last_id, self._counts = 0, {}

    def run(self):
        while not self.stop.is_set():
            if self.db_path.exists():
                try:
                    db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=1)
                    rows = db.execute("SELECT id, run_id, name FROM metrics WHERE id > ? AND source <> 'grading' "
                                      "ORDER BY id", (self._last_id,)).fetchall()
                    db.close()
                    now = time.time()
                    for row_id, run_id, name in rows:
                        self._last_id = max(self._last_id, row_id)
                        n = self._counts.get((run_id, name), 0)
                        self._counts[(run_id, name)] = n + 1
                        self.point_seen[(run_id, name, n)] = now
                        self.first_seen.setdefault((run_id, name), now)
                        self.first_seen.setdefault((run_id, None), now)
                except sqlite3.Error:
                    pass      # not migrated yet, or a checkpoint in progress: try again
            self.stop.wait(0.1)


def watched_batch(home, plan, tiny_model_dir, env: dict | None = None):
    """Run plan `--batch` under the real engine (the tests' agents and tasks, the tiny model) while a
    StoreWatcher watches; returns (watcher, read-only store connection, runs by agent)."""
    import os
    import shutil
    import subprocess
    import sys

    from tests.support.harness import REPO, TASKS, TEST_AGENTS

    (home / "models").mkdir(parents=True)
    shutil.copytree(tiny_model_dir, home / "models" / "tiny")
    watcher = StoreWatcher(home / "store.db")
    watcher.start()
    proc = subprocess.run([sys.executable, "-m", "autorl_tui", "--home", str(home), "--agents-dir", str(TEST_AGENTS),
                           "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan)],
                          capture_output=True, text=True, timeout=1500,
                          env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})), cwd=REPO)
    watcher.stop.set()
    watcher.join()
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return watcher, db, {r["agent"]: dict(r) for r in db.execute("SELECT * FROM runs")}
