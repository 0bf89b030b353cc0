"""DeepSearchQA as AutoRL-Bench's evaluator measures it: its cut of the official questions, its two
tools and their web searches, its judge and its string-match fallback.

References: the split is checked against HF `datasets` run for real as AutoRL-Bench runs it
(`Dataset.from_csv(...).shuffle(seed=42)`, rows 100-299 held out); the string-match verdicts in
tests/data/deepsearchqa/autorl_string_match.json were produced by running AutoRL-Bench's own
`_string_match` (microsoft/RD-Agent 471eb30, benchmarks/deepsearchqa/eval.py) outside the project.
SerpAPI, DuckDuckGo and the OpenAI-compatible judge are paid or external services: local HTTP
servers speaking their protocols stand in for them.
"""

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from autorl_tui.catalog.tasks import load_task_card
from autorl_tui.tasks.deepsearchqa import provider
from autorl_tui.tasks.deepsearchqa.api import open_backend
from autorl_tui.tasks.deepsearchqa.tool_loop import SearchEpisode
from autorl_tui.tasks.deepsearchqa.judging import AnswerGrader
from autorl_tui.tasks.deepsearchqa.official import gold_items, read_official

from tests.support.local_http import http_server  # noqa: F401  (a fixture)
from tests.support.official_interactive import dsqa_csv_bytes

TABLE = json.loads((Path(__file__).parents[1] / "data" / "deepsearchqa" / "autorl_string_match.json").read_text())
CARD = Path(__file__).parents[2] / "autorl_tui" / "tasks" / "deepsearchqa" / "task.yaml"


def write_csv(path: Path, n: int) -> Path:
    path.write_bytes(dsqa_csv_bytes(n))
    return path


def test_the_test_split_is_autorl_bench_s_rows(tmp_path, monkeypatch):
    from datasets import Dataset
    csv_path = write_csv(tmp_path / "DSQA-full.csv", 450)
    reference = Dataset.from_csv(str(csv_path), cache_dir=str(tmp_path / "hf")).shuffle(seed=42)
    want_test = reference.select(range(100, 300))["problem"]
    want_train = reference.select(range(100))["problem"]
    monkeypatch.setenv("DEEPSEARCHQA_PATH", str(csv_path))
    card = load_task_card(CARD)
    test, docs = provider.build_split(card, "test")
    train, _ = provider.build_split(card, "train")
    dev, _ = provider.build_split(card, "dev")
    assert docs == []
    assert [q["question"] for q in test] == want_test
    assert [q["question"] for q in train] == want_train
    assert len(dev) == 100 and not {q["id"] for q in dev} & ({q["id"] for q in test} | {q["id"] for q in train})


def test_an_unknown_cut_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSEARCHQA_PATH", str(write_csv(tmp_path / "DSQA-full.csv", 20)))
    card = load_task_card(CARD)
    card.data["params"] = {**card.data["params"], "cut": "mine"}
    with pytest.raises(provider.DeepSearchQADataError, match="cut must be one of autorl-bench, seeded"):
        provider.build_split(card, "test")


def test_gold_lists_keep_an_item_holding_a_comma_whole(tmp_path):
    assert gold_items("Town 3, Washington, D.C., Austin, TX") == ["Town 3", "Washington, D.C.", "Austin, TX"]
    assert gold_items('"Smith, John", Alice; Bob') == ['"Smith, John", Alice', "Bob"]   # `;` separates first
    assert gold_items('"Smith, John", Alice') == ["Smith, John", "Alice"]
    assert gold_items("1,234, 5,678, Acme, Inc.") == ["1,234", "5,678", "Acme, Inc."]
    items = read_official(write_csv(tmp_path / "DSQA-full.csv", 4))
    assert items[0]["answers"] == ["Town 0", "Washington, D.C.", "Austin, TX"]
    assert items[0]["answer_raw"] == "Town 0, Washington, D.C., Austin, TX"
    assert items[0]["answer_type_label"] == "Set Answer" and items[1]["answers"] == ["answer 1"]


def item_for(case: dict) -> dict:
    is_set = case["answer_type"] == "Set Answer"
    return {"id": "q", "question": "?", "answers": gold_items(case["gold"]) if is_set else [case["gold"]],
            "answer_type": "list" if is_set else "single", "answer_raw": case["gold"],
            "answer_type_label": case["answer_type"]}


@pytest.mark.parametrize("case", TABLE["cases"], ids=[f"{c['pred']!r}~{c['gold']!r}" for c in TABLE["cases"]])
def test_answer_only_episodes_get_autorl_bench_s_string_match_verdicts(case):
    grader = AnswerGrader({"answer_scoring": "autorl-bench"})
    ep = SearchEpisode(item_for(case), backend=None, grade=grader, tools="autorl-bench")
    ep.reset()
    obs = ep.step(f"answer[{case['pred']}]")
    assert obs.done and obs.won == case["autorl_bench"]
    assert obs.answer_score["method"] == "autorl-bench string_match (judge absent)"


def test_the_table_holds_both_verdicts_for_both_answer_types():
    seen = {(c["answer_type"], c["autorl_bench"]) for c in TABLE["cases"]}
    assert seen == {("Single Answer", True), ("Single Answer", False), ("Set Answer", True), ("Set Answer", False)}


def test_a_set_answer_with_extra_items_is_right_and_counted_as_extraneous():
    case = {"pred": "France, Spain, Italy", "gold": "France, Spain", "answer_type": "Set Answer"}
    score = AnswerGrader({"answer_scoring": "autorl-bench"})(case["pred"], item_for(case))
    assert score["correct"] and score["category"] == "correct_with_extraneous"
    assert score["precision"] == pytest.approx(2 / 3) and score["recall"] == 1.0
    strict = AnswerGrader({})(case["pred"], item_for(case))     # our own string match wants exactly the set
    assert not strict["correct"] and strict["category"] == "correct_with_extraneous"


@pytest.fixture()
def server(http_server):
    return http_server


def _reply(handler, code, payload):
    body = json.dumps(payload).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class Quiet(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass


class Judge(Quiet):
    """An OpenAI-compatible chat endpoint: `Correct.` when the predicted answer mentions Paris,
    `incorrect` otherwise, HTTP 500 when it mentions `boom`."""
    prompts: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        user = body["messages"][-1]["content"]
        self.prompts.append(body["messages"])
        pred = user.split("Predicted answer: ", 1)[1].split("\n", 1)[0]
        if "boom" in pred:
            return _reply(self, 500, {"error": "down"})
        text = "Correct.\nThe gold is there." if "paris" in pred.lower() else "incorrect"
        _reply(self, 200, {"choices": [{"message": {"role": "assistant", "content": text}}],
                           "usage": {"prompt_tokens": 10, "completion_tokens": 2}})


def test_the_judge_decides_and_its_failure_falls_back_to_the_string_match(server):
    handler = type("J", (Judge,), {"prompts": []})
    grader = AnswerGrader({"answer_scoring": "autorl-bench", "judge_model": "standin", "judge_url": server(handler)})
    item = item_for({"gold": "Paris", "answer_type": "Single Answer"})
    assert grader("It is paris", item)["correct"] is True
    assert grader("Lyon", item)["correct"] is False
    system, user = handler.prompts[0]
    assert system == {"role": "system", "content": "You are a strict answer evaluator."}
    assert "Question answer type: Single Answer\nGold answer: Paris\nPredicted answer: It is paris" in user["content"]
    failed = grader("Paris boom", item)             # the judge fails: AutoRL-Bench's string match decides
    assert failed["correct"] is True and failed["method"].startswith("autorl-bench string_match (judge error")
    assert grader("Lyon boom", item)["correct"] is False and grader.judge_errors == 2


class SerpApi(Quiet):
    seen: list = []

    def do_GET(self):
        q = parse_qs(urlparse(self.path).query)
        self.seen.append(q)
        if q["q"] == ["fail"]:
            return _reply(self, 500, {"error": "quota"})
        _reply(self, 200, {"organic_results": [{"title": f"t{i}", "snippet": f"snippet {i} on {q['q'][0]}"}
                                               for i in range(5)]})


class DuckDuckGo(Quiet):
    def do_GET(self):
        q = parse_qs(urlparse(self.path).query)["q"][0]
        if q == "abstract":
            return _reply(self, 200, {"AbstractText": "An abstract.", "RelatedTopics": [{"Text": "x"}]})
        if q == "related":
            return _reply(self, 200, {"AbstractText": "", "RelatedTopics": [
                {"Name": "group", "Topics": []}, {"Text": "second"}, {"Text": "third"}]})
        _reply(self, 200, {"AbstractText": "", "RelatedTopics": []})


def search_obs(backend, query):
    ep = SearchEpisode({"id": "q", "question": "?", "answers": ["x"]}, backend, tools="autorl-bench")
    ep.reset()
    return ep.step(f"search[{query}]").text


def test_serpapi_with_a_key_gives_the_top_three_snippets(server, monkeypatch):
    handler = type("S", (SerpApi,), {"seen": []})
    url = server(handler) + "/search"
    monkeypatch.setenv("SERPAPI_KEY", "k-123")
    backend = open_backend(None, url, "autorl-bench")          # a key set: SerpAPI, as AutoRL-Bench picks
    assert backend.name == "serpapi"
    assert search_obs(backend, "eiffel tower") == " | ".join(f"snippet {i} on eiffel tower" for i in range(3))
    assert handler.seen[0]["api_key"] == ["k-123"] and handler.seen[0]["num"] == ["3"]
    assert search_obs(backend, "fail").startswith("Search error: ")
    monkeypatch.delenv("SERPAPI_KEY")
    with pytest.raises(ValueError, match=r"set \$SERPAPI_KEY"):
        open_backend(None, url, "serpapi")


def test_duckduckgo_instant_answers(server, monkeypatch):
    monkeypatch.delenv("SERPAPI_KEY", raising=False)
    backend = open_backend(None, server(DuckDuckGo) + "/", "autorl-bench")   # no key: DuckDuckGo
    assert backend.name == "duckduckgo"
    assert search_obs(backend, "abstract") == "An abstract."
    # the first two topics joined, a topic group (no Text) as an empty piece, as AutoRL-Bench joins them
    assert search_obs(backend, "related") == " | second"
    assert search_obs(backend, "nothing") == "No results found."


def test_autorl_bench_tools_are_search_and_answer_only():
    ep = SearchEpisode({"id": "q", "question": "?", "answers": ["Paris"]}, backend=None, tools="autorl-bench")
    ep.reset()
    assert not ep.step("open[D0001]").done
    placeholder = ep.step("answer[your final answer]")
    assert not placeholder.done and placeholder.text == "That is not a valid answer. Please think again."
    assert ep.step("answer[Paris]").won and ep.moves == 3
