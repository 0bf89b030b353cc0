"""The reference agent on WebShop under the real engine (`--batch`), with the built-in
`tiny-webshop` model: the engine builds the model, materializes a small WebShop card, grades the
untrained baseline on dev and the held-out test, and the agent fine-tunes on the expert's steps
with TRL (v1: loss on every token; v2: on the actions), submits both; the better one is played on
the held-out instructions. The card is cut to a few instructions and the training to what fits a
loaded CI machine: this checks the pipeline end to end, not the size of the gain. Whether the
reference recipe lifts tiny-webshop's held-out success has not been measured yet (docs/webshop.md):
on a machine at load 20 this run got through 25 SFT steps."""

import json
import shutil
import sqlite3

import pytest
import yaml

from tests.support.harness import REPO, cli, make_reachable_home, write_plan

# A whole reference-agent run with minutes of training budget: `make test-long` (not in `make test`,
# which must stay well under 20 minutes on a 2-core CI machine).
pytestmark = [pytest.mark.slow, pytest.mark.long]
SHORT = "ws_sft_steps=150,ws_sft_batch=8,ws_focus_steps=60,ws_submit_reserve_s=90,threads=2"


@pytest.fixture
def home():
    h = make_reachable_home()
    yield h
    shutil.rmtree(h.parent, ignore_errors=True)


def small_webshop_tasks(root):
    """The shipped card over a smaller catalog with fewer instructions (same environment and protocol)."""
    task = root / "webshop-small"
    shutil.copytree(REPO / "autorl_tui" / "tasks" / "webshop", task, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    card = yaml.safe_load((task / "task.yaml").read_text())
    card["id"] = "webshop-small"
    card["protocol"]["max_steps"] = 8
    card["submission_cap"] = {"min_interval_s": 0}
    card["data"]["params"].update(source="generated", per_type=6)
    card["data"]["splits"] = {"train": {"n": 240, "seed": 1}, "dev": {"n": 8, "seed": 2}, "test": {"n": 16, "seed": 3}}
    (task / "task.yaml").write_text(yaml.safe_dump(card))
    return root


def test_reference_agent_trains_tiny_webshop_under_the_engine(home, tmp_path):
    tasks = small_webshop_tasks(tmp_path / "tasks")
    plan = write_plan(tmp_path / "plan.yaml", tasks=["webshop-small"], agents=["reference"],
                      models=["tiny-webshop"], budget="900s")
    proc = cli("--tasks-dir", str(tasks), "--plain", "--batch", str(plan), home=home, timeout=1500,
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
