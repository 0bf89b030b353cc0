"""`autorl-tui report` end to end over a store written through the real Store API: the JSON
validates against its schema, every number in it is recomputed here from the store's rows with
plain sqlite3, and the HTML renders in headless Chromium without console errors."""

import json
import re
from pathlib import Path

import jsonschema
import pytest

from autorl_tui.cli import main
from autorl_tui.reports.sections_run import RunReport
from autorl_tui.reports.typed_json import from_dict, to_dict
from autorl_tui.store.db import Store
from tests.support import chromium
from tests.support.report_trace import check_run_report
from tests.support.run_writer import RunShape, write_run

SCHEMAS = Path(__file__).resolve().parents[2] / "autorl_tui" / "reports" / "schemas"


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    store = Store(home / "store.db")
    write_run(store, RunShape("r0001-arith-baseline-copy-s0", driver="claude-sonnet", gpus=[0],
                              dangers=("kl_spike", "nan"), metric_steps=90, n_stdout=400))
    write_run(store, RunShape("r0002-arith-baseline-copy-s1", seed=1, scores=[], drops=["rejected"],
                              state="failed", end_reason="agent exited with code 2", start=1_790_050_000.0))
    store.close()
    out = tmp_path_factory.mktemp("out")
    code = main(["--home", str(home), "report", "r0001-arith-baseline-copy-s0",
                 "--html", str(out / "run.html"), "--json", str(out / "run.json")])
    assert code == 0
    return home / "store.db", out, json.loads((out / "run.json").read_text())


def test_json_validates_against_its_schema(reported):
    _, _, report = reported
    schema = json.loads((SCHEMAS / "run_report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(report, schema)
    broken = dict(report, outcome=dict(report["outcome"], baseline_score="20"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    # the report is built as its typed sections (the schema's source): it reads back as them, whole
    assert to_dict(from_dict(RunReport, report)) == report
    with pytest.raises(ValueError, match="unknown key"):
        from_dict(RunReport, dict(report, outcome=dict(report["outcome"], baseline_scor=1.0)))


def test_every_number_is_traceable_to_store_rows(reported):
    db, _, r = reported
    check_run_report(db, r)
    # and the fixture's planted problems are what the checks found
    checks = {c["signal"]: c for c in r["metrics"]["checks"]}
    kl = next(st for st in r["metrics"]["stats"] if st["name"] == "kl")
    assert checks["kl_spike"]["status"] == "flagged" and checks["kl_spike"]["evidence"][0]["max"] == kl["max"] == 2.5
    assert [e["series"] for e in checks["non_finite"]["evidence"]] == ["loss"]
    assert checks["reward_up_dev_down"]["status"] == "flagged"
    assert r["events"]["shown"] < r["events"]["total"]  # the stdout flood was capped
    assert r["cost"]["gpu_allocated_hours"] > 0 and r["cost"]["gpu_busy_hours"] > 0


def test_the_trace_checker_catches_a_wrong_number(reported):
    db, _, r = reported
    tampered = json.loads(json.dumps(r))
    tampered["timeline"]["submissions"][0]["t_s"] += 1
    with pytest.raises(AssertionError):
        check_run_report(db, tampered)


def test_html_is_self_contained(reported):
    _, out, r = reported
    html = (out / "run.html").read_text()
    # the only URL is the SVG namespace; no scripts, styles, fonts or images from anywhere
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}
    assert not re.search(r"<(link|img|iframe)\b", html) and "src=" not in html
    for section in ("header", "outcome", "timeline", "phases", "training", "code", "log", "badcases", "drops", "cost"):
        assert f'<section id="{section}">' in html
    assert "claude-sonnet" in html and "KL spike" in html
    assert "&lt;b&gt;show&lt;/b&gt;" in html  # sample prompts are escaped, not injected


def test_failed_run_without_scores_still_reports(reported, tmp_path):
    db, _, _ = reported
    home = db.parent
    code = main(["--home", str(home), "report", "r0002-arith-baseline-copy-s1", "--json", str(tmp_path / "f.json"),
                 "--html", str(tmp_path / "f.html")])
    assert code == 0
    r = json.loads((tmp_path / "f.json").read_text())
    jsonschema.validate(r, json.loads((SCHEMAS / "run_report.schema.json").read_text()))
    check_run_report(db, r)
    assert r["outcome"]["state"] == "failed" and r["outcome"]["best_dev_score"] is None
    assert r["samples"]["submission_id"] is None and [d["drop_kind"] for d in r["drops"]] == ["rejected"]


def test_unknown_run_exits_2_with_a_hint(reported, capsys):
    db, _, _ = reported
    assert main(["--home", str(db.parent), "report", "r9999", "--json", "/dev/null"]) == 2
    err = capsys.readouterr().err
    assert "no run 'r9999'" in err and "r0001-arith-baseline-copy-s0" in err


@pytest.mark.chromium
@pytest.mark.skipif(chromium.CHROMIUM is None, reason="LOUD SKIP: headless Chromium is not installed "
                    "(apt-get install chromium, or `make system-deps`); the report's rendering is NOT verified")
def test_html_renders_in_headless_chromium(reported):
    _, out, r = reported
    shot = out / "run-report.png"
    rendered = chromium.render(out / "run.html", shot, height=3200)
    assert rendered.console_errors == []
    assert shot.stat().st_size > 50_000  # a real page, not a blank one
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    for text in ("Run r0001-arith-baseline-copy-s0", "Training monitor", "Drops manifest", "<svg"):
        assert text in rendered.dom


def test_a_failed_runs_cause_sits_beside_its_outcome_and_a_grading_submission_is_not_a_drop(tmp_path):
    """A failed run's report says why next to its outcome (the harness's error with its traceback,
    the agent's last stderr lines) instead of a collapsed block at the bottom; a report made while
    a submission is still being graded draws it as such, not as a red 'dropped' cross."""
    from autorl_tui.reports import svg

    home = tmp_path / "home"
    home.mkdir()
    store = Store(home / "store.db")
    rid = "r0001-arith-a-s0"
    write_run(store, RunShape(rid, scores=[], drops=[], state="failed", end_reason="internal error: KeyError: 'x'"))
    for i in range(15):
        store.append_event(rid, "stderr", f"stderr line {i}", attempt=1, ts=1_790_000_900.0 + i)
    store.append_event(rid, "error", "internal error: KeyError: 'x'", level="error", attempt=1, ts=1_790_001_000.0,
                       data={"traceback": "Traceback (most recent call last):\n  File \"x.py\"\nKeyError: 'x'"})
    store.close()
    assert main(["--home", str(home), "report", rid, "--html", str(tmp_path / "r.html"),
                 "--json", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(report, json.loads((SCHEMAS / "run_report.schema.json").read_text()))
    cause = report["outcome"]["cause"]
    assert cause["errors"][-1]["message"] == "internal error: KeyError: 'x'"
    assert "Traceback" in cause["errors"][-1]["traceback"]
    assert cause["stderr_tail"] == [f"stderr line {i}" for i in range(3, 15)]
    html = (tmp_path / "r.html").read_text()
    outcome = html[html.index('<section id="outcome">'):html.index("</section>", html.index('<section id="outcome">'))]
    assert "Why it failed" in outcome and "KeyError: &#39;x&#39;" in outcome and "stderr line 14" in outcome
    # the timeline of a run mid-way: #2 is being graded
    subs = [{"seq": 1, "status": "scored", "score": 40.0, "t_s": 60.0, "is_best": True},
            {"seq": 2, "status": "grading", "score": None, "t_s": 120.0}]
    drawn = svg.score_timeline(subs, baseline=20.0, budget_s=600)
    assert 'class="grading"' in drawn and "being graded" in drawn and "#2 grading" in drawn
    assert 'stroke="#dc2626" stroke-width="2"><title>' not in drawn          # no red cross
    subs[1]["status"] = "error"
    assert 'stroke="#dc2626" stroke-width="2"><title>#2 error' in svg.score_timeline(subs, baseline=20.0, budget_s=600)


def test_the_header_says_how_loaded_the_host_was(reported):
    """The host's load average recorded with each resource sample reaches the report (issue 38):
    a slow run on a busy machine is explained next to the agent's CPU."""
    _, out, r = reported
    hl = r["cost"]["host_load"]
    assert hl["n_samples"] == r["cost"]["resource_samples"] > 0 and hl["load1_max"] == 4.5
    html = (out / "run.html").read_text()
    row = re.search(r'<td id="host-load">(.*?)</td>', html, re.S)
    assert row and f"{hl['load1_mean']:.1f} on average, peak 4.5" in row.group(1)
