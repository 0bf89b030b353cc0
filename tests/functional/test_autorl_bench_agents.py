"""An agent folder in AutoRL-Bench's format (start.sh + config.yaml) runs unchanged under --batch,
with the local and the docker executor: its env, its grading API answers, the scores.json mirror."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.support.harness import REPO, TASKS, cli, install_model, load_json, make_reachable_home, write_plan

pytestmark = pytest.mark.slow
PROBE_AGENT = REPO / "tests" / "data" / "autorl_bench" / "agents" / "probe"


def _new_home(tiny_model_dir) -> Path:
    h = make_reachable_home()
    h.mkdir(parents=True)
    install_model(tiny_model_dir, h)
    return h


def _run_probe(home: Path, tmp: Path, executor: str):
    # The plan names the folder by its path, as AutoRL-Bench's `agents: [path/to/agents/claude]`.
    plan = write_plan(tmp / "plan.yaml", agents=[str(PROBE_AGENT)], budget="240s", executor=executor)
    return cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, timeout=600)


@pytest.fixture(scope="module")
def local_home(tiny_model_dir, tmp_path_factory):
    """One local run of the probe agent, shared by the tests below (a full run takes minutes)."""
    home = _new_home(tiny_model_dir)
    proc = _run_probe(home, tmp_path_factory.mktemp("plan"), "local")
    yield home, proc
    shutil.rmtree(home.parent, ignore_errors=True)


def test_autorl_bench_agent_folder_runs_unchanged_local(local_home):
    _check_probe_run(*local_home)


@pytest.mark.docker
def test_autorl_bench_agent_folder_runs_unchanged_docker(tiny_model_dir, tmp_path, docker_available):
    if not docker_available:
        pytest.skip("DOCKER ENGINE NOT REACHABLE: the docker AutoRL-Bench agent test did not run")
    home = _new_home(tiny_model_dir)
    try:
        _check_probe_run(home, _run_probe(home, tmp_path, "docker"))
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)


def _check_probe_run(home: Path, proc) -> None:
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    ws = Path(run["workspace"])
    log = (ws / "agent.log").read_text() if (ws / "agent.log").exists() else "(no agent.log)"
    assert proc.returncode == 0 and run["state"] == "done", (run["state"], run["end_reason"], log, proc.stderr[-3000:])
    assert run["agent"] == "probe"
    probe = load_json(ws / "probe.json")

    # Its env: the contract, config.yaml's env_vars under it (TASK stays the harness's).
    assert probe["note"] == "from config.yaml" and probe["task"] == "arith-small"
    # stdout and stderr went to agent.log in the workspace, as AutoRL-Bench's runner writes it
    assert "=== Probe Agent ===" in log and "probe done" in log

    first, again = probe["first"], probe["again"]
    for key in ("submission_id", "timestamp", "model_path", "score", "baseline_score", "improvement",
                "elapsed_seconds", "best", "total_submissions"):
        assert key in first, key
    assert first["best"]["submission_id"] == first["submission_id"] and first["best"]["score"] == first["score"]
    assert first["total_submissions"] == 1 and first["elapsed_seconds"] >= 0
    assert first["baseline_score"] == run["baseline_dev_score"]
    # The same folder again: the earlier response, unchanged (ours adds `duplicate`).
    assert again["duplicate"] is True
    assert {k: again[k] for k in first if k not in ("duplicate", "status", "run_elapsed_seconds", "grading_queue")} == \
           {k: first[k] for k in first if k not in ("duplicate", "status", "run_elapsed_seconds", "grading_queue")}

    # A model that cannot be graded: 200, score 0.0, `error` (and our code).
    broken = probe["broken"]
    assert probe["broken_code"] == "200" and broken["score"] == 0.0 and broken["error"], broken
    assert broken["code"] == "grading_failed" and broken["best"]["submission_id"] == first["submission_id"]
    assert broken["total_submissions"] == 2

    assert probe["missing_code"] == "400" and probe["missing"]["error"] == "Missing model_path"
    assert probe["bad_gpu_code"] == "400" and probe["bad_gpu"]["available_gpus"] == []
    health = probe["health"]
    assert health["status"] == "ok" and health["task"] == "arith-small" and health["workspace"] == str(ws)
    assert health["available_gpus"] == []
    t = probe["time"]
    assert t["timeout_s"] == 240 and t["start_time"] == int(run["started_at"]) and 0 < t["remaining"] <= 240
    assert t["last_submit_time"] is not None and t["end_time"] is None and int(probe["remaining"]) > 0

    # scores.json mirrored the ledger: the two graded entries (not the duplicate)
    assert [e["submission_id"] for e in probe["scores"]] == [first["submission_id"], broken["submission_id"]]
    assert probe["scores"][1]["score"] == 0.0 and probe["scores"][1]["error"]

    subs = [dict(r) for r in db.execute("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run["id"],))]
    assert [s["status"] for s in subs] == ["scored", "duplicate", "error"]
    # The agent forged the mirror with a score of 100: the ledger and the result did not move.
    assert run["best_dev_score"] == first["score"] != 100.0 and run["best_submission_id"] == subs[0]["id"]
    assert run["test_score"] is not None


FIXTURES = REPO / "tests" / "data" / "autorl_bench"
IMPORTED = "ab-arith-small-20260228t100000-example-agent"


def test_imported_runs_compare_and_report_beside_a_run_of_ours(local_home, tmp_path):
    home, _ = local_home
    ours = json.loads(cli("runs", "list", "--json", home=home, check=True).stdout)
    ours_id = next(r["id"] for r in ours if r["agent"] == "probe")
    proc = cli("import", "autorl-bench", str(FIXTURES / "workspace"), str(FIXTURES / "results.csv"), home=home)
    # the malformed scores.json and results.csv row are reported with their lines; the rest is imported
    assert proc.returncode == 2 and "scores.json: line 14" in proc.stderr and "results.csv: line 5" in proc.stderr
    assert f"imported {IMPORTED}" in proc.stdout and "Traceback" not in proc.stderr

    listed = cli("runs", "list", home=home, check=True, env={"COLUMNS": "400"}).stdout
    assert "imported: no test" in listed
    rows = {r["id"]: r for r in json.loads(cli("runs", "list", "--json", home=home, check=True).stdout)}
    assert rows[IMPORTED]["imported_from"] and rows[ours_id]["imported_from"] is None

    out_json, out_html = tmp_path / "cmp.json", tmp_path / "cmp.html"
    cli("compare", ours_id, IMPORTED, "--json", str(out_json), "--html", str(out_html), home=home, check=True)
    cmp = load_json(out_json)
    runs = {r["run_id"]: r for r in cmp["runs"]}
    assert runs[IMPORTED]["task"] == runs[ours_id]["task"] == "arith-small"
    assert runs[IMPORTED]["test_score"] is None and runs[IMPORTED]["imported_from"].startswith("autorl-bench:")
    assert runs[IMPORTED]["best_dev_score"] == 45.0 and runs[ours_id]["test_score"] is not None
    assert sorted(cmp["agents"]) == ["example_agent", "probe"]
    assert "imported: no held-out test" in out_html.read_text()

    # Both run reports carry AutoRL-Bench's ten diagnostics beside ours.
    for run_id in (ours_id, IMPORTED):
        rep = tmp_path / f"{run_id}.json"
        cli("report", run_id, "--json", str(rep), "--html", str(tmp_path / f"{run_id}.html"), home=home, check=True)
        diag = load_json(rep)["autorl_bench"]
        assert len(diag) == 10 and "AutoRL-Bench diagnostics" in (tmp_path / f"{run_id}.html").read_text()
    ours_diag = load_json(tmp_path / f"{ours_id}.json")["autorl_bench"]
    scored = sqlite3.connect(home / "store.db").execute(
        "SELECT score FROM submissions WHERE run_id=? AND status='scored'", (ours_id,)).fetchone()[0]
    # the failed grading counts as 0.0 and the duplicate not at all, as in AutoRL-Bench's scores.json
    assert ours_diag["score_trajectory"] == [scored, 0.0]
    assert ours_diag["valid_submission_rate"] == (0.5 if scored > 0 else 0.0)
    assert ours_diag["copy_model_count"] == 1          # the probe submitted a byte-for-byte copy of the base model
    assert "no held-out test" in (tmp_path / f"{IMPORTED}.html").read_text()

    # Export in its shape; it reads back through the importer into another home.
    out = tmp_path / "ab"
    cli("export", "--format", "autorl-bench", "--out", str(out), ours_id, home=home, check=True)
    metrics = load_json(out / "workspace" / "arith-small" / ours_id / "reports" / "metrics.json")
    assert metrics == ours_diag
    rows = (out / "results.csv").read_text().splitlines()
    assert rows[0].split(",")[:3] == ["run_id", "timestamp", "task"] and rows[1].startswith(ours_id + ",")
    other = tmp_path / "other-home"
    back = cli("import", "autorl-bench", str(out), home=other)
    assert back.returncode == 0 and "1 imported" in back.stdout, back.stdout + back.stderr
