"""The reference agent's renamed DeepSearchQA steps (pipeline/dsqa_rename.py), run as the agent runs
it on the expert steps of a materialized train split: every copy renames the names and document
ids consistently, so the action is still the one the renamed prompt calls for, and none is kept."""

import json
import re
import subprocess
import sys

import pytest

from autorl_tui.catalog.tasks import load_task_card, materialize
from tests.support.harness import REPO

SCRIPT = REPO / "autorl_tui" / "builtin" / "agents" / "reference" / "pipeline" / "dsqa_rename.py"
DOC = re.compile(r"\[D(\d{4})\]")


@pytest.fixture(scope="module")
def train(tmp_path_factory):
    card = load_task_card(REPO / "autorl_tui" / "tasks" / "deepsearchqa-gen" / "task.yaml")
    card.data["params"]["source"] = "generated"
    card.data["splits"]["train"]["n"] = 10
    return materialize(card, "train", tmp_path_factory.mktemp("cache"))


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.subprocess
def test_renamed_copies_keep_the_action_readable_off_the_prompt(train, tmp_path):
    out = tmp_path / "renamed.jsonl"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--data", str(train / "sft_prompt_completion.jsonl"),
                           "--corpus", str(train / "corpus.jsonl"), "--out", str(out), "--copies", "2"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    originals, copies = rows(train / "sft_prompt_completion.jsonl"), rows(out)
    assert len(copies) == 2 * len(originals) and json.loads(proc.stdout)["copies"] == len(copies)
    titles = {json.loads(line)["title"] for line in (train / "corpus.jsonl").read_text().splitlines()}
    changed_action = 0
    for n, copy in enumerate(copies):
        orig = originals[n // 2]
        user, action = copy["prompt"][-1]["content"], copy["completion"][0]["content"]
        o_user, o_action = orig["prompt"][-1]["content"], orig["completion"][0]["content"]
        assert copy["prompt"][0] == orig["prompt"][0]                # the rules are not names
        tool, arg = re.fullmatch(r"(\w+)\[(.*)\]", action).groups()
        assert tool == re.fullmatch(r"(\w+)\[(.*)\]", o_action).group(1)
        if tool == "search":        # the name searched for (before the fact's keywords) is the renamed one, in the prompt
            name = max((t for t in titles if arg == t or arg.startswith(t + " ")), key=len)
            assert name in user
            changed_action += arg != o_action[7:-1]
        elif tool == "open":        # the id opened is listed by the renamed search results
            doc = arg.split("#")[0]
            assert f"[{doc}]" in user or f"open[{doc}#" in user
            changed_action += doc != o_action[5:-1].split("#")[0]
        # same lines, same structure; only names and ids differ
        assert len(user.splitlines()) == len(o_user.splitlines())
        assert len(DOC.findall(user)) == len(DOC.findall(o_user))
    assert changed_action > 0.8 * sum(1 for c in copies if not c["completion"][0]["content"].startswith("answer"))


def test_reworded_questions_keep_their_names_in_order_and_the_rest_of_the_example():
    """`--reword`: the question's other words dropped, shuffled or moved behind its names; the names
    (in their order: a comparison's second name is searched second), the tool outputs and the
    action stay as they were."""
    import random

    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from dsqa_rename import QWORD, renamer
    finally:
        sys.path.remove(str(SCRIPT.parent))
    titles = ["Joss Tulo", "Uma Pelul", "Talel Partners", "Bremar"]
    reword = renamer(titles).reword
    question = "Who was born earlier, Uma Pelul or Joss Tulo?"
    rest = "> search[Uma Pelul]\n[D0001] Uma Pelul: Uma Pelul (born 1950) is a person from Bremar.\n\nStep 2 of 6. Your action:"
    row = {"prompt": [{"role": "system", "content": "rules"}, {"role": "user", "content": f"Question: {question}\n\n{rest}"}],
           "completion": [{"role": "assistant", "content": "open[D0001]"}]}
    assert reword(row, random.Random(0), 0.0) is row
    seen = set()
    for seed in range(20):
        new = reword(row, random.Random(seed), 1.0)
        head, body = new["prompt"][1]["content"].split("\n\n", 1)
        assert body == rest and new["completion"] == row["completion"] and new["prompt"][0] == row["prompt"][0]
        q = head.removeprefix("Question: ")
        assert q.index("Uma Pelul") < q.index("Joss Tulo")
        others = [w for w in QWORD.findall(q.replace("Uma Pelul", "").replace("Joss Tulo", "")) if w != ":"]
        assert set(others) <= set(QWORD.findall(question))
        seen.add(q)
    assert len(seen) > 10 and question not in seen
