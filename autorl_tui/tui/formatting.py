"""Text for cells and labels (plain functions, shared by screens)."""

from __future__ import annotations

from autorl_tui.durations import format_duration

ACTIVE_STATES = ("preparing", "baseline", "running", "paused", "finalizing")
FINISHED_STATES = ("done", "failed", "cancelled", "lost")
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


def elapsed_s(run: dict, now: float) -> float | None:
    start = run.get("started_at")
    if not start:
        return None
    end = run.get("ended_at") if run.get("state") in FINISHED_STATES else None
    return max(0.0, (end or now) - start)


def fmt_elapsed_budget(run: dict, now: float) -> str:
    return f"{format_duration(elapsed_s(run, now)) if run.get('started_at') else '-'}/" \
           f"{format_duration(run.get('budget_s'))}"


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
