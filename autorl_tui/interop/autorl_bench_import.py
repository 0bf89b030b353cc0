"""AutoRL-Bench runs into the store (`autorl-tui import autorl-bench PATH...`).

Each run becomes a run row marked `imported_from`, in state done (a valid submission) or failed,
with its scores.json entries as submissions (their score is on the eval set the agent saw: our
dev score), agent.log as stdout events, agent.jsonl through the stack's stream parser as actions,
and code/ as a revision. It has no held-out test of ours: test_score stays empty. A run is written
in one transaction or not at all; a run already imported is left alone (same id)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from autorl_tui import registry
from autorl_tui.catalog.autorl_bench import STACKS, TASK_ALIASES
from autorl_tui.interop.autorl_bench_ledger import parse_iso
from autorl_tui.store.imported_runs import write_imported_run
from autorl_tui.interop.autorl_bench_files import (Malformed, ResultRow, RunFolder, is_run_folder, number,
                                                   read_results, read_run_folder)

SOURCE = "autorl-bench"
MAX_LOG_EVENTS = 20000
NO_TEST = "imported from AutoRL-Bench: no held-out test of ours"


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")[:40] or "x"


def run_key(task: str, run_id: str, agent: str) -> str:
    return f"ab-{_slug(task)}-{_slug(run_id)}-{_slug(agent)}"


def _discover(paths: list[Path], report: ImportReport) -> tuple[list[Path], list[Path]]:
    folders, csvs = [], []
    for p in paths:
        p = Path(p)
        if not p.exists():
            report.problems.append(f"{p}: does not exist; skipped")
        elif p.is_file() and p.suffix == ".csv":
            csvs.append(p)
        elif p.is_file():
            report.problems.append(f"{p}: not a results.csv or a run folder; skipped")
        elif is_run_folder(p):
            folders.append(p)
        else:
            found = sorted({m.parent for pattern in ("run_meta.json", "*/run_meta.json", "*/*/run_meta.json",
                                                     "*/*/*/run_meta.json") for m in p.glob(pattern)})
            csvs += sorted(c for pattern in ("results.csv", "*/results.csv") for c in p.glob(pattern))
            if not found and not csvs:
                report.problems.append(f"{p}: holds no AutoRL-Bench run folder (run_meta.json) or results.csv; skipped")
            folders += found
    return list(dict.fromkeys(f.resolve() for f in folders)), list(dict.fromkeys(c.resolve() for c in csvs))


def _our_task(task: str) -> str:
    return TASK_ALIASES.get(task) or task


def _csv_time(text: str) -> float | None:
    try:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp()
    except (TypeError, ValueError):
        return parse_iso(text)


def import_paths(store, paths: list[Path]) -> ImportReport:
    report = ImportReport()
    folders, csvs = _discover(paths, report)
    rows: list[tuple[Path, ResultRow]] = []
    for c in csvs:
        rows += [(c, r) for r in read_results(c, report.problems)]
    matched: set[int] = set()
    for folder in folders:
        # results.csv names the run's workspace folder (<run_id>_<agent>) or its run_id and agent
        row = next((i for i, (_, r) in enumerate(rows) if Path(r.values["workspace"]).name == folder.name
                    or f"{r.values['run_id']}_{r.values['agent']}" == folder.name), None)
        if row is not None:
            matched.add(row)
        try:
            run = read_run_folder(folder)
        except (Malformed, OSError) as exc:
            report.problems.append(f"{exc}; run {folder.name} skipped (nothing of it imported)")
            continue
        _import_one(store, _from_folder(run, rows[row][1] if row is not None else None, rows[row][0] if row is not None else None),
                    report)
    for i, (csv_path, r) in enumerate(rows):
        if i not in matched:
            _import_one(store, _from_row(csv_path, r), report)
    return report


def _import_one(store, built: tuple[dict, list[dict], list[tuple], dict | None], report: ImportReport) -> None:
    run, subs, events, revision = built
    if write_imported_run(store, run, subs, events, revision):
        report.imported.append(run["id"])
    else:
        report.already.append(run["id"])


def _base_run(*, key: str, task: str, agent: str, model: str, driver: str | None, budget_s: float, start: float,
              end: float | None, baseline: float | None, best: float | None, workspace: str | None, origin: str,
              imported: dict, success: bool | None) -> dict:
    done = best is not None
    exit_note = {True: "the agent exited 0", False: "the agent failed or timed out", None: "the agent's exit not recorded"}
    return {"id": key, "plan_id": None, "plan_name": "imported from AutoRL-Bench", "task": task, "level": None,
            "agent": agent, "model": model, "driver": driver, "seed": 0, "budget_s": budget_s, "executor": "imported",
            "state": "done" if done else "failed", "failure_source": None if done else "agent",
            "end_reason": f"{NO_TEST}; {exit_note[success]}" + ("" if done else "; no valid submission"),
            "created_at": start, "started_at": start, "deadline": start + budget_s, "ended_at": end,
            "baseline_dev_score": baseline, "best_dev_score": best,
            "dev_improvement": None if best is None or baseline is None else best - baseline,
            "workspace": workspace, "imported_from": origin,
            "spec": {"imported": {"from": SOURCE, **imported}, "agent": {"name": agent}, "task": {"id": task},
                     "model_name": model, "executor": "imported"}}


def _success(text: str | None) -> bool | None:
    return {"true": True, "false": False}.get(str(text).strip().lower()) if text is not None else None


def _from_folder(run: RunFolder, result: ResultRow | None, csv_path: Path | None):
    values = result.values if result else {}
    if values:      # results.csv knows the run id and agent even when the folder was renamed
        run.run_id, run.agent = values["run_id"], values.get("agent") or run.agent
    meta = run.meta
    start = float(meta["start_time"])
    entries = run.scores
    baseline = number(values.get("baseline")) if values.get("baseline") not in (None, "") else \
        next((e.get("baseline_score") for e in entries if e.get("baseline_score") is not None), None)
    seqs = [e.get("submission_id") for e in entries]
    if not all(isinstance(s, int) for s in seqs) or len(set(seqs)) != len(seqs):
        seqs = list(range(1, len(entries) + 1))
    subs = []
    for seq, e in zip(seqs, entries):
        graded = parse_iso(e["timestamp"])
        failed = bool(e.get("error"))
        score = None if failed else float(e.get("score", 0.0) or 0.0)
        subs.append({"run_id": None, "seq": seq, "path": str(e.get("model_path") or "")[:1000],
                     "received_at": graded - float(e.get("elapsed_seconds") or 0.0), "graded_at": graded,
                     "status": "error" if failed else "scored", "score": score,
                     "improvement": None if score is None or baseline is None else score - baseline,
                     "error": str(e["error"]) if failed else None, "grading_s": e.get("elapsed_seconds")})
    best = max((s["score"] for s in subs if s["status"] == "scored"), default=None)
    task = _our_task(values.get("task") or run.task)
    model = values.get("base_model") or run.base_model or "unknown"
    key = run_key(task, run.run_id, run.agent)
    end = meta.get("end_time") or (max((s["graded_at"] for s in subs), default=None))
    # Its entries name paths on the machine it ran on (results.csv's workspace), as does the base model's.
    original = Path(values.get("workspace") or run.path)
    imported = {"path": str(run.path), "run_id": run.run_id, "task": run.task, "original_workspace": str(original),
                "base_model_path": str(original / "models" / model), "last_submit_time": meta.get("last_submit_time"),
                "end_time": meta.get("end_time"),
                "results_csv": f"{csv_path}:{result.line}" if result else None, "success": _success(values.get("success")),
                "code_files_skipped": run.code_skipped}
    driver = values.get("driver_model")
    rec = _base_run(key=key, task=task, agent=run.agent, model=model, driver=None if driver in (None, "", "unknown") else driver,
                    budget_s=float(meta["timeout_s"]), start=start, end=float(end) if end else None, baseline=baseline,
                    best=best, workspace=str(run.path), origin=f"{SOURCE}:{run.path}", imported=imported,
                    success=imported["success"])
    for s in subs:
        s["run_id"] = key
    events = [(start, "state", "info", f"imported from AutoRL-Bench {run.path}",
               json.dumps({"state": rec["state"], "imported_from": str(run.path)}))]
    events += [(start, "stdout", "info", line[:4000], None) for line in run.log_lines[:MAX_LOG_EVENTS]]
    if len(run.log_lines) > MAX_LOG_EVENTS:
        events.append((start, "harness", "warning", f"agent.log: {len(run.log_lines) - MAX_LOG_EVENTS} more lines "
                                                    f"not imported", None))
    events += _actions(run, start)
    revision = {"files": run.code, "skipped": run.code_skipped, "ts": float(end or start)} if run.code else None
    return rec, subs, events, revision


def _actions(run: RunFolder, ts: float) -> list[tuple]:
    """agent.jsonl through the stream parser of the stack the agent's id names (claude, codex...)."""
    stack = next((s for s in STACKS if s in run.agent.lower()), None)
    if stack is None or not run.jsonl_lines:
        return []
    parser = registry.load("output_parsers", STACKS[stack][0])()
    actions = [a for line in run.jsonl_lines[:MAX_LOG_EVENTS] for a in parser.feed(line)] + list(parser.finish())
    return [(ts, "action", "info", a.summary(), json.dumps(a.to_dict())) for a in actions]


def _from_row(csv_path: Path, result: ResultRow):
    v = result.values
    start = _csv_time(v["timestamp"]) or time.time()
    duration = number(v.get("duration_s")) or 0.0
    best_score = number(v.get("best_score"))
    n = int(v["submissions"]) if v.get("submissions") not in ("", "None", None) else 0
    best = best_score if n > 0 and best_score is not None and best_score > 0 else None
    task = _our_task(v["task"])
    key = run_key(task, v["run_id"], v["agent"] or "unknown")
    imported = {"path": v.get("workspace"), "run_id": v["run_id"], "task": v["task"], "results_csv": f"{csv_path}:{result.line}",
                "success": _success(v.get("success")), "submissions": n, "summary_only": True}
    driver = v.get("driver_model")
    rec = _base_run(key=key, task=task, agent=v["agent"] or "unknown", model=v.get("base_model") or "unknown",
                    driver=None if driver in (None, "", "unknown") else driver, budget_s=max(duration, 1.0),
                    start=start, end=start + duration, baseline=number(v.get("baseline")), best=best,
                    workspace=v.get("workspace") or None, origin=f"{SOURCE}:{csv_path}:{result.line}", imported=imported,
                    success=imported["success"])
    events = [(start, "state", "info", f"imported from AutoRL-Bench {csv_path} line {result.line} (results row only)",
               json.dumps({"state": rec["state"]}))]
    return rec, [], events, None
