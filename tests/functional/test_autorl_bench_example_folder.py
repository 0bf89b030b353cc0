"""A folder shaped like AutoRL-Bench's example_agent (tests/data/autorl_bench/agents/example_shaped:
a TRL GRPO script reading GSM8K's own rows `{question, answer}`) runs unchanged under the engine
and is graded, its printed GRPO points caught from the merged stream."""

import pytest

from tests.support.batch_run import folder_home, run_folder, the_done_run  # noqa: F401
from tests.support.harness import REPO

pytestmark = pytest.mark.slow
FOLDER = REPO / "tests" / "data" / "autorl_bench" / "agents" / "example_shaped"


@pytest.mark.xfail(reason="runs on arith-small, whose rows are not GSM8K's {question, answer}: it needs a "
                          "GSM8K-format task small enough for the tiny model (gsm8k's autorl-bench protocol is "
                          "4-shot, 512 tokens), not built yet", run=False)
def test_an_example_agent_folder_reads_the_data_in_its_shape_and_is_graded(folder_home):
    proc = run_folder(folder_home, FOLDER, {}, {}, budget="300s")
    db, run, ws = the_done_run(folder_home, proc)
    assert [s["status"] for s in db.execute("SELECT status FROM submissions")] == ["scored"]
    sessions = db.execute("SELECT kind FROM training_sessions").fetchall()
    assert [s["kind"] for s in sessions] == ["grpo"]
    assert db.execute("SELECT count(*) FROM metrics WHERE name='reward' AND source='stdout'").fetchone()[0] == 4
    db.close()
