"""Issue 24, items 5 and 8, end to end: a hostile agent against the real engine, its real grading
API and the real grader worker on the tiny model. The agent (tests/agents/api_abuse_agent.py)
sends malformed submissions, a slow partial request, a model whose chat template loops and two
identical submissions at once; the store must show every one of them contained."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.support.harness import TASKS, TEST_AGENTS, cli, install_model, load_json, make_reachable_home, write_plan

pytestmark = pytest.mark.slow

BUDGET_S = 240
BAD = ("nul", "surrogate", "long_name", "deep_json", "deep_object", "not_json", "number", "null", "list", "array_body",
       "too_big")


@pytest.fixture(scope="module")
def attacked(tiny_model_dir, tmp_path_factory):
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    plan = write_plan(tmp_path_factory.mktemp("plan") / "plan.yaml", agents=["test-api-abuse"], budget=f"{BUDGET_S}s")
    proc = cli("--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home,
               timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    subs = [dict(r) for r in db.execute("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run["id"],))]
    gradings = [json.loads(r[0]) for r in db.execute(
        "SELECT data FROM events WHERE run_id=? AND kind='grading' ORDER BY id", (run["id"],))]
    probe = load_json(Path(run["workspace"]) / "logs" / "probe.json")
    db.close()
    yield {"run": run, "subs": subs, "probe": probe, "gradings": gradings}
    shutil.rmtree(home.parent, ignore_errors=True)


def test_malformed_submissions_get_a_4xx_with_a_fix_and_leave_no_row(attacked):
    probe, subs = attacked["probe"], attacked["subs"]
    for round_ in (0, 1):
        for name in BAD:
            status, body, _ = probe[f"{name}{round_}"]
            assert 400 <= status < 500, (name, status, body)
            assert body.get("error") and body.get("code"), (name, body)   # JSON, saying what to fix
    assert probe["too_big0"][0] == 413
    assert probe["deep_json0"][1]["code"] == "too_deep" and probe["deep_object0"][1]["code"] == "too_deep"
    for name in ("nul", "surrogate", "long_name"):
        assert probe[f"{name}0"][1]["code"] == "bad_path", probe[f"{name}0"]
    assert "255" in probe["long_name0"][1]["error"]
    # Nothing was recorded for them: the only rows are the three real submissions that follow.
    paths = [s["path"] for s in subs]
    assert paths[0] == "output/loop" and sorted(paths[1:]) == ["output/c1", "output/c2"]   # the pair races
    assert not [s for s in subs if s["status"] in ("received", "grading")]


def test_cap_is_unaffected_by_rejected_requests(attacked):
    # 22 bad requests against a cap of 10: the valid submissions after them are still taken.
    c1, c2 = attacked["probe"]["concurrent"]["c1"], attacked["probe"]["concurrent"]["c2"]
    assert c1[0] == 200 and c2[0] == 200, (c1, c2)


def test_slow_partial_request_is_closed_and_others_are_answered(attacked):
    from autorl_tui.engine.run_api import HEADER_TIMEOUT_S

    slow = attacked["probe"]["slowloris"]
    assert slow["closed_after_s"] is not None, "the server never closed a connection sending one byte at a time"
    assert HEADER_TIMEOUT_S - 1 <= slow["closed_after_s"] <= HEADER_TIMEOUT_S + 20, slow
    assert slow["others"] and set(slow["others"]) == {200}


def test_looping_chat_template_fails_that_submission_only(attacked):
    run, subs, probe = attacked["run"], attacked["subs"], attacked["probe"]
    status, body, elapsed = probe["loop"]
    assert status == 422 and "chat template" in body["error"], probe["loop"]
    loop = subs[0]
    assert loop["status"] == "error" and "chat template" in loop["error"] and loop["score"] is None
    # Stopped at the template limit (5s per prompt), not by the grading process's hour-long limit.
    assert loop["grading_s"] < 60, loop
    # The next good submission was graded and the run ended well inside its budget.
    assert subs[1]["status"] == "scored" and subs[1]["score"] is not None
    assert run["state"] == "done" and run["best_submission_id"] == subs[1]["id"]
    assert run["ended_at"] - run["started_at"] < BUDGET_S


def test_identical_concurrent_submissions_are_graded_once(attacked):
    subs, probe, gradings = attacked["subs"], attacked["probe"], attacked["gradings"]
    c1, c2 = probe["concurrent"]["c1"][1], probe["concurrent"]["c2"][1]
    first, second = sorted([c1, c2], key=lambda r: r["duplicate"])
    assert not first["duplicate"] and second["duplicate"] and second["duplicate_of"] == first["submission_id"]
    # the duplicate gets the earlier answer unchanged (AutoRL-Bench's contract), same submission_id
    assert second["submission_id"] == first["submission_id"] and second["best"] == first["best"]
    assert second["score"] == first["score"]
    assert [s["status"] for s in subs[1:]] == ["scored", "duplicate"]
    assert subs[2]["duplicate_of"] == subs[1]["id"] and subs[1]["content_hash"] == subs[2]["content_hash"]
    # Gradings on dev: the baseline's, the looping model's and one for the pair (not two).
    dev_starts = [g for g in gradings if g.get("phase") == "start" and g.get("split") == "dev"]
    assert len(dev_starts) == 1 + 2, gradings
