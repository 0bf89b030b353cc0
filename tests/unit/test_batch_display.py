"""The pure parts of headless output: progress over a plan, the "next" section, the demo's
conditions, and preparation progress thinning."""

import io
import shlex
from types import SimpleNamespace

from autorl_tui import progress
from autorl_tui.commands._conditions import describe_conditions, training_steps
from autorl_tui.commands._display import plan_progress, print_next, progress_line


def test_plan_progress_counts_finished_runs_and_estimates_time_left_from_budgets():
    now = 1000.0
    rows = [SimpleNamespace(**r) for r in (     # the RunRecord fields plan_progress reads
        {"id": "r0001-a", "state": "done", "budget_s": 300, "started_at": 100, "best_dev_score": 70.0},
        {"id": "r0002-a", "state": "running", "budget_s": 300, "started_at": 900, "best_dev_score": 40.0},
        {"id": "r0003-a", "state": "queued", "budget_s": 300, "started_at": None, "best_dev_score": None},
        {"id": "r0004-a", "state": "failed", "budget_s": 300, "started_at": 50, "best_dev_score": None})]
    p = plan_progress(rows, concurrency=1, now=now)
    assert (p["finished"], p["total"], p["done"]) == (2, 4, 1)
    assert p["eta_s"] == (300 - 100) + 300 + 60        # what is left of r0002, then r0003 with preparation
    assert plan_progress(rows, concurrency=2, now=now)["eta_s"] == 360   # the longest single run bounds it
    line = progress_line(p)
    assert "2/4 run(s) finished (1 not done)" in line and "left (from budgets)" in line
    assert p["best"] == {"r0001-a": 70.0, "r0002-a": 40.0, "r0003-a": None, "r0004-a": None}


def test_next_section_spells_out_home_and_quotes_paths():
    out = io.StringIO()
    rows = [{"id": "r0001-x-s0", "state": "done"}, {"id": "r0002-x-s1", "state": "cancelled"}]
    print_next("/tmp/my home", rows, "p", exports={"r0001-x-s0": "/tmp/my home/reports/r0001-x-s0.json"}, stream=out)
    text = out.getvalue()
    report = next(line for line in text.splitlines() if "report r0001" in line)
    assert shlex.split(report.split(None, 1)[1]) == ["autorl-tui", "report", "r0001-x-s0", "--home", "/tmp/my home"]
    assert "compare --plan p" in text and "export   /tmp/my home/reports/r0001-x-s0.json" in text
    assert "export r0002-x-s1 --json" in text and "retry RUN" in text


def test_training_steps_and_budget_cuts_are_read_from_the_agents_output():
    lines = ["[reference] running python code/sft.py --model m --steps 400 --lr 1",
             '{"stage": "sft", "steps": 400, "stopped_early": false}',
             "[reference] running python code/grpo.py --model m --steps 60",
             '{"stage": "grpo", "steps": 22, "stopped_early": true}',
             "[reference] stopping: 30s left, a GRPO round needs about 75s"]
    stages = training_steps(lines)
    assert stages == [{"stage": "sft", "steps": 400, "asked": 400, "stopped_early": False},
                      {"stage": "grpo", "steps": 22, "asked": 60, "stopped_early": True}]
    text = "\n".join(describe_conditions("r0001", {"cores": 2, "agent_cores": 0.6, "samples": 40, "stages": stages,
                                                   "budget_stops": [lines[-1]], "load": 8.5}))
    assert "0.60 of 2 CPU core(s)" in text and "30%" in text and "load average now 8.5" in text
    assert "sft 400/400 steps, grpo 22/60 steps (cut by the budget)" in text
    assert "stopping: 30s left" in text and "budget is wall-clock" in text
    calm = describe_conditions("r0001", {"cores": 2, "agent_cores": 1.8, "samples": 40, "stages": stages[:1],
                                         "budget_stops": [], "load": 1.2})
    assert not any("wall-clock" in line for line in calm)


def test_progress_reports_are_thinned_to_tenths():
    seen = []
    progress.set_sink(seen.append)
    try:
        for step in range(1, 301):
            progress.report("pretraining", step, 300)
        progress.report("saving")
    finally:
        progress.set_sink(None)
    done = [p["done"] for p in seen if p["step"] == "pretraining"]
    assert done[0] == 1 and done[-1] == 300 and len(done) == 11
    assert seen[-1] == {"step": "saving", "done": None, "total": None}
    assert progress.describe({"step": "x", "done": 150, "total": 300}) == "x: 150/300 (50%)"
