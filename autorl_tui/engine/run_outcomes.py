"""How a run's steps end early: each exception names the run's next state (supervisor.py turns it
into the transition). Raised by the supervisor, its grading and its finalization alike."""

from __future__ import annotations


class RunFailure(Exception):
    """The run fails; `source` is who is to blame (agent | infra | task | grader | user | budget)."""

    def __init__(self, source: str, message: str):
        super().__init__(message)
        self.source = source


class RunCancelled(Exception):
    pass


class RunLost(Exception):
    pass


class InfraRetry(Exception):
    """An infrastructure failure of this attempt: retried as a new attempt after a backoff, while
    the retry policy allows (agent failures are never retried)."""
