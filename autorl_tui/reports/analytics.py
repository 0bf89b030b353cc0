"""The analytics layer: DuckDB over the SQLite store, attached read-only.

Reports and the console read runs through `Analytics`; every method returns plain lists of dicts
(or dicts) so callers never see DuckDB. The SQL lives in `sql/views.sql` (views) and
`sql/queries.sql` (named, parameterised queries).

The store is written live by the engine in WAL mode. The SQLite scanner opens it read-only: a
reader never takes a write lock, never checkpoints and never blocks the writer; each query sees a
consistent snapshot of what was committed when it started.

DuckDB cannot download extensions here, so the SQLite scanner is loaded from the file shipped by
the `duckdb-extension-sqlite-scanner` package, with extension auto-install/auto-load off.

One process, one SQLite library per file: the scanner bundles its own copy of SQLite, and two
copies of SQLite opening the same database in one process break each other's POSIX locks and
shared-memory mapping (sqlite.org/howtocorrupt.html §2.2; here it ended in SIGBUS while the
engine's writer committed). So when this process already has the store open (an engine hosted
in the same process, or any sqlite3 connection), `Analytics` reads a consistent snapshot copy
made with Python's own SQLite backup API instead of the live file. Reports run as their own
process (`autorl-tui report`) read the live file directly.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import sqlite3
import tempfile
import threading
import time
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import duckdb

from autorl_tui.exitcodes import InfraError, UsageError
from autorl_tui.reports.pushdown import create_macros
from autorl_tui.reports.sql_literals import inline
from autorl_tui.store.db import readonly_uri

SQL_DIR = Path(__file__).resolve().parent / "sql"

# Shell commands that start training (the phase heuristic counts them as "train").
TRAIN_COMMAND_RE = (r"(accelerate launch|torchrun|deepspeed|trl (sft|dpo|grpo)"
                    r"|python[0-9.]*( -u)? \S*(train|finetune|fine_tune|sft|dpo|grpo|ppo|rl)\S*\.py)")

# Names under which TRL (and common hand-written loops) log the series the danger signals watch,
# in order of preference.
SERIES_ALIASES = {
    "reward": ("reward", "train/reward", "rewards/mean", "objective/rlhf_reward", "env/reward_mean"),
    "kl": ("kl", "train/kl", "objective/kl", "policy/approxkl_avg"),
    "entropy": ("entropy", "train/entropy", "objective/entropy", "policy/entropy_avg"),
    "length": ("completions/mean_length", "completion_length", "train/completion_length",
               "completions/mean_terminated_length", "train/completions/mean_length"),
}
# A KL below this is no danger whatever its shape (TRL's GRPO logs ~1e-3..1e-1 in healthy runs).
KL_SPIKE_FLOOR = 0.1
# Entropy collapse is a reinforcement-learning failure: supervised stages lower entropy on purpose.
NOT_RL_KINDS = ("sft", "rm")

PHASES = ("explore", "write_code", "train", "evaluate", "idle")


def sqlite_scanner_path() -> Path:
    spec = importlib.util.find_spec("duckdb_extension_sqlite_scanner")
    if spec is None or not spec.origin:
        raise InfraError("the DuckDB SQLite scanner is not installed: "
                         "pip install duckdb-extension-sqlite-scanner==" + duckdb.__version__)
    path = Path(spec.origin).parent / "extensions" / f"v{duckdb.__version__}" / "sqlite_scanner.duckdb_extension"
    if not path.exists():
        raise InfraError(f"no SQLite scanner for DuckDB {duckdb.__version__} at {path}; install "
                         f"duckdb-extension-sqlite-scanner=={duckdb.__version__}")
    return path


# What the per-run aggregates give a run without rows (one query without GROUP BY would give these).
AGENT_END_NONE = {"ended_at": None, "running": 0}
RESOURCE_COST_NONE = {"n_samples": 0, "cpu_hours": None, "mean_cpu_percent": None, "peak_rss_bytes": None,
                      "gpu_busy_hours": None}


@lru_cache(maxsize=4)
def named_queries(file: str = "queries.sql") -> dict[str, str]:
    """The `-- name: <name>` blocks of a file in sql/."""
    text = (SQL_DIR / file).read_text()
    queries: dict[str, str] = {}
    for block in re.split(r"^-- name: ", text, flags=re.M)[1:]:
        name, _, body = block.partition("\n")
        queries[name.strip()] = body.strip().rstrip(";")
    return queries


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _decode_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _open_in_this_process(path: Path) -> bool:
    """True when a file descriptor of this process already points at the store (Linux /proc)."""
    target = os.path.realpath(path)
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False


def _snapshot(src: Path, dst: Path) -> None:
    """A consistent copy of a live store through the same SQLite library as the writer's."""
    source = sqlite3.connect(readonly_uri(src), uri=True)
    try:
        target = sqlite3.connect(str(dst))
        try:
            source.backup(target)
        finally:
            target.close()
    finally:
        source.close()


def _compat_views(conn) -> list[str]:
    """runs_v (s.runs, plus the dev-baseline columns computed for stores that predate them: there
    the only baseline is the dev one), metrics_v (s.metrics with session_id) and sessions_v
    (s.training_sessions), also for stores written before training sessions existed (every point
    then has no session), findings_v (s.findings; empty for stores older than trust findings).
    The SQL is sql/compat.sql."""
    sql = named_queries("compat.sql")
    tables = {r[0]: r[1] for r in conn.execute(sql["store_columns"]).fetchall()}
    if not tables.get("runs"):
        raise InfraError("the store has no runs table: is this an autorl-tui store?")
    missing = [sql[f"runs.{c}"] for c in ("baseline_dev_score", "dev_improvement", "imported_from")
               if c not in tables["runs"]]
    has_sessions = "session_id" in tables.get("metrics", [])
    return [sql["runs_view"].replace("{missing_columns}", "".join(", " + m for m in missing)),
            sql["metrics_view" if has_sessions else "metrics_view_before_sessions"],
            sql["sessions_view" if "training_sessions" in tables else "sessions_view_before_sessions"],
            sql["findings_view" if "findings" in tables else "findings_view_before_trust"]]


def _id_list(ids) -> str:
    # Lists go to DuckDB as one string split in SQL: binding a Python list would import pandas.
    return "\x1f".join(str(i) for i in ids)


class Analytics:
    """Read-only analytics over one store. Safe to use while the engine writes the store."""

    def __init__(self, store_path: str | Path, *, max_points: int = 400):
        self.store_path = Path(store_path)
        if not self.store_path.exists():
            raise UsageError(f"no store at {self.store_path}: run something first, or pass the right --home")
        self.max_points = max_points
        self.snapshot: Path | None = None
        self._tmpdir: tempfile.TemporaryDirectory | None = None
        read_path = self.store_path
        # DuckDB's SQLite reader cannot open a WAL store in a folder it cannot write: read a copy.
        if _open_in_this_process(self.store_path) or not os.access(self.store_path.parent, os.W_OK):
            self._tmpdir = tempfile.TemporaryDirectory(prefix="autorl-report-")
            read_path = self.snapshot = Path(self._tmpdir.name) / "store-snapshot.db"
            _snapshot(self.store_path, read_path)
        self._lock = threading.RLock()
        self._focused: dict[str, tuple] = {}
        self._conn = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                                        "autoload_known_extensions": False,
                                                        "threads": 1})
        try:
            self._conn.execute("SET enable_progress_bar = false")    # a long scan printed a bar on stdout
            self._conn.execute(f"LOAD '{sqlite_scanner_path()}'")
            quoted = str(read_path).replace("'", "''")
            self._conn.execute(f"ATTACH '{quoted}' AS s (TYPE sqlite, READ_ONLY)")
            for view in _compat_views(self._conn):
                self._conn.execute(view)
            create_macros(self._conn, named_queries("pushdown.sql"))
            self._conn.execute((SQL_DIR / "views.sql").read_text())
        except duckdb.Error as exc:
            self._conn.close()
            raise InfraError(f"cannot read store {self.store_path} with DuckDB: {exc}") from exc

    def close(self) -> None:
        self._conn.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> "Analytics":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    def query(self, query_name: str, /, **params: Any) -> list[dict]:
        """Runs a named query from sql/queries.sql; returns rows as dicts."""
        return self.sql(named_queries()[query_name], params)

    def sql(self, sql: str, params: dict | None = None) -> list[dict]:
        with self._lock:
            cur = self._conn.execute(inline(sql, params or {}))
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, row)) for row in cur.fetchall()]

    # ------------------------------------------------------------------ runs
    def run(self, run_id: str) -> dict:
        rows = self.query("runs_by_id", ids=_id_list([run_id]))
        if not rows:
            known = [r["run_id"] for r in self.query("run_list", limit=5)]
            hint = f"; recent runs: {', '.join(known)}" if known else "; the store has no runs yet"
            raise UsageError(f"no run {run_id!r} in {self.store_path}{hint}")
        row = rows[0]
        row["spec"] = _decode_json(row["spec"]) or {}
        return row

    def resolve_run_id(self, given: str) -> str:
        """The full id of a run given by its id, short id (`r0001`) or a unique prefix."""
        from autorl_tui.run_ids import match_run_id

        rows = self.query("run_ids_starting", prefix=given)
        if not rows:
            self.run(given)        # raises: no such run, with the recent ones as a hint
        return match_run_id(given, [r["run_id"] for r in rows], str(self.store_path))

    def runs(self, ids: list[str] | None = None, plan: str | None = None) -> list[dict]:
        if plan is not None:
            rows = self.query("runs_by_plan", plan=plan)
            if not rows:
                raise UsageError(f"no runs of plan {plan!r} in {self.store_path}")
        else:
            rows = self.query("runs_by_id", ids=_id_list(ids or []))
            missing = sorted(set(ids or []) - {r["run_id"] for r in rows})
            if missing:
                raise UsageError(f"no run(s) {', '.join(missing)} in {self.store_path}")
        for row in rows:
            row["spec"] = _decode_json(row["spec"]) or {}
        return rows

    def run_list(self, limit: int = 200) -> list[dict]:
        return self.query("run_list", limit=limit)

    def submissions(self, run_id: str) -> list[dict]:
        rows = self.query("submissions", run_id=run_id)
        for row in rows:
            row["metrics"] = _decode_json(row["metrics"])
        return rows

    def attempts(self, run_id: str) -> list[dict]:
        rows = self.query("attempts", run_id=run_id, t0=self._t0(run_id))
        for row in rows:
            row["gpus"] = _decode_json(row["gpus"])
        return rows

    def drops(self, run_id: str) -> list[dict]:
        return self.query("drops", run_id=run_id)

    # ------------------------------------------------------------------ metrics
    def metric_series(self, run_id: str, max_points: int | None = None, t0: float | None = None) -> list[dict]:
        """One entry per (training session, name): bucketed points {x, step, t_s, mean, min, max, n, ...}."""
        t0 = self._t0(run_id) if t0 is None else t0
        self._focus("metrics", run_id)
        rows = self.query("metric_series", run_id=run_id, max_points=max_points or self.max_points, t0=t0)
        series: dict[tuple, dict] = {}
        for r in rows:
            key = (r["session_id"], r["name"], None if r["session_id"] is not None else r["source"])
            s = series.setdefault(key, {"name": r["name"], "source": r["source"], "session": r["session_seq"],
                                        "session_id": r["session_id"], "session_kind": r["session_kind"],
                                        "n_points": 0, "n_nan": 0, "n_inf": 0, "points": []})
            if r["source"] not in s["source"].split(","):
                s["source"] = ",".join(sorted(set(s["source"].split(",")) | set(r["source"].split(","))))
            s["n_points"] += r["n_points"]
            s["n_nan"] += r["n_nan"]
            s["n_inf"] += r["n_inf"]
            s["points"].append({"step": r["step_max"], "t_s": r["t_s"], "mean": _finite(r["mean"]),
                                "min": _finite(r["min"]), "max": _finite(r["max"]), "n": r["n_points"],
                                "n_bad": r["n_nan"] + r["n_inf"]})
        for s in series.values():
            s["downsampled"] = len(s["points"]) < s["n_points"]
            s["x_axis"] = "step" if all(p["step"] is not None for p in s["points"]) else "t_s"
        return list(series.values())

    def training_sessions(self, run_id: str) -> list[dict]:
        rows = self.query("training_sessions", run_id=run_id)
        for r in rows:
            r["sources"] = _decode_json(r["sources"]) or []
        return rows

    def metric_stats(self, run_id: str) -> list[dict]:
        self._focus("metrics", run_id)
        return self.query("metric_stats", run_id=run_id, t0=self._t0(run_id))

    def danger_signals(self, run_id: str, stats: list[dict] | None = None) -> list[dict]:
        """Every check with its verdict: status is flagged | ok | not_applicable. Each check is
        judged within one training session at a time; its evidence names the session."""
        stats = self.metric_stats(run_id) if stats is None else stats
        sessions: dict = {}
        for s in stats:
            sessions.setdefault(s["session_id"], {}).setdefault(s["name"], s)
        checks = []

        def pick(by_name, role):
            for alias in SERIES_ALIASES[role]:
                if alias in by_name:
                    return by_name[alias]
            for name, s in by_name.items():
                if name.endswith("/" + role):
                    return s
            return None

        def picks(role):     # one series per session, in session order
            found = [s for by_name in sessions.values() if (s := pick(by_name, role)) is not None]
            return sorted(found, key=lambda s: (s["session_seq"] is not None, s["session_seq"] or 0))

        def where(s):
            return {"session": s["session_seq"], "session_id": s["session_id"], "session_kind": s["session_kind"]}

        def label(s):
            return (f"session {s['session_seq']} ({s['session_kind']}) " if s["session_seq"] is not None else "")

        def finish(check, found, judged, none_msg):
            check["series"] = found[0]["name"] if found else None
            check["sessions"] = [s["session_seq"] for s in judged]
            if not judged:
                check["message"] = "; ".join(filter(None, (check.get("message"), none_msg)))
            checks.append(check)

        # reward rising while dev score falls, within one session's reward series
        rewards = picks("reward")
        check = {"signal": "reward_up_dev_down", "title": "Reward rising while dev score falls",
                 "status": "not_applicable", "evidence": []}
        msgs = []
        if rewards:
            self._focus("metrics", run_id)
            t0 = self._t0(run_id)
            check["status"] = "ok"
            windows: dict[int, dict] = {}     # per scored submission: the session with most reward points in it
            for reward in rewards:
                rows = self.query("reward_between_submissions", run_id=run_id, name=reward["name"],
                                  session_id=reward["session_id"])
                for r in rows:
                    if r["seq"] not in windows or r["n_points"] > windows[r["seq"]]["n_points"]:
                        windows[r["seq"]] = {"seq": r["seq"], "t_s": r["received_at"] - t0, "score": r["score"],
                                             "reward_mean": _finite(r["reward_mean"]), "n_points": r["n_points"],
                                             "series": reward["name"], **where(reward)}
                prev = None
                for r in rows:
                    if r["reward_mean"] is None:
                        continue
                    if prev is not None and r["reward_mean"] > prev["reward_mean"] and r["score"] < prev["score"] - 1.0:
                        check["status"] = "flagged"
                        check["evidence"].append({"from_seq": prev["seq"], "to_seq": r["seq"],
                                                  "reward_from": prev["reward_mean"], "reward_to": r["reward_mean"],
                                                  "score_from": prev["score"], "score_to": r["score"], **where(reward)})
                    prev = r
                n = sum(1 for e in check["evidence"] if e["session_id"] == reward["session_id"])
                msgs.append(f"{label(reward)}{n} submission(s) where mean {reward['name']} rose but the dev score "
                            f"fell by more than 1 point" if n else
                            f"{label(reward)}mean {reward['name']} and dev score never moved in opposite directions")
            check["windows"] = [windows[k] for k in sorted(windows)]
            check["message"] = "; ".join(msgs)
        finish(check, rewards, rewards, "no reward series logged")

        kls = picks("kl")
        check = {"signal": "kl_spike", "title": "KL spike", "status": "not_applicable", "evidence": []}
        judged, msgs = [], []
        for kl in kls:
            if kl["n_points"] < 5 or kl["median"] is None:
                continue
            judged.append(kl)
            spread = max(kl["mad"] or 0.0, 0.1 * abs(kl["median"]), 1e-6)
            threshold = max(kl["median"] + 10 * spread, KL_SPIKE_FLOOR)
            flagged = kl["max"] > threshold
            check["status"] = "flagged" if flagged or check["status"] == "flagged" else "ok"
            check["evidence"].append({"max": kl["max"], "step": kl["step_at_max"], "median": kl["median"],
                                      "mad": kl["mad"], "threshold": threshold, "flagged": flagged, **where(kl)})
            msgs.append(f"{label(kl)}{kl['name']} reached {kl['max']:.4g} at step {kl['step_at_max']} "
                        f"(median {kl['median']:.4g}; spike threshold max(median + 10×MAD, {KL_SPIKE_FLOOR:g}) "
                        f"= {threshold:.4g})")
        check["message"] = "; ".join(msgs)
        finish(check, kls, judged, "no KL series with at least 5 points")

        for role, signal, title, test, explain in (
                ("entropy", "entropy_collapse", "Entropy collapse",
                 lambda h, t: h > 0 and t < 0.2 * h, "fell below 20% of its starting level"),
                ("length", "length_blowup", "Completion length blow-up",
                 lambda h, t: h > 0 and t > 2 * h, "more than doubled")):
            found = picks(role)
            check = {"signal": signal, "title": title, "status": "not_applicable", "evidence": []}
            judged, msgs = [], []
            for s in found:
                if s["n_points"] < 10 or s["head_mean"] is None or s["tail_mean"] is None:
                    continue
                if role == "entropy" and s["session_kind"] in NOT_RL_KINDS:
                    msgs.append(f"{label(s)}not judged (supervised training lowers entropy by design)")
                    continue
                judged.append(s)
                flagged = test(s["head_mean"], s["tail_mean"])
                check["status"] = "flagged" if flagged or check["status"] == "flagged" else "ok"
                check["evidence"].append({"head_mean": s["head_mean"], "tail_mean": s["tail_mean"],
                                          "flagged": flagged, **where(s)})
                msgs.append(f"{label(s)}{s['name']}: mean of first tenth {s['head_mean']:.4g} → last tenth "
                            f"{s['tail_mean']:.4g}" + (f" ({explain})" if flagged else ""))
            check["message"] = "; ".join(msgs)
            finish(check, found, judged, f"no {role} series with at least 10 points"
                   + (" in a reinforcement-learning session" if role == "entropy" else ""))

        bad = [s for s in stats if s["n_nan"] or s["n_inf"]]
        checks.append({"signal": "non_finite", "title": "NaN / inf values", "series": None,
                       "sessions": sorted({s["session_seq"] for s in bad if s["session_seq"] is not None}),
                       "status": "flagged" if bad else ("ok" if stats else "not_applicable"),
                       "evidence": [{"series": s["name"], "n_nan": s["n_nan"], "n_inf": s["n_inf"],
                                     "first_step": s["first_bad_step"], **where(s)} for s in bad],
                       "message": (", ".join(f"{label(s)}{s['name']}: {s['n_nan']} NaN, {s['n_inf']} inf" for s in bad)
                                   if bad else ("every logged value is finite" if stats else "no metrics logged"))})
        return checks

    # ------------------------------------------------------------------ phases
    def phases(self, run_id: str, *, max_buckets: int = 1000, idle_gap_s: float = 120.0) -> dict:
        """Splits the agent's time into explore / write_code / train / evaluate / idle.

        Heuristic (documented in docs/reports.md): the agent's time, from its start to its end
        (the last attempt's end; else the run's end) is cut into at most `max_buckets` equal buckets (at least 1 s wide). A bucket is
          evaluate    if a submission was being graded (received_at..graded_at) during it;
          train       else if training metrics were logged or a training command was started (as a
                      tool call, or announced on the agent's stdout);
          write_code  else if the agent edited a file (file_edit action, or a code/ revision whose
                      content differs from the one before);
          explore     else if the agent did anything else (shell commands, messages, tool results);
        otherwise it continues the last agent phase, explore after an edit (stdout/stderr lines keep a phase alive; the
        agent's start opens an explore phase) as long as the last activity was less than
        `idle_gap_s` ago, and is idle after that.
        """
        run = self.run(run_id)
        t0 = run["started_at"]
        if t0 is None:
            return {"bucket_s": None, "idle_gap_s": idle_gap_s, "totals_s": {p: 0.0 for p in PHASES},
                    "segments": [], "span_s": 0.0}
        agent = self._by_run("agent_end", [run_id], AGENT_END_NONE)[run_id]
        t1 = (agent["ended_at"] if agent["ended_at"] is not None and not agent["running"] else None) \
            or run["ended_at"] or self._last_activity(run_id) or time.time()
        if run["ended_at"] is not None:
            t1 = min(t1, run["ended_at"])
        span = max(0.0, t1 - t0)
        width = max(1.0, span / max_buckets)
        nb = max(1, math.ceil(span / width))
        params = dict(run_id=run_id, t0=t0, t1=t1, width=width)
        self._focus_events(run_id)
        ev = {r["b"]: r for r in self.query("phase_event_signals", train_re=TRAIN_COMMAND_RE, **params)}
        self._focus("metrics", run_id)
        met = {r["b"]: r["n_metric"] for r in self.query("phase_metric_signals", **params)}
        rev = {r["b"]: r["n_revision"] for r in self.query("phase_revision_signals", **params)}
        grading = [False] * nb
        for g in self.query("grading_intervals", run_id=run_id):
            a = max(0, int((g["received_at"] - t0) // width))
            b = min(nb - 1, int((g["graded_at"] - t0) // width))
            for i in range(a, b + 1):
                grading[i] = True
        cats: list[str] = []
        current = "explore"
        last_activity = 0  # the agent's start counts as activity: it is reading its task
        for b in range(nb):
            e = ev.get(b)
            kind = None
            if met.get(b) or (e and e["n_train_cmd"]):
                kind = "train"
            elif (e and e["n_edit"]) or rev.get(b):
                kind = "write_code"
            elif e and e["n_action"]:
                kind = "explore"
            if kind:
                # what follows an edit (output, silence) is not more writing: only exploring and
                # training carry on between signals, so a 1 s edit is not shown as a minute of code
                current = "explore" if kind == "write_code" else kind
            if kind or (e and e["n_output"]):
                last_activity = b
            if grading[b]:
                cats.append("evaluate")
            elif kind:
                cats.append(kind)
            elif last_activity is not None and (b - last_activity) * width < idle_gap_s:
                cats.append(current)
            else:
                cats.append("idle")
        totals = {p: 0.0 for p in PHASES}
        segments: list[dict] = []
        for b, cat in enumerate(cats):
            start = b * width
            dur = min(width, span - start)
            totals[cat] += dur
            if segments and segments[-1]["phase"] == cat:
                segments[-1]["end_s"] = start + dur
            else:
                segments.append({"phase": cat, "start_s": start, "end_s": start + dur})
        return {"bucket_s": width, "idle_gap_s": idle_gap_s, "span_s": span, "totals_s": totals,
                "segments": segments}

    # ------------------------------------------------------------------ samples
    def failure_counts(self, submission_id: int, split: str = "dev") -> list[dict]:
        return self.query("failure_counts", submission_id=submission_id, split=split)

    def badcases(self, submission_id: int, per_kind: int = 5, chars: int = 600, split: str = "dev") -> list[dict]:
        return self.query("badcase_examples", submission_id=submission_id, per_kind=per_kind, chars=chars,
                          split=split)

    def sample_results(self, submission_id: int) -> list[dict]:
        return self.query("sample_results", submission_id=submission_id)

    def held_out_pairs(self, run_ids: list[str]) -> dict[str, list[tuple[float, float]]]:
        """run id -> (base, trained) share of correct samples per held-out question, for the runs
        whose tested submission and test baseline both hold samples."""
        out: dict[str, list[tuple[float, float]]] = {}
        keys = self.query("held_out_keys", ids=_id_list(run_ids))
        if not keys:
            return out
        lists = {name: _id_list(k[column] for k in keys)
                 for name, column in (("ids", "run_id"), ("subs", "submission_id"), ("bases", "baseline_id"))}
        for row in self.query("held_out_pairs", **lists):
            out.setdefault(row["run_id"], []).append((float(row["base"]), float(row["trained"])))
        return out

    def baseline_for_run(self, run_id: str) -> dict | None:
        rows = self.query("baseline_for_run", run_id=run_id)
        return rows[0] if rows else None

    def versus_baseline(self, submission_id: int, baseline_id: int) -> dict:
        return self.query("versus_baseline", submission_id=submission_id, baseline_id=baseline_id)[0]

    # ------------------------------------------------------------------ events
    def _focus(self, table: str, run_id: str) -> None:
        """Copies one run's events or metrics into a DuckDB temp table (one scan of the store
        instead of one per query); redone when the run has new rows."""
        newest = self.query(f"newest_{table}", run_id=run_id)[0]
        key = (run_id, newest["id"], newest["n"])
        with self._lock:
            if self._focused.get(table) != key:
                self.query(f"focus_{table}", run_id=run_id)
                self._focused[table] = key

    def _focus_events(self, run_id: str) -> None:
        self._focus("events", run_id)

    def event_counts(self, run_id: str) -> list[dict]:
        self._focus_events(run_id)
        return self.query("event_counts", run_id=run_id, t0=self._t0(run_id))

    def action_log(self, run_id: str, head: int = 100, tail: int = 50, chars: int = 300) -> list[dict]:
        """Events by category, capped to the first `head` and last `tail` of each category."""
        self._focus_events(run_id)
        return self.query("event_log_capped", run_id=run_id, t0=self._t0(run_id), head=head, tail=tail,
                          chars=chars)

    # ------------------------------------------------------------------ code
    def commands(self, run_id: str, limit: int = 5000) -> list[dict]:
        """The agent's actions and output lines that name a script (`python code/train.py`), in
        order: which files a submitted pipeline ran."""
        return self.query("commands", run_id=run_id, limit=limit)

    def revisions(self, run_id: str) -> list[dict]:
        rows = self.query("revisions", run_id=run_id, t0=self._t0(run_id))
        for row in rows:
            row["manifest"] = _decode_json(row["manifest"]) or {}
            row["skipped"] = _decode_json(row["skipped"]) or []
        return rows

    def blob(self, sha256: str) -> bytes | None:
        return self.blobs([sha256]).get(sha256)

    def blobs(self, digests: list[str]) -> dict[str, bytes]:
        """Contents of many blobs in one query: {sha256: bytes} (missing ones are left out)."""
        out = {}
        for row in self.query("blobs", shas=_id_list(sorted(set(digests)))):
            content = bytes(row["content"])
            out[row["sha256"]] = zlib.decompress(content) if row["encoding"] == "zlib" else content
        return out

    # ------------------------------------------------------------------ cost
    def agent_time(self, run: dict, agent: dict | None = None) -> float | None:
        """Seconds the agent ran: from its start to its last attempt's end (capped at the run's end).
        The budget is the agent's; the harness's own grading after it (the held-out test) is not
        counted, so budget use stays <= 100% for an agent stopped at its deadline. agent: the run's
        `agent_end` row, when the caller has it."""
        t0 = run["started_at"]
        if t0 is None:
            return None
        if agent is None:
            agent = self._by_run("agent_end", [run["run_id"]], AGENT_END_NONE)[run["run_id"]]
        end = agent["ended_at"] if agent["ended_at"] is not None and not agent["running"] else None
        end = end or run["ended_at"]
        if end is None:
            return None
        if run["ended_at"] is not None:
            end = min(end, run["ended_at"])
        return max(0.0, end - t0)

    def _by_run(self, query_name: str, run_ids: list[str], none: dict, **params: Any) -> dict[str, dict]:
        """A per-run aggregate for every run of run_ids, in one query; `none` for a run without rows."""
        rows = {r.pop("run_id"): r for r in self.query(query_name, ids=_id_list(run_ids), **params)}
        return {rid: rows.get(rid, dict(none)) for rid in run_ids}

    def cost(self, run_id: str, run: dict | None = None) -> dict:
        """run: the run's row (`runs()`), when the caller has it: not read again."""
        return self.costs([run if run is not None else self.run(run_id)])[run_id]

    def costs(self, runs: list[dict]) -> dict[str, dict]:
        """cost() of each run (rows of `runs()`), each aggregate one query over all of them."""
        ids = [r["run_id"] for r in runs]
        agents = self._by_run("agent_end", ids, AGENT_END_NONE)
        resources = self._by_run("resource_cost", ids, RESOURCE_COST_NONE, max_gap=60.0)
        gpus = self._by_run("gpu_allocated", ids, {"gpu_allocated_hours": 0.0, "n_attempts": 0}, now=time.time())
        gradings = self._by_run("grading_time", ids, {"inference_s": 0.0, "grading_s": 0.0})
        loads = self.host_loads(ids)
        out = {}
        for run in runs:
            rid = run["run_id"]
            agent_s = self.agent_time(run, agents[rid])
            res, gpu, grading = resources[rid], gpus[rid], gradings[rid]
            out[rid] = {
                "wall_s": run["wall_s"], "budget_s": run["budget_s"], "agent_s": agent_s,
                "budget_used": (agent_s / run["budget_s"]) if agent_s is not None and run["budget_s"] else None,
                "cpu_hours": res["cpu_hours"], "mean_cpu_percent": res["mean_cpu_percent"],
                "peak_rss_bytes": res["peak_rss_bytes"], "resource_samples": res["n_samples"],
                "gpu_busy_hours": res["gpu_busy_hours"], "gpu_allocated_hours": gpu["gpu_allocated_hours"],
                "attempts": gpu["n_attempts"], "inference_s": grading["inference_s"],
                "grading_s": grading["grading_s"], "tokens_in": run["tokens_in"], "tokens_out": run["tokens_out"],
                "cost_usd": run["cost_usd"], "host_load": loads.get(rid)}
        return out

    def host_loads(self, run_ids: list[str]) -> dict[str, dict]:
        """Per run: mean and peak of the host's 1-minute load average over its samples, the means of
        the 5- and 15-minute ones (no entry without samples, nor in a store older than the column)."""
        try:
            rows = self._by_run("host_load", run_ids, {"n_samples": 0})
        except duckdb.BinderException:        # a store written before the load was recorded
            return {}
        return {rid: {k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}
                for rid, row in rows.items() if row["n_samples"]}

    # ------------------------------------------------------------------ helpers
    def _t0(self, run_id: str) -> float:
        rows = self.query("run_t0", run_id=run_id)
        return rows[0]["t0"] if rows else 0.0

    def _last_activity(self, run_id: str) -> float | None:
        rows = self.query("last_activity", run_id=run_id)
        return rows[0]["ts"] if rows else None
