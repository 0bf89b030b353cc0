"""`autorl-tui score TASK --episodes FILE`, run for real as a subprocess: action lists replayed in
the task's environment under the chosen protocol and scored as the grader scores them (the
generated DeepSearchQA questions; the default protocol and AutoRL-Bench's string match); bad input
is refused with exit 2 and a one-line error."""

import json
from pathlib import Path

import pytest

from support.harness import cli
from autorl_tui.catalog.tasks import load_task_card, materialize

REPO = Path(__file__).resolve().parents[2]


def write_lines(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def dev_items(tmp_path_factory):
    home = tmp_path_factory.mktemp("score_home")
    card = load_task_card(REPO / "autorl_tui" / "tasks" / "deepsearchqa-gen")
    split = materialize(card, "dev", home / "cache" / "tasks")
    items = [json.loads(line) for line in (split / "items.jsonl").read_text().splitlines()]
    single = next(i for i in items if i["answer_type"] == "single")
    listed = next(i for i in items if i["answer_type"] == "list")
    return home, single, listed


def test_episodes_are_replayed_and_scored(dev_items, tmp_path):
    home, single, listed = dev_items
    gold = ", ".join(listed["answers"])
    rows = [{"id": single["id"], "actions": [f"search[{single['question']}]", f"answer[{single['answers'][0]}]"]},
            {"id": listed["id"], "actions": [f"answer[{gold}, Somebody Else]"]},          # an extra item
            {"id": single["id"], "actions": ["answer[certainly not this]"]},
            {"id": listed["id"], "actions": ["search[nothing useful]"] * 20}]           # never answers
    proc = cli("score", "deepsearchqa-gen", "--split", "dev", "--episodes", str(write_lines(tmp_path / "e.jsonl", rows)),
               "--json", home=home, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["protocol"] == "default" and out["primary_metric"] == "accuracy"
    got = [(i["id"], i["won"], i["correct"], i["steps"], i["category"]) for i in out["items"]]
    assert got == [(single["id"], True, True, 2, "fully_correct"),
                   (listed["id"], False, False, 1, "correct_with_extraneous"),   # ours wants exactly the set
                   (single["id"], False, False, 1, "fully_incorrect"),
                   (listed["id"], False, False, 12, None)]                    # the default protocol's 12 steps
    assert out["score"] == 25.0 and out["metrics"]["success_rate"] == 25.0
    assert out["metrics"]["share_correct_with_extraneous"] == 25.0


def test_the_autorl_bench_protocol_on_official_format_questions(dev_items, tmp_path, monkeypatch):
    """`--protocol autorl-bench` on a CSV in the official columns: the test split is AutoRL-Bench's
    cut; in its ReAct loop a bare `answer[x]` is replied as `Action: answer[x]`, open[] is not one of
    its tools (no action: the next line is the forced answer), an answer with an extra item is right
    under its string match (its judge absent), and after its 6 steps without an answer
    "I don't know" is graded."""
    from tests.unit.test_deepsearchqa_autorl import write_csv
    from autorl_tui.tasks.deepsearchqa import provider
    home, _, _ = dev_items
    csv_path = write_csv(tmp_path / "DSQA-full.csv", 320)
    monkeypatch.setenv("DEEPSEARCHQA_PATH", str(csv_path))
    card = load_task_card(REPO / "autorl_tui" / "tasks" / "deepsearchqa", protocol="autorl-bench")
    test, _ = provider.build_split(card, "test")
    listed = next(q for q in test if q["answer_type"] == "list")
    rows = [{"id": listed["id"], "actions": ["open[W1]", f"{listed['answer_raw']}, Somebody Else"]},
            {"id": listed["id"], "actions": ["answer[only part of it]"]},
            {"id": listed["id"], "actions": ["Action: answer[your final answer]"] * 10}]
    proc = cli("score", "deepsearchqa", "--protocol", "autorl-bench", "--split", "test", "--episodes",
               str(write_lines(tmp_path / "e.jsonl", rows)), "--json", home=home, timeout=300,
               env={"DEEPSEARCHQA_PATH": str(csv_path)})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["protocol"] == "autorl-bench"
    got = [(i["correct"], i["steps"], i["answer_scoring"]) for i in out["items"]]
    method = "autorl-bench string_match (judge absent)"
    assert got == [(True, 1, method), (False, 1, method), (False, 6, method)]
    assert out["score"] == pytest.approx(100 / 3)


@pytest.mark.parametrize("content,message", [
    ("not json\n", "line 1: not JSON"),
    ('{"id": "x"}\n', 'needs "id" and "actions"'),
    ('{"id": "nope", "actions": []}\n', "unknown id 'nope'"),
])
def test_bad_episode_files_are_refused(dev_items, tmp_path, content, message):
    home, _, _ = dev_items
    f = tmp_path / "e.jsonl"
    f.write_text(content)
    proc = cli("score", "deepsearchqa-gen", "--split", "dev", "--episodes", str(f), home=home, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_an_unknown_protocol_names_the_known_ones(dev_items, tmp_path):
    home, single, _ = dev_items
    f = write_lines(tmp_path / "e.jsonl", [{"id": single["id"], "actions": ["answer[x]"]}])
    proc = cli("score", "deepsearchqa", "--protocol", "nope", "--split", "dev", "--episodes", str(f), home=home)
    assert proc.returncode == 2 and "autorl-bench" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("task,variable", [("deepsearchqa", "DEEPSEARCHQA_PATH"), ("webshop", "WEBSHOP_DATA")])
def test_a_benchmark_id_without_its_official_data_is_refused(tmp_path, task, variable):
    """The benchmark ids never fall back to their stand-ins: without the official data, scoring stops
    with one line naming `autorl-tui data get TASK`, the variable and the stand-in's id."""
    f = write_lines(tmp_path / "e.jsonl", [{"id": "x", "actions": ["answer[x]"]}])
    proc = cli("score", task, "--split", "dev", "--episodes", str(f), home=tmp_path / "home", timeout=120,
               env={variable: ""})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert f"autorl-tui data get {task}" in proc.stderr and variable in proc.stderr
    assert not list((tmp_path / "home").glob(f"cache/tasks/{task}/*/dev*")), "nothing half-written"


def test_webshop_purchases_are_replayed_and_get_goal_py_s_reward(tmp_path):
    """WebShop's stand-in shop: buying the goal's product with its options wins (reward 1.0); the
    same product with other options gets the reward WebShop's get_reward gives (reward.py)."""
    from autorl_tui.tasks.webshop.reward import reward
    home = tmp_path / "home"
    card = load_task_card(REPO / "autorl_tui" / "tasks" / "webshop-mini")
    split = materialize(card, "dev", home / "cache" / "tasks")
    goals = [json.loads(line) for line in (split / "items.jsonl").read_text().splitlines()]
    catalog = {p["asin"]: p for p in map(json.loads, (split / "catalog.jsonl").read_text().splitlines())}
    goal = next(g for g in goals if len(catalog[g["asin"]]["options"]) >= 1
                and any(len(v) > 1 for v in catalog[g["asin"]]["options"].values()))
    product = catalog[goal["asin"]]
    right = [f"click[{v}]" for v in goal["goal_options"].values()]
    other = {grp: next(v for v in vals if v != goal["goal_options"].get(grp)) if len(vals) > 1 else vals[0]
             for grp, vals in product["options"].items()}
    buy = [f"search[{product['title']}]", f"click[{goal['asin'].lower()}]"]
    rows = [{"id": goal["id"], "actions": buy + right + ["click[buy now]"]},
            {"id": goal["id"], "actions": buy + [f"click[{v}]" for v in other.values()] + ["click[buy now]"]}]
    proc = cli("score", "webshop-mini", "--split", "dev", "--episodes", str(write_lines(tmp_path / "e.jsonl", rows)),
               "--json", home=home, timeout=600)
    assert proc.returncode == 0, proc.stderr
    first, second = json.loads(proc.stdout)["items"]
    assert first["won"] and first["reward"] == 1.0
    assert second["reward"] == pytest.approx(reward(product, goal, product["price"], other))
    assert second["won"] == (second["reward"] >= 1.0)


def test_autorl_bench_s_webshop_sessions_are_replayed_to_webshop_s_rewards(tmp_path):
    """`score webshop --split test`: the items are AutoRL-Bench's sessions (`session-<i>`); the scripted
    episodes that WebShop's own WebAgentTextEnv played (tests/data/webshop/text_env_reference.json) get
    its rewards, and the aggregate is the share with reward >= 0.5. The type reward is given the blank
    pipeline WebShop ran with there (WEBSHOP_SPACY_MODEL=blank:en)."""
    reference = json.loads((REPO / "tests" / "data" / "webshop" / "text_env_reference.json").read_text())
    episodes = [e for e in reference["episodes"] if e["steps"][-1]["done"]]
    rows = [{"id": f"session-{e['session']}", "actions": e["actions"]} for e in episodes]
    proc = cli("score", "webshop", "--split", "test", "--episodes", str(write_lines(tmp_path / "e.jsonl", rows)),
               "--json", home=tmp_path / "home", timeout=600,
               env={"WEBSHOP_DATA": str(REPO / "tests" / "data" / "webshop" / "official_small"),
                    "WEBSHOP_SPACY_MODEL": "blank:en"})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    rewards = [e["steps"][-1]["reward"] for e in episodes]
    assert [i["reward"] for i in out["items"]] == pytest.approx(rewards, abs=1e-9)
    assert [i["steps"] for i in out["items"]] == [len(e["actions"]) for e in episodes]
    assert out["protocol"] == "autorl-bench"
    assert out["metrics"]["reward_ge_0.5"] == pytest.approx(100 * sum(r >= 0.5 for r in rewards) / len(rewards))
