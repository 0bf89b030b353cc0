"""AlpacaEval 2.0: our `alpaca_eval` scorer gives the numbers alpaca-eval's own `evaluate` gives
on the same model outputs, reference outputs and judgments.

The judge is a paid LLM API: a local HTTP server speaking the OpenAI chat-completions protocol
stands in for it (tests/support/alpaca_judge.py, deterministic preferences). The reference side
is alpaca-eval's `evaluate(model_outputs, reference_outputs, annotators_config=...)`, the call
AutoRL-Bench's evaluator makes, with an annotator configuration written the way AutoRL-Bench's
`annotators_gpt52_fn` is (alpaca-eval's `alpaca_eval_gpt4_turbo_fn` with model gpt-5.2); the only
thing changed on that side is where alpaca-eval's hub download of `df_gamed.csv` is answered from
(the same local file our side reads). The files are made-up content in the official layout.
"""

import json
from pathlib import Path

import pytest
import yaml

from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path
from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.types import Completion, ScorerContext
from tests.support import alpacaeval_data as data
from tests.support.alpaca_judge import AlpacaJudge

pytest.importorskip("alpaca_eval")


class ReplayPolicy:
    """The model's outputs, given (the agreement is about scoring them, not producing them)."""

    def __init__(self, outputs):
        self.outputs = outputs
        self.prompts = None

    def generate(self, prompts, **kw):
        self.prompts = prompts
        return [[Completion(o, len(o.split()), "stop")] for o in self.outputs]


def official_folder(root: Path, n: int) -> Path:
    root.mkdir(parents=True)
    (root / "alpaca_eval_gpt4_baseline.json").write_text(json.dumps(data.eval_set(n)))
    (root / "df_gamed.csv").write_bytes(data.df_gamed_csv())
    (root / "alpaca_train.parquet").write_bytes(data.alpaca_parquet(80))
    return root


def reference_config(folder: Path, judge_url: str, packaged: str, model: str, name: str) -> Path:
    """An annotator configuration as AutoRL-Bench writes one (its annotators_gpt52_fn/configs.yaml is
    alpaca-eval's alpaca_eval_gpt4_turbo_fn with model gpt-5.2), its client pointed at the stand-in."""
    import alpaca_eval
    base = Path(alpaca_eval.__file__).parent / "evaluators_configs"
    entry = yaml.safe_load((base / packaged / "configs.yaml").read_text())[packaged]
    entry["prompt_template"] = str(base / entry["prompt_template"])
    entry["completions_kwargs"]["model_name"] = model
    (folder / name).mkdir(parents=True)
    clients = folder / "clients.yaml"
    clients.write_text(yaml.safe_dump({"default": [{"api_key": "test-key", "base_url": judge_url}]}))
    entry["completions_kwargs"]["client_config_path"] = str(clients)
    path = folder / name / "configs.yaml"
    path.write_text(yaml.safe_dump({name: entry}))
    return path


def alpaca_eval_own(model_outputs, reference_outputs, config: Path, gamed: Path, monkeypatch) -> dict:
    import alpaca_eval
    import alpaca_eval.metrics.glm_winrate as glm
    monkeypatch.setattr(glm, "hf_hub_download", lambda repo_id, filename, **kw: str(gamed / filename))
    board, annotations = alpaca_eval.evaluate(model_outputs=model_outputs, reference_outputs=reference_outputs,
                                              annotators_config=str(config), name="model", output_path=None,
                                              precomputed_leaderboard=None, is_return_instead_of_print=True,
                                              metric_kwargs={"save_weights_dir": None})
    return dict(board.loc["model"])


def ours(tmp_path, monkeypatch, folder: Path, outputs, judge_url: str, protocol=None):
    monkeypatch.setenv("ALPACAEVAL_PATH", str(folder))
    card = find_task("alpacaeval", task_search_path([]), protocol=protocol)
    split = materialize(card, "test", tmp_path / "cache")
    items = read_items(split / "items.jsonl")
    scorer = get_scorer(card.scorer)
    opts = {**card.scorer_options, "judge_url": judge_url}
    ctx = ScorerContext(card.dir, "test", split, tmp_path / "scratch", opts)
    policy = ReplayPolicy(outputs)
    return scorer.evaluate(policy, items, card.protocol, ctx), policy, items


PROTOCOLS = {   # protocol -> (alpaca-eval's packaged annotator, judge model, annotator name)
    "autorl-bench": ("alpaca_eval_gpt4_turbo_fn", "gpt-5.2", "alpaca_eval_gpt5_2_fn"),
    "leaderboard": ("weighted_alpaca_eval_gpt4_turbo", "gpt-4-1106-preview", "weighted_alpaca_eval_gpt4_turbo"),
}


@pytest.mark.parametrize("n,protocol", [(16, "autorl-bench"), (79, "autorl-bench"), (16, "leaderboard"),
                                        pytest.param(805, "autorl-bench", marks=pytest.mark.slow)])
def test_lc_win_rate_equals_alpaca_evals_own(n, protocol, tmp_path, monkeypatch):
    packaged, model, name = PROTOCOLS[protocol]
    folder = official_folder(tmp_path / "official", n)
    refs = data.eval_set(n)
    outputs = data.model_outputs(refs)
    with AlpacaJudge() as judge:
        result, policy, items = ours(tmp_path, monkeypatch, folder, outputs, judge.url, protocol)
        ours_requests = len(judge.requests)
        # AutoRL-Bench strips the generated text before it hands it to alpaca-eval.
        model_outputs = [{"instruction": r["instruction"], "output": o.strip(), "generator": "model",
                          "dataset": r["dataset"]} for r, o in zip(refs, outputs)]
        own = alpaca_eval_own(model_outputs, refs, reference_config(tmp_path / "ae", judge.url, packaged, model, name),
                              folder, monkeypatch)
    assert ours_requests == n and {r["model"] for r in judge.requests} == {model}
    assert all(r["tools"] if protocol == "autorl-bench" else r["logprobs"] for r in judge.requests)
    # The prompts are AutoRL-Bench's: the instruction alone, one user turn.
    assert policy.prompts[0] == [{"role": "user", "content": refs[0]["instruction"]}]
    assert [it["id"] for it in items][:2] == ["alpacaeval-000", "alpacaeval-001"]
    m = result.metrics
    json.dumps(result.to_dict())      # the grader sends it as JSON: no numpy scalars may remain
    print(f"n={n}: ours LC {result.score:.4f} win {m['win_rate']:.4f}; alpaca-eval LC "
          f"{own['length_controlled_winrate']:.4f} win {own['win_rate']:.4f}")
    assert abs(result.score - own["length_controlled_winrate"]) <= 0.5, (result.score, own)
    assert abs(m["win_rate"] - own["win_rate"]) <= 1e-9
    assert m["n_total"] == own["n_total"] == n
    assert m["annotator"] == name and m["judge_model"] == model
    # Not a degenerate case: the judge's verdicts are mixed and the LC rate is not the raw rate.
    assert 0 < m["n_wins"] < n and abs(result.score - m["win_rate"]) > 0.01
    # Sample verdicts are the annotations' preferences (the weighted annotator's are fractions).
    assert sum(s.score for s in result.samples) == pytest.approx(m["win_rate"] * n / 100)


def test_score_annotations_recomputes_alpaca_evals_numbers(tmp_path, monkeypatch):
    """`autorl-tui score alpacaeval --annotations F` re-scores cached judgments in alpaca-eval's own
    format with alpaca-eval's own metric (no judge asked), and refuses a malformed file in one line."""
    import random

    import alpaca_eval.metrics.glm_winrate as glm
    from tests.support.harness import cli

    folder = official_folder(tmp_path / "official", 30)
    refs = data.eval_set(30)
    rng = random.Random(5)
    annotations = [{"instruction": r["instruction"], "output_1": r["output"], "output_2": o.strip(),
                    "generator_1": "gpt4_turbo", "generator_2": "my-model", "annotator": "alpaca_eval_gpt5_2_fn",
                    "preference": rng.choice([1.0, 2.0, 2.0, 1.5])}
                   for r, o in zip(refs, data.model_outputs(refs))]
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(annotations, indent=2))
    env = {"ALPACAEVAL_PATH": str(folder)}
    proc = cli("score", "alpacaeval", "--annotations", str(path), "--json", home=tmp_path / "home", env=env)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    monkeypatch.setattr(glm, "hf_hub_download", lambda repo_id, filename, **kw: str(folder / filename))
    own = glm.get_length_controlled_winrate(annotations, save_weights_dir=None)
    assert got["lc_win_rate"] == pytest.approx(own["length_controlled_winrate"], abs=1e-9)
    assert got["win_rate"] == pytest.approx(own["win_rate"], abs=1e-9) and got["n"] == 30
    assert got["protocol"] == "autorl-bench"
    text = cli("score", "alpacaeval", "--annotations", str(path), home=tmp_path / "home", env=env)
    assert text.returncode == 0 and f"length-controlled win rate {own['length_controlled_winrate']:.2f}" in text.stdout
    # A record without its preference: exit 2, one line saying what is missing.
    del annotations[3]["preference"]
    path.write_text(json.dumps(annotations))
    bad = cli("score", "alpacaeval", "--annotations", str(path), home=tmp_path / "home", env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "record 4 lacks preference" in bad.stderr
