"""The reference agent on DeepSearchQA under the real engine (`--batch`, two seeds), with the
built-in `tiny-dsqa` model: the engine builds the model, materializes a small DeepSearchQA card,
grades the untrained baseline through the real tool loop (BM25 search), the agent fine-tunes on
the shipped expert tool steps with TRL and submits v1 (and v2), the best is played on the held-out
questions; then `autorl-tui compare` says whether the held-out change is beyond the seed noise.
Training is cut short (REFERENCE_AGENT_OPTIONS): this checks the pipeline and the honesty of the
report, not the size of the gain (docs/deepsearchqa.md has the measured one)."""

import json
import shutil
import sqlite3

import pytest
import yaml

from tests.support.harness import REPO, cli, make_reachable_home, write_plan

# A whole reference-agent run with minutes of training budget: `make test-long` (not in `make test`,
# which must stay well under 20 minutes on a 2-core CI machine).
pytestmark = [pytest.mark.slow, pytest.mark.long]
SHORT = "dsqa_sft_steps=40,dsqa_sft_batch=8,dsqa_focus_steps=10,dsqa_submit_reserve_s=60,threads=1"


@pytest.fixture
def home():
    h = make_reachable_home()
    yield h
    shutil.rmtree(h.parent, ignore_errors=True)


def small_tasks(root):
    task = root / "dsqa-small"
    shutil.copytree(REPO / "autorl_tui" / "tasks" / "deepsearchqa", task,
                    ignore=shutil.ignore_patterns("__pycache__"))
    card = yaml.safe_load((task / "task.yaml").read_text())
    card["id"] = "dsqa-small"
    card["protocol"]["max_steps"] = 6
    card["submission_cap"] = {"min_interval_s": 0}
    card["data"]["params"]["source"] = "generated"
    card["data"]["splits"]["train"]["n"] = 30
    card["data"]["splits"]["dev"]["n"] = 10
    card["data"]["splits"]["test"]["n"] = 14
    (task / "task.yaml").write_text(yaml.safe_dump(card))
    return root


def test_reference_agent_on_deepsearchqa_and_the_noise_verdict(home, tmp_path):
    tasks = small_tasks(tmp_path / "tasks")
    plan = write_plan(tmp_path / "plan.yaml", name="dsqa", tasks=["dsqa-small"], agents=["reference"],
                      models=["tiny-dsqa"], seeds=[0, 1], budget="240s")
    proc = cli("--tasks-dir", str(tasks), "--plain", "--batch", str(plan), home=home, timeout=1500,
               env={"REFERENCE_AGENT_OPTIONS": SHORT})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    runs = [dict(r) for r in db.execute("SELECT * FROM runs ORDER BY seed")]
    assert [r["state"] for r in runs] == ["done", "done"], runs
    for run in runs:
        subs = [dict(r) for r in db.execute("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run["id"],))]
        assert subs and all(s["status"] == "scored" for s in subs), subs
        assert run["baseline_score"] is not None and run["test_score"] is not None
        assert run["improvement"] == pytest.approx(run["test_score"] - run["baseline_score"])
        samples = db.execute("SELECT data FROM samples WHERE submission_id=?", (subs[0]["id"],)).fetchall()
        data = [json.loads(s[0]) for s in samples]
        assert data and all(d["trajectory"] for d in data)        # every episode's trajectory is stored
    out = tmp_path / "compare.json"
    proc = cli("compare", "--plan", "dsqa", "--primary-task", "dsqa-small", "--json", str(out), home=home, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    cell = report["gates"][0]["cells"][0]
    improvements = [r["improvement"] for r in runs]
    assert cell["n"] == 2 and cell["mean"] == pytest.approx(sum(improvements) / 2)
    assert cell["noise"] is not None and cell["noise"] >= abs(improvements[0] - improvements[1]) - 1e-9
    expected = "up" if cell["mean"] > cell["noise"] else "regressed" if cell["mean"] < -cell["noise"] else "flat"
    assert cell["verdict"] == expected and "noise" in cell["reason"]
