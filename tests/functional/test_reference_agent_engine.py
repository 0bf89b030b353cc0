"""The built-in reference agent run by the real engine (`--batch`): it trains with TRL, submits,
and the store holds its metrics under TRL's names, its code revisions, and submissions linked to
them. Training is shortened through REFERENCE_AGENT_OPTIONS (passed through by the spec's `env`)."""

import json
import shutil
import sqlite3

import pytest

from tests.support.harness import TASKS, cli, make_reachable_home, write_plan

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
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, timeout=900,
               env={"REFERENCE_AGENT_OPTIONS": SHORT})
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
    names = {r[0] for r in db.execute("SELECT DISTINCT name FROM metrics WHERE run_id=? AND source='metrics_jsonl'",
                                      (run["id"],))}
    assert {"loss", "learning_rate"} <= names, names
    assert {"reward", "reward_std", "kl", "completions/mean_length"} <= names, names
    assert run["test_score"] is not None and run["baseline_score"] is not None
