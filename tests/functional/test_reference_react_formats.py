"""The reference agent and the tiny models speak AutoRL-Bench's ReAct formats.

- `tiny-dsqa`'s tokenizer keeps case and glues punctuation, so the DeepSearchQA loop's texts come
  back from a round trip with their syntax (`Action: search[...]`, `Thought:`) and a model can
  write an action the loop reads;
- on the official DeepSearchQA train split (no SFT files; a CSV in the official columns) the
  reference pipeline writes its own rows in the loop's text (dsqa_answers.py) and the lean loop
  trains `tiny-dsqa` on them until the model, played through the workspace's own ReAct loop,
  writes `Action: answer[...]` itself (not the loop's forced answer);
- on ALFWorld under AutoRL-Bench's protocol the collection writes text rows in the grader's
  ReAct prompt (the first step of each game is the shipped row), and the lean loop and the TRL
  script train on text rows without crashing;
- lean_sft.py fails at once, with one line, on an empty SFT file (it used to loop until killed).

Every script runs for real in a subprocess, from a copy of the pipeline folder as the agent
writes it into `code/`."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.functional.test_alfworld_react_sft import rows, train  # noqa: F401  (the module's fixture)
from tests.support.harness import REPO
from tests.support.official_interactive import dsqa_csv_bytes

PIPELINE = REPO / "autorl_tui" / "builtin" / "agents" / "reference" / "pipeline"


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("code")
    for src in PIPELINE.glob("*.py"):
        shutil.copy(src, dest / src.name)
    return dest


def run(code: Path, script: str, *args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "PIPELINE_THREADS": "1", "OMP_NUM_THREADS": "1",
           "METRICS_FILE": str(cwd / "metrics.jsonl"), "TOKENIZERS_PARALLELISM": "false",
           "ALFWORLD_DATA": os.environ.get("ALFWORLD_DATA", str(cwd / ".alfworld"))}
    return subprocess.run([sys.executable, str(code / script), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


def summary(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return json.loads([line for line in out.stdout.splitlines() if line.startswith('{"stage"')][-1])


@pytest.fixture(scope="module")
def tiny_dsqa(tmp_path_factory) -> Path:
    from autorl_tui.tasks.deepsearchqa.tiny_model import build
    return build(tmp_path_factory.mktemp("models") / "tiny-dsqa")


def canon(text: str) -> str:
    """A text with its whitespace as the tokenizer's round trip leaves it: runs of spaces and line
    breaks are one space (the decoder puts one between words), and no space follows an opening
    bracket (the decoder puts one there)."""
    return re.sub(r"([\[(]) ", r"\1", re.sub(r"\s+", " ", text)).strip()


def test_tiny_dsqa_keeps_the_react_loop_s_syntax_and_case():
    from autorl_tui.tasks.deepsearchqa.react import RETRY, SYSTEM_PROMPT, find_action, first_prompt
    from autorl_tui.tasks.deepsearchqa.tiny_model import build_tokenizer
    tok = build_tokenizer()
    fixed = [first_prompt("Who founded Talel Partners Group?", "Set Answer"), RETRY, "I don't know"]
    for text in fixed:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids, text
        assert canon(tok.decode(ids)) == canon(text)
    for turn in ("I need the founder. Action: search[Talel Partners founder]",
                 "It is Joss Tulo. Action: answer[Joss Tulo]",
                 "Two of them. Action: answer[Ada Doryo, Wim Balmar]", "The year. Action: answer[1,914,000]"):
        decoded = tok.decode(tok(turn, add_special_tokens=False)["input_ids"])
        assert find_action(decoded) == find_action(turn) and "Action: " in decoded
    # any ASCII word is spelled, never unknown, and comes back as written
    odd = "Xylophone QUIZ zebra-crossing 42nd"
    assert tok.decode(tok(odd, add_special_tokens=False)["input_ids"]) == odd
    assert SYSTEM_PROMPT.split("\n")[0] in tok.decode(tok(fixed[0])["input_ids"])


def test_lean_sft_fails_at_once_on_an_empty_file(code, tiny_dsqa, tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    out = run(code, "lean_sft.py", "--model", str(tiny_dsqa), "--out", str(tmp_path / "v1"), "--data",
              str(tmp_path / "empty.jsonl"), "--steps", "5", cwd=tmp_path, timeout=60)
    assert out.returncode != 0 and not (tmp_path / "v1").exists()
    assert out.stderr.strip() == (f"lean_sft.py: no training examples in {tmp_path / 'empty.jsonl'}: pass --data "
                                  "files holding prompt/completion rows")
    (tmp_path / "bad.jsonl").write_text('{"prompt": 3}\n')
    out = run(code, "lean_sft.py", "--model", str(tiny_dsqa), "--out", str(tmp_path / "v1"), "--data",
              str(tmp_path / "bad.jsonl"), cwd=tmp_path, timeout=60)
    assert out.returncode != 0 and "Traceback" not in out.stderr and "line 1 is not a prompt/completion row" in out.stderr


def test_official_deepsearchqa_rows_teach_tiny_dsqa_the_loop_s_answer(code, tiny_dsqa, tmp_path, monkeypatch):
    from autorl_tui.catalog.tasks import load_task_card
    from autorl_tui.grading.inference import TransformersPolicy
    from autorl_tui.tasks.deepsearchqa import provider
    from autorl_tui.tasks.deepsearchqa.react import FORCE, STOP, ReactSearchEpisode
    csv_path = tmp_path / "DSQA-full.csv"
    csv_path.write_bytes(dsqa_csv_bytes(320))
    monkeypatch.setenv("DEEPSEARCHQA_PATH", str(csv_path))
    card = load_task_card(REPO / "autorl_tui" / "tasks" / "deepsearchqa")
    split = provider.materialize(card, "train", tmp_path / "cache")
    assert not (split / "sft_prompt_completion.jsonl").exists()
    got = summary(run(code, "dsqa_answers.py", "--data", str(split), "--out", str(tmp_path / "answers.jsonl"),
                      cwd=tmp_path))
    items = [json.loads(line) for line in (split / "items.jsonl").read_text().splitlines()]
    written = rows(tmp_path / "answers.jsonl")
    assert got["examples"] == len(items) == len(written) == 100
    for item, row in zip(items, written):
        episode = ReactSearchEpisode(item, backend=None)
        episode.reset()
        assert row["prompt"] == episode.text                  # the text the grader has the model complete
        assert row["completion"].endswith(f" Action: answer[{item['answer_raw']}]") and "\n" not in row["completion"]
    v1 = tmp_path / "v1"
    got = summary(run(code, "lean_sft.py", "--model", str(tiny_dsqa), "--out", str(v1), "--data",
                      str(tmp_path / "answers.jsonl"), "--steps", "80", "--batch", "8", "--lr", "3e-3",
                      "--prompt_weight", "0", "--decisions", "1", cwd=tmp_path))
    assert got["steps"] == 80 and (v1 / "model.safetensors").exists()
    sys.path.insert(0, str(split))
    try:
        from deepsearchqa_api import list_questions, open_backend, run_react_episodes
        policy = TransformersPolicy(v1, prompt_format="plain", threads=1)

        def generate(prompts, stop=None, max_tokens=None):
            return [c[0].text for c in policy.generate([p[-1]["content"] for p in prompts], max_tokens=max_tokens or 256,
                                                       stop=stop or STOP)]

        played = run_react_episodes(generate, list_questions(split)[:12], backend=open_backend(None, None, "duckduckgo"),
                                    batch_size=12)
    finally:
        sys.path.remove(str(split))
        for name in [m for m in sys.modules if m == "deepsearchqa_api" or m.startswith("deepsearchqa_api.")]:
            del sys.modules[name]
    own = [r for r in played if r.steps == 1 and FORCE not in r.trajectory[0]["raw_output"]
           and re.search(r"Action: answer\[ ?answer \d+\]$", r.trajectory[0]["raw_output"])]
    assert len(own) >= 10, [r.trajectory[0]["raw_output"] for r in played]


def test_alfworld_react_collection_and_sft_on_text_rows(code, train, tmp_path):  # noqa: F811
    from autorl_tui.tasks.alfworld.tiny_model import build
    split, _ = train
    out = tmp_path / "collected.jsonl"
    got = summary(run(code, "alfworld_collect.py", "--data", str(split), "--out", str(out), "--variants", "1",
                      "--react", cwd=tmp_path))
    collected, shipped = rows(out), rows(split / "sft_prompt_completion.jsonl")
    assert got["examples"] == len(collected) > 0 and got["games_won"] >= 4
    assert all(isinstance(r["prompt"], str) and re.fullmatch(r" [^\n]+\n", r["completion"]) for r in collected)
    for game in {r["game_id"] for r in collected}:
        mine = [r for r in collected if r["game_id"] == game]
        first = next(r for r in shipped if r["game_id"] == game and r["step"] == 1)
        assert (mine[0]["prompt"], mine[0]["completion"]) == (first["prompt"], first["completion"])   # the plan thought
        for before, after in zip(mine, mine[1:]):       # each prompt continues the one before, as the grader's text
            assert after["prompt"].startswith(before["prompt"] + before["completion"])
    model = build(tmp_path / "tiny-alfworld")
    got = summary(run(code, "lean_sft.py", "--model", str(model), "--out", str(tmp_path / "v1"), "--data", str(out),
                      "--steps", "3", "--batch", "4", "--decisions", "1", "--prompt_weight", "1", cwd=tmp_path))
    assert got["steps"] == 3 and (tmp_path / "v1" / "model.safetensors").exists()
    got = summary(run(code, "alfworld_sft.py", "--model", str(model), "--out", str(tmp_path / "v2"), "--data",
                      str(split / "sft_prompt_completion.jsonl"), "--steps", "2", "--batch", "2", "--rename", "1",
                      "--decisions", "2", cwd=tmp_path))
    assert got["steps"] == 2 and (tmp_path / "v2" / "model.safetensors").exists()


def test_the_reference_agent_trains_on_an_official_deepsearchqa_workspace(tiny_dsqa, tmp_path, monkeypatch):
    """agent.py itself on a workspace holding the official train split (no SFT files, no grading
    server): it writes its rows, trains v1 and v2 on them and ends well (before: the generic static
    path, which has no questions/answers of that shape to train on)."""
    import time
    from autorl_tui.catalog.tasks import load_task_card
    from autorl_tui.tasks.deepsearchqa import provider
    csv_path = tmp_path / "DSQA-full.csv"
    csv_path.write_bytes(dsqa_csv_bytes(320))
    monkeypatch.setenv("DEEPSEARCHQA_PATH", str(csv_path))
    split = provider.materialize(load_task_card(REPO / "autorl_tui" / "tasks" / "deepsearchqa"), "train",
                                 tmp_path / "cache")
    ws = tmp_path / "ws"
    for folder in ("code", "output", "logs", "models"):
        (ws / folder).mkdir(parents=True)
    shutil.copytree(split, ws / "data")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "WORKSPACE": str(ws), "MODEL_PATH": str(tiny_dsqa),
           "DATA_PATH": str(ws / "data"), "RUN_DEADLINE": str(time.time() + 900),
           "REFERENCE_AGENT_OPTIONS": "dsqa_sft_steps=4,dsqa_sft_batch=4,dsqa_focus_steps=2,dsqa_submit_reserve_s=5,"
                                      "threads=1"}
    out = subprocess.run([sys.executable, str(REPO / "autorl_tui" / "builtin" / "agents" / "reference" / "agent.py")],
                         capture_output=True, text=True, cwd=ws, env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "ships no SFT data" in out.stdout and "code/dsqa_answers.py" in out.stdout
    assert len(rows(ws / "logs" / "dsqa_answers.jsonl")) == 100
    assert (ws / "output" / "v1" / "model.safetensors").exists() and (ws / "output" / "v2" / "model.safetensors").exists()


def test_the_reference_agent_trains_in_react_text_on_an_alfworld_benchmark_workspace(train, tmp_path):  # noqa: F811
    """agent.py itself on the `alfworld` benchmark's train split (text rows shipped; no grading
    server): it collects in the ReAct text, trains v1 and v2 with the lean loop and skips DAgger."""
    import time
    from autorl_tui.tasks.alfworld.tiny_model import build
    split, _ = train
    ws = tmp_path / "ws"
    for folder in ("code", "output", "logs", "models"):
        (ws / folder).mkdir(parents=True)
    shutil.copytree(split, ws / "data")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "WORKSPACE": str(ws),
           "MODEL_PATH": str(build(tmp_path / "tiny-alfworld")), "DATA_PATH": str(ws / "data"),
           "ALFWORLD_DATA": os.environ.get("ALFWORLD_DATA", str(tmp_path / ".alfworld")),
           "RUN_DEADLINE": str(time.time() + 900),
           "REFERENCE_AGENT_OPTIONS": "alf_collect_variants=1,alf_sft_steps=3,alf_sft_batch=2,alf_focus_steps=2,"
                                      "alf_submit_reserve_s=5,alf_dagger_rounds=1,threads=1"}
    out = subprocess.run([sys.executable, str(REPO / "autorl_tui" / "builtin" / "agents" / "reference" / "agent.py")],
                         capture_output=True, text=True, cwd=ws, env=env, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "--react" in out.stdout and "code/lean_sft.py" in out.stdout and "code/alfworld_sft.py" not in out.stdout
    assert "skipping them" in out.stdout and "alfworld_dagger.py" not in out.stdout.split("skipping them")[1]
    assert all(isinstance(r["prompt"], str) for r in rows(ws / "logs" / "alfworld_search.jsonl"))
    assert (ws / "output" / "v1" / "model.safetensors").exists() and (ws / "output" / "v2" / "model.safetensors").exists()


def test_alfworld_chat_collection_and_sft_still_train(code, train, tmp_path):  # noqa: F811
    """Without --react the collection writes the harness's chat rows, as before, and alfworld_sft.py
    trains on them with renamed copies and decision weights."""
    from autorl_tui.tasks.alfworld.tiny_model import build
    split, _ = train
    out = tmp_path / "chat.jsonl"
    got = summary(run(code, "alfworld_collect.py", "--data", str(split), "--out", str(out), "--variants", "1",
                      cwd=tmp_path))
    collected = rows(out)
    assert got["examples"] == len(collected) > 0
    assert all(r["prompt"][-1]["role"] == "user" and r["completion"][0]["role"] == "assistant" for r in collected)
    assert not any(r["completion"][0]["content"].startswith("think:") for r in collected)
    got = summary(run(code, "alfworld_sft.py", "--model", str(build(tmp_path / "tiny-alfworld")), "--out",
                      str(tmp_path / "v1"), "--data", str(out), "--steps", "2", "--batch", "2", "--rename", "1",
                      "--decisions", "2", cwd=tmp_path))
    assert got["steps"] == 2 and got["examples"] > len(collected)
