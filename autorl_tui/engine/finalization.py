"""The end of a run that produced an agent exit: select the submission (best dev score, earliest
among equals), grade it once on the held-out test split, and state the result: the fields the run's
`done` transition records (test score, improvement over the base model on test, the selection).
No valid submission is a failure, blamed on the budget or the agent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autorl_tui.engine.run_outcomes import RunFailure

if TYPE_CHECKING:
    from autorl_tui.engine.run_grading import RunGrading
    from autorl_tui.engine.run_journal import RunJournal
    from autorl_tui.home import Home


@dataclass(frozen=True)
class FinalResult:
    reason: str           # the run's end reason
    fields: dict          # test_score, improvement, best_submission_id, best_dev_score


async def finalize(journal: "RunJournal", grading: "RunGrading", home: "Home",
                   agent_exit: tuple[int | None, str]) -> FinalResult:
    """agent_exit: (exit code, why it ended: exited | deadline | a budget or kill reason)."""
    best = journal.store.best_submission(journal.run_id)
    code, reason = agent_exit
    if best is None:
        why = {"deadline": "the budget ran out", "exited": f"the agent exited (code {code})"}.get(reason, reason)
        source = "budget" if reason == "deadline" or "budget exhausted" in reason else "agent"
        raise RunFailure(source, f"no valid submission: {why} without one")
    test_score = best.test_score
    if test_score is None:
        work = grading.work_dir(f"test-{best.seq}")
        outcome = await grading.grade(Path(best.snapshot_path), "test", work)
        if not outcome.ok:
            raise RunFailure("grader", f"held-out test grading failed: {outcome.error}")
        journal.store.delete_samples(best.id, "test")
        grading.store_samples(outcome.samples, "test", submission_id=best.id)
        test_score = outcome.score
        # the test grading's details sit beside the dev ones (a task's own figures included)
        journal.set_submission(best.id, test_score=test_score,
                               metrics={**(best.metrics or {}), "test": outcome.metrics})
    baseline = journal.run.baseline_score
    improvement = None if baseline is None else test_score - baseline
    end_reason = {"deadline": "deadline reached", "exited": f"agent finished (exit code {code})"}.get(reason, reason)
    return FinalResult(end_reason, {"test_score": test_score, "improvement": improvement,
                                    "best_submission_id": best.id, "best_dev_score": best.score})
