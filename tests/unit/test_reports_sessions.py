"""Danger signals and charts per training session, over a real store written through the Store
API: an SFT session whose entropy is high and a GRPO session whose entropy is low are two
sessions, so no "entropy collapse" is read across them; a collapse inside one session is flagged
with that session named; charts draw one line per session, informative series first, and list
constant series instead of charting them."""

import pytest

from autorl_tui.reports.analytics import Analytics
from autorl_tui.reports.run_report import charts_for, metric_chart_order
from autorl_tui.store.db import Store

T0 = 1_790_000_000.0


def _session(store, run_id, kind, t, series: dict[str, list[float]]):
    sid = store.append_session(run_id, attempt=1, kind=kind, sources=["stdout"], started_at=t)
    n = max(len(v) for v in series.values())
    for i in range(n):
        for name, values in series.items():
            if i < len(values):
                store.append_metric(run_id, name, values[i], step=i + 1, source="stdout", attempt=1, ts=t + i,
                                    session_id=sid)
    return sid


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "store.db"
    store = Store(path)
    for rid in ("r-two", "r-collapse", "r-sft-sharpens", "r-kl"):
        store.insert("runs", {"id": rid, "task": "arith", "agent": "a", "model": "tiny", "budget_s": 600, "state": "done",
                              "created_at": T0, "started_at": T0, "spec": "{}"})
    # SFT: entropy ~1.0, loss falls; GRPO: entropy ~0.1 from its start, clip ratio always 0
    _session(store, "r-two", "sft", T0 + 10, {"loss": [2.0 - 0.05 * i for i in range(20)], "entropy": [1.0] * 20,
                                               "learning_rate": [1e-5] * 20})
    _session(store, "r-two", "grpo", T0 + 100, {"loss": [0.01 * i for i in range(20)], "entropy": [0.1] * 20,
                                                 "reward": [0.1 + 0.01 * i for i in range(20)], "kl": [0.001 * i for i in range(20)],
                                                 "clip_ratio/region_mean": [0.0] * 20})
    _session(store, "r-collapse", "sft", T0, {"loss": [1.0] * 5})
    _session(store, "r-collapse", "grpo", T0 + 50, {"entropy": [1.0] * 10 + [0.05] * 10})
    # SFT makes the model sure of its answers: the same fall is no collapse there
    _session(store, "r-sft-sharpens", "sft", T0, {"entropy": [1.0] * 10 + [0.05] * 10})
    # a KL that jumps 20x but stays tiny, and one that really jumps
    _session(store, "r-kl", "grpo", T0, {"kl": [0.001] * 19 + [0.02]})
    _session(store, "r-kl", "grpo", T0 + 50, {"kl": [0.01] * 19 + [0.5]})
    store.close()
    return path


def test_no_signal_compares_two_sessions(store_path):
    with Analytics(store_path) as a:
        checks = {c["signal"]: c for c in a.danger_signals("r-two")}
        series = a.metric_series("r-two")
    entropy = checks["entropy_collapse"]
    assert entropy["status"] == "ok", entropy            # merged, 1.0 -> 0.1 would read as a collapse
    assert [(e["session"], e["session_kind"]) for e in entropy["evidence"]] == [(2, "grpo")]
    assert entropy["sessions"] == [2] and "session 2 (grpo)" in entropy["message"]
    assert "session 1 (sft) not judged" in entropy["message"]
    assert checks["kl_spike"]["sessions"] == [2]
    assert {(s["name"], s["session"]) for s in series if s["name"] in ("loss", "entropy")} == {
        ("loss", 1), ("loss", 2), ("entropy", 1), ("entropy", 2)}


def test_a_collapse_inside_one_session_is_flagged_naming_it(store_path):
    with Analytics(store_path) as a:
        entropy = next(c for c in a.danger_signals("r-collapse") if c["signal"] == "entropy_collapse")
    assert entropy["status"] == "flagged"
    assert [(e["session"], e["flagged"]) for e in entropy["evidence"]] == [(2, True)]


def test_charts_informative_first_one_line_per_session_constants_listed(store_path):
    with Analytics(store_path) as a:
        series = a.metric_series("r-two")
        checks = a.danger_signals("r-two")
    charted, constant, _ = metric_chart_order(series)
    # entropy is flat within each session but not across them: charted, one line per session
    assert [name for name, _ in charted] == ["loss", "reward", "kl", "entropy"]
    assert [len(group) for _, group in charted] == [2, 1, 1, 2]
    assert [(c["name"], c["value"]) for c in constant] == [("clip_ratio/region_mean", 0.0), ("learning_rate", 1e-5)]
    report = {"timeline": {"submissions": []}, "outcome": {"baseline_dev_score": None}, "run": {"budget_s": 600},
              "phases": {"segments": [], "span_s": 0}, "metrics": {"series": series, "checks": checks}}
    charts = charts_for(report)
    loss = charts["metrics"][0]
    assert loss["name"] == "loss" and loss["sessions"] == ["session 1 (sft)", "session 2 (grpo)"]
    assert "session 1 (sft)" in loss["svg"] and "session 2 (grpo)" in loss["svg"]     # legend: two lines
    assert loss["svg"].count("<path d=") >= 2


def test_entropy_falling_in_supervised_training_is_not_a_collapse(store_path):
    with Analytics(store_path) as a:
        entropy = next(c for c in a.danger_signals("r-sft-sharpens") if c["signal"] == "entropy_collapse")
    assert entropy["status"] == "not_applicable" and entropy["evidence"] == [], entropy
    assert "not judged" in entropy["message"]


def test_a_kl_spike_must_also_be_large(store_path):
    with Analytics(store_path) as a:
        kl = next(c for c in a.danger_signals("r-kl") if c["signal"] == "kl_spike")
    assert kl["status"] == "flagged"
    assert [(e["session"], e["flagged"]) for e in kl["evidence"]] == [(1, False), (2, True)]
    assert kl["evidence"][0]["threshold"] == pytest.approx(0.1)


def _series(name, values, session=1):
    return {"name": name, "session": session, "session_kind": "grpo", "n_points": len(values), "n_nan": 0,
            "n_inf": 0, "points": [{"step": i + 1, "mean": v, "min": v, "max": v} for i, v in enumerate(values)]}


def test_equal_series_are_charted_once_and_one_point_series_are_listed():
    series = [_series("reward", [0.1, 0.4, 0.6]), _series("rewards/exact_match/mean", [0.1, 0.4, 0.6]),
              _series("loss", [2.0, 1.5, 1.2]), _series("train_runtime", [12.5], 1), _series("train_runtime", [30.0], 2),
              _series("rewards/format/mean", [0.2, 0.4, 0.6])]
    charted, constant, aliases = metric_chart_order(series)
    assert [name for name, _ in charted] == ["loss", "reward", "rewards/format/mean"]
    assert aliases == {"reward": ["rewards/exact_match/mean"]}
    [runtime] = constant
    assert runtime["name"] == "train_runtime" and [v["value"] for v in runtime["values"]] == [12.5, 30.0]
