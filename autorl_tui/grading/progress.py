"""The grader worker's progress file: `{"done", "total", "stage"}`, rewritten atomically as work
advances, so whoever started the worker can show samples done / total while it waits. Knows
nothing of runs; writing it is best effort (a full disk must not fail a grading)."""

from __future__ import annotations

import json
import os
from pathlib import Path

PROGRESS_FILE = "progress.json"


class ProgressFile:
    def __init__(self, path: Path | None):
        self.path = Path(path) if path is not None else None
        self.scorer_stage: str | None = None

    def write(self, done: int, total: int, stage: str) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        try:
            tmp.write_text(json.dumps({"done": int(done), "total": int(total), "stage": stage}))
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)

    def inference(self, done: int, total: int) -> None:
        """Batches of the backend. Ignored once the scorer reports its own units (an episode
        scorer calls the backend once per step: its batches are not samples)."""
        if self.scorer_stage is None:
            self.write(done, total, "inference")

    def scorer(self, done: int, total: int, stage: str) -> None:
        self.scorer_stage = stage
        self.write(done, total, stage)
