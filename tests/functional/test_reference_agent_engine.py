"""The built-in reference agent run by the real engine (`--batch`): it trains with TRL, submits,
and the store holds its metrics under TRL's names, its code revisions, and submissions linked to
them. Training is shortened through REFERENCE_AGENT_OPTIONS (passed through by the spec's `env`).

Its two stages (SFT, then GRPO: what the demo plan runs) are two training sessions: GRPO's reward
and kl reach the store while the agent still runs, and the run report's danger signals judge each
session on its own (none compares SFT's entropy with GRPO's)."""

import json
import shutil
import sqlite3

import pytest

from autorl_tui.cli import main
from tests.support.harness import TASKS, cli, make_reachable_home, write_plan
from tests.support.report_trace import check_run_report
from tests.support.store_watcher import StoreWatcher

pytestmark = pytest.mark.slow
SHORT = ("sft_steps=16,sft_batch=8,grpo_steps=3,grpo_prompts=2,grpo_gens=4,grpo_rounds=1,threads=1,"
         "submit_reserve_s=15")


@pytest.fixture
def home(tiny_model_dir):
    h = make_reachable_home()
    (h / "models").mkdir(parents=True)
    shutil.copytree(tiny_model_dir, h / "models" / "tiny")
    yield h
    shutil.rmtree(h.parent, ignore_errors=True)


def test_reference_agent_under_the_engine(home, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", agents=["reference"], budget="240s")
    watcher = StoreWatcher(home / "store.db")
    watcher.start()
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, timeout=900,
               env={"REFERENCE_AGENT_OPTIONS": SHORT})
    watcher.stop.set()
    watcher.join()
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    assert run["state"] == "done", run
    subs = [dict(r) for r in db.execute("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run["id"],))]
    assert [s["status"] for s in subs] == ["scored", "scored"], subs     # v1 (SFT) and v2 (GRPO)
    assert run["end_reason"] == "agent finished (exit code 0)", run["end_reason"]   # not killed at the deadline
    assert all(s["revision_id"] for s in subs)
    manifest = json.loads(db.execute("SELECT manifest FROM revisions WHERE id=?",
                                      (subs[0]["revision_id"],)).fetchone()[0])
    assert {"sft.py", "grpo.py", "metrics_callback.py", "common.py"} <= {p.split("/")[-1] for p in manifest}
    assert run["test_score"] is not None and run["baseline_score"] is not None
    sessions = [dict(r) for r in db.execute("SELECT * FROM training_sessions WHERE run_id=? ORDER BY seq", (run["id"],))]
    assert [(s["seq"], s["kind"]) for s in sessions] == [(1, "sft"), (2, "grpo")]
    sft, grpo = sessions

    def names(session):
        return {r[0] for r in db.execute("SELECT DISTINCT name FROM metrics WHERE session_id=?", (session["id"],))}

    assert {"loss", "learning_rate", "entropy"} <= names(sft), names(sft)
    assert {"reward", "reward_std", "kl", "completions/mean_length"} <= names(grpo), names(grpo)
    # printed by the stage (stdout) and written to METRICS_FILE by its callback: stored once
    n_loss = db.execute("SELECT count(*) FROM metrics WHERE session_id=? AND name='loss'", (sft["id"],)).fetchone()[0]
    assert n_loss == 16, n_loss                                 # sft_steps=16, logging every step
    # live: GRPO's reward and kl were in the store before the agent ended
    agent_end = db.execute("SELECT ended_at FROM attempts WHERE run_id=?", (run["id"],)).fetchone()[0]
    for name in ("reward", "kl"):
        assert watcher.first_seen[(run["id"], name)] < agent_end, name

    out = tmp_path / "report.json"
    assert main(["--home", str(home), "report", run["id"], "--json", str(out), "--html", str(tmp_path / "r.html")]) == 0
    report = json.loads(out.read_text())
    check_run_report(home / "store.db", report)
    # every danger signal is judged within one session, and says which
    for check in report["metrics"]["checks"]:
        for ev in check["evidence"]:
            assert ev["session"] in (1, 2), check
    entropy = next(c for c in report["metrics"]["checks"] if c["signal"] == "entropy_collapse")
    for ev in entropy["evidence"]:
        values = [r[0] for r in db.execute("SELECT value FROM metrics WHERE session_id=? AND name='entropy' "
                                           "ORDER BY ts, id", (ev["session_id"],))]
        tenth = max(1, len(values) // 10)
        assert ev["head_mean"] == pytest.approx(sum(values[:tenth]) / tenth)
        assert ev["tail_mean"] == pytest.approx(sum(values[-tenth:]) / tenth)
    # charts: one line per session, never one line across stages
    html = (tmp_path / "r.html").read_text()
    assert "session 1 (sft)" in html and "session 2 (grpo)" in html
