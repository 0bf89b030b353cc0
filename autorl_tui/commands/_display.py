"""Headless displays for `--batch` and `demo`: rich live progress on a terminal, plain lines
otherwise (CI logs). Both render engine events; neither imports Textual."""

from __future__ import annotations

import asyncio
import sys
import time

from autorl_tui.durations import format_duration
from autorl_tui.engine import events as ev
from autorl_tui.exitcodes import ExitCode
from autorl_tui.store.queries import StoreReader
from autorl_tui.store.records import RunRecord
from autorl_tui import settings
from autorl_tui.run_states import FINAL_STATES as FINAL, UNSUCCESSFUL_STATES


def _f(v, nd=1) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


PREP_ESTIMATE_S = 60.0   # a queued run's preparation and baseline, before its budget starts


def plan_progress(rows: list[RunRecord], concurrency: int, now: float | None = None) -> dict:
    """Done / total over a plan's runs and a time-left estimate from their budgets: what is left of
    each active run's budget, plus whole budgets (and a preparation allowance) of queued runs,
    spread over the engine's concurrency."""
    now = time.time() if now is None else now
    finished = [r for r in rows if r.state in FINAL]
    left = []
    for r in rows:
        if r.state in FINAL:
            continue
        if r.started_at:
            left.append(max(0.0, r.budget_s - (now - r.started_at)))
        else:
            left.append(r.budget_s + PREP_ESTIMATE_S)
    eta = max(max(left, default=0.0), sum(left) / max(1, concurrency)) if left else 0.0
    return {"finished": len(finished), "total": len(rows), "done": sum(r.state == "done" for r in finished),
            "eta_s": eta, "best": {r.id: r.best_dev_score for r in rows}}


def progress_line(p: dict) -> str:
    bar_w = 20
    filled = round(bar_w * p["finished"] / max(1, p["total"]))
    text = f"[{'#' * filled}{'.' * (bar_w - filled)}] {p['finished']}/{p['total']} run(s) finished"
    if p["finished"] > p["done"]:
        text += f" ({p['finished'] - p['done']} not done)"
    if p["finished"] < p["total"]:
        text += f"; about {format_duration(p['eta_s'])} left (from budgets)"
    return text


def best_dev_line(p: dict) -> str:
    return "best dev: " + ", ".join(f"{rid.split('-')[0]} {_f(v)}" for rid, v in p["best"].items())


class PlainDisplay:
    # Lines for CI logs: when nothing was said for this long, a line per active run says where it is
    # (the demo's agent used to work for minutes without a word).
    HEARTBEAT_S: float | None = None    # None: the setting AUTORL_PLAIN_HEARTBEAT_S (default 30)

    def __init__(self, engine, stream=None):
        self.heartbeat_s = settings.current().plain_heartbeat_s if self.HEARTBEAT_S is None else self.HEARTBEAT_S
        self.engine = engine
        self.stream = stream or sys.stdout
        self._task: asyncio.Task | None = None
        self._beat: asyncio.Task | None = None
        self._sub_status: dict[int, str] = {}
        self._last_note = time.monotonic()
        self._last_output: dict[str, str] = {}

    def note(self, text: str) -> None:
        self._last_note = time.monotonic()
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=self.stream, flush=True)

    def start(self, run_ids: list[str], plan_name: str) -> None:
        self.note(f"plan {plan_name}: {len(run_ids)} run(s) queued: {', '.join(run_ids)}")
        self.run_ids = set(run_ids)
        self.order = list(run_ids)
        self._sub = self.engine.bus.subscribe()
        self._task = asyncio.create_task(self._follow())
        if self.heartbeat_s > 0:
            self._beat = asyncio.create_task(self._heartbeat())

    async def _follow(self) -> None:
        async for e in self._sub:
            if e.run_id not in self.run_ids:
                continue
            if isinstance(e, ev.RunEventAppended) and e.kind in ("stdout", "stderr", "action"):
                self._last_output[e.run_id] = " ".join(e.message.split())[:100]
            self.render(e)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(max(0.2, self.heartbeat_s - (time.monotonic() - self._last_note)))
            if time.monotonic() - self._last_note < self.heartbeat_s:
                continue
            now = time.time()
            active = [r for r in self.rows() if r.state not in FINAL and r.state != "queued"]
            for r in active:
                clock = (f" {format_duration(now - r.started_at)}/{format_duration(r.budget_s)}"
                         if r.started_at and r.state in ("running", "paused") else "")
                last = self._last_output.get(r.id)
                self.note(f"{r.id}: {r.state}{clock}, best dev {_f(r.best_dev_score)}"
                          + (f"; last output: {last}" if last else ""))
            if not active:
                self._last_note = time.monotonic()

    def reader(self) -> StoreReader | None:
        store = self.engine.store if self.engine is not None else None
        return StoreReader.over(store) if store is not None else None

    def rows(self) -> list[RunRecord]:
        reader = self.reader()
        if reader is None:
            return []
        return [r for r in map(reader.run, self.order) if r is not None]

    def progress(self) -> dict | None:
        rows = self.rows()
        return plan_progress(rows, getattr(self.engine, "concurrency", 1)) if rows else None

    def render(self, e) -> None:
        if isinstance(e, ev.RunStateChanged):
            self.note(f"{e.run_id}: {e.state}" + (f" ({e.reason})" if e.reason else ""))
            p = self.progress()
            if p is not None and (e.state in FINAL or e.state == "running"):
                self.note(f"{progress_line(p)}; {best_dev_line(p)}")
        elif isinstance(e, ev.SubmissionUpdated):
            s = e.submission
            if self._sub_status.get(s["id"]) == s["status"]:
                return
            self._sub_status[s["id"]] = s["status"]
            if s["status"] == "scored":
                self.note(f"{e.run_id}: submission {s['seq']} scored {_f(s['score'])} on dev "
                          f"({'+' if (s['improvement'] or 0) >= 0 else ''}{_f(s['improvement'])} vs baseline)")
            elif s["status"] in ("rejected", "error"):
                self.note(f"{e.run_id}: submission {s['seq']} {s['status']}: {s['error']}")
            elif s["status"] == "duplicate":
                self.note(f"{e.run_id}: submission {s['seq']} duplicates an earlier one ({_f(s['score'])})")
        elif isinstance(e, ev.RunEventAppended) and e.kind == "harness" and e.level in ("warning", "error"):
            self.note(f"{e.run_id}: {e.message}")
        elif isinstance(e, ev.RunEventAppended) and e.kind == "harness" and e.message.startswith(("baseline", "preparing:")):
            self.note(f"{e.run_id}: {e.message}")

    def stop(self) -> None:
        if self._task:
            self._task.cancel()
            self._sub.close()
        if self._beat:
            self._beat.cancel()


class RichDisplay(PlainDisplay):
    """A live table of the plan's runs, refreshed twice a second."""
    HEARTBEAT_S = 0       # the table shows each run's progress and last output all the time

    def start(self, run_ids: list[str], plan_name: str) -> None:
        from rich.console import Console
        from rich.live import Live

        self.plan_name = plan_name
        self.order = list(run_ids)
        self.last_line: dict[str, str] = {}
        self.console = Console()
        self.live = Live(self._table(), console=self.console, refresh_per_second=2, transient=False)
        self.live.start()
        super().start(run_ids, plan_name)
        self._refresh = asyncio.create_task(self._tick())

    def note(self, text: str) -> None:
        if hasattr(self, "live"):
            self.live.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {text}")
        else:
            super().note(text)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            self.live.update(self._table())

    def render(self, e) -> None:
        if isinstance(e, ev.RunEventAppended) and e.kind in ("stdout", "stderr", "action"):
            self.last_line[e.run_id] = e.message[:80]
            return
        if isinstance(e, ev.RunEventAppended) and e.kind == "harness" and e.message.startswith(("preparing:", "baseline")):
            self.last_line[e.run_id] = e.message[:80]     # shown in the table, not as a scrolling line
            return
        if isinstance(e, ev.RunStateChanged):
            self.note(f"{e.run_id}: {e.state}" + (f" ({e.reason})" if e.reason else ""))
            return
        super().render(e)

    def _table(self):
        from rich.table import Table

        p = self.progress() if hasattr(self, "order") else None
        table = Table(title=f"plan {getattr(self, 'plan_name', '')}", expand=True,
                      caption=progress_line(p) if p else None)
        for col in ("run", "state", "elapsed / budget", "baseline", "best dev", "test", "last output"):
            if col == "run":       # never cut or folded
                table.add_column(col, no_wrap=True, min_width=max(map(len, getattr(self, "order", []) or ["run"])))
            else:
                table.add_column(col, overflow="fold")
        now = time.time()
        for r in self.rows() if hasattr(self, "order") else []:
            elapsed = (min(now, r.ended_at or now) - r.started_at) if r.started_at else 0
            table.add_row(r.id, r.state, f"{format_duration(elapsed)} / {format_duration(r.budget_s)}",
                          _f(r.baseline_dev_score), _f(r.best_dev_score), _f(r.test_score),
                          self.last_line.get(r.id, ""))
        return table

    def stop(self) -> None:
        super().stop()
        if hasattr(self, "_refresh"):
            self._refresh.cancel()
            self.live.update(self._table())
            self.live.stop()


def make_display(engine, plain: bool):
    return PlainDisplay(engine) if plain else RichDisplay(engine)


async def follow_to_end(engine, run_ids: list[str], title: str, plain: bool) -> list[dict]:
    """Show the runs until each has ended, then the summary and where to look next; their rows."""
    display = make_display(engine, plain=plain)
    display.start(run_ids, title)
    rows = await engine.wait_runs(run_ids)
    display.stop()
    print_outcome(StoreReader.over(engine.store), engine.home.root, rows)
    return rows


def print_outcome(reader: StoreReader, home_root, rows: list[dict], plan_name: str | None = None,
                  show_next: bool = True, stream=None) -> ExitCode:
    """The end of following runs, whichever route followed them (`--batch` in this process or
    handed to a running engine, `retry`, `resume`): the summary table, then where to look next;
    returns the exit code (RUN_FAILED unless every run is done)."""
    print_summary(reader, [r["id"] for r in rows], stream)
    if show_next:
        print_next(home_root, rows, plan_name, stream=stream)
    return ExitCode.OK if all(r["state"] == "done" for r in rows) else ExitCode.RUN_FAILED


def print_summary(reader: StoreReader, run_ids: list[str], stream=None) -> None:
    from rich.console import Console
    from rich.table import Table

    out = stream or sys.stdout
    console = Console(file=out, width=None if out.isatty() else 160)   # a terminal's own width; logs: 160
    table = Table(title="summary (scores 0-100; baseline = base model on the same split)")
    runs = [r for r in map(reader.run, run_ids) if r is not None]
    id_width = max((len(r.id) for r in runs), default=3)
    for col in ("run", "state", "baseline dev", "submissions (dev)", "best dev", "baseline test", "test (selected)",
                "improvement", "wall time", "end"):
        if col == "run":     # ids are never cut or folded: they are what the next commands take
            table.add_column(col, no_wrap=True, min_width=id_width)
        else:
            table.add_column(col, overflow="fold")
    narrow = console.width < 140     # ten columns do not fit: one block of lines per run instead
    if narrow:
        console.print("summary (scores 0-100; baseline = base model on the same split)", style="bold")
    for r in runs:
        subs = ", ".join(f"v{s.seq}:{_f(s.score)}" if s.status in ("scored", "duplicate")
                         else f"v{s.seq}:{s.status}" for s in reader.submissions(r.id)) or "-"
        imp = r.improvement
        cells = (r.id, r.state, _f(r.baseline_dev_score), subs, _f(r.best_dev_score),
                 _f(r.baseline_score), _f(r.test_score),
                 "-" if imp is None else f"{imp:+.1f}", format_duration(r.wall_s) if r.wall_s else "-",
                 r.end_reason or r.failure_source or "-")
        if narrow:
            console.print(f"{cells[0]}  {cells[1]}", markup=False, highlight=False)
            console.print(f"  dev: baseline {cells[2]}, submissions {cells[3]}, best {cells[4]}", markup=False)
            console.print(f"  test: baseline {cells[5]}, selected {cells[6]}, improvement {cells[7]}", markup=False)
            console.print(f"  wall time {cells[8]}; {cells[9]}", markup=False)
        else:
            table.add_row(*cells)
    if not narrow:
        console.print(table)


def print_next(home_root, rows: list[dict], plan_name: str | None = None, exports: dict | None = None,
               stream=None) -> None:
    """Where to look next, as commands that work when pasted: `--home` is always spelled out."""
    import shlex

    out = stream or sys.stdout
    h = shlex.quote(str(home_root))
    print("\nnext:", file=out)
    for r in rows:
        print(f"  report   autorl-tui report {r['id']} --home {h}", file=out)
    if plan_name and len(rows) > 1:
        print(f"  compare  autorl-tui compare --plan {shlex.quote(plan_name)} --home {h}", file=out)
    print(f"  runs     autorl-tui runs list --home {h}", file=out)
    for r in rows:
        if exports and r["id"] in exports:
            print(f"  export   {exports[r['id']]}", file=out)
        else:
            print(f"  export   autorl-tui export {r['id']} --json {shlex.quote(r['id'] + '.json')} --home {h}", file=out)
    if any(r["state"] in UNSUCCESSFUL_STATES for r in rows):
        print(f"  retry    autorl-tui retry RUN --home {h}   (a failed, cancelled or lost run)", file=out)
    out.flush()
