"""The run's real grading API (`engine.run_api.RunApiServer`: its routes, token prefix, input
limits and error answers) in a thread of its own, over a desk that scores every submission with a
fixed number instead of grading it: agent tests submit a folder that is not a model. The desk checks
the path with the engine's own rule (`engine.submissions.resolve_submission_path`: a folder under
output/ reached and read without following a link), so only the score is stood in."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from autorl_tui.engine.run_api import RunApiServer
from autorl_tui.grading_host.submissions import resolve_submission_path


class FixedScoreDesk:
    """The SubmissionDesk the server calls: every valid submission scores `score`."""

    def __init__(self, workspace: Path, score: float, baseline: float, deadline: float | None):
        self.workspace, self.score, self.baseline, self.deadline = Path(workspace), score, baseline, deadline
        self.submissions: list[dict] = []

    async def submit(self, model_path: str, gpu=None) -> dict:
        resolve_submission_path(self.workspace, model_path)      # SubmissionRejected -> HTTP 400
        sub = {"submission_id": len(self.submissions) + 1, "model_path": model_path, "score": self.score,
               "baseline_score": self.baseline, "improvement": self.score - self.baseline}
        self.submissions.append(sub)
        return sub

    def time_info(self) -> dict:
        now = time.time()
        return {"deadline": self.deadline, "remaining_seconds": max(0.0, (self.deadline or now) - now)}

    def submissions_info(self) -> list[dict]:
        return list(self.submissions)

    def health_info(self) -> dict:
        return {"ok": True, "status": "ok", "workspace": str(self.workspace)}


class StandinGrading:
    def __init__(self, workspace: Path, score: float = 42.0, baseline: float = 10.0, deadline: float | None = None):
        self.desk = FixedScoreDesk(workspace, score, baseline, deadline)
        self.server = RunApiServer(self.desk)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def submissions(self) -> list[dict]:
        return self.desk.submissions

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> "StandinGrading":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=30)
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        self._loop.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
