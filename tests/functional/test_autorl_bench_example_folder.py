"""A folder shaped like AutoRL-Bench's example_agent (tests/data/autorl_bench/agents/example_shaped:
a TRL GRPO script reading GSM8K's own rows `{question, answer}`) runs unchanged under the engine
and is graded, its printed GRPO points caught from the merged stream. The task is `arith-qa`
(tests/data/tasks): word problems the tiny model knows, in GSM8K's official file format."""

import json

import pytest

from tests.support.batch_run import folder_home, run_folder, the_done_run  # noqa: F401
from tests.support.harness import REPO

pytestmark = pytest.mark.slow
FOLDER = REPO / "tests" / "data" / "autorl_bench" / "agents" / "example_shaped"


def test_an_example_agent_folder_reads_the_data_in_its_shape_and_is_graded(folder_home):
    proc = run_folder(folder_home, FOLDER, {}, {}, budget="300s", task="arith-qa")
    db, run, ws = the_done_run(folder_home, proc)
    # the workspace holds GSM8K's own row shape, which the folder's script indexes by `question`
    rows = [json.loads(line) for line in (ws / "data" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 64 and all(set(r) == {"question", "answer"} and "\n#### " in r["answer"] for r in rows)
    subs = [dict(s) for s in db.execute("SELECT status, score FROM submissions")]
    assert [s["status"] for s in subs] == ["scored"] and subs[0]["score"] is not None
    assert f"Score: {subs[0]['score']}" in (ws / "agent.log").read_text()      # the answer it printed
    sessions = db.execute("SELECT kind FROM training_sessions").fetchall()
    assert [s["kind"] for s in sessions] == ["grpo"]
    assert db.execute("SELECT count(*) FROM metrics WHERE name='reward' AND source='stdout'").fetchone()[0] == 4
    assert run["test_score"] is not None
    db.close()
