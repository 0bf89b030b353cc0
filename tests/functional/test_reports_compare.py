"""`autorl-tui compare` end to end over a plan's worth of runs written through the Store API:
schema, every cell recomputed from the runs table, gates, usage errors, Chromium rendering."""

import json
import re
import sqlite3
import statistics
from pathlib import Path

import jsonschema
import pytest

from autorl_tui.cli import main
from autorl_tui.store.db import Store
from tests.support import chromium
from tests.support.run_writer import write_matrix

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "autorl_tui" / "reports" / "schemas" /
                     "compare_report.schema.json").read_text())


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    store = Store(home / "store.db")
    write_matrix(store, plan="demo")
    store.close()
    return home


@pytest.fixture(scope="module")
def compared(home, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    assert main(["--home", str(home), "compare", "--plan", "demo", "--html", str(out / "compare.html"),
                 "--json", str(out / "compare.json")]) == 0
    return out, json.loads((out / "compare.json").read_text())


def runs(home):
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM runs")], {
            r["run_id"]: json.loads(r["metrics"]) for r in conn.execute(
                "SELECT r.id AS run_id, s.metrics FROM runs r JOIN submissions s ON s.id = r.best_submission_id")}
    finally:
        conn.close()


def test_schema(compared):
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(compared[1], SCHEMA)


def test_cells_are_plain_aggregates_of_runs_rows(home, compared):
    _, r = compared
    rows, best_metrics = runs(home)
    assert sorted(x["run_id"] for x in r["runs"]) == sorted(x["id"] for x in rows)
    assert len(r["matrix"]) == len({(x["agent"], x["task"]) for x in rows})
    for c in r["matrix"]:
        group = [x for x in rows if x["agent"] == c["agent"] and x["task"] == c["task"]]
        vals = [x["improvement"] for x in group if x["improvement"] is not None]
        assert c["n_runs"] == len(group) and c["n"] == len(vals) and c["n_missing"] == len(group) - len(vals)
        assert c["mean"] == pytest.approx(statistics.fmean(vals))
        assert c["std"] == pytest.approx(statistics.stdev(vals))
        assert c["stderr"] == pytest.approx(statistics.stdev(vals) / len(vals) ** 0.5)
        assert (c["min"], c["max"]) == (min(vals), max(vals))
        scores = [x["test_score"] if x["test_score"] is not None else x["best_dev_score"] for x in group]
        scores = [s for s in scores if s is not None]
        assert c["mean_score"] == pytest.approx(statistics.fmean(scores))
        i = r["radar"]["axes"].index(c["task"])
        series = next(s for s in r["radar"]["series"] if s["agent"] == c["agent"])
        assert series["values"][i] == pytest.approx(max(0, min(100, c["mean_score"])))
    for c in r["by_level"]:
        vals = [x["improvement"] for x in rows if x["agent"] == c["agent"] and x["level"] == c["level"]
                and x["improvement"] is not None]
        assert c["mean"] == pytest.approx(statistics.fmean(vals)) and c["n"] == len(vals)
    # the driver LLM varies for claude-code, so its effect is broken out
    assert r["drivers"] == ["(none)", "opus", "sonnet"]
    for c in r["by_driver"]:
        vals = [x["improvement"] for x in rows if x["agent"] == c["agent"] and x["task"] == c["task"]
                and (x["driver"] or "(none)") == c["driver"] and x["improvement"] is not None]
        assert c["mean"] == pytest.approx(statistics.fmean(vals))
    for p in r["pass_at_k"]:
        ids = [x["id"] for x in rows if x["agent"] == p["agent"] and x["task"] == p["task"]]
        for v in p["values"]:
            got = [best_metrics[i][f"pass@{v['k']}"] for i in ids if i in best_metrics]
            assert v["mean"] == pytest.approx(statistics.fmean(got)) and v["n"] == len(got)
    assert {p["task"] for p in r["pass_at_k"]} == {"humaneval"}


def test_gates(home, compared, tmp_path):
    _, r = compared
    gates = {g["agent"]: g for g in r["gates"]}
    assert gates["scripted"]["passed"] is True
    assert all(c["verdict"] == "up" for c in gates["scripted"]["cells"])
    cc = gates["claude-code"]
    assert cc["passed"] is False
    verdicts = {c["task"]: c["verdict"] for c in cc["cells"]}
    assert verdicts["alfworld"] == "regressed" and verdicts["arith"] == "up"
    noise = next(c for c in cc["cells"] if c["task"] == "arith")["noise"]
    cell = next(c for c in r["matrix"] if c["agent"] == "claude-code" and c["task"] == "arith")
    assert noise == pytest.approx(max(2 * cell["stderr"], cell["max"] - cell["min"]))
    # one seed only: noise cannot be estimated, the gate says so instead of passing
    rows, _ = runs(home)
    one = [x["id"] for x in rows if x["agent"] == "scripted" and x["seed"] == 0]
    assert main(["--home", str(home), "compare", *one, "--json", str(tmp_path / "one.json")]) == 0
    single = json.loads((tmp_path / "one.json").read_text())
    assert {c["verdict"] for g in single["gates"] for c in g["cells"]} == {"insufficient"}
    assert not single["gates"][0]["passed"]
    # ... and it is shown as insufficient, not as a red FAIL
    assert all(g["verdict"] == "insufficient" for g in single["gates"])
    assert single["gates"][0]["gates"][0]["verdict"] == "insufficient"
    assert main(["--home", str(home), "compare", *one, "--html", str(tmp_path / "one.html")]) == 0
    page = (tmp_path / "one.html").read_text()
    assert 'class="pill insufficient">INSUFFICIENT<' in page and ">FAIL<" not in page and 'pill fail"' not in page
    assert gates["scripted"]["verdict"] == "pass" and cc["verdict"] == "fail"
    # with a primary task, the other tasks only need to not regress
    assert main(["--home", str(home), "compare", "--plan", "demo", "--primary-task", "arith",
                 "--json", str(tmp_path / "p.json")]) == 0
    p = {g["agent"]: g for g in json.loads((tmp_path / "p.json").read_text())["gates"]}
    assert p["claude-code"]["gates"][0]["passed"] is True and p["claude-code"]["gates"][1]["passed"] is False
    assert "alfworld" in p["claude-code"]["gates"][1]["detail"]


@pytest.mark.parametrize("argv, message", [
    (["compare"], "either RUN_ID... or --plan"),
    (["compare", "r1", "--plan", "demo"], "either RUN_ID... or --plan"),
    (["compare", "--plan", "nope"], "no runs of plan 'nope'"),
    (["compare", "missing-run"], "no run 'missing-run'"),
    (["compare", "--plan", "demo", "--primary-task", "chess"], "--primary-task 'chess' is not among"),
])
def test_bad_input_exits_2_with_a_clear_message(home, capsys, argv, message, tmp_path):
    assert main(["--home", str(home), *argv, "--json", str(tmp_path / "x.json")]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.chromium
@pytest.mark.skipif(chromium.CHROMIUM is None, reason="LOUD SKIP: headless Chromium is not installed "
                    "(apt-get install chromium, or `make system-deps`); the comparison's rendering is NOT verified")
def test_html_renders_in_headless_chromium(compared):
    out, _ = compared
    html = (out / "compare.html").read_text()
    assert set(re.findall(r"https?://[^\s\"'<>)]+", html)) <= {"http://www.w3.org/2000/svg"}
    assert "<script" not in html
    rendered = chromium.render(out / "compare.html", out / "compare-report.png", height=2600)
    assert rendered.console_errors == []
    assert rendered.screenshot.stat().st_size > 30_000
    for text in ("Improvement: agents × tasks", "Release gates", "Driver-LLM effect", "<polygon"):
        assert text in rendered.dom


def test_runs_not_ended_are_pending_not_missing_and_left_out_of_gates(tmp_path):
    """`compare --plan` while some runs are queued or running: each such cell says pending (with
    the states), none of them enters a statistic or a gate (it used to count them as "no result"
    and judge the gates anyway), and a per-seed plot is drawn for two tasks (no radar below 3)."""
    from tests.support.run_writer import RunShape, write_run

    home = tmp_path / "home"
    home.mkdir()
    store = Store(home / "store.db")
    for seed, gain in ((0, 8.0), (1, 9.0)):
        write_run(store, RunShape(run_id=f"r000{seed + 1}-arith-a-s{seed}", plan="mix", seed=seed,
                                  scores=[20.0 + gain], test_delta=0.0))
    write_run(store, RunShape(run_id="r0003-arith-a-s2", plan="mix", seed=2, state="running", scores=[80.0]))
    write_run(store, RunShape(run_id="r0004-gsm8k-a-s0", task="gsm8k", plan="mix", state="queued", scores=[]))
    store.close()
    out = tmp_path / "out"
    assert main(["--home", str(home), "compare", "--plan", "mix", "--html", str(out / "c.html"),
                 "--json", str(out / "c.json")]) == 0
    r = json.loads((out / "c.json").read_text())
    jsonschema.validate(r, SCHEMA)
    cells = {c["task"]: c for c in r["matrix"]}
    assert cells["arith"]["n"] == 2 and cells["arith"]["n_pending"] == 1 and cells["arith"]["n_missing"] == 0
    assert cells["arith"]["pending"] == {"running": 1}
    ended = [x for x in r["runs"] if x["run_id"] in ("r0001-arith-a-s0", "r0002-arith-a-s1")]
    assert cells["arith"]["mean"] == pytest.approx(statistics.fmean(x["improvement"] for x in ended))
    assert cells["gsm8k"]["mean"] is None and cells["gsm8k"]["pending"] == {"queued": 1}
    assert r["pending_runs"] == {"queued": 1, "running": 1}
    verdicts = {c["task"]: c["verdict"] for c in r["gates"][0]["cells"]}
    assert verdicts == {"arith": "pending", "gsm8k": "pending"}
    assert r["gates"][0]["verdict"] == "pending"
    page = (out / "c.html").read_text()
    assert "1 queued, 1 running" in page and "not ended yet" in page
    assert 'pending</span> <span class="note">(1 queued)' in page and "no result" not in page
    assert 'class="pill pending">PENDING<' in page
    assert 'aria-label="improvement per seed"' in page and "baseline-copy · arith" in page


def test_several_plans_compare_side_by_side(tmp_path):
    from tests.support.run_writer import RunShape, write_run

    home = tmp_path / "home"
    home.mkdir()
    store = Store(home / "store.db")
    write_run(store, RunShape(run_id="r0001-arith-a-s0", plan="webshop-cells", task="arith"))
    write_run(store, RunShape(run_id="r0002-gsm8k-a-s0", plan="gsm8k-cells", task="gsm8k"))
    write_run(store, RunShape(run_id="r0003-gsm8k-a-s1", plan="other", task="gsm8k", seed=1))
    store.close()
    assert main(["--home", str(home), "compare", "--plan", "webshop-cells", "--plan", "gsm8k-cells",
                 "--json", str(tmp_path / "c.json")]) == 0
    r = json.loads((tmp_path / "c.json").read_text())
    jsonschema.validate(r, SCHEMA)
    assert sorted(r["selection"]["run_ids"]) == ["r0001-arith-a-s0", "r0002-gsm8k-a-s0"]
    assert r["tasks"] == ["arith", "gsm8k"] and r["selection"]["plan"] == "webshop-cells + gsm8k-cells"
