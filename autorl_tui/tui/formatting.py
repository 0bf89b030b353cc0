"""Text for cells and labels (plain functions, shared by screens)."""

from __future__ import annotations

from autorl_tui.durations import format_duration
# The screens import the states from here; their one home is autorl_tui/run_states.py.
from autorl_tui.run_states import ACTIVE_STATES, FINAL_STATES as FINISHED_STATES  # noqa: F401

STATE_STYLE = {
    "queued": "dim", "preparing": "cyan", "baseline": "cyan", "running": "bold green", "paused": "yellow",
    "finalizing": "cyan", "done": "green", "failed": "bold red", "cancelled": "magenta", "lost": "red",
}
STATE_ICON = {
    "queued": "·", "preparing": "◔", "baseline": "◑", "running": "▶", "paused": "⏸", "finalizing": "◕",
    "done": "✓", "failed": "✗", "cancelled": "⊘", "lost": "?",
}


def short_id(run_id: str) -> str:
    return run_id.split("-", 1)[0]


def fmt_score(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def fmt_delta(value) -> str:
    return "-" if value is None else f"{value:+.1f}"


def budget_s(run: dict) -> float | None:
    """The agent's budget as it stands (extensions move the deadline)."""
    if run.get("deadline") and run.get("started_at"):
        return run["deadline"] - run["started_at"]
    return run.get("budget_s")


def agent_span(run: dict, now: float) -> tuple[float, float] | None:
    """(the agent's own elapsed time, the time after it: held-out grading and finalizing), both
    from the agent's start. The agent never runs past its deadline, so time past it is after."""
    start = run.get("started_at")
    if not start:
        return None
    end = (run.get("ended_at") if run.get("state") in FINISHED_STATES else None) or now
    agent_end = min(run.get("agent_ended_at") or end, end)
    if run.get("deadline"):
        agent_end = min(agent_end, run["deadline"])
    return max(0.0, agent_end - start), max(0.0, end - agent_end)


def fmt_elapsed_budget(run: dict, now: float) -> str:
    """The agent's elapsed time against its budget (grading and finalizing are not in it)."""
    span = agent_span(run, now)
    return f"{format_duration(span[0]) if span else '-'}/{format_duration(budget_s(run))}"


def fmt_after_agent(run: dict, now: float) -> str:
    """'graded +28s': the time a run spent after its agent (held-out grading, finalizing)."""
    span = agent_span(run, now)
    if not span or span[1] < 1:
        return ""
    return f"{'grading' if run.get('state') == 'finalizing' else 'graded'} +{format_duration(span[1])}"


STALE_AFTER_S = 300.0   # an active run silent this long is marked stale (phases report at least every 10 s)


def is_stale(run: dict, now: float) -> bool:
    """Active (not paused) and silent for STALE_AFTER_S: hung, or no engine is watching it."""
    last = run.get("last_event_at")
    return run.get("state") in ACTIVE_STATES and run.get("state") != "paused" and bool(last) \
        and now - last > STALE_AFTER_S


def fmt_age(seconds: float) -> str:
    """A coarse age for a glance: 45s, 6m, 2h05m."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def fmt_liveness(run: dict, now: float) -> str:
    """'step 120 · 2m ago' / 'materializing split train: 0/3 · 12s ago' for an active run; for a
    failed one what failed and why ('grading: grader exited 1'); '' else."""
    if run.get("state") == "failed":
        return ": ".join(str(p) for p in (run.get("failure_source"), run.get("end_reason")) if p)
    if run.get("state") not in ACTIVE_STATES:
        return fmt_after_agent(run, now)
    if run.get("waiting"):        # executor ray: its cluster unreachable, the budget clock stopped
        what = f"waiting for {run['waiting']}"
    elif run["state"] in ("preparing", "baseline") and run.get("progress"):
        what = str(run["progress"]).removeprefix("preparing: ")
    elif run.get("step") is not None:
        what = f"step {run['step']}"
    else:
        what = run["state"]
    last = run.get("last_event_at")
    if not last:
        return what
    age = fmt_age(now - last)
    return f"STALE {age}: {what}" if is_stale(run, now) else f"{what} · {age} ago"


def time_left(run: dict, now: float) -> float | None:
    deadline = run.get("deadline")
    if not deadline or run.get("state") in FINISHED_STATES:
        return None
    return max(0.0, deadline - now)


def fmt_offset(seconds: float | None) -> str:
    """'+MM:SS' (or '+H:MM:SS') since the run started: deterministic, timezone-free."""
    if seconds is None:
        return "   -  "
    sign = "-" if seconds < 0 else "+"
    s = int(abs(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h}:{m:02d}:{s:02d}" if h else f"{sign}{m:02d}:{s:02d}"


def dev_baseline(run: dict):
    """The base model's dev score (what best dev is compared with); `baseline_score` is the test one."""
    return run.get("baseline_dev_score")


def shown_improvement(run: dict) -> tuple[float | None, str]:
    """Test improvement once the held-out test is scored, else the dev improvement so far."""
    if run.get("improvement") is not None:
        return run["improvement"], "test"
    return run.get("dev_improvement"), "dev"
