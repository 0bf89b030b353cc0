"""The judge scorer against a local stand-in judge.

The stand-in is a real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions protocol;
it stands in for a paid judge API. Its preferences are deterministic: the response containing
the word GOOD wins; both or neither -> tie. An instruction containing SLOW makes it answer after
the client's timeout, MALFORMED makes it reply without a verdict, BROKENJSON with invalid JSON.
"""

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.scorers.judge import length_controlled_win_rate, parse_verdict
from autorl_tui.grading.judge_client import JudgeError
from autorl_tui.grading.types import Completion, EvalProtocol, ScorerContext


class StandInJudge:
    def __init__(self):
        self.requests: list[dict] = []
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = body["messages"][-1]["content"]
                m = re.search(r"\[Instruction\]\n(.*?)\n\n\[Response A\]\n(.*?)\n\n\[Response B\]\n(.*?)\n\nWhich", user, re.S)
                prompt, a, b = m.groups()
                judge.requests.append({"prompt": prompt, "a": a, "b": b, "model": body["model"],
                                       "auth": self.headers.get("Authorization")})
                if "SLOW" in prompt:
                    time.sleep(1.0)
                if "BROKENJSON" in prompt:
                    return self._send(b"{not json")
                if "MALFORMED" in prompt:
                    text = "Both responses have merits."
                else:
                    ga, gb = "GOOD" in a, "GOOD" in b
                    text = "Verdict: " + ("A" if ga and not gb else "B" if gb and not ga else "tie")
                reply = {"id": "x", "object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": len(user.split()), "completion_tokens": 2,
                                   "total_tokens": len(user.split()) + 2}}
                self._send(json.dumps(reply).encode())

            def _send(self, data):
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def judge():
    j = StandInJudge()
    yield j
    j.close()


class GivenOutputsPolicy:
    """A grading.types.Policy returning a fixed output per instruction."""

    def __init__(self, outputs: dict[str, str]):
        self.outputs = outputs

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_tokens=64, stop=None):
        return [[Completion(self.outputs[p[-1]["content"] if isinstance(p, list) else p], 5, "stop")] for p in prompts]


def make_ctx(tmp_path, judge, **options):
    opts = {"judge_url": judge.url, "judge_model": "stand-in-judge", "cache_path": str(tmp_path / "judge.sqlite"),
            "timeout_s": 5, "retries": 0, "concurrency": 4, **options}
    return ScorerContext(task_dir=tmp_path, split="dev", split_path=tmp_path, scratch_dir=tmp_path, options=opts, seed=0,
                         log=lambda m: None)


def evaluate(judge, tmp_path, items, outputs, **options):
    return get_scorer("judge").evaluate(GivenOutputsPolicy(outputs), items, EvalProtocol(prompt_format="chat"),
                                        make_ctx(tmp_path, judge, **options))


def test_order_is_randomized_recorded_and_verdicts_map_to_the_candidate(judge, tmp_path):
    items = [{"id": f"q{i}", "prompt": f"question {i}", "reference": "plain reference"} for i in range(20)]
    outputs = {f"question {i}": "a GOOD answer" for i in range(20)}
    res = evaluate(judge, tmp_path, items, outputs)
    orders = [s.data["order"] for s in res.samples]
    assert 0 < orders.count("candidate_first") < 20, "both orders must be requested over a set"
    # the stand-in really saw the candidate in both positions
    assert {r["a"] == "a GOOD answer" for r in judge.requests} == {True, False}
    assert res.score == 100.0 and all(s.data["outcome"] == "win" for s in res.samples)
    # the same seed gives the same orders (recorded protocol)
    judge.requests.clear()
    again = evaluate(judge, tmp_path / "other", items, outputs)
    assert [s.data["order"] for s in again.samples] == orders


def test_ties_count_half_and_losses_zero(judge, tmp_path):
    items = [{"id": "w", "prompt": "p-win", "reference": "meh"},
             {"id": "t", "prompt": "p-tie", "reference": "GOOD ref"},
             {"id": "l", "prompt": "p-loss", "reference": "GOOD ref"},
             {"id": "t2", "prompt": "p-tie2", "reference": "meh"}]
    outputs = {"p-win": "GOOD", "p-tie": "also GOOD", "p-loss": "bad", "p-tie2": "meh too"}
    res = evaluate(judge, tmp_path, items, outputs)
    by = {s.sample_id: s for s in res.samples}
    assert [by[k].score for k in ("w", "t", "l", "t2")] == [1.0, 0.5, 0.0, 0.5]
    assert by["l"].failure_kind == "wrong_answer" and by["t"].failure_kind is None
    assert res.score == pytest.approx(100 * 2 / 4)
    assert (res.metrics["wins"], res.metrics["ties"], res.metrics["losses"]) == (1, 2, 1)


def test_cache_hits_send_no_request(judge, tmp_path):
    items = [{"id": f"c{i}", "prompt": f"cached {i}", "reference": "ref"} for i in range(6)]
    outputs = {f"cached {i}": "GOOD" if i % 2 else "nope" for i in range(6)}
    first = evaluate(judge, tmp_path, items, outputs)
    assert len(judge.requests) == 6 and first.metrics["cache_hits"] == 0
    assert first.metrics["judge_prompt_tokens"] > 0
    second = evaluate(judge, tmp_path, items, outputs)
    assert len(judge.requests) == 6, "a cache hit must not reach the judge"
    assert second.metrics["cache_hits"] == 6 and second.metrics["judge_requests"] == 0
    assert second.metrics["judge_cost_usd"] == 0 and second.score == first.score
    assert all(s.data["cached"] for s in second.samples)
    # a different judge model is a different cache entry
    evaluate(judge, tmp_path, items, outputs, judge_model="another-judge")
    assert len(judge.requests) == 12 and judge.requests[-1]["model"] == "another-judge"


def test_timeout_and_malformed_replies_are_recorded_errors(judge, tmp_path):
    items = [{"id": "ok1", "prompt": "fine", "reference": "r"},
             {"id": "slow", "prompt": "SLOW one", "reference": "r"},
             {"id": "bad", "prompt": "MALFORMED one", "reference": "r"},
             {"id": "json", "prompt": "BROKENJSON one", "reference": "r"},
             {"id": "ok2", "prompt": "fine too", "reference": "r"}]
    outputs = {"fine": "GOOD", "SLOW one": "GOOD", "MALFORMED one": "GOOD", "BROKENJSON one": "GOOD", "fine too": "x"}
    res = evaluate(judge, tmp_path, items, outputs, timeout_s=0.3)
    by = {s.sample_id: s for s in res.samples}
    assert by["slow"].failure_kind == "runtime_error" and "timed out" in by["slow"].error
    assert by["bad"].failure_kind == "runtime_error" and "no verdict" in by["bad"].error
    assert by["json"].failure_kind == "runtime_error" and "malformed" in by["json"].error
    for k in ("slow", "bad", "json"):
        assert by[k].score is None, "an error must never become a silent 0"
    assert res.metrics["n_judge_errors"] == 3 and res.metrics["n_judged"] == 2
    assert res.score == pytest.approx(100 * (1 + 0.5) / 2)   # over the judged samples only
    # errors are not cached: a rerun asks again
    n = len(judge.requests)
    evaluate(judge, tmp_path, items, outputs, timeout_s=0.3)
    assert len(judge.requests) == n + 3


def test_all_judgments_failing_fails_the_evaluation(judge, tmp_path):
    items = [{"id": "b", "prompt": "MALFORMED", "reference": "r"}]
    with pytest.raises(RuntimeError, match="every judgment failed"):
        evaluate(judge, tmp_path, items, {"MALFORMED": "GOOD"})


def test_unreachable_judge_is_an_error_not_a_score(tmp_path):
    class Dead:
        url = "http://127.0.0.1:9/v1"
    items = [{"id": "a", "prompt": "p", "reference": "r"}]
    with pytest.raises(RuntimeError, match="unreachable"):
        evaluate(Dead(), tmp_path, items, {"p": "x"})


def test_empty_output_is_a_loss_without_a_request(judge, tmp_path):
    res = evaluate(judge, tmp_path, [{"id": "e", "prompt": "p", "reference": "r"}, {"id": "f", "prompt": "q", "reference": "r"}],
                   {"p": "  ", "q": "GOOD"})
    assert len(judge.requests) == 1
    assert res.samples[0].failure_kind == "empty" and res.score == 50.0


def test_drift_guard_anchors_rejudged_every_time(judge, tmp_path):
    anchors = tmp_path / "anchors.jsonl"
    anchors.write_text("\n".join(json.dumps(a) for a in [
        {"id": "a1", "prompt": "anchor 1", "output_a": "GOOD", "output_b": "bad", "expected": "A"},
        {"id": "a2", "prompt": "anchor 2", "output_a": "same", "output_b": "same", "expected": "tie"},
        {"id": "a3", "prompt": "anchor 3", "output_a": "bad", "output_b": "GOOD", "expected": "A"},  # the judge disagrees
    ]) + "\n")
    items = [{"id": "x", "prompt": "p", "reference": "r"}]
    res = evaluate(judge, tmp_path, items, {"p": "GOOD"}, anchors="anchors.jsonl", anchor_min_agreement=0.8)
    assert res.metrics["anchors_judged"] == 6                # both orders of each anchor
    assert res.metrics["anchor_agreement"] == pytest.approx(4 / 6)
    assert res.metrics["judge_drift"] is True
    assert {d["id"] for d in res.metrics["anchor_disagreements"]} == {"a3"}
    n = len(judge.requests)
    evaluate(judge, tmp_path, items, {"p": "GOOD"}, anchors="anchors.jsonl")
    assert len(judge.requests) == n + 6, "anchors bypass the cache: they exist to catch a changed judge"
    ok = evaluate(judge, tmp_path, items, {"p": "GOOD"}, anchors="anchors.jsonl", anchor_min_agreement=0.5)
    assert ok.metrics["judge_drift"] is False


def test_cost_and_api_key_from_the_named_variable(judge, tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_JUDGE_KEY", "sk-test-123")
    items = [{"id": "x", "prompt": "p", "reference": "r"}]
    res = evaluate(judge, tmp_path, items, {"p": "GOOD"}, api_key_env="STANDIN_JUDGE_KEY",
                   price_per_input_token=0.001, price_per_output_token=0.01)
    assert judge.requests[0]["auth"] == "Bearer sk-test-123"
    m = res.metrics
    assert m["judge_cost_usd"] == pytest.approx(m["judge_prompt_tokens"] * 0.001 + m["judge_completion_tokens"] * 0.01)
    assert m["judge_completion_tokens"] == 2
    monkeypatch.delenv("STANDIN_JUDGE_KEY")
    # a remote endpoint without its key is refused before any request (the name of the variable is said)
    with pytest.raises(ValueError, match="STANDIN_JUDGE_KEY"):
        evaluate(judge, tmp_path / "2", items, {"p": "GOOD"}, api_key_env="STANDIN_JUDGE_KEY",
                 judge_url="http://judge.example.invalid/v1")
    # a loopback endpoint may go without one
    evaluate(judge, tmp_path / "3", items, {"p": "GOOD"}, api_key_env="STANDIN_JUDGE_KEY")
    assert judge.requests[-1]["auth"] is None


def test_missing_judge_url_says_how_to_set_it(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTORL_JUDGE_URL", raising=False)
    ctx = ScorerContext(tmp_path, "dev", tmp_path, tmp_path, {"judge_model": "m"})
    with pytest.raises(ValueError, match="--judge-url"):
        get_scorer("judge").evaluate(GivenOutputsPolicy({}), [], EvalProtocol(), ctx)


def test_length_controlled_win_rate():
    # wins only for the longer answers: the raw rate flatters, the length-controlled one does not
    outcomes = [1.0] * 10 + [0.0] * 10
    diffs = [200.0] * 10 + [-200.0] * 10
    lc, slope = length_controlled_win_rate(outcomes, diffs)
    assert slope > 0 and lc == pytest.approx(0.5, abs=0.05)
    lc2, _ = length_controlled_win_rate([1.0] * 8 + [0.0] * 2, [0.0] * 10)   # no length difference: raw rate
    assert lc2 == pytest.approx(0.8, abs=1e-6)
    lc3, _ = length_controlled_win_rate([0.5] * 4, [10.0, -10.0, 5.0, -5.0])
    assert lc3 == pytest.approx(0.5, abs=1e-6)


def test_parse_verdict():
    assert parse_verdict("Verdict: A") == "A"
    assert parse_verdict("Reasoning... verdict: [[B]]") == "B"
    assert parse_verdict("**Verdict:** tie") == "tie"
    assert parse_verdict(" b ") == "B"
    with pytest.raises(JudgeError):
        parse_verdict("I cannot decide between them.")


def test_alpaca_judge_task_end_to_end_with_shipped_anchors(judge, tmp_path):
    from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path
    card = find_task("alpaca-judge", task_search_path())
    items = read_items(materialize(card, "dev", tmp_path / "cache"))
    assert len(items) == 16
    outputs = {it["prompt"]: ("GOOD " + it["reference"]) if i % 2 else "I don't know." for i, it in enumerate(items)}
    opts = {k: v for k, v in card.scorer_options.items() if k != "api_key_env"}
    ctx = ScorerContext(card.dir, "dev", tmp_path, tmp_path,
                        {**opts, "judge_url": judge.url, "cache_path": str(tmp_path / "c.sqlite")}, log=lambda m: None)
    res = get_scorer("judge").evaluate(GivenOutputsPolicy(outputs), items, card.protocol, ctx)
    assert res.score == pytest.approx(75.0)   # 8 wins, 8 ties (neither says GOOD)
    assert res.metrics["anchors_judged"] == 16 and res.metrics["lc_win_rate"] is not None
    json.dumps(res.to_dict())   # the grader worker writes it as JSON


def _independent_lc(outcomes, diffs, scale):
    """sigmoid(b0) of an unpenalized fractional logistic fit of outcome ~ 1 + tanh(d / scale), by IRLS in numpy."""
    np = pytest.importorskip("numpy")
    y = np.asarray(outcomes, dtype=float)
    X = np.column_stack([np.ones(len(y)), np.tanh(np.asarray(diffs, dtype=float) / scale)])
    beta = np.zeros(2)
    for _ in range(200):
        p = 1 / (1 + np.exp(-X @ beta))
        step = np.linalg.solve(X.T @ (X * (p * (1 - p))[:, None]), X.T @ (y - p))
        beta += step
        if np.abs(step).max() < 1e-12:
            break
    return 1 / (1 + np.exp(-beta[0]))


def test_length_controlled_win_rate_uses_the_standard_deviation_like_alpaca_eval():
    # 805 annotations (AlpacaEval's size) where the candidate is mostly longer than the reference, so the
    # root mean square of d (old code) is far from its standard deviation (alpaca-eval: d / d.std()).
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(7)
    diffs = rng.normal(600, 400, 805).round()
    p_win = 1 / (1 + np.exp(-(-0.9 + 1.6 * np.tanh(diffs / diffs.std(ddof=1)))))
    draw = rng.random(805)
    outcomes = np.where(draw < 0.06, 0.5, (draw < p_win).astype(float))
    expected = _independent_lc(outcomes, diffs, diffs.std(ddof=1))
    with_rms = _independent_lc(outcomes, diffs, np.sqrt(np.mean(diffs ** 2)))
    assert abs(expected - with_rms) > 0.01, "the data must tell the two scalings apart by more than a point"
    lc, slope = length_controlled_win_rate(outcomes.tolist(), diffs.tolist())
    assert slope > 0
    assert 100 * lc == pytest.approx(100 * expected, abs=0.1)
