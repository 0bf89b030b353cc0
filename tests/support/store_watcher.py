"""Watch a live store from a test: when each run's training metrics first became visible."""

import sqlite3
import threading
import time


class StoreWatcher(threading.Thread):
    """Polls the live store (read-only) and notes when each run's first training metric, and each
    (run, name) pair, became visible: the time a point *reached the store* (committed)."""

    def __init__(self, db_path):
        super().__init__(daemon=True)
        self.db_path, self.first_seen, self.stop = db_path, {}, threading.Event()

    def run(self):
        while not self.stop.is_set():
            if self.db_path.exists():
                try:
                    db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=1)
                    rows = db.execute("SELECT DISTINCT run_id, name FROM metrics WHERE source <> 'grading'").fetchall()
                    db.close()
                    now = time.time()
                    for run_id, name in rows:
                        self.first_seen.setdefault((run_id, name), now)
                        self.first_seen.setdefault((run_id, None), now)
                except sqlite3.Error:
                    pass      # not migrated yet, or a checkpoint in progress: try again
            self.stop.wait(0.1)
