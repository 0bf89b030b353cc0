"""The held-out bootstrap band in `autorl-tui compare` and `autorl-tui report`, over runs written
through the Store API with per-question held-out samples of the base model and the tested
submission: the band is computed from the stored pairs, shown in JSON and HTML, and decides the
verdict of a one-seed cell (a cell with seeds keeps the seed-noise verdict)."""

import json
from pathlib import Path

import jsonschema
import pytest

from autorl_tui.cli import main
from autorl_tui.reports.bootstrap import paired_band
from autorl_tui.store.db import Store

SCHEMAS = Path(__file__).resolve().parents[2] / "autorl_tui" / "reports" / "schemas"
T0 = 1_790_000_000.0


def write_run(store: Store, run_id: str, task: str, seed: int, pairs: list[tuple[int, int]],
              improvement_offset: float = 0.0) -> None:
    """A finished run whose held-out test has one sample per question: the base model's (test
    baseline, named by a harness event as the engine does) and the tested submission's."""
    t = T0 + seed * 1000
    if store.one("SELECT id FROM plans WHERE name = 'band'") is None:
        store.insert("plans", {"id": "p-band", "name": "band", "source": "name: band\n", "created_at": T0 - 100})
    base_test = 100.0 * sum(b for b, _ in pairs) / len(pairs)
    test = 100.0 * sum(x for _, x in pairs) / len(pairs)
    store.insert("runs", {"id": run_id, "plan_id": "p-band", "plan_name": "band", "task": task, "level": 1,
                          "agent": "ref", "model": "tiny", "seed": seed, "budget_s": 60, "state": "done",
                          "created_at": t, "started_at": t, "ended_at": t + 50,
                          "spec": {"task": {"id": task, "primary_metric": "accuracy"}}})
    base_id = store.insert("baselines", {"task": task, "model": f"tiny@{run_id}", "protocol_hash": "p",
                                         "grader_version": "g", "split": "test", "score": base_test,
                                         "created_at": t})
    store.append_event(run_id, "harness", f"baseline on test: {base_test:.2f}",
                       data={"split": "test", "baseline_id": base_id}, ts=t + 1)
    sub = store.insert("submissions", {"run_id": run_id, "seq": 1, "path": "output/v1", "received_at": t + 30,
                                       "status": "scored", "score": test, "test_score": test})
    rows = []
    for i, (b, x) in enumerate(pairs):
        q = f"q{i:03d}"
        rows.append({"run_id": None, "submission_id": None, "baseline_id": base_id, "split": "test", "sample_id": q,
                     "correct": b})
        rows.append({"run_id": run_id, "submission_id": sub, "baseline_id": None, "split": "test", "sample_id": q,
                     "correct": x})
        # a dev sample of the same id must not be paired with the held-out ones
        rows.append({"run_id": run_id, "submission_id": sub, "baseline_id": None, "split": "dev", "sample_id": q,
                     "correct": 1 - x})
    store.insert_many("samples", rows)
    store.update("runs", run_id, {"baseline_score": base_test, "test_score": test, "best_submission_id": sub,
                                  "improvement": test - base_test + improvement_offset, "best_dev_score": test})


FIXED = [(0, 1)] * 15 + [(0, 0)] * 5                 # +75: the band excludes 0
ONE = [(0, 1)] + [(0, 0)] * 29                       # +3.3: the band holds 0


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    store = Store(home / "store.db")
    write_run(store, "r0001-up", "gain", 0, FIXED)
    write_run(store, "r0002-flat", "small", 0, ONE)
    write_run(store, "r0003-score", "scored", 0, FIXED, improvement_offset=-10.0)   # primary metric ≠ accuracy
    write_run(store, "r0004-seeds", "seeds", 0, FIXED)
    write_run(store, "r0005-seeds", "seeds", 1, ONE)
    store.close()
    return home


@pytest.fixture(scope="module")
def compared(home, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    assert main(["--home", str(home), "compare", "--plan", "band", "--html", str(out / "c.html"),
                 "--json", str(out / "c.json")]) == 0
    return out, json.loads((out / "c.json").read_text())


def test_each_run_carries_the_band_of_its_held_out_pairs(compared):
    _, r = compared
    jsonschema.validate(r, json.loads((SCHEMAS / "compare_report.schema.json").read_text()))
    bands = {x["run_id"]: x["held_out_band"] for x in r["runs"]}
    assert bands["r0001-up"] == paired_band(FIXED) and bands["r0002-flat"] == paired_band(ONE)
    assert bands["r0001-up"]["n"] == 20 and bands["r0001-up"]["observed"] == 75.0 and bands["r0001-up"]["low"] > 0
    assert bands["r0002-flat"]["n"] == 30 and bands["r0002-flat"]["low"] <= 0


def test_one_seed_cells_are_judged_by_the_band_seeded_cells_by_seed_noise(compared):
    _, r = compared
    cells = {c["task"]: c for c in r["gates"][0]["cells"]}
    assert cells["gain"]["verdict"] == "up" and "bootstrap band" in cells["gain"]["reason"]
    assert cells["gain"]["band"]["low"] > 0 and cells["gain"]["noise"] is None
    assert cells["small"]["verdict"] == "flat" and "within noise" in cells["small"]["reason"]
    # the band is over per-question accuracy; an improvement of another metric is not judged by it
    assert cells["scored"]["verdict"] == "insufficient" and "not this primary metric" in cells["scored"]["reason"]
    # two seeds: seed noise decides, as before (+75 and +3.3: spread 71.7 > mean 39.2)
    assert cells["seeds"]["band"] is None and cells["seeds"]["noise"] == pytest.approx(75.0 - 100 / 30)
    assert cells["seeds"]["verdict"] == "flat" and "noise" in cells["seeds"]["reason"]
    assert r["gates"][0]["gates"][0]["verdict"] == "pass"        # `gain` is up beyond its band


def test_html_shows_the_bands(compared):
    out, _ = compared
    html = (out / "c.html").read_text()
    assert "bootstrap band" in html
    b = paired_band(FIXED)
    assert f"[{b['low']:+.2f}, {b['high']:+.2f}] (95%, n=20)" in html
    # a one-seed matrix cell names its band under the mean (a cell with seeds shows its range instead)
    assert f"band [{b['low']:+.1f}, {b['high']:+.1f}] · n=1" in html


def test_run_report_has_the_band(home, tmp_path):
    assert main(["--home", str(home), "report", "r0002-flat", "--json", str(tmp_path / "r.json"),
                 "--html", str(tmp_path / "r.html")]) == 0
    r = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(r, json.loads((SCHEMAS / "run_report.schema.json").read_text()))
    assert r["outcome"]["held_out_band"] == paired_band(ONE)
    html = (tmp_path / "r.html").read_text()
    assert "holds 0, within noise" in html and "(95%, n=30)" in html
