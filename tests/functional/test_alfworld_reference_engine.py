"""The reference agent on ALFWorld under the real engine (`--batch`), with the built-in
`tiny-alfworld` model: the engine builds the model, materializes a small ALFWorld card, grades the
untrained baseline in the real text engine, and the agent collects the reactive expert's
trajectories online, fine-tunes with TRL and submits (v1), continues on the decision steps with the
loss on the command only and submits (v2), then runs one DAgger round (the better model plays the
train games, the expert labels its states, SFT continues) and submits again; submissions are
played on the dev games and the best one on the held-out games. Training is cut to a few steps (REFERENCE_AGENT_OPTIONS); this checks the
pipeline end to end, not the size of the gain (see docs/alfworld.md for the measured one)."""

import json
import shutil
import sqlite3

import pytest
import yaml

from tests.support.harness import REPO, cli, make_reachable_home, write_plan

pytestmark = pytest.mark.slow
SHORT = ("alf_sft_steps=6,alf_sft_batch=4,alf_submit_reserve_s=60,threads=1,alf_collect_variants=2,"
         "alf_focus_steps=3,alf_dagger_rounds=1,alf_dagger_steps=4,alf_max_steps=6")


@pytest.fixture
def home():
    h = make_reachable_home()
    yield h
    shutil.rmtree(h.parent, ignore_errors=True)


def small_alfworld_tasks(root):
    """The shipped card with one task type and a handful of games (same generator and protocol)."""
    task = root / "alfworld-small"
    shutil.copytree(REPO / "autorl_tui" / "tasks" / "alfworld-gen", task)
    card = yaml.safe_load((task / "task.yaml").read_text())
    card["id"] = "alfworld-small"
    card["protocol"]["max_steps"] = 6
    card["submission_cap"] = {"min_interval_s": 0}
    card["data"]["params"].update(source="generated", task_types=["pick_and_place_simple"])
    card["data"]["splits"] = {"train": {"seed": 1, "n_per_type": 2, "rooms": "seen"},
                              "dev": {"seed": 2, "n_per_type": 1, "rooms": "seen"},
                              "test": {"seed": 3, "n_per_type": 1, "rooms": "unseen"}}
    (task / "task.yaml").write_text(yaml.safe_dump(card))
    return root


def test_reference_agent_trains_tiny_alfworld_under_the_engine(home, tmp_path):
    tasks = small_alfworld_tasks(tmp_path / "tasks")
    plan = write_plan(tmp_path / "plan.yaml", tasks=["alfworld-small"], agents=["reference"],
                      models=["tiny-alfworld"], budget="420s")
    proc = cli("--tasks-dir", str(tasks), "--plain", "--batch", str(plan), home=home, timeout=900,
               env={"REFERENCE_AGENT_OPTIONS": SHORT, "ALFWORLD_DATA": str(tmp_path / "alfworld")})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert (home / "models" / "tiny-alfworld" / "config.json").exists()
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    assert run["state"] == "done", run
    assert run["end_reason"] == "agent finished (exit code 0)", run["end_reason"]
    subs = [dict(r) for r in db.execute("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run["id"],))]
    assert [s["status"] for s in subs] == ["scored", "scored", "scored"], subs
    assert run["baseline_score"] == 0.0 and run["test_score"] is not None
    manifest = json.loads(db.execute("SELECT manifest FROM revisions WHERE id=?",
                                      (subs[0]["revision_id"],)).fetchone()[0])
    assert {"alfworld_collect.py", "alfworld_sft.py", "alfworld_dagger.py"} <= {p.split("/")[-1] for p in manifest}
    # One canonical series per training session: the pipeline's METRICS_FILE points and TRL's printed
    # log dicts are the same points, stored once (docs/metrics.md), whichever source wins.
    names = {r[0] for r in db.execute("SELECT DISTINCT name FROM metrics WHERE run_id=? AND session_id IS NOT NULL",
                                      (run["id"],))}
    assert {"loss", "mean_token_accuracy"} <= names, names
    stdout = "\n".join(r[0] for r in db.execute("SELECT message FROM events WHERE run_id=? AND kind='stdout'",
                                                  (run["id"],)))
    collected = json.loads(next(line for line in stdout.splitlines() if '"stage": "collect"' in line))
    assert collected["tried"] == 4 and collected["episodes"] >= 3 and collected["examples"] > 0, collected
    sfts = [json.loads(line) for line in stdout.splitlines() if '"stage": "sft"' in line]
    assert sfts[0]["examples"] > 4 * collected["examples"] and sfts[0]["steps"] == 6, sfts  # renamed copies, decisions x2
    dagger = json.loads(next(line for line in stdout.splitlines() if '"stage": "dagger"' in line))
    assert dagger["played"] == 2 and dagger["examples"] > 0, dagger      # both train games, labelled
    assert sfts[1]["steps"] == 3 and sfts[1]["examples"] > sfts[0]["examples"], sfts    # focus: decisions x4
    assert sfts[1]["out"].endswith("output/v2") and sfts[2]["out"].endswith("output/v3"), sfts
    assert sfts[2]["steps"] == 4 and sfts[2]["examples"] > sfts[0]["examples"], sfts    # expert data + labels
    focus_cmd = next(line for line in stdout.splitlines() if "running" in line and "--out" in line and "output/v2" in line)
    assert "--full_loss 0" in focus_cmd and "--decisions 4" in focus_cmd and "output/v1 " in focus_cmd, focus_cmd
    # every graded game's trajectory is stored with the submission's samples
    samples = db.execute("SELECT data FROM samples WHERE submission_id=?", (subs[0]["id"],)).fetchall()
    assert samples and all(json.loads(s[0])["trajectory"] for s in samples)
