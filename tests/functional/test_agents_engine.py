"""Agent stacks through the whole engine (`autorl-tui --batch`): the real Claude Code CLI (by
default; TEST_AGENTS_ENGINE=claude-code,react,codex runs more, one after the other), driven by a
scripted stand-in for a paid LLM API on 127.0.0.1
(tests/support/standin_llm.py), each run a short real session in its workspace — look around,
write a training script (three real SFT steps on the tiny model), run it, submit through the
run's real grading API. The store then holds the prompt, the normalized actions, the token
totals, the submission and its score."""

import json
import shutil
import sqlite3
import os
from pathlib import Path

import pytest

from tests.support.agent_clis import install_agent_clis
from tests.support.agent_session import LOOK, SUBMIT
from tests.support.harness import home_with_tiny, TASKS, cli, write_plan
from tests.support.standin_llm import Step, StandinLLM

pytestmark = pytest.mark.slow

TRAIN = """\
import json, os, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
torch.set_num_threads(1); torch.manual_seed(0)
tok = AutoTokenizer.from_pretrained(os.environ["MODEL_PATH"])
model = AutoModelForCausalLM.from_pretrained(os.environ["MODEL_PATH"])
items = [json.loads(l) for l in open(os.path.join(os.environ["DATA_PATH"], "train.jsonl"))][:24]
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    batch = items[step * 8:(step + 1) * 8]
    texts = [tok.apply_chat_template([{"role": "user", "content": x["prompt"]},
                                      {"role": "assistant", "content": "#### " + str(x["answer"])}], tokenize=False)
             for x in batch]
    enc = tok(texts, return_tensors="pt", padding=True)
    loss = model(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss
    loss.backward(); opt.step(); opt.zero_grad()
    with open(os.environ["METRICS_FILE"], "a") as f:
        f.write(json.dumps({"step": step, "phase": "train", "metrics": {"loss": loss.item()}}) + "\\n")
model.save_pretrained("output/v1"); tok.save_pretrained("output/v1")
print("trained 3 steps, saved output/v1")
"""
WRITE = f"mkdir -p code && cat > code/train.py <<'PYEOF'\n{TRAIN}PYEOF"
RUN = "python code/train.py"
AGENTS = os.environ.get("TEST_AGENTS_ENGINE", "claude-code").split(",")


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


def tiny_task(root: Path) -> Path:
    """arith-small with 8-item dev/test splits: the four gradings of a run take seconds."""
    import yaml

    card = yaml.safe_load((TASKS / "arith-small" / "task.yaml").read_text())
    card.update(id="arith-tiny", name="Arithmetic (8-item splits, agent engine tests)")
    card["data"]["splits"].update(dev={"n": 8, "seed": 5678}, test={"n": 8, "seed": 1234})
    card["protocol"]["max_tokens"] = 16
    task = root / "tasks" / "arith-tiny"
    task.mkdir(parents=True)
    (task / "task.yaml").write_text(yaml.safe_dump(card))
    shutil.copy(TASKS / "arith-small" / "description.md", task / "description.md")
    return task.parent


def test_real_agent_cli_through_the_engine(home, tmp_path):
    cli_dir = install_agent_clis()
    tasks = tiny_task(tmp_path)
    steps = [Step(shell=LOOK), Step(shell=WRITE), Step(shell=RUN), Step(shell=SUBMIT)]
    with StandinLLM(steps, final_text="Submitted output/v1.") as llm:
        plan = write_plan(tmp_path / "plan.yaml", tasks=["arith-tiny"], agents=AGENTS, drivers=["standin-model"],
                          driver_url=llm.base_url + "/v1", budget="300s")
        # The harness's environment: the stand-in's dummy key, and the npm folder holding `claude`.
        env = {"ANTHROPIC_API_KEY": "sk-ant-standin-not-a-key", "OPENAI_API_KEY": "sk-standin-not-a-key", "PATH": f"{cli_dir}:{os.environ['PATH']}"}
        proc = cli("--tasks-dir", str(tasks), "--plain", "--batch", str(plan),
                   home=home, env=env, timeout=600)
        requests = list(llm.requests)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    runs = {r["agent"]: dict(r) for r in db.execute("SELECT * FROM runs")}
    assert set(runs) == set(AGENTS)
    for agent, run in runs.items():
        assert run["state"] == "done", (agent, run)
        assert run["driver"] == "standin-model"
        subs = [dict(s) for s in db.execute("SELECT * FROM submissions WHERE run_id=?", (run["id"],))]
        assert [s["status"] for s in subs] == ["scored"], (agent, subs)
        assert run["best_dev_score"] == subs[0]["score"] is not None
        actions = [json.loads(r["data"]) for r in db.execute(
            "SELECT data FROM events WHERE run_id=? AND kind='action' ORDER BY id", (run["id"],))]
        shells = [a for a in actions if a["kind"] == "shell"]
        assert [s["exit_code"] for s in shells] == [0, 0, 0, 0], (agent, shells)
        assert "trained 3 steps" in shells[2]["output"]
        assert json.loads(shells[3]["output"])["score"] == subs[0]["score"]   # the API's answer, as the agent saw it
        assert not [a for a in actions if a["kind"] in ("malformed", "error")], (agent, actions)
        assert run["tokens_in"] == 500 and run["tokens_out"] == 100, (agent, run)   # 5 scripted calls
        losses = db.execute("SELECT COUNT(*) FROM metrics WHERE run_id=? AND name='loss'", (run["id"],)).fetchone()[0]
        assert losses == 3
        prompt_events = [json.loads(r["data"]) for r in db.execute(
            "SELECT data FROM events WHERE run_id=? AND kind='harness' AND message LIKE 'agent prompt %'", (run["id"],))]
        assert len(prompt_events) == 1 and prompt_events[0]["prompt_version"].startswith("agent_prompt_v1@")
        prompt = db.execute("SELECT content FROM blobs WHERE sha256=?", (prompt_events[0]["prompt_blob"],)).fetchone()
        assert prompt is not None
        assert (Path(run["workspace"]) / "prompt.md").read_text().startswith("You are an autonomous ML engineer")
    if "claude-code" in runs:
        assert runs["claude-code"]["cost_usd"] > 0          # Claude Code reports a cost
    if "react" in runs:
        assert runs["react"]["cost_usd"] is None            # unknown, not 0
    apis = {"claude-code": "anthropic", "react": "chat", "codex": "responses"}
    assert {r["api"] for r in requests if r["tools"]} == {apis[a] for a in AGENTS}
    assert all(r["body"]["model"] == "standin-model" for r in requests if r["tools"])
