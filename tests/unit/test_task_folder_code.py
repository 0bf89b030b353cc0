"""A task folder outside the package carries its own code: the card names `module:attribute` of
a file beside it (data provider, scorer, interactive environment, the provider's `check_split`),
and `tasks validate`, `score` and the env_success scorer load it from there (registry.resolve with
the task's folder). The example folder is copied into tmp all the same."""

import json
import shutil
import textwrap
from pathlib import Path

from autorl_tui.catalog.tasks import load_task_card, materialize
from autorl_tui.cli import main
from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.types import EvalProtocol, ScorerContext

REPO = Path(__file__).resolve().parents[2]
NUMBER_WALK = REPO / "tests" / "data" / "tasks" / "number-walk"


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def copy_task(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "tasks" / src.name
    shutil.copytree(src, dst)
    return dst


class Walker:
    """A grading.types.Policy that reads the prompt and walks towards the target, or says `word`."""

    def __init__(self, word=None):
        self.word, self.calls = word, []

    def generate(self, prompts, n=1, **kw):
        self.calls.append(len(prompts))
        replies = []
        for p in prompts:
            text = p[-1]["content"]
            target = int(text.split("Your task is to: reach ")[1].split(".")[0])
            at = int(text.rsplit("You stand on ", 1)[1].split(".")[0])
            replies.append([self.word or ("up" if at < target else "down")])
        return replies


def test_interactive_task_with_its_code_in_its_folder_validates_and_scores(capsys, home_dir, tmp_path):
    task = copy_task(NUMBER_WALK, tmp_path)
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "tasks", "validate", str(task))
    assert code == 0, out
    assert "valid (train 6, dev 4, test 4)" in out           # counted from each split's items.jsonl

    card = load_task_card(task)
    dev = materialize(card, "dev", tmp_path / "cache")
    items = [json.loads(line) for line in (dev / "items.jsonl").read_text().splitlines()]
    protocol = EvalProtocol.from_dict(card.protocol.to_dict())

    def evaluate(policy):
        ctx = ScorerContext(task_dir=card.dir, split="dev", split_path=dev, scratch_dir=tmp_path,
                            options=card.scorer_options, log=lambda s: None)
        return get_scorer(card.scorer, card.dir).evaluate(policy, items, protocol, ctx)

    walker = Walker()
    result = evaluate(walker)
    assert not list(task.rglob("__pycache__"))               # the task's folder is not written to
    assert result.score == 100.0 and result.metrics["episodes"] == 4
    assert max(walker.calls) == 3                              # the card's batch_size
    steps = {s.sample_id: s.data["steps"] for s in result.samples}
    assert steps == {it["id"]: abs(it["target"] - it["start"]) for it in items}
    stuck = evaluate(Walker(word="jump"))
    assert stuck.score == 0.0 and stuck.metrics["unmatched_action_rate"] == 100.0
    assert {s.failure_kind for s in stuck.samples} == {"format_error"}


def test_the_tasks_own_split_check_and_a_broken_environment_are_reported(capsys, home_dir, tmp_path):
    task = copy_task(NUMBER_WALK, tmp_path)
    card = (task / "task.yaml").read_text()
    (task / "task.yaml").write_text(card.replace("max_steps: 6", "max_steps: 2")
                                    .replace("env: environment:NumberWalk", "env: environment:Nowhere"))
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "tasks", "validate", str(task))
    assert code == 2
    assert "cannot be won within max_steps" in out and "raise protocol.max_steps" in out
    assert "env 'environment:Nowhere' failed to load" in out and "AttributeError" in out


STATIC_CARD = """\
id: {id}
name: Keyword answers (example static task with its own scorer)
level: 1
scorer: {scorer}
primary_metric: accuracy
protocol: {{prompt_format: plain, temperature: 0.0, max_tokens: 8, n: 1}}
data:
  provider: python
  function: provider:materialize
  splits: {{train: {{n: 3}}, dev: {{n: 2}}, test: {{n: 2}}}}
"""

PROVIDER = """\
import json
from pathlib import Path

from .words import WORDS


def materialize(card, split, out_dir):
    offset = {"train": 0, "dev": 3, "test": 5}[split]
    path = Path(out_dir) / f"{split}.jsonl"
    path.write_text("".join(json.dumps({"id": f"k{i}", "prompt": f"Say {WORDS[i]}.", "keyword": WORDS[i]}) + "\\n"
                            for i in range(offset, offset + card.data["splits"][split]["n"])))
    return path
"""

SCORER = """\
from autorl_tui.grading.types import EvalResult, SampleResult

from .words import WORDS


class KeywordScorer:
    name = "keyword"
    version = "1"
    item_fields = ("id", "prompt", "keyword")

    def validate_options(self, opts, task_dir=None):
        return []

    def evaluate(self, policy, items, protocol, ctx):
        outs = [o[0].text for o in policy.generate([it["prompt"] for it in items], n=1)]
        samples = [SampleResult(sample_id=it["id"], prompt=it["prompt"], output=o, extracted=None,
                                expected=it["keyword"], correct=it["keyword"] in o and it["keyword"] in WORDS,
                                score=float(it["keyword"] in o)) for it, o in zip(items, outs)]
        acc = 100.0 * sum(s.correct for s in samples) / len(samples)
        return EvalResult(score=acc, metrics={"accuracy": acc}, samples=samples)
"""


def static_task(root: Path, scorer: str) -> Path:
    task = root / "keywords"
    task.mkdir(parents=True)
    (task / "task.yaml").write_text(STATIC_CARD.format(id="keywords", scorer=scorer))
    (task / "description.md").write_text("Say the word the prompt asks for.\n")
    (task / "words.py").write_text("WORDS = ['apple', 'birch', 'cedar', 'dune', 'ember', 'fjord', 'grove']\n")
    (task / "provider.py").write_text(PROVIDER)
    (task / "scoring.py").write_text(SCORER)
    return task


def test_a_static_task_with_its_own_scorer_validates_and_scores_completions(capsys, home_dir, tmp_path):
    task = static_task(tmp_path / "tasks", "scoring:KeywordScorer")
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "tasks", "validate", str(task))
    assert code == 0, out
    assert "valid (train 3, dev 2, test 2)" in out
    completions = tmp_path / "completions.jsonl"
    completions.write_text('{"id": "k3", "completion": "dune"}\n{"id": "k4", "completion": "fire"}\n')
    code, out, err = run_cli(capsys, "--home", str(home_dir), "--tasks-dir", str(tmp_path / "tasks"),
                             "score", "keywords", "--completions", str(completions), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["score"] == 50.0 and [i["passed"] for i in result["items"]] == [True, False]


def test_a_scorer_reference_that_does_not_load_is_a_problem_with_a_fix(capsys, home_dir, tmp_path):
    task = static_task(tmp_path / "tasks", "scoring:Missing")
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "tasks", "validate", str(task))
    assert code == 2
    assert "scorer 'scoring:Missing' failed to load" in out and "fix the scorer's module" in out
    (task / "task.yaml").write_text(STATIC_CARD.format(id="keywords", scorer="keyword_typo"))
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "tasks", "validate", str(task))
    assert code == 2 and "scorer 'keyword_typo' is not known" in out and "module:Class" in out
    assert "Traceback" not in out
