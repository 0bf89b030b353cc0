"""Recomputes a run report's numbers from the store's rows with plain sqlite3 (independent of the
DuckDB layer that produced them) and asserts they agree. Works for any run: scored or failed,
with or without metrics, revisions, resources or GPUs."""

from __future__ import annotations

import difflib
import json
import math
import sqlite3
import statistics
import zlib

import pytest


def held_out_band(db, run: dict) -> dict | None:
    """The bootstrap band recomputed from rows: the tested submission's and the test baseline's
    (named by the run's harness events) held-out samples, paired per question."""
    from autorl_tui.reports.bootstrap import paired_band

    events = [json.loads(e["data"]) for e in rows(db, "SELECT data FROM events WHERE run_id = ? AND kind = 'harness' "
                                                    "AND data LIKE '%baseline_id%'", (run["id"],))]
    base_ids = [e["baseline_id"] for e in events if e.get("split") == "test"]
    if not base_ids or run["test_score"] is None:
        return None

    def per_question(column, key):
        out: dict[str, list[int]] = {}
        for x in rows(db, f"SELECT sample_id, correct FROM samples WHERE split = 'test' AND {column} = ?", (key,)):
            out.setdefault(x["sample_id"], []).append(x["correct"] or 0)
        return {q: sum(v) / len(v) for q, v in out.items()}

    base, trained = per_question("baseline_id", max(base_ids)), per_question("submission_id", run["best_submission_id"])
    return paired_band([(base[q], trained[q]) for q in sorted(trained) if q in base])


def rows(db, q, params=()):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(q, params)]
    finally:
        conn.close()


def blob(db, sha):
    r = rows(db, "SELECT encoding, content FROM blobs WHERE sha256 = ?", (sha,))[0]
    return zlib.decompress(r["content"]) if r["encoding"] == "zlib" else r["content"]


def _json(text):
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def has_number(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    if isinstance(v, dict):
        return any(has_number(x) for x in v.values())
    if isinstance(v, list):
        return any(has_number(x) for x in v)
    return False


def check_run_report(db, r: dict) -> set[str]:
    """Asserts every section against the store; returns the sections checked."""
    run_id = r["run"]["run_id"]
    run = rows(db, "SELECT * FROM runs WHERE id = ?", (run_id,))[0]
    t0 = run["started_at"] if run["started_at"] is not None else run["created_at"]
    checked: set[str] = set()

    spec = _json(run["spec"]) or {}
    for k, v in r["run"].items():
        if k == "isolation":   # from the run's spec (absent before it was recorded)
            from autorl_tui.store.isolation import recorded_isolation

            assert v == recorded_isolation(spec, run["executor"]), (v, spec.get("isolation"))
            continue
        if k == "exposures":   # from the run's spec too (network: host, a Ray cluster without tokens)
            from autorl_tui.store.isolation import recorded_exposures

            assert v == recorded_exposures(spec), (v, spec)
            continue
        assert v == run["id" if k == "run_id" else k], k
    proto = spec.get("protocol") or (spec.get("task") or {}).get("protocol") or {}
    for k in ("temperature", "top_p", "n", "max_tokens"):
        assert r["protocol"][k] == proto.get(k), k
    assert r["protocol"]["splits"] == list(((spec.get("task") or {}).get("data") or {}).get("splits") or {})
    checked |= {"run", "protocol", "model_path"}

    att = rows(db, "SELECT * FROM attempts WHERE run_id = ? ORDER BY number", (run_id,))
    assert [(x["number"], x["state"], x["exit_code"], x["error"]) for x in r["attempts"]] == \
        [(x["number"], x["state"], x["exit_code"], x["error"]) for x in att]
    for got, x in zip(r["attempts"], att):
        if x["started_at"] is not None and x["ended_at"] is not None:
            assert got["duration_s"] == pytest.approx(x["ended_at"] - x["started_at"])
    checked.add("attempts")

    subs = rows(db, "SELECT * FROM submissions WHERE run_id = ? ORDER BY seq", (run_id,))
    best = next((s for s in subs if s["id"] == run["best_submission_id"]), None)
    o = r["outcome"]
    for k in ("baseline_score", "best_dev_score", "test_score", "improvement", "best_submission_id", "state",
              "end_reason", "failure_source"):
        assert o[k] == run[k], k
    base_dev = run.get("baseline_dev_score", run["baseline_score"])  # older schema: one (dev) baseline
    assert o["baseline_dev_score"] == base_dev
    if run["best_dev_score"] is not None and base_dev is not None:
        assert o["dev_improvement"] == pytest.approx(run["best_dev_score"] - base_dev)
    assert o["best_submission_seq"] == (best["seq"] if best else None)
    assert o["held_out_band"] == held_out_band(db, run)
    checked.add("outcome")

    t = r["timeline"]
    scored = [s for s in subs if s["status"] == "scored"]
    assert t["n_submissions"] == len(subs) and t["n_scored"] == len(scored)
    assert t["n_dropped"] == sum(s["status"] in ("rejected", "error", "duplicate") for s in subs)
    if scored and run["started_at"] is not None:
        assert t["time_to_first_valid_s"] == pytest.approx(min(s["received_at"] for s in scored) - t0)
    if best and run["started_at"] is not None:
        assert t["time_to_best_s"] == pytest.approx(best["received_at"] - t0)
    if run["ended_at"] is not None and run["started_at"] is not None:
        assert t["wall_s"] == pytest.approx(run["ended_at"] - run["started_at"])
        # the budget is the agent's: its start to its last attempt's end, not the grading after it
        ends = [x["ended_at"] for x in att if x["ended_at"] is not None]
        live = any(x["ended_at"] is None and x["started_at"] is not None for x in att)
        agent_end = min(max(ends), run["ended_at"]) if ends and not live else run["ended_at"]
        assert t["agent_s"] == pytest.approx(agent_end - run["started_at"])
        assert t["budget_used"] == pytest.approx((agent_end - run["started_at"]) / run["budget_s"])
        assert r["cost"]["agent_s"] == t["agent_s"] and r["cost"]["budget_used"] == t["budget_used"]
    running = None
    for got, s in zip(t["submissions"], subs, strict=True):
        assert (got["submission_id"], got["seq"], got["status"], got["score"], got["improvement"], got["test_score"],
                got["error"], got["revision_id"], got["path"], got["inference_s"], got["grading_s"]) == \
            (s["id"], s["seq"], s["status"], s["score"], s["improvement"], s["test_score"], s["error"],
             s["revision_id"], s["path"], s["inference_s"], s["grading_s"])
        if run["started_at"] is not None:
            assert got["t_s"] == pytest.approx(s["received_at"] - t0)
        if s["graded_at"] is not None:
            assert got["latency_s"] == pytest.approx(s["graded_at"] - s["received_at"])
        assert got["metrics"] == _json(s["metrics"])
        if s["score"] is not None:
            running = s["score"] if running is None else max(running, s["score"])
        assert got["best_so_far"] == running
        assert got["is_best"] == (s["id"] == run["best_submission_id"])
    checked.add("timeline")

    agent_end = max((x["ended_at"] for x in att if x["ended_at"] is not None), default=None)
    if any(x["started_at"] is not None and x["ended_at"] is None for x in att):
        agent_end = None
    if run["started_at"] is not None and run["ended_at"] is not None:
        span = min(agent_end or run["ended_at"], run["ended_at"]) - run["started_at"]
        assert sum(r["phases"]["totals_s"].values()) == pytest.approx(span)
        if r["phases"]["segments"]:
            assert r["phases"]["segments"][-1]["end_s"] == pytest.approx(span)
    checked.add("phases")

    # one series per (training session, name); points without a session (older stores): per (name, source)
    keys = {(x["session_id"], x["name"], x["source"] if x["session_id"] is None else None)
            for x in rows(db, "SELECT DISTINCT session_id, name, source FROM metrics WHERE run_id = ? "
                              "AND source <> 'grading'", (run_id,))}
    assert {(s["session_id"], s["name"], s["source"] if s["session_id"] is None else None)
            for s in r["metrics"]["series"]} == keys

    def series_rows(session_id, name, source):
        if session_id is None:
            return rows(db, "SELECT ts, value FROM metrics WHERE run_id = ? AND session_id IS NULL AND name = ? "
                            "AND source = ? ORDER BY ts, id", (run_id, name, source))
        return rows(db, "SELECT ts, value FROM metrics WHERE session_id = ? AND name = ? ORDER BY ts, id",
                    (session_id, name))

    sessions = {x["id"]: x for x in rows(db, "SELECT * FROM training_sessions WHERE run_id = ?", (run_id,))}
    assert [t["id"] for t in r["metrics"].get("sessions", [])] == sorted(sessions, key=lambda i: sessions[i]["seq"])
    for s in r["metrics"]["series"]:
        raw = series_rows(s["session_id"], s["name"], s["source"])
        if s["session_id"] is not None:
            assert s["session"] == sessions[s["session_id"]]["seq"] and s["session_kind"] == sessions[s["session_id"]]["kind"]
        assert s["n_points"] == len(raw) == sum(p["n"] for p in s["points"])
        assert s["n_nan"] == sum(x["value"] is None for x in raw)
        assert len(s["points"]) <= r["metrics"]["max_points_per_series"]
        finite = [x["value"] for x in raw if x["value"] is not None and math.isfinite(x["value"])]
        if finite:
            assert min(p["min"] for p in s["points"] if p["min"] is not None) == pytest.approx(min(finite))
            assert max(p["max"] for p in s["points"] if p["max"] is not None) == pytest.approx(max(finite))
    for st in r["metrics"]["stats"]:
        finite = [x["value"] for x in series_rows(st["session_id"], st["name"], st["source"])
                  if x["value"] is not None and math.isfinite(x["value"])]
        if finite:
            assert st["median"] == pytest.approx(statistics.median(finite))
            assert st["max"] == pytest.approx(max(finite)) and st["min"] == pytest.approx(min(finite))
            if st["n_nan"] == 0 and st["n_inf"] == 0:
                tenth = max(1, st["n_points"] // 10)
                assert st["head_mean"] == pytest.approx(statistics.fmean(finite[:tenth]))
                assert st["tail_mean"] == pytest.approx(statistics.fmean(finite[-tenth:]))
    checks = {c["signal"]: c for c in r["metrics"]["checks"]}
    reward = checks["reward_up_dev_down"]
    if reward.get("windows") is not None:
        assert [(w["seq"], w["score"]) for w in reward["windows"]] == [(s["seq"], s["score"]) for s in scored]
        for w, s, prev in zip(reward["windows"], scored, [None] + scored[:-1]):
            raw = series_rows(w["session_id"], w["series"], w["series"]) if w["session_id"] is not None else \
                rows(db, "SELECT ts, value FROM metrics WHERE run_id = ? AND name = ? AND source <> 'grading'",
                     (run_id, w["series"]))
            vals = [x["value"] for x in raw if x["value"] is not None and math.isfinite(x["value"])
                    and x["ts"] <= s["received_at"] and (prev is None or x["ts"] > prev["received_at"])]
            assert w["n_points"] == len(vals)
            if vals:
                assert w["reward_mean"] == pytest.approx(statistics.fmean(vals))
    bad = [s for s in r["metrics"]["stats"] if s["n_nan"] or s["n_inf"]]
    assert [(e["series"], e["n_nan"], e["n_inf"]) for e in checks["non_finite"]["evidence"]] == \
        [(s["name"], s["n_nan"], s["n_inf"]) for s in bad]
    checked.add("metrics")

    revs = {x["id"]: x for x in rows(db, "SELECT * FROM revisions WHERE run_id = ?", (run_id,))}
    assert r["revisions"]["n_revisions"] == len(revs)
    assert r["revisions"]["n_change"] == sum(x["reason"] == "change" for x in revs.values())
    first = min(revs.values(), key=lambda x: x["seq"]) if revs else None
    prev, prev_id = (json.loads(first["manifest"]), first["id"]) if first else ({}, None)
    prev_submitted = None
    for got, s in zip(r["revisions"]["by_submission"], subs, strict=True):
        rev = revs.get(s["revision_id"])
        if rev is None:
            assert got["revision_seq"] is None
            continue
        man = json.loads(rev["manifest"])
        if rev["id"] == prev_submitted:  # the same code as the submission before: said, not repeated
            assert got["unchanged"] and got["files"] == [] and (got["lines_added"], got["lines_removed"]) == (0, 0)
            continue
        assert not got["unchanged"]
        prev_submitted = rev["id"]
        if rev["id"] == prev_id:        # the submission is the first snapshot itself: no base, all of it is new
            assert got["base"] is None
            prev = {}
        assert got["revision_seq"] == rev["seq"] and got["n_files"] == rev["n_files"]
        added = removed = 0
        for path in set(prev) | set(man):
            if prev.get(path) == man.get(path):
                continue
            a = blob(db, prev[path]).decode().splitlines(True) if path in prev else []
            b = blob(db, man[path]).decode().splitlines(True) if path in man else []
            lines = list(difflib.unified_diff(a, b, n=2))
            added += sum(ln.startswith("+") and not ln.startswith("+++") for ln in lines)
            removed += sum(ln.startswith("-") and not ln.startswith("---") for ln in lines)
        assert (got["lines_added"], got["lines_removed"]) == (added, removed)
        prev, prev_id = man, rev["id"]
    checked.add("revisions")

    events = rows(db, "SELECT kind, data FROM events WHERE run_id = ?", (run_id,))
    assert r["events"]["total"] == len(events)
    assert sum(sec["n"] for sec in r["events"]["sections"]) == len(events)
    for sec in r["events"]["sections"]:
        if sec["category"].startswith("action:"):
            kind = sec["category"].split(":", 1)[1]
            n = sum(e["kind"] == "action" and ((_json(e["data"]) if isinstance(_json(e["data"]), dict) else {})
                                               .get("kind") or "other") == kind for e in events)
        else:
            n = sum(e["kind"] == sec["category"] for e in events)
        assert sec["n"] == n and sec["shown"] + sec["omitted"] == n
    checked.add("events")

    sm = r["samples"]
    sample_sub = best or (scored[-1] if scored else None)
    if sample_sub is None:
        assert sm["submission_id"] is None and sm["n"] == 0
    else:
        samples = rows(db, "SELECT correct, failure_kind FROM samples WHERE submission_id = ? AND split = 'dev'",
                       (sample_sub["id"],))
        assert sm["n"] == len(samples) and sm["submission_id"] == sample_sub["id"]
        counts = {c["kind"]: c["n"] for c in sm["counts"]}
        assert counts.get("correct", 0) == sum(x["correct"] == 1 for x in samples)
        for g in sm["badcases"]:
            assert g["n"] == sum((x["failure_kind"] or "unclassified") == g["kind"] and x["correct"] != 1
                                 for x in samples)
            assert len(g["examples"]) == min(g["n"], r["limits"]["badcases_per_kind"])
        base = rows(db, "SELECT id FROM baselines WHERE task = ? AND model = ? AND split = 'dev' "
                        "ORDER BY created_at DESC LIMIT 1", (run["task"], run["model"]))
        assert sm["baseline_id"] == (base[0]["id"] if base else None)
    checked.add("samples")

    unscored = [s for s in subs if s["status"] in ("rejected", "error", "duplicate")
                or (s["status"] in ("received", "grading") and run["state"] in ("done", "failed", "cancelled", "lost"))]
    assert [d["submission_id"] for d in r["drops"]] == [s["id"] for s in unscored]
    for d, s in zip(r["drops"], unscored):
        assert d["seq"] == s["seq"] and d["status"] == s["status"] and d["path"] == s["path"]
        if s["status"] in ("rejected", "error"):
            assert d["reason"] == (s["error"] or "(no reason recorded)")
    checked.add("drops")

    res = rows(db, "SELECT ts, cpu_percent, rss_bytes, gpus FROM resources WHERE run_id = ? ORDER BY ts, id", (run_id,))
    pairs = list(zip(res, res[1:]))
    cpu = sum((a["cpu_percent"] or 0) / 100 * min(b["ts"] - a["ts"], 60) for a, b in pairs) / 3600
    gpu_busy = sum(sum(g.get("util") or 0 for g in (_json(a["gpus"]) or [])) / 100 * min(b["ts"] - a["ts"], 60)
                   for a, b in pairs) / 3600
    alloc = sum((x["ended_at"] - x["started_at"]) * len(_json(x["gpus"]) or []) for x in att
                if x["started_at"] is not None and x["ended_at"] is not None) / 3600
    c = r["cost"]
    assert (c["cpu_hours"] or 0) == pytest.approx(cpu) and (c["gpu_busy_hours"] or 0) == pytest.approx(gpu_busy)
    assert c["gpu_allocated_hours"] == pytest.approx(alloc)
    assert c["resource_samples"] == len(res)
    assert c["peak_rss_bytes"] == (max((x["rss_bytes"] for x in res if x["rss_bytes"] is not None), default=None))
    assert (c["tokens_in"], c["tokens_out"], c["cost_usd"]) == (run["tokens_in"], run["tokens_out"], run["cost_usd"])
    assert c["inference_s"] == pytest.approx(sum(s["inference_s"] or 0 for s in subs))
    assert c["grading_s"] == pytest.approx(sum(s["grading_s"] or 0 for s in subs))
    loads = rows(db, "SELECT load1, load5, load15 FROM resources WHERE run_id = ? AND load1 IS NOT NULL", (run_id,))
    if not loads:
        assert c["host_load"] is None
    else:
        mean = lambda k: sum(x[k] for x in loads) / len(loads)  # noqa: E731
        assert c["host_load"]["n_samples"] == len(loads)
        assert c["host_load"]["load1_max"] == pytest.approx(max(x["load1"] for x in loads))
        for k in ("load1", "load5", "load15"):
            assert c["host_load"][f"{k}_mean"] == pytest.approx(mean(k), abs=0.005)
    checked.add("cost")

    # AutoRL-Bench's diagnostics, by its definitions (core/metrics.py): graded entries in order, a
    # failed grading as 0.0, valid = score > 0, whole seconds from the agent's start.
    ab = r["autorl_bench"]
    graded = [s for s in subs if s["status"] in ("scored", "error")]
    traj = [0.0 if s["status"] == "error" else (s["score"] or 0.0) for s in graded]
    start, end = run["started_at"], run["ended_at"]
    assert ab["score_trajectory"] == pytest.approx(traj)
    assert ab["valid_submission_rate"] == (pytest.approx(sum(x > 0 for x in traj) / len(traj)) if traj else None)
    first = next((i for i, x in enumerate(traj) if x > 0), None)
    assert ab["first_valid_idx"] == (None if first is None else first + 1)
    since = lambda sub: int(sub["graded_at"] - start)  # noqa: E731
    if first is not None and start:
        assert abs(ab["first_valid_delay"] - since(graded[first])) <= 1
    if traj and start:
        best = traj.index(max(traj))
        assert abs(ab["time_to_best"] - since(graded[best])) <= 1
    if len(traj) >= 2:
        ups = sum(b > a for a, b in zip(traj, traj[1:]))
        assert ab["monotonic_ratio"] == pytest.approx(ups / (len(traj) - 1))
    if start and end and run["budget_s"]:
        # on the whole-second clocks AutoRL-Bench's run_meta.json holds (each clock cut to its second)
        assert abs(ab["time_used_ratio"] - (end - start) / run["budget_s"]) <= 2 / run["budget_s"]
    if end and graded:
        assert abs(ab["last_submit_gap"] - (end - max(s["graded_at"] for s in graded))) <= 1   # whole seconds
    assert ab["copy_model_count"] is None or ab["copy_model_count"] >= 0
    checked.add("autorl_bench")

    # trust: the run's findings as stored (none in a store written before them), and cost per point
    has_findings = rows(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'findings'")
    found = rows(db, "SELECT id, kind, severity FROM findings WHERE run_id = ? ORDER BY ts, id",
                 (run_id,)) if has_findings else []
    tr = r["trust"]
    assert [f["id"] for f in tr["findings"]] == [f["id"] for f in found]
    assert tr["n_flags"] == sum(f["severity"] in ("warning", "critical") for f in found)
    assert len(tr["provenance"]) == sum(f["kind"] == "provenance" for f in found)
    checked.add("trust")
    cp, improvement = r["cost_per_point"], run["improvement"]
    assert cp["improvement"] == improvement
    if improvement is not None and improvement > 0 and c["agent_s"] is not None:
        assert cp["agent_hours_per_point"] == pytest.approx(c["agent_s"] / 3600 / improvement)
    else:
        assert cp["agent_hours_per_point"] is None and cp["gpu_hours_per_point"] is None
    checked.add("cost_per_point")

    numeric_sections = {k for k, v in r.items() if has_number(v)}
    assert numeric_sections - checked <= {"schema_version", "generated_at", "limits"}
    return checked
