"""DeepSearchQA's `autorl-bench` protocol plays AutoRL-Bench's ReAct loop: on the same scripted model
outputs our grader sends the same texts with the same stops and token limits, searches the same
queries, extracts the same answer and gives the same verdict as AutoRL-Bench's own evaluator.

Reference: tests/data/deepsearchqa/react_reference.json, made by running AutoRL-Bench's own
`_react_loop` and `_judge_answer` (microsoft/RD-Agent 471eb30, benchmarks/deepsearchqa/eval.py, its
judge absent so its string match decides) on the same outputs outside the project:
tests/data/deepsearchqa/make_react_table.py says how. The web search is a local HTTP server
speaking DuckDuckGo's instant-answer protocol (DuckDuckGo itself is an external service)."""

import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from autorl_tui.catalog.tasks import load_task_card
from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.types import ScorerContext
from autorl_tui.tasks.deepsearchqa.official import gold_items
from autorl_tui.tasks.deepsearchqa.react import (ReactSearchEpisode, find_action, first_prompt, join_turn,
                                                 last_answer, split_turn)

from tests.support.local_http import http_server  # noqa: F401, F811  (a fixture)
from tests.unit.test_deepsearchqa_autorl import Quiet, _reply

TABLE = json.loads((Path(__file__).parents[1] / "data" / "deepsearchqa" / "react_reference.json").read_text())
CARD = Path(__file__).parents[2] / "autorl_tui" / "tasks" / "deepsearchqa" / "task.yaml"


class DuckDuckGo(Quiet):
    """DuckDuckGo's instant answers: the abstract `Abstract about <query>.`"""
    queries: list = []

    def do_GET(self):
        q = parse_qs(urlparse(self.path).query)["q"][0]
        self.queries.append(q)
        _reply(self, 200, {"AbstractText": f"Abstract about {q}.", "RelatedTopics": []})


class Scripted:
    """A policy answering each generate call with the case's next output, uncut (the loop applies
    the stops as vLLM does); it records what it was asked."""

    def __init__(self, outputs):
        self.outputs = list(outputs)
        self.calls = []

    def generate(self, prompts, *, n=1, stop=None, max_tokens=None, **kw):
        out = []
        for prompt in prompts:
            self.calls.append({"prompt": prompt, "stop": stop, "max_tokens": max_tokens})
            out.append([self.outputs.pop(0) if self.outputs else ""])
        return out


def item(case: dict, n: int) -> dict:
    is_set = case["answer_type"] == "Set Answer"
    return {"id": f"q{n}", "question": case["question"], "answer_raw": case["gold"],
            "answers": gold_items(case["gold"]) if is_set else [case["gold"]],
            "answer_type": "list" if is_set else "single", "answer_type_label": case["answer_type"]}


@pytest.fixture()
def ddg(http_server, monkeypatch):  # noqa: F811
    monkeypatch.delenv("SERPAPI_KEY", raising=False)     # AutoRL-Bench's choice without a key: DuckDuckGo
    handler = type("D", (DuckDuckGo,), {"queries": []})
    return handler, http_server(handler) + "/"


def play(case, n, url, tmp_path):
    card = load_task_card(CARD)
    policy = Scripted(case["outputs"])
    ctx = ScorerContext(task_dir=card.dir, split="test", split_path=tmp_path, scratch_dir=tmp_path,
                        options={**card.scorer_options, "search_url": url}, log=lambda s: None)
    result = get_scorer("deepsearchqa", card.dir).evaluate(policy, [item(case, n)], card.protocol, ctx)
    return policy, result.samples[0]


@pytest.mark.parametrize("n", range(len(TABLE["cases"])), ids=[c["question"][:30] for c in TABLE["cases"]])
def test_the_grader_plays_autorl_bench_s_loop_on_the_same_outputs(n, ddg, tmp_path):
    case = TABLE["cases"][n]
    handler, url = ddg
    policy, sample = play(case, n, url, tmp_path)
    assert [c["prompt"] for c in policy.calls] == [c["prompt"] for c in case["calls"]]     # the texts, in order
    assert [(c["stop"], c["max_tokens"]) for c in policy.calls] == [(c["stop"], c["max_tokens"]) for c in case["calls"]]
    assert handler.queries == case["searches"]
    answer = sample.data["answer_score"]
    assert sample.data["trajectory"][-1]["answer"] == case["predicted"]
    assert answer["correct"] is case["verdict"] and sample.correct is case["verdict"]
    assert answer["method"] == "autorl-bench string_match (judge absent)"
    assert sample.data["steps"] == len(case["calls"]) - sum(1 for c in case["calls"] if c["stop"] == ["]"])


def test_the_table_covers_the_loop_s_branches():
    calls = [c for case in TABLE["cases"] for c in case["calls"]]
    assert any(c["stop"] == ["]"] for c in calls)                         # forced answers
    assert any(case["predicted"] == "I don't know" for case in TABLE["cases"])       # 6 steps, no answer
    assert any(len(case["calls"]) == 6 and case["predicted"] != "I don't know" for case in TABLE["cases"])
    assert {case["verdict"] for case in TABLE["cases"]} == {True, False}
    assert any("your final answer" in o for case in TABLE["cases"] for o in case["outputs"])


def test_the_first_prompt_is_the_reference_s():
    for case in TABLE["cases"]:
        assert case["calls"][0]["prompt"] == first_prompt(case["question"], case["answer_type"])


@pytest.mark.parametrize("text,want", [
    ("I will look. Action: search[Eiffel Tower]", ("search", "Eiffel Tower")),
    ("Action:answer[ Paris ]", ("answer", "Paris")),
    ("Action: answer[Blue,\nWhite]", ("answer", "Blue,\nWhite")),
    ("Action: answer[] Lima]", ("answer", "] Lima")),            # `.+?` needs one character
    ("action: search[lower case]", None),
    ("Action: Search[capital S]", None),
    ("Action: open[D1]", None),
    ("search[bare]", None),
])
def test_action_extraction(text, want):
    assert find_action(text) == want


def test_the_answer_after_the_last_step_is_the_last_real_one_written():
    trace = "Action: search[a] Action: answer[Rome]\nAction: answer[your final answer]"
    assert last_answer(trace) == "Rome" and last_answer("Action: search[x]") == "I don't know"


def test_a_turn_keeps_the_forced_answer_apart():
    assert split_turn(join_turn("no action", "Paris")) == ("no action", "Paris")
    assert split_turn(join_turn("Action: search[x]", None)) == ("Action: search[x]", None)
    ep = ReactSearchEpisode({"id": "q", "question": "?", "answers": ["x"]}, backend=None)
    ep.reset()
    with pytest.raises(ValueError, match="forced answer"):
        ep.step("no action and no forced answer")
