"""The reference agent on WebShop under the real engine (`--batch`), with the built-in
`tiny-webshop` model: the engine builds the model, materializes a small WebShop card, grades the
untrained baseline on dev and the held-out test, and the agent fine-tunes on the expert's steps
(lean_sft.py; v1: loss on every token, product ids renamed in half the examples, the type's
attributes and option values permuted in all; v2: on the actions), submits both; the better one is
played on the held-out instructions. The card is cut to a few instructions, short product ids
(`id_chars: 2`, one token each) and a 1,500 s budget (the whole test: 12-25 minutes, with the load). Checked: the pipeline end to end, WebShop's figures (mean reward,
reward >= 0.5) in every grading's details and the report, equal to the stored episodes' rewards;
and that the held-out success improved over the base model's beyond noise, wins and the share of
reward >= 0.5 alike, by paired sign tests over 144 held-out episodes (docs/webshop.md)."""

import json
import shutil
import sqlite3

import pytest
import yaml

from tests.support.harness import REPO, cli, make_reachable_home, write_plan

# A whole reference-agent run with minutes of training budget: `make test-long` (not in `make test`,
# which must stay well under 20 minutes on a 2-core CI machine).
pytestmark = [pytest.mark.slow, pytest.mark.long]
# 144 held-out instructions (over the split's 25 target products): wins are rare (about 7 %), and a
# paired sign test needs at least 5 of them, with none for the base model, to be beyond noise
TEST_N = 144
SHORT = "ws_sft_steps=2500,ws_sft_batch=8,ws_focus_steps=100,ws_focus_share=0.15,ws_submit_reserve_s=90,threads=2"


@pytest.fixture
def home():
    h = make_reachable_home()
    yield h
    shutil.rmtree(h.parent, ignore_errors=True)


def small_webshop_tasks(root):
    """The shipped card over a smaller catalog with fewer instructions (same environment and protocol)."""
    task = root / "webshop-small"
    shutil.copytree(REPO / "autorl_tui" / "tasks" / "webshop-mini", task, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    card = yaml.safe_load((task / "task.yaml").read_text())
    card["id"] = "webshop-small"
    card["protocol"]["max_steps"] = 8
    card["submission_cap"] = {"min_interval_s": 0}
    card["data"]["params"].update(source="generated", per_type=6, id_chars=2)
    card["data"]["splits"] = {"train": {"n": 240, "seed": 1}, "dev": {"n": 24, "seed": 2}, "test": {"n": TEST_N, "seed": 3}}
    (task / "task.yaml").write_text(yaml.safe_dump(card))
    return root


def test_reference_agent_trains_tiny_webshop_under_the_engine(home, tmp_path):
    tasks = small_webshop_tasks(tmp_path / "tasks")
    plan = write_plan(tmp_path / "plan.yaml", tasks=["webshop-small"], agents=["reference"],
                      models=["tiny-webshop"], budget="1500s")
    proc = cli("--tasks-dir", str(tasks), "--plain", "--batch", str(plan), home=home, timeout=2300,
               env={"REFERENCE_AGENT_OPTIONS": SHORT})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    assert run["state"] == "done", run
    subs = [dict(r) for r in db.execute("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run["id"],))]
    assert [s["status"] for s in subs] == ["scored", "scored"], subs
    assert run["baseline_score"] == 0.0          # the untrained model wins nothing
    assert run["test_score"] is not None, run    # the selected submission was played on the held-out test
    stdout = "\n".join(r[0] for r in db.execute("SELECT message FROM events WHERE run_id=? AND kind='stdout'",
                                                  (run["id"],)))
    sfts = [json.loads(line) for line in stdout.splitlines() if '"stage": "sft"' in line]
    assert [s["out"].rsplit("/", 1)[-1] for s in sfts] == ["v1", "v2"], sfts
    samples = db.execute("SELECT data FROM samples WHERE submission_id=?", (subs[0]["id"],)).fetchall()
    assert samples and all(json.loads(s[0])["trajectory"] for s in samples)
    # WebShop's own figures are in every grading's details, equal to its stored episodes' rewards
    selected = next(s for s in subs if s["id"] == run["best_submission_id"])
    for sub in subs:
        details = json.loads(sub["metrics"])
        check_env_summary(db, details, sub["id"], "dev")
    check_env_summary(db, json.loads(selected["metrics"])["test"], selected["id"], "test")
    report = cli("report", run["id"], "--html", str(tmp_path / "r.html"), home=home, timeout=300)
    assert report.returncode == 0, report.stderr
    assert "test: mean_reward" in (tmp_path / "r.html").read_text()
    figures = {"baseline_dev": run["baseline_dev_score"], "baseline_test": run["baseline_score"],
               "dev": {s["seq"]: s["score"] for s in subs}, "test": run["test_score"],
               "test_details": json.loads(selected["metrics"])["test"]["env_summary"],
               "steps": [s["steps"] for s in sfts]}
    print("webshop reference run:", json.dumps(figures))
    # The point of the run: the trained model buys well and wins held-out instructions (target
    # products never seen in train) that the base model does not. Paired exact sign tests over the
    # same 144 episodes: wins beyond noise (p <= 0.05: 5 or more with none for the base; 10 of 144
    # measured offline), and the share with reward >= 0.5 far beyond (p <= 0.001; docs/webshop.md).
    won = paired_outcomes(db, selected["id"], lambda r: r >= 1.0)
    good = paired_outcomes(db, selected["id"], lambda r: r >= 0.5)
    assert len(won) == TEST_N, len(won)
    figures["paired"] = {"won": sign_test(won), "reward_ge_0.5": sign_test(good)}
    print("webshop paired held-out check:", json.dumps(figures["paired"]))
    assert run["test_score"] > run["baseline_score"] and run["improvement"] > 0, figures
    assert figures["paired"]["won"]["p"] <= 0.05, figures
    assert figures["paired"]["reward_ge_0.5"]["p"] <= 0.001, figures


def paired_outcomes(db, submission_id: int, hit) -> list[tuple[bool, bool]]:
    """(base, trained) outcome per held-out episode, paired by instruction id."""
    def rewards(where, arg):
        return {r[0]: json.loads(r[1])["reward"] for r in db.execute(
            f"SELECT sample_id, data FROM samples WHERE split='test' AND {where}", arg)}
    base = rewards("baseline_id IS NOT NULL", ())
    trained = rewards("submission_id=?", (submission_id,))
    assert base.keys() == trained.keys(), (sorted(base), sorted(trained))
    return [(hit(base[k]), hit(trained[k])) for k in sorted(base)]


def sign_test(pairs: list[tuple[bool, bool]]) -> dict:
    """Exact one-sided sign test (McNemar's) on the discordant pairs: the chance of at least this
    many trained-only hits if trained-only and base-only hits were equally likely. With no base-only
    hit, p <= 0.05 needs 5 trained-only hits (0.5**5 = 0.031)."""
    from math import comb
    up = sum(t and not b for b, t in pairs)
    down = sum(b and not t for b, t in pairs)
    n = up + down
    p = sum(comb(n, i) for i in range(up, n + 1)) / 2 ** n if n else 1.0
    return {"trained_only": up, "base_only": down, "p": p}


def check_env_summary(db, details: dict, submission_id: int, split: str) -> None:
    rewards = [json.loads(r[0])["reward"] for r in db.execute(
        "SELECT data FROM samples WHERE submission_id=? AND split=?", (submission_id, split))]
    assert rewards, (submission_id, split)
    assert details["env_summary"]["mean_reward"] == pytest.approx(100 * sum(rewards) / len(rewards))
    assert details["env_summary"]["reward_ge_0.5"] == pytest.approx(100 * sum(r >= 0.5 for r in rewards) / len(rewards))
